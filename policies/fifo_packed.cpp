#include "policies/fifo_packed.hpp"

#include <algorithm>

#include "policies/fifo.hpp"
#include "policies/gavel_family.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

namespace {

/// The type job m runs alone on for the whole round, or -1.
int whole_type(const allocation& a, std::size_t m) {
  for (std::size_t j = 0; j < a.x[m].size(); ++j)
    if (a.x[m][j] >= 1.0) return static_cast<int>(j);
  return -1;
}

/// Normalised throughput of running job r and waiting job w sharing r's GPUs of type j:
/// sum over the two of co-located / alone (a term left out where alone is 0); 0 when the
/// table has no co-location entry for them there.
double pair_gain(const snapshot& s, const matrix& t, std::size_t r, std::size_t w, int j) {
  const auto& jr = *s.jobs[r].spec;
  const auto& jw = *s.jobs[w].spec;
  auto co = s.rates->colocated_table(j, jr.job_type, jw.job_type, jr.scale_factor);
  if (!co) return 0.0;
  const double speed = s.cl->types[j].mean_speed;
  double gain = 0;
  if (t[r][j] > 0) gain += co->first * speed / t[r][j];
  if (t[w][j] > 0) gain += co->second * speed / t[w][j];
  return gain;
}

/// Whether job m fits some type alone (FIFO skips the others rather than block its queue).
bool can_ever_run(const snapshot& s, const matrix& t, std::size_t m) {
  for (std::size_t j = 0; j < t[m].size(); ++j)
    if (t[m][j] > 0 && s.cl->types[j].gpus >= s.jobs[m].spec->scale_factor) return true;
  return false;
}

}  // namespace

result<allocation> fifo_packed::allocate(const snapshot& s) {
  fifo base(fifo_choice::fastest);
  auto a = base.allocate(s);
  if (!a || !s.rates) return a;
  const matrix t = policy_throughputs(s);
  const std::size_t n = s.jobs.size();
  std::vector<char> paired(n, 0);
  for (std::size_t w = 0; w < n; ++w) {
    // Running alone, or skipped by FIFO as never fitting: not in the waiting queue.
    if (whole_type(*a, w) >= 0 || !can_ever_run(s, t, w)) continue;
    double best = threshold_;
    std::size_t partner = n;
    for (std::size_t r = 0; r < n; ++r) {
      const int j = whole_type(*a, r);
      if (j < 0 || paired[r] || s.jobs[r].spec->scale_factor != s.jobs[w].spec->scale_factor)
        continue;
      const double g = pair_gain(s, t, r, w, j);
      if (g > best) {
        best = g;
        partner = r;
      }
    }
    if (partner == n) break;  // no job jumps the queue
    const int j = whole_type(*a, partner);
    pair_allocation p{std::min(partner, w), std::max(partner, w),
                      std::vector<double>(s.cl->types.size(), 0.0)};
    p.x[j] = 1.0;
    a->x[partner][j] = 0.0;
    a->pairs.push_back(std::move(p));
    paired[partner] = paired[w] = 1;
  }
  return a;
}

std::vector<option_spec> fifo_packed_options() {
  return {{"packing_threshold",
           "a waiting job shares a running job's GPUs only when the pair's normalised "
           "throughput (sum of co-located over alone) exceeds this",
           1.5, 0.0, 2.0}};
}

std::unique_ptr<allocation_policy> make_fifo_packed(const options& o) {
  return std::make_unique<fifo_packed>(o.get("packing_threshold"));
}

}  // namespace tessera
