#include "runtime/core/timeline.hpp"

#include <istream>
#include <ostream>

#include <nlohmann/json.hpp>

namespace tessera {

timeline_recorder::timeline_recorder(std::ostream& out, const cluster& cl,
                                     const std::string& source, const std::string& policy,
                                     double round_length)
    : out_(out) {
  nlohmann::json servers = nlohmann::json::array(), types = nlohmann::json::array();
  for (const auto& sv : cl.servers)
    servers.push_back({{"name", sv.name}, {"type", sv.gpu_type}, {"gpus", sv.gpus}});
  for (const auto& t : cl.types) types.push_back({{"name", t.name}, {"gpus", t.gpus}});
  const nlohmann::json head = {{"timeline", 1},      {"source", source},
                               {"policy", policy},   {"round_length", round_length},
                               {"servers", servers}, {"types", types}};
  out_ << head.dump() << '\n';
}

std::vector<timeline_placement> placements_of(const cluster& cl, const round_plan& p) {
  std::vector<timeline_placement> out;
  for (const auto& as : p.assignments)
    for (const auto& sh : as.shares) {
      const bool known = sh.server >= 0 && sh.server < static_cast<int>(cl.servers.size());
      out.push_back({as.job, as.copy,
                     known ? cl.servers[sh.server].name : std::to_string(sh.server), sh.gpus,
                     as.tasks});
    }
  return out;
}

void timeline_recorder::record(const snapshot& s, const round_plan& p) {
  nlohmann::json places = nlohmann::json::array();
  for (const auto& pl : placements_of(*s.cl, p))
    places.push_back({{"job", pl.job},
                      {"copy", pl.copy},
                      {"server", pl.server},
                      {"gpus", pl.gpus},
                      {"tasks", pl.tasks}});
  std::lock_guard<std::mutex> lock(mu_);
  const nlohmann::json line = {{"round", rounds_++},
                               {"start", p.start},
                               {"length", p.length},
                               {"active", s.jobs.size()},
                               {"placements", places}};
  out_ << line.dump() << '\n';
}

status timeline_recorder::check(const std::string& path) const {
  out_.flush();
  if (!out_) return error{error_kind::io, path + ": write failed"};
  return {};
}

result<std::unique_ptr<timeline_file>> timeline_file::open(const std::string& path,
                                                           const cluster& cl,
                                                           const std::string& source,
                                                           const std::string& policy,
                                                           double round_length) {
  std::unique_ptr<timeline_file> f(new timeline_file());
  f->path_ = path;
  f->out_.open(path, std::ios::trunc);
  if (!f->out_) return error{error_kind::io, path + ": cannot open for writing"};
  f->rec_ = std::make_unique<timeline_recorder>(f->out_, cl, source, policy, round_length);
  if (auto st = f->rec_->check(path); !st) return st.err();
  return f;
}

status timeline_file::close() {
  if (auto st = rec_->check(path_); !st) return st;
  out_.close();
  if (!out_) return error{error_kind::io, path_ + ": write failed"};
  return {};
}

namespace {

/// One round line; errors name the field.
result<timeline_round> parse_round(const nlohmann::json& j, const std::string& where) {
  timeline_round r;
  try {
    r.round = j.at("round").get<std::int64_t>();
    r.start = j.at("start").get<double>();
    r.length = j.at("length").get<double>();
    r.active = j.at("active").get<int>();
    for (const auto& pl : j.at("placements"))
      r.placements.push_back({pl.at("job").get<job_id>(), pl.at("copy").get<int>(),
                              pl.at("server").get<std::string>(), pl.at("gpus").get<int>(),
                              pl.at("tasks").get<int>()});
  } catch (const nlohmann::json::exception& e) {
    return error{error_kind::invalid_input, where + ": " + e.what()};
  }
  return r;
}

}  // namespace

result<std::vector<timeline_round>> read_timeline(std::istream& in, const std::string& name) {
  std::vector<timeline_round> rounds;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    const std::string where = name + ":" + std::to_string(line);
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return error{error_kind::invalid_input, where + ": not a JSON object"};
    if (line == 1) {
      if (!j.contains("timeline"))
        return error{error_kind::invalid_input, where + ": field 'timeline': missing (no header)"};
      continue;
    }
    auto r = parse_round(j, where);
    if (!r) return r.err();
    rounds.push_back(std::move(r.value()));
  }
  return rounds;
}

}  // namespace tessera
