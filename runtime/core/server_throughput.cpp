#include "runtime/core/server_throughput.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

double gradient_megabytes(const std::string& job_type, const iteration_model& m) {
  struct family {
    const char* prefix;
    double mb;
  };
  // Rounded parameter counts of the models behind Gavel's job types, x 4 bytes.
  static const family families[] = {
      {"ResNet-18", 45},      {"ResNet-50", 98}, {"Transformer", 250}, {"LM", 130},
      {"Recommendation", 16}, {"A3C", 4},        {"CycleGAN", 110},
  };
  for (const auto& f : families)
    if (job_type.rfind(f.prefix, 0) == 0) return f.mb;
  return m.default_gradient_mb;
}

server_throughput::server_throughput(const cluster& cl, throughput_table types,
                                     iteration_model model)
    : cl_(&cl), types_(std::move(types)), model_(model), measured_server_(cl.servers.size(), 0) {
  // Versions are unique across instances, so a cache keyed by (address, version) cannot
  // mistake a new model at a reused address for the old one.
  static std::atomic<std::uint64_t> instances{0};
  version_ = (instances.fetch_add(1) + 1) << 32;
  table_types_ = types_.gpu_types();
  relative_.assign(cl.types.size(), std::vector<double>(table_types_.size(), 0.0));
  for (std::size_t k = 0; k < cl.types.size(); ++k) {
    const auto mine = types_.job_keys(cl.types[k].name);
    for (std::size_t t = 0; t < table_types_.size(); ++t) {
      double log_sum = 0;
      int n = 0;
      for (const auto& key : mine) {
        if (key.scale_factor != 1) continue;
        const auto a = types_.isolated(cl.types[k].name, key);
        const auto b = types_.isolated(table_types_[t], key);
        if (a && b && *a > 0 && *b > 0) {
          log_sum += std::log(*a / *b);
          ++n;
        }
      }
      relative_[k][t] = n > 0 ? std::exp(log_sum / n) : 0.0;
    }
  }
  build_tier2_cache();
}

void server_throughput::build_tier2_cache() {
  // The distinct GPU type names of the servers, and every job type and scale of the table.
  std::vector<std::string> kinds;
  cached_kind_.assign(cl_->servers.size(), 0);
  for (std::size_t i = 0; i < cl_->servers.size(); ++i) {
    const std::string& name = cl_->servers[i].gpu_type;
    auto it = std::find(kinds.begin(), kinds.end(), name);
    cached_kind_[i] = static_cast<int>(it - kinds.begin());
    if (it == kinds.end()) kinds.push_back(name);
  }
  std::vector<std::string> job_types;
  for (const auto& g : table_types_)
    for (const auto& key : types_.job_keys(g)) {
      cached_max_gpus_ = std::max(cached_max_gpus_, key.scale_factor);
      job_types.push_back(key.job_type);
    }
  for (const auto& jt : job_types) {
    auto& values = cached_[jt];
    if (!values.empty()) continue;
    values.assign(cached_at(static_cast<int>(kinds.size()), 0, false), 0.0);
    for (std::size_t k = 0; k < kinds.size(); ++k)
      for (int g = 1; g <= cached_max_gpus_; ++g)
        for (int multi = 0; multi < 2; ++multi) {
          const auto v = types_.isolated(kinds[k], job_key{jt, g}, multi == 0);
          values[cached_at(static_cast<int>(k), g, multi == 1)] = v ? *v : 0.0;
        }
  }
}

std::size_t server_throughput::job_type_hash::operator()(const std::string& t) const {
  std::uint64_t head = 0, tail = 0;
  const std::size_t n = std::min<std::size_t>(8, t.size());
  std::memcpy(&head, t.data(), n);
  std::memcpy(&tail, t.data() + t.size() - n, n);
  return std::hash<std::uint64_t>()(head * 0x9E3779B97F4A7C15ull ^ tail ^ t.size());
}

std::optional<double> server_throughput::cached_tier2(int server, const std::string& job_type,
                                                      int gpus, bool multi) const {
  if (gpus < 1 || gpus > cached_max_gpus_) return std::nullopt;
  auto it = cached_.find(job_type);
  if (it == cached_.end()) return std::nullopt;
  return it->second[cached_at(cached_kind_[server], gpus, multi)];
}

std::size_t server_throughput::cached_at(int kind, int gpus, bool multi) const {
  const std::size_t per_kind = 2 * (static_cast<std::size_t>(cached_max_gpus_) + 1);
  return static_cast<std::size_t>(kind) * per_kind + 2 * static_cast<std::size_t>(gpus) +
         (multi ? 1 : 0);
}

server_rate server_throughput::tabled(int server, const std::string& job_type, int gpus,
                                      bool multi) const {
  // The key copies the job type: look only when some server has measured entries.
  if (!measured_.empty()) {
    auto m = measured_.find({server, job_type, gpus, multi});
    if (m != measured_.end()) return {m->second, throughput_source::server_table};
  }
  const auto& sv = cl_->servers.at(server);
  if (const auto c = cached_tier2(server, job_type, gpus, multi)) {
    if (*c > 0) return {*c * sv.speed, throughput_source::type_table};
    return {};
  }
  auto t = types_.isolated(sv.gpu_type, job_key{job_type, gpus}, !multi);
  if (t && *t > 0) return {*t * sv.speed, throughput_source::type_table};
  return {};
}

double server_throughput::single_gpu_rate(int server, const std::string& job_type) const {
  if (auto r = tabled(server, job_type, 1, false); r.steps_per_s > 0) return r.steps_per_s;
  // Another GPU type's single-GPU entry, scaled by how much faster this server's type is
  // (geometric mean over the job types both types list); the geometric mean of the estimates
  // over every such type.
  const auto& sv = cl_->servers.at(server);
  if (sv.type_index < 0 || sv.type_index >= static_cast<int>(relative_.size())) return 0;
  double log_sum = 0;
  int n = 0;
  for (std::size_t t = 0; t < table_types_.size(); ++t) {
    const double rel = relative_[sv.type_index][t];
    if (rel <= 0) continue;
    const auto v = types_.isolated(table_types_[t], job_key{job_type, 1});
    if (!v || *v <= 0) continue;
    log_sum += std::log(*v * rel);
    ++n;
  }
  return n > 0 ? std::exp(log_sum / n) * sv.speed : 0.0;
}

server_rate server_throughput::rate_at(int server, const std::string& job_type, int gpus,
                                       bool multi_server) const {
  if (gpus <= 0 || server < 0 || server >= static_cast<int>(cl_->servers.size())) return {};
  if (gpus == 1 && multi_server) return {};  // one GPU cannot span servers
  if (auto r = tabled(server, job_type, gpus, multi_server); r.steps_per_s > 0) return r;
  // Tier 3: t_iter = t_compute + all-reduce time; per-GPU rate = 1 / t_iter.
  const double r1 = single_gpu_rate(server, job_type);
  if (r1 <= 0) return {};
  double sync = 0;
  if (gpus > 1) {
    const double bw = multi_server ? model_.inter_server_gb_per_s : model_.intra_server_gb_per_s;
    const double lat = multi_server ? model_.inter_latency_s : model_.intra_latency_s;
    const double bytes_gb = gradient_megabytes(job_type, model_) / 1024.0;
    sync = 2.0 * (gpus - 1) / gpus * bytes_gb / bw + 2.0 * (gpus - 1) * lat;
  }
  const double t_iter = 1.0 / r1 + sync;
  return {gpus / t_iter, throughput_source::analytic};
}

double server_throughput::rate(const std::string& job_type,
                               const std::vector<server_share>& shares) const {
  return rate(job_type, tier2_row(job_type), shares);
}

const std::vector<double>* server_throughput::tier2_row(const std::string& job_type) const {
  const auto it = cached_.find(job_type);
  return it == cached_.end() ? nullptr : &it->second;
}

double server_throughput::rate(const std::string& job_type, const std::vector<double>* row,
                               const std::vector<server_share>& shares) const {
  if (shares.empty()) return 0;
  int gpus = 0;
  for (const auto& sh : shares) gpus += sh.gpus;
  const bool multi = shares.size() > 1;
  if (const double r = cached_rate(job_type, row, shares, gpus, multi); r >= 0) return r;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& sh : shares) {
    const double r = rate_at(sh.server, job_type, gpus, multi).steps_per_s;
    if (r <= 0) return 0;
    best = std::min(best, r);
  }
  return best;
}

double server_throughput::cached_rate(const std::string& job_type, const std::vector<double>* row,
                                      const std::vector<server_share>& shares, int gpus,
                                      bool multi) const {
  if (!row || !measured_.empty() || gpus < 1 || gpus > cached_max_gpus_ || (gpus == 1 && multi))
    return -1;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& sh : shares) {
    if (sh.server < 0 || sh.server >= static_cast<int>(cl_->servers.size())) return 0;
    const double c = (*row)[cached_at(cached_kind_[sh.server], gpus, multi)];
    double r = c * cl_->servers[sh.server].speed;
    if (!(c > 0) || !(r > 0)) r = rate_at(sh.server, job_type, gpus, multi).steps_per_s;
    if (r <= 0) return 0;
    best = std::min(best, r);
  }
  return best;
}

std::optional<std::pair<double, double>> server_throughput::colocated_rate(
    const std::string& a, const std::string& b, int scale,
    const std::vector<server_share>& shares) const {
  if (shares.empty()) return std::nullopt;
  double slowest = std::numeric_limits<double>::infinity();
  const int type = cl_->servers.at(shares.front().server).type_index;
  for (const auto& sh : shares) {
    const auto& sv = cl_->servers.at(sh.server);
    if (sv.type_index != type) return std::nullopt;
    slowest = std::min(slowest, sv.speed);
  }
  auto t = colocated_table(type, a, b, scale);
  if (!t) return std::nullopt;
  return std::make_pair(t->first * slowest, t->second * slowest);
}

std::optional<std::pair<double, double>> server_throughput::colocated_table(int type,
                                                                            const std::string& a,
                                                                            const std::string& b,
                                                                            int scale) const {
  const std::string& name = cl_->types.at(type).name;
  const job_key ka{a, scale}, kb{b, scale};
  const auto ab = types_.colocated(name, ka, kb);
  const auto ba = types_.colocated(name, kb, ka);
  if (!ab && !ba) return std::nullopt;
  const double va = ab ? ab->first : ba->second;
  const double vb = ba ? ba->first : ab->second;
  if (!(va > 0) || !(vb > 0)) return std::nullopt;
  return std::make_pair(va, vb);
}

void server_throughput::record(const std::string& job_type, const std::vector<server_share>& shares,
                               double steps_per_s) {
  if (shares.empty() || !(steps_per_s > 0) || !std::isfinite(steps_per_s)) return;
  int gpus = 0;
  for (const auto& sh : shares) gpus += sh.gpus;
  const bool multi = shares.size() > 1;
  for (const auto& sh : shares) {
    if (sh.server < 0 || sh.server >= static_cast<int>(cl_->servers.size())) continue;
    measured_[{sh.server, job_type, gpus, multi}] = steps_per_s;
    measured_server_[sh.server] = 1;
  }
  ++version_;
}

bool server_throughput::has_measurements(int server) const {
  return server >= 0 && server < static_cast<int>(measured_server_.size()) &&
         measured_server_[server] != 0;
}

}  // namespace tessera
