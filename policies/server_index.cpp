#include "policies/server_index.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera {

server_classes::server_classes(const std::vector<int>& key) {
  std::map<int, std::size_t> ids;
  std::vector<std::size_t> group(key.size());
  for (std::size_t u = 0; u < key.size(); ++u)
    group[u] = ids.emplace(key[u], ids.size()).first->second;
  number_by(group);
}

void server_classes::number_by(const std::vector<std::size_t>& group) {
  // Classes are numbered by their lowest member, so the numbering does not depend on the
  // order the splits happened in.
  std::map<std::size_t, int> number;
  class_of_.assign(group.size(), 0);
  first_.clear();
  for (std::size_t u = 0; u < group.size(); ++u) {
    auto [it, fresh] = number.emplace(group[u], static_cast<int>(first_.size()));
    if (fresh) first_.push_back(static_cast<int>(u));
    class_of_[u] = it->second;
  }
  ++version_;
}

bool server_classes::refine(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = class_of_.size();
  bool split = false;
  for (std::size_t u = 0; u < n && !split; ++u) {
    const auto f = static_cast<std::size_t>(first_[static_cast<std::size_t>(class_of_[u])]);
    split = !(a[u] == a[f]) || !(b[u] == b[f]);
  }
  if (!split) return false;
  std::map<std::tuple<int, double, double>, std::size_t> ids;
  std::vector<std::size_t> group(n);
  for (std::size_t u = 0; u < n; ++u)
    group[u] = ids.emplace(std::make_tuple(class_of_[u], a[u], b[u]), ids.size()).first->second;
  number_by(group);
  return true;
}

free_buckets::free_buckets(const server_classes& classes, const std::vector<int>& free) {
  for (const int f : free) max_free_ = std::max(max_free_, f);
  buckets_.assign(static_cast<std::size_t>(classes.count()),
                  std::vector<std::set<int>>(static_cast<std::size_t>(max_free_) + 1));
  for (std::size_t u = 0; u < free.size(); ++u) {
    if (free[u] <= 0) continue;
    auto& bucket = buckets_[static_cast<std::size_t>(classes.of(static_cast<int>(u)))]
                           [static_cast<std::size_t>(free[u])];
    bucket.insert(bucket.end(), static_cast<int>(u));  // ids ascending: O(1) each
  }
}

void free_buckets::update(int u, int c, int from, int to) {
  auto& row = buckets_[static_cast<std::size_t>(c)];
  if (to > max_free_) {  // more free than any server had at the start: grow every class
    max_free_ = to;
    for (auto& r : buckets_) r.resize(static_cast<std::size_t>(max_free_) + 1);
  }
  if (from > 0) row[static_cast<std::size_t>(from)].erase(u);
  if (to > 0) row[static_cast<std::size_t>(to)].insert(u);
}

const std::set<int>& free_buckets::at(int c, int f) const {
  static const std::set<int> none;
  if (c < 0 || c >= static_cast<int>(buckets_.size()) || f <= 0 || f > max_free_) return none;
  return buckets_[static_cast<std::size_t>(c)][static_cast<std::size_t>(f)];
}

}  // namespace tessera
