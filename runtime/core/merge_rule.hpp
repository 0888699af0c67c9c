#pragma once
/// @file merge_rule.hpp
/// How a forked job's copies are combined at a round end: a job setting (`merge` in the
/// job-set file), read by the job-file loader and applied by runtime/node/train/fork_merge.hpp.
/// Header-only, so the file formats need nothing of the training code.

#include <optional>
#include <string>

namespace tessera::train {

/// How forked copies' states are combined at a round end (runtime/node/train/fork_merge.hpp).
enum class fork_merge_rule {
  mean,      ///< plain average of parameters and optimizer state
  weighted,  ///< average weighted by each copy's steps this round
};

/// "mean" or "weighted".
inline std::string to_string(fork_merge_rule r) {
  return r == fork_merge_rule::weighted ? "weighted" : "mean";
}

/// The rule named `name`, or nothing.
inline std::optional<fork_merge_rule> parse_fork_merge_rule(const std::string& name) {
  for (auto r : {fork_merge_rule::mean, fork_merge_rule::weighted})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

/// "mean, weighted": the accepted names, for messages.
inline std::string fork_merge_rule_names() { return "mean, weighted"; }

}  // namespace tessera::train
