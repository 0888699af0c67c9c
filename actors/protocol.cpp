#include "actors/protocol.hpp"

namespace tessera::actors {

caf::error make_run_error(run_errc code, std::string message) {
  return caf::error(static_cast<std::uint8_t>(code), run_error_category,
                    caf::make_message(std::move(message)));
}

std::string describe(const caf::actor_system& sys, const caf::error& e) {
  if (!e) return "normal exit";  // category() and context() require a non-empty error
  if (e.category() == run_error_category && e.context().match_elements<std::string>())
    return e.context().get_as<std::string>(0);
  return sys.render(e);
}

void register_protocol(caf::actor_system_config& cfg) {
  cfg.add_message_type<auth_request>("tessera::auth_request");
  cfg.add_message_type<auth_challenge>("tessera::auth_challenge");
  cfg.add_message_type<node_hello>("tessera::node_hello");
  cfg.add_message_type<node_welcome>("tessera::node_welcome");
  cfg.add_message_type<heartbeat>("tessera::heartbeat");
  cfg.add_message_type<start_copy>("tessera::start_copy");
  cfg.add_message_type<round_orders>("tessera::round_orders");
  cfg.add_message_type<stop_copy>("tessera::stop_copy");
  cfg.add_message_type<copy_started>("tessera::copy_started");
  cfg.add_message_type<progress_report>("tessera::progress_report");
  cfg.add_message_type<checkpoint_done>("tessera::checkpoint_done");
  cfg.add_message_type<job_finished>("tessera::job_finished");
  cfg.add_message_type<round_done>("tessera::round_done");
  cfg.add_message_type<job_summary>("tessera::job_summary");
  cfg.add_message_type<run_summary>("tessera::run_summary");
  cfg.add_error_category(run_error_category,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string text = "tessera error " + std::to_string(code);
                           if (ctx.match_elements<std::string>())
                             text += ": " + ctx.get_as<std::string>(0);
                           return text;
                         });
}

}  // namespace tessera::actors
