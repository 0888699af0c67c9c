#include "actors/program_average.hpp"

#include <algorithm>

namespace tessera::actors {

namespace {

/// A count as two exact floats (24-bit halves), and back.
void push_count(std::vector<float>& v, std::uint64_t n) {
  v.push_back(static_cast<float>(n >> 24));
  v.push_back(static_cast<float>(n & 0xffffff));
}
std::uint64_t read_count(const float* two) {
  return (static_cast<std::uint64_t>(two[0]) << 24) + static_cast<std::uint64_t>(two[1]);
}

/// Floats one offer takes on the wire: copy, present, steps (2), count (2).
constexpr std::size_t offer_floats = 6;

std::vector<float> encode(const copy_offer& o) {
  std::vector<float> v{static_cast<float>(o.copy), o.present ? 1.0f : 0.0f};
  push_count(v, static_cast<std::uint64_t>(o.steps));
  push_count(v, o.count);
  return v;
}

std::vector<copy_offer> decode(const std::vector<float>& all) {
  std::vector<copy_offer> out;
  for (std::size_t at = 0; at + offer_floats <= all.size(); at += offer_floats) {
    copy_offer o;
    o.copy = static_cast<std::int32_t>(all[at]);
    o.present = all[at + 1] > 0.5f;
    o.steps = static_cast<std::int64_t>(read_count(&all[at + 2]));
    o.count = read_count(&all[at + 4]);
    out.push_back(o);
  }
  return out;
}

std::string where(std::int64_t job, std::int32_t copy) {
  return "job " + std::to_string(job) + " copy " + std::to_string(copy);
}

}  // namespace

merge_plan plan_merge(const std::vector<copy_offer>& offers, const std::string& rule,
                      std::int64_t job) {
  merge_plan p;
  p.weight.assign(offers.size(), 0.0);
  p.left_out.assign(offers.size(), "");
  // The size of the mean: the lowest present copy's.
  std::int32_t first = -1;
  for (const auto& o : offers)
    if (o.present && (first < 0 || o.copy < first)) {
      first = o.copy;
      p.count = o.count;
    }
  if (first < 0) return p;
  double steps = 0;
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const auto& o = offers[i];
    if (!o.present) continue;
    if (o.count != p.count) {
      p.left_out[i] = where(job, o.copy) + " passed " + std::to_string(o.count) +
                      " values to average, copy " + std::to_string(first) + " passed " +
                      std::to_string(p.count) + ": it is left out of the mean";
      continue;
    }
    p.weight[i] = 1;
    ++p.copies;
    p.steps += o.steps;
    steps += static_cast<double>(o.steps);
  }
  const bool weighted = rule == "weighted" && steps > 0;
  for (std::size_t i = 0; i < offers.size(); ++i) {
    if (p.weight[i] > 0 && weighted) p.weight[i] = static_cast<double>(offers[i].steps);
    p.total += p.weight[i];
  }
  return p;
}

result<merge_outcome> merge_copies(comm::aggregator& agg, const comm::group& leaders,
                                   const copy_offer& me, float* data,
                                   const std::shared_ptr<void>& owner, const std::string& rule,
                                   std::int64_t job, comm::reduce_options opt) {
  const std::string who = where(job, me.copy) + " (" + std::to_string(me.count) + " values)";
  std::vector<float> all;
  if (auto st = agg.allgather(leaders, encode(me), all, nullptr, opt); !st)
    return error{st.err().kind, "merging the copies of " + who + ": " + st.err().message};
  const auto offers = decode(all);
  const auto plan = plan_merge(offers, rule, job);
  merge_outcome out;
  out.copies = plan.copies;
  out.steps = plan.steps;
  if (plan.copies == 0) return out;
  double w = 0;
  for (std::size_t i = 0; i < offers.size(); ++i)
    if (offers[i].copy == me.copy) {
      w = plan.weight[i];
      out.left_out = plan.left_out[i];
    }
  // Copies not in the mean add zeros (held alive with the call, in case it times out).
  comm::buffer_view view{data, plan.count, comm::memory_kind::host, 0, owner};
  if (w == 0) {
    auto zeros = std::make_shared<std::vector<float>>(plan.count, 0.0f);
    view.data = zeros->data();
    view.owner = zeros;
  } else if (w != 1) {
    const auto wf = static_cast<float>(w);
    for (std::size_t i = 0; i < plan.count; ++i) data[i] *= wf;
  }
  opt.op = comm::reduce_op::sum;
  opt.order = comm::reduce_order::fastest;
  if (auto st = agg.allreduce(leaders, view, opt); !st)
    return error{st.err().kind, "merging the copies of " + who + ": " + st.err().message};
  if (w > 0) {
    const auto total = static_cast<float>(plan.total);
    for (std::size_t i = 0; i < plan.count; ++i) data[i] /= total;
  }
  return out;
}

}  // namespace tessera::actors
