#include "actors/journal_records.hpp"

#include <map>

#include <nlohmann/json.hpp>

namespace tessera::actors {

namespace {

using ojson = nlohmann::ordered_json;

/// One job in the job file's shape, every key explicit, so the job file's reader gives the
/// same run_job back.
ojson job_json(const run_job& rj) {
  ojson j;
  j["id"] = rj.spec.id;
  j["job_type"] = rj.spec.job_type;
  j["scale_factor"] = rj.spec.scale_factor;
  j["total_steps"] = static_cast<std::int64_t>(rj.spec.total_steps);
  j["priority_weight"] = rj.spec.priority_weight;
  if (rj.spec.slo > 0) j["slo"] = rj.spec.slo;
  if (!rj.spec.acceptable_gpus.empty()) j["acceptable_gpus"] = rj.spec.acceptable_gpus;
  if (rj.spec.max_copies > 0) j["max_copies"] = rj.spec.max_copies;
  j["kind"] = rj.kind;
  j["step_time"] = rj.step_time;
  j["merge"] = train::to_string(rj.merge);
  if (rj.is_program()) {
    j["command"] = rj.program.command;
    j["workdir"] = rj.program.workdir;
    j["env"] = rj.program.env;
    j["max_restarts"] = rj.program.max_restarts;
    j["grace_seconds"] = rj.program.grace_seconds;
    return j;
  }
  j["seed"] = rj.seed;
  if (rj.target_loss > 0) j["target_loss"] = rj.target_loss;
  if (!rj.config.empty()) j["config"] = rj.config;
  return j;
}

error bad_record(std::size_t i, const std::string& why) {
  return error{error_kind::invalid_input, "journal record " + std::to_string(i) + ": " + why};
}

/// Applies one record to the jobs replayed so far.
status apply(const nlohmann::json& r, std::size_t i, std::vector<restored_job>& jobs,
             std::map<std::int64_t, std::size_t>& index, std::int64_t& last_round) {
  const std::string t = r.value("t", "");
  if (t == "submit") {
    auto read = parse_run_jobs(r.at("jobs").dump(), job_text_format::json,
                               "journal record " + std::to_string(i), "/");
    if (!read) return read.err();
    for (auto& rj : *read) {
      rj.spec.arrival = 0;
      rj.id_given = true;
      index[rj.spec.id] = jobs.size();
      jobs.push_back(restored_job{std::move(rj), job_state::queued, false, 0, {}});
    }
    return {};
  }
  const auto id = r.at("id").get<std::int64_t>();
  auto it = index.find(id);
  if (it == index.end()) return bad_record(i, "job " + std::to_string(id) + " was never submitted");
  auto& j = jobs[it->second];
  if (t == "state") {
    auto s = parse_state(r.at("state").get<std::string>());
    if (!s) return bad_record(i, "unknown state " + r.at("state").dump());
    j.life = *s;
    last_round = std::max(last_round, r.value("round", std::int64_t{-1}));
  } else if (t == "cancel") {
    j.cancel_requested = true;
  } else if (t == "ckpt") {
    checkpoint_file f{r.at("path").get<std::string>(), r.at("round").get<std::int64_t>(),
                      r.at("step").get<std::int64_t>()};
    last_round = std::max(last_round, f.round);
    j.step = f.step;
    j.checkpoints.push_back(std::move(f));
    if (j.checkpoints.size() > 2) j.checkpoints.erase(j.checkpoints.begin());
  } else {
    return bad_record(i, "unknown record type '" + t + "'");
  }
  return {};
}

}  // namespace

std::string submit_record(const std::vector<run_job>& jobs) {
  ojson set = ojson::array();
  for (const auto& rj : jobs) set.push_back(job_json(rj));
  return ojson{{"t", "submit"}, {"jobs", ojson{{"job", std::move(set)}}}}.dump();
}

std::string state_record(std::int64_t id, job_state s, std::int64_t step, std::int64_t round) {
  return ojson{
      {"t", "state"}, {"id", id}, {"state", state_name(s)}, {"step", step}, {"round", round}}
      .dump();
}

std::string cancel_record(std::int64_t id) { return ojson{{"t", "cancel"}, {"id", id}}.dump(); }

std::string checkpoint_record(std::int64_t id, const checkpoint_file& f) {
  return ojson{{"t", "ckpt"}, {"id", id}, {"path", f.path}, {"round", f.round}, {"step", f.step}}
      .dump();
}

result<restored_cluster> replay_journal(const std::vector<std::string>& records) {
  restored_cluster c;
  std::map<std::int64_t, std::size_t> index;
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      const auto r = nlohmann::json::parse(records[i]);
      if (!r.is_object()) return bad_record(i, "not a JSON object");
      if (auto st = apply(r, i, c.jobs, index, c.last_round); !st) return st.err();
    } catch (const std::exception& e) {
      return bad_record(i, e.what());
    }
  }
  return c;
}

std::vector<std::string> compacted_records(const restored_cluster& c) {
  std::vector<std::string> out;
  for (const auto& j : c.jobs) {
    out.push_back(submit_record({j.spec}));
    for (const auto& f : j.checkpoints) out.push_back(checkpoint_record(j.spec.spec.id, f));
    if (j.life != job_state::queued)
      out.push_back(state_record(j.spec.spec.id, j.life, j.step, c.last_round));
    if (j.cancel_requested) out.push_back(cancel_record(j.spec.spec.id));
  }
  return out;
}

}  // namespace tessera::actors
