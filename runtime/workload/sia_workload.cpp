#include "runtime/workload/sia_workload.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>

#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

namespace fs = std::filesystem;

const std::vector<sia_app_setting>& sia_app_settings() {
  // Sia's simulator: max_epochs in applications.py's APPLICATIONS, SLOWDOWNS in
  // simulator_config.py, Application.rescale_time in applications.py.
  static const std::vector<sia_app_setting> s = {
      {"bert", 2, 1.2, 120},      {"cifar10", 100, 1.8, 50}, {"deepspeech2", 80, 1.2, 25},
      {"imagenet", 90, 1.2, 250}, {"ncf", 10, 1.5, 15},      {"yolov3", 50, 1.2, 80},
  };
  return s;
}

namespace {

/// A CSV file read whole: its header's column indices by name and its data lines.
struct csv_file {
  std::string path;
  std::map<std::string, int> column;
  std::vector<std::vector<std::string>> rows;  ///< rows[i] is line i + 2
};

result<csv_file> read_csv(std::istream& in, const std::string& path) {
  csv_file f;
  f.path = path;
  std::string line;
  if (!std::getline(in, line)) return error{error_kind::invalid_input, path + ": empty file"};
  const auto names = detail::csv_fields(line);
  for (int i = 0; i < static_cast<int>(names.size()); ++i)
    f.column[std::string(detail::trim(names[static_cast<std::size_t>(i)]))] = i;
  while (std::getline(in, line)) {
    if (detail::trim(line).empty()) continue;
    f.rows.push_back(detail::csv_fields(line));
    if (f.rows.size() > limits::max_trace_jobs)
      return error{error_kind::invalid_input,
                   path + ": more than " + std::to_string(limits::max_trace_jobs) + " lines"};
  }
  return f;
}

result<csv_file> read_csv_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{error_kind::io, path + ": cannot open"};
  return read_csv(in, path);
}

/// Field `name` of data row `i` (line i + 2) as a number.
result<double> number_at(const csv_file& f, std::size_t i, const std::string& name) {
  const std::string where = f.path + ":" + std::to_string(i + 2);
  const auto c = f.column.find(name);
  if (c == f.column.end()) return import_field_error(f.path + ":1", name, "missing column");
  const auto& row = f.rows[i];
  if (static_cast<std::size_t>(c->second) >= row.size())
    return import_field_error(where, name, "missing value");
  const auto& text = row[static_cast<std::size_t>(c->second)];
  if (const auto v = detail::parse_double(text)) return *v;
  return import_field_error(where, name, "expected a number, got " + detail::quoted(text));
}

/// Fields of data row `i` into their slots, by name.
status numbers_at(const csv_file& f, std::size_t i,
                  std::initializer_list<std::pair<const char*, double*>> fields) {
  for (const auto& [field, slot] : fields) {
    auto v = number_at(f, i, field);
    if (!v) return v.err();
    *slot = *v;
  }
  return {};
}

result<std::vector<sia_epoch>> read_validation(const std::string& path) {
  auto f = read_csv_file(path);
  if (!f) return f.err();
  std::vector<sia_epoch> out;
  for (std::size_t i = 0; i < f->rows.size(); ++i) {
    sia_epoch e;
    if (auto st = numbers_at(
            *f, i,
            {{"progress", &e.progress}, {"grad_sqr", &e.grad_sqr}, {"grad_var", &e.grad_var}});
        !st)
      return st.err();
    out.push_back(e);
  }
  return out;
}

/// Placement rows by placement id, sorted by local batch.
result<std::map<std::string, std::vector<sia_step>>> read_placements(const std::string& path) {
  auto f = read_csv_file(path);
  if (!f) return f.err();
  std::map<std::string, std::vector<sia_step>> out;
  const auto col = f->column.find("placement");
  if (col == f->column.end()) return import_field_error(path + ":1", "placement", "missing column");
  for (std::size_t i = 0; i < f->rows.size(); ++i) {
    sia_step s;
    if (auto st = numbers_at(*f, i,
                             {{"local_bsz", &s.local_batch},
                              {"step_time", &s.step_time},
                              {"sync_time", &s.sync_time}});
        !st)
      return st.err();
    const auto& row = f->rows[i];
    const auto at = static_cast<std::size_t>(col->second);
    if (at >= row.size() || detail::trim(row[at]).empty())
      return import_field_error(path + ":" + std::to_string(i + 2), "placement", "missing value");
    out[std::string(detail::trim(row[at]))].push_back(s);
  }
  for (auto& [id, rows] : out)
    std::stable_sort(rows.begin(), rows.end(), [](const sia_step& a, const sia_step& b) {
      return a.local_batch < b.local_batch;
    });
  return out;
}

/// validation-<batch>.csv files of an application folder.
result<std::map<int, std::vector<sia_epoch>>> read_validations(const fs::path& folder) {
  std::map<int, std::vector<sia_epoch>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string file = entry.path().filename().string();
    const std::string prefix = "validation-", suffix = ".csv";
    if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const auto batch =
        detail::parse_int(file.substr(prefix.size(), file.size() - prefix.size() - suffix.size()));
    if (!batch || *batch <= 0) continue;
    auto v = read_validation(entry.path().string());
    if (!v) return v.err();
    out[static_cast<int>(*batch)] = std::move(*v);
  }
  if (ec) return error{error_kind::io, folder.string() + ": " + ec.message()};
  return out;
}

/// The validated batch sizes around `batch` and the weight of the upper one (Sia's linear
/// interpolation between them).
struct bracket {
  int lower = 0, upper = 0;
  double w = 0;
};

std::optional<bracket> bracket_of(const sia_application& a, double batch) {
  std::optional<int> lo, hi;
  for (const auto& [b, v] : a.validation) {
    if (b <= batch) lo = b;
    if (b >= batch) {
      hi = b;
      break;
    }
  }
  if (!lo || !hi) return std::nullopt;
  bracket r{*lo, *hi, 0};
  if (*hi != *lo) r.w = (batch - *lo) / (*hi - *lo);
  return r;
}

/// Steps at batch `batch` (any value within the validated sizes) to finish `a`.
result<double> steps_at(const sia_application& a, double batch) {
  const auto br = bracket_of(a, batch);
  if (!br)
    return error{error_kind::invalid_input, a.setting.name + ": batch size " +
                                                detail::format_shortest(batch) +
                                                " is outside the validated ones (" +
                                                std::to_string(a.validation.begin()->first) + ".." +
                                                std::to_string(a.validation.rbegin()->first) + ")"};
  const int epochs = a.setting.epochs;
  auto progress = [&](int e) {  // progress at the start of epoch e: the least over batches
    if (e == 0) return 0.0;
    double p = INFINITY;
    for (const auto& [b, v] : a.validation)
      p = std::min(p, v[static_cast<std::size_t>(e - 1)].progress);
    return p;
  };
  const double scale = batch / a.validation.begin()->first;
  const auto& lo = a.validation.at(br->lower);
  const auto& hi = a.validation.at(br->upper);
  double steps = 0;
  for (int e = 0; e < epochs; ++e) {
    const auto i = static_cast<std::size_t>(e);
    const double sqr = lo[i].grad_sqr + br->w * (hi[i].grad_sqr - lo[i].grad_sqr);
    const double var = lo[i].grad_var + br->w * (hi[i].grad_var - lo[i].grad_var);
    const double gain = (var + sqr) / (var / scale + sqr);
    steps += (progress(e + 1) - progress(e)) / gain;
  }
  return steps;
}

/// Sia's placement of a rigid job: servers filled in turn, as its lexicographically least
/// rotation ("24" for 6 GPUs on 4-GPU servers).
std::string packed_placement(int replicas, int per_server) {
  std::vector<int> p;
  for (int left = replicas; left > 0; left -= per_server) p.push_back(std::min(left, per_server));
  std::string best;
  for (std::size_t r = 0; r < p.size(); ++r) {
    std::string s;
    for (std::size_t i = 0; i < p.size(); ++i) s += std::to_string(p[(r + i) % p.size()]);
    if (best.empty() || s < best) best = s;
  }
  return best;
}

/// Sum of a placement's digits: its GPUs.
int placement_gpus(const std::string& id) {
  int n = 0;
  for (char c : id) n += c - '0';
  return n;
}

/// Step and sync time at `local` by linear interpolation among `rows`; nullopt outside them.
std::optional<std::pair<double, double>> interpolate(const std::vector<sia_step>& rows,
                                                     double local) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].local_batch == local) return std::pair{rows[i].step_time, rows[i].sync_time};
    if (i + 1 < rows.size() && rows[i].local_batch < local && local < rows[i + 1].local_batch) {
      const double w =
          (local - rows[i].local_batch) / (rows[i + 1].local_batch - rows[i].local_batch);
      return std::pair{rows[i].step_time + w * (rows[i + 1].step_time - rows[i].step_time),
                       rows[i].sync_time + w * (rows[i + 1].sync_time - rows[i].sync_time)};
    }
  }
  return std::nullopt;
}

}  // namespace

result<sia_data> sia_data::load(const std::string& dir, const std::vector<std::string>& kinds) {
  fs::path root(dir);
  if (fs::is_directory(root / "traces")) root /= "traces";
  if (!fs::is_directory(root)) return error{error_kind::io, dir + ": not a folder"};
  sia_data d;
  for (const auto& s : sia_app_settings()) {
    const fs::path folder = root / s.name;
    if (!fs::is_directory(folder)) continue;
    sia_application a;
    a.setting = s;
    auto v = read_validations(folder);
    if (!v) return v.err();
    a.validation = std::move(*v);
    if (a.validation.empty())
      return error{error_kind::invalid_input, folder.string() + ": no validation-<batch>.csv"};
    for (const auto& [b, epochs] : a.validation)
      if (static_cast<int>(epochs.size()) < s.epochs)
        return error{error_kind::invalid_input,
                     (folder / ("validation-" + std::to_string(b) + ".csv")).string() + ": " +
                         std::to_string(epochs.size()) + " epochs, Sia trains " + s.name + " for " +
                         std::to_string(s.epochs)};
    for (const auto& kind : kinds) {
      const fs::path file = folder / ("placements-" + kind + ".csv");
      if (!fs::exists(file)) continue;
      auto p = read_placements(file.string());
      if (!p) return p.err();
      a.placements[kind] = std::move(*p);
    }
    d.apps_[s.name] = std::move(a);
  }
  if (d.apps_.empty())
    return error{error_kind::invalid_input, root.string() + ": none of Sia's applications found"};
  return d;
}

const sia_application* sia_data::find(const std::string& app) const {
  const auto it = apps_.find(app);
  return it == apps_.end() ? nullptr : &it->second;
}

result<double> sia_data::steps(const std::string& app, int batch) const {
  const auto* a = find(app);
  if (!a) return error{error_kind::not_found, "Sia application '" + app + "' was not read"};
  return steps_at(*a, batch);
}

result<double> sia_data::throughput(const std::string& app, const std::string& kind, int per_server,
                                    int replicas, int batch) const {
  const auto* a = find(app);
  if (!a) return error{error_kind::not_found, "Sia application '" + app + "' was not read"};
  if (replicas <= 0 || per_server <= 0 || batch <= 0)
    return error{error_kind::invalid_input, "replicas, GPUs per server and batch must be positive"};
  const std::string id = packed_placement(replicas, per_server);
  const std::string what = app + " on " + kind + ", placement " + id;
  const auto k = a->placements.find(kind);
  if (k == a->placements.end() || !k->second.count(id))
    return error{error_kind::not_found, what + ": not profiled"};
  const auto& rows = k->second.at(id);
  // Sia's simulator (Job.update_local_bsz): per-GPU batch, accumulation steps when it exceeds
  // the placement's largest profiled batch, then capped by memory and the largest batch.
  const int local = (batch + replicas - 1) / replicas;
  const double max_local = rows.back().local_batch;
  int accum = static_cast<int>(std::ceil(local / max_local - 1e-8)) - 1;
  const int init_batch = a->validation.begin()->first, max_batch = a->validation.rbegin()->first;
  if (replicas == 1 && batch > init_batch) accum = std::max(1, accum);
  double atomic = std::ceil(static_cast<double>(local) / (accum + 1) - 1e-8);
  double memory_cap = 0;
  for (const auto& [pid, prow] : k->second)
    if (placement_gpus(pid) == replicas) memory_cap = std::max(memory_cap, prow.back().local_batch);
  atomic = std::min(atomic, memory_cap);
  atomic = std::min(atomic, std::floor(static_cast<double>(max_batch) / (replicas * (accum + 1))));
  const auto t = interpolate(rows, atomic);
  if (!t)
    return error{error_kind::not_found,
                 what + ": per-GPU batch " + detail::format_shortest(atomic) + " not profiled"};
  const double step = t->first + (t->first - t->second) * accum;
  const double ran_batch = atomic * (accum + 1) * replicas;
  auto nominal = steps_at(*a, batch);
  if (!nominal) return nominal.err();
  auto ran = steps_at(*a, ran_batch);
  if (!ran) return ran.err();
  return 1.0 / a->setting.slowdown / step * (*nominal / *ran);
}

std::string sia_job_type(const std::string& app, int batch) {
  return app + " (batch size " + std::to_string(batch) + ")";
}

std::optional<std::pair<std::string, int>> parse_sia_job_type(const std::string& job_type) {
  const std::string mid = " (batch size ";
  const auto at = job_type.find(mid);
  if (at == std::string::npos || job_type.empty() || job_type.back() != ')') return std::nullopt;
  const auto b = detail::parse_int(
      std::string_view(job_type).substr(at + mid.size(), job_type.size() - 1 - at - mid.size()));
  if (!b || *b <= 0 || *b > (1 << 30)) return std::nullopt;
  return std::pair{job_type.substr(0, at), static_cast<int>(*b)};
}

result<std::vector<job>> import_sia_workload(std::istream& in, const std::string& name,
                                             const sia_data& data, import_summary& summary) {
  auto f = read_csv(in, name);
  if (!f) return f.err();
  for (const char* col : {"time", "application", "num_replicas", "batch_size"})
    if (!f->column.count(col)) return import_field_error(name + ":1", col, "missing column");
  const auto app_col = static_cast<std::size_t>(f->column.at("application"));
  std::vector<job> jobs;
  summary.read = f->rows.size();
  for (std::size_t i = 0; i < f->rows.size(); ++i) {
    const std::string where = name + ":" + std::to_string(i + 2);
    auto time = number_at(*f, i, "time");
    auto replicas = number_at(*f, i, "num_replicas");
    auto batch = number_at(*f, i, "batch_size");
    for (const auto* r : {&time, &replicas, &batch})
      if (!*r) return r->err();
    if (*time < 0) return import_field_error(where, "time", "negative");
    for (auto [v, field] : {std::pair{*replicas, "num_replicas"}, std::pair{*batch, "batch_size"}})
      if (!(v >= 1 && v <= (1 << 20) && v == std::floor(v)))
        return import_field_error(where, field, "expected a positive whole number");
    const auto& row = f->rows[i];
    const std::string app =
        app_col < row.size() ? std::string(detail::trim(row[app_col])) : std::string();
    if (!data.knows(app)) {
      ++summary.dropped["application not in Sia's data (" + app + ")"];
      continue;
    }
    auto steps = data.steps(app, static_cast<int>(*batch));
    if (!steps) {
      ++summary.dropped["batch size outside the validated ones"];
      continue;
    }
    job j;
    j.job_type = sia_job_type(app, static_cast<int>(*batch));
    j.scale_factor = static_cast<int>(*replicas);
    j.total_steps = std::max(1.0, std::ceil(*steps));
    j.arrival = *time;
    jobs.push_back(std::move(j));
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const job& a, const job& b) { return a.arrival < b.arrival; });
  for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<job_id>(i);
  summary.kept = jobs.size();
  return jobs;
}

result<throughput_table> sia_throughput_table(const sia_data& data, const std::vector<job>& jobs,
                                              const std::vector<sia_gpu_kind>& kinds,
                                              std::vector<std::string>& missing) {
  std::set<job_key> keys;
  for (const auto& j : jobs) keys.insert(job_key{j.job_type, j.scale_factor});
  throughput_table t;
  for (const auto& key : keys) {
    const auto shape = parse_sia_job_type(key.job_type);
    if (!shape)
      return error{error_kind::invalid_input,
                   "job type '" + key.job_type + "' is not '<application> (batch size <B>)'"};
    for (const auto& k : kinds) {
      auto tput =
          data.throughput(shape->first, k.kind, k.per_server, key.scale_factor, shape->second);
      if (!tput) {
        missing.push_back(k.gpu_type + ": " + key.job_type + " x" +
                          std::to_string(key.scale_factor) + ": " + tput.err().message);
        continue;
      }
      t.set_isolated(k.gpu_type, key, *tput);
    }
  }
  return t;
}

}  // namespace tessera
