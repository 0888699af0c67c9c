// A node's registration on CAF's virtual clock (actors/node_actor.cpp): a challenge request
// that goes unanswered is sent again, so a busy host that loses one message does not cost the
// node its place (seen at load 40 with 64 node processes).
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include "actor_support.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

struct stub_state {
  int requests = 0;                               ///< auth_requests received
  std::vector<caf::response_promise> unanswered;  ///< the ignored ones, kept open
  nonce_pair issued;                              ///< the latest challenge's nonces
  std::shared_ptr<int> welcomed = std::make_shared<int>(0);
  std::shared_ptr<int> beats = std::make_shared<int>(0);
};

/// A scheduler that leaves the first `ignore` challenge requests unanswered, answers the next
/// as the real one does, and welcomes a proven hello.
caf::behavior stub_scheduler(caf::stateful_actor<stub_state>* self, int ignore,
                             std::shared_ptr<int> welcomed, std::shared_ptr<int> beats) {
  return {
      [=](const auth_request& r) -> caf::result<auth_challenge> {
        if (self->state.requests++ < ignore) {
          self->state.unanswered.push_back(self->make_response_promise());
          return caf::delegated<auth_challenge>();
        }
        auto c = answer_request(test_secret(), r, self->state.issued);
        REQUIRE(c);
        return std::move(*c);
      },
      [=](const node_hello& h) -> caf::result<node_welcome> {
        if (!hello_is_proven(test_secret(), h, self->state.issued))
          return caf::make_error(caf::sec::unexpected_message);
        ++*welcomed;
        return node_welcome{h.rank, 1.0, 0.5};
      },
      [=](const heartbeat&) { ++*beats; },
  };
}

}  // namespace

/// A node of a one-server cluster with `seconds` to register, under a stub that ignores the
/// first `ignore` challenge requests; the stub's counts and the node's exit reason.
struct registration_run {
  virtual_system vs;
  cluster cl = speed_cluster({1.0});
  train::trainable_registry kinds = train::builtin_trainables();
  std::shared_ptr<int> welcomed = std::make_shared<int>(0), beats = std::make_shared<int>(0);
  std::shared_ptr<std::string> exit_reason = std::make_shared<std::string>();
  caf::actor sched, node;
  registration_run(int ignore, double seconds) {
    sched = vs.sys.spawn(stub_scheduler, ignore, welcomed, beats);
    auto nc = make_node_config(cl, 0, kinds);
    nc.register_timeout = seconds;
    node = vs.sys.spawn(node_actor, nc, sched);
    auto reason = exit_reason;
    auto& sys = vs.sys;
    node->attach_functor([reason, &sys](const caf::error& e) { *reason = sys.render(e); });
    vs.coord.run();
  }
  ~registration_run() {
    caf::anon_send_exit(node, caf::exit_reason::kill);
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    vs.coord.run();
  }
  void advance(double s) {
    vs.coord.advance_time(
        std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s)));
    vs.coord.run();
  }
};

TEST_CASE("node: an unanswered challenge request is sent again and the node registers",
          "[actors][node][registration]") {
  registration_run run(1, 12);
  CHECK(*run.welcomed == 0);  // the first request is left unanswered
  run.advance(5);             // unanswered for 5 s: asked again, answered, welcomed
  CHECK(*run.welcomed == 1);
  run.advance(1);
  CHECK(*run.beats >= 1);
  CHECK(run.exit_reason->empty());
}

TEST_CASE("node: a scheduler that never answers ends the node at its registration time-out",
          "[actors][node][registration]") {
  registration_run run(1000, 12);
  run.advance(11.9);
  CHECK(run.exit_reason->empty());  // asked at 0, 5 and 10 s
  run.advance(0.2);
  CHECK(*run.welcomed == 0);
  CHECK_THAT(*run.exit_reason, Catch::Contains("could not open its registration"));
}
