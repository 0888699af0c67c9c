#pragma once
// Small builders shared by the tests.
#include <string>

#include "runtime/model.hpp"

namespace tessera::test {

/// A job with the fields the scheduler reads; the Gavel command fields stay empty.
inline job make_job(job_id id, const std::string& type, int scale, double steps,
                    double arrival = 0, double weight = 1) {
  job j;
  j.id = id;
  j.job_type = type;
  j.scale_factor = scale;
  j.total_steps = steps;
  j.arrival = arrival;
  j.priority_weight = weight;
  return j;
}

}  // namespace tessera::test
