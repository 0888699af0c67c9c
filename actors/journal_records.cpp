#include "actors/journal_records.hpp"

#include <filesystem>
#include <map>
#include <stdexcept>

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
  if (rj.spec.arrival > 0) j["arrival"] = rj.spec.arrival;
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
    j["checkpoint_every"] = format_checkpoint_cadence(rj.program.checkpoint_every);
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

ojson history_json(const job_history& h) {
  ojson j{{"first_start", h.first_start},
          {"finish", h.finish},
          {"steps", h.steps},
          {"run_time", h.run_time},
          {"gpu_seconds", h.gpu_seconds},
          {"loss", h.loss},
          {"accuracy", h.accuracy},
          {"restarts", h.restarts},
          {"lost_rounds", h.lost_rounds},
          {"rounds", h.rounds},
          {"max_copies", h.max_copies},
          {"program_failures", h.program_failures}};
  if (h.reached_target) j["reached_target"] = true;
  if (!h.failure.empty()) j["failure"] = h.failure;
  return j;
}

job_history read_history(const nlohmann::json& j) {
  job_history h;
  h.first_start = j.value("first_start", -1.0);
  h.finish = j.value("finish", -1.0);
  h.steps = j.value("steps", std::int64_t{0});
  h.run_time = j.value("run_time", 0.0);
  h.gpu_seconds = j.value("gpu_seconds", 0.0);
  h.loss = j.value("loss", 0.0);
  h.accuracy = j.value("accuracy", 0.0);
  h.restarts = j.value("restarts", 0);
  h.lost_rounds = j.value("lost_rounds", 0);
  h.rounds = j.value("rounds", 0);
  h.max_copies = j.value("max_copies", 0);
  h.program_failures = j.value("program_failures", 0);
  h.reached_target = j.value("reached_target", false);
  h.failure = j.value("failure", std::string());
  return h;
}

/// Jobs replayed so far, and what a record's "at" and "round" advanced.
struct replay {
  restored_cluster c;
  std::map<std::int64_t, std::size_t> index;  ///< job id -> its place in c.jobs
};

void add_restored(replay& rp, run_job rj) {
  rj.id_given = true;
  rp.index[rj.spec.id] = rp.c.jobs.size();
  rp.c.jobs.emplace_back();
  rp.c.jobs.back().spec = std::move(rj);
}

/// Brings back as failed a job of a submission that no longer reads back (an earlier
/// version accepted what this one refuses): its id, kind and type as far as they read.
void add_unreadable(replay& rp, const nlohmann::json& raw, const std::string& why) {
  const auto id = raw.is_object() ? raw.find("id") : raw.end();
  if (!raw.is_object() || id == raw.end() || !id->is_number_integer()) {
    rp.c.failed_at_replay.push_back(why + " (no id: left out)");
    return;
  }
  const auto job_type = raw.find("job_type");
  run_job rj;
  rj.spec.id = id->get<std::int64_t>();
  rj.kind = program_kind;
  rj.spec.job_type =
      job_type != raw.end() && job_type->is_string() ? job_type->get<std::string>() : "unreadable";
  rj.spec.total_steps = 1;
  add_restored(rp, std::move(rj));
  auto& j = rp.c.jobs.back();
  j.life = job_state::failed;
  j.ended = job_history{};
  j.ended->failure = "its journal record no longer reads back: " + why;
  j.unreadable = raw.dump();
  rp.c.failed_at_replay.push_back("job " + std::to_string(j.spec.spec.id) + ": " +
                                  j.ended->failure);
}

/// A submission record: its jobs, each alone when the whole set does not read back.
void apply_submit(const nlohmann::json& r, std::size_t i, replay& rp) {
  const std::string name = "journal record " + std::to_string(i);
  const auto& set = r.at("jobs");
  if (auto read = parse_recorded_jobs(set.dump(), name)) {
    for (auto& rj : *read) add_restored(rp, std::move(rj));
    return;
  }
  const auto list = set.find("job");
  if (list == set.end() || !list->is_array()) throw std::runtime_error("no job list");
  for (std::size_t k = 0; k < list->size(); ++k) {
    // Read alone, as its own object: the reason names no index, so it reads the same after
    // a compaction moved the record.
    auto read = parse_recorded_jobs((*list)[k].dump(), "its submission");
    if (read)
      add_restored(rp, std::move(read->front()));
    else
      add_unreadable(rp, (*list)[k], read.err().message);
  }
}

/// Applies one record to the jobs replayed so far.
status apply(const nlohmann::json& r, std::size_t i, replay& rp) {
  const std::string t = r.value("t", "");
  if (t == "submit") {
    apply_submit(r, i, rp);
    return {};
  }
  const auto id = r.at("id").get<std::int64_t>();
  auto it = rp.index.find(id);
  if (it == rp.index.end())
    return bad_record(i, "job " + std::to_string(id) + " was never submitted");
  auto& j = rp.c.jobs[it->second];
  auto& c = rp.c;
  c.clock = std::max(c.clock, r.value("at", 0.0));
  if (t == "state") {
    auto s = parse_state(r.at("state").get<std::string>());
    if (!s) return bad_record(i, "unknown state " + r.at("state").dump());
    if (is_final(j.life)) return {};  // an ended job stays as it ended
    j.life = *s;
    if (const auto end = r.find("end"); end != r.end() && end->is_object())
      j.ended = read_history(*end);
    c.last_round = std::max(c.last_round, r.value("round", std::int64_t{-1}));
  } else if (t == "cancel") {
    j.cancel_requested = true;
  } else if (t == "ckpt") {
    checkpoint_file f{r.at("path").get<std::string>(), r.at("round").get<std::int64_t>(),
                      r.at("step").get<std::int64_t>()};
    c.last_round = std::max(c.last_round, f.round);
    j.step = f.step;
    j.checkpoints.push_back(std::move(f));
    if (j.checkpoints.size() > 2) j.checkpoints.erase(j.checkpoints.begin());
  } else {
    return bad_record(i, "unknown record type '" + t + "'");
  }
  return {};
}

/// An open program job whose workdir is gone cannot run again: it fails, alone.
void fail_homeless(restored_cluster& c) {
  for (auto& j : c.jobs) {
    if (is_final(j.life) || !j.spec.is_program()) continue;
    std::error_code ec;
    if (std::filesystem::is_directory(j.spec.program.workdir, ec)) continue;
    j.life = job_state::failed;
    j.ended = job_history{};
    j.ended->steps = j.step;
    j.ended->failure = "its workdir " + j.spec.program.workdir + " no longer exists (at resume)";
    c.failed_at_replay.push_back("job " + std::to_string(j.spec.spec.id) + ": " + j.ended->failure);
  }
}

}  // namespace

std::string submit_record(const std::vector<run_job>& jobs) {
  ojson set = ojson::array();
  for (const auto& rj : jobs) set.push_back(job_json(rj));
  return ojson{{"t", "submit"}, {"jobs", ojson{{"job", std::move(set)}}}}.dump();
}

job_history history_of(const job_status& s) {
  const auto& m = s.summary;
  job_history h;
  h.first_start = m.first_start;
  h.finish = m.finish;
  h.steps = m.steps;
  h.run_time = m.run_time;
  h.gpu_seconds = s.gpu_seconds;
  h.loss = m.loss;
  h.accuracy = m.accuracy;
  h.restarts = m.restarts;
  h.lost_rounds = m.lost_rounds;
  h.rounds = m.rounds;
  h.max_copies = m.max_copies;
  h.program_failures = m.program_failures;
  h.reached_target = m.reached_target;
  h.failure = m.failure;
  return h;
}

std::string state_record(std::int64_t id, job_state s, std::int64_t step, std::int64_t round,
                         double at, const job_history* ended) {
  ojson r{{"t", "state"}, {"id", id},       {"state", state_name(s)},
          {"step", step}, {"round", round}, {"at", at}};
  if (ended) r["end"] = history_json(*ended);
  return r.dump();
}

std::string cancel_record(std::int64_t id) { return ojson{{"t", "cancel"}, {"id", id}}.dump(); }

std::string checkpoint_record(std::int64_t id, const checkpoint_file& f, double at) {
  return ojson{{"t", "ckpt"},      {"id", id},       {"path", f.path},
               {"round", f.round}, {"step", f.step}, {"at", at}}
      .dump();
}

result<restored_cluster> replay_journal(const std::vector<std::string>& records) {
  replay rp;
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      const auto r = nlohmann::json::parse(records[i]);
      if (!r.is_object()) return bad_record(i, "not a JSON object");
      if (auto st = apply(r, i, rp); !st) return st.err();
    } catch (const std::exception& e) {
      return bad_record(i, e.what());
    }
  }
  fail_homeless(rp.c);
  return std::move(rp.c);
}

std::vector<std::string> compacted_records(const restored_cluster& c) {
  std::vector<std::string> out;
  for (const auto& j : c.jobs) {
    // A job that no longer reads back keeps its record as written: the next resume says why.
    out.push_back(j.unreadable.empty() ? submit_record({j.spec})
                                       : R"({"t":"submit","jobs":{"job":[)" + j.unreadable + "]}}");
    for (const auto& f : j.checkpoints)
      out.push_back(checkpoint_record(j.spec.spec.id, f, c.clock));
    if (j.life != job_state::queued)
      out.push_back(state_record(j.spec.spec.id, j.life, j.step, c.last_round, c.clock,
                                 j.ended ? &*j.ended : nullptr));
    if (j.cancel_requested) out.push_back(cancel_record(j.spec.spec.id));
  }
  return out;
}

}  // namespace tessera::actors
