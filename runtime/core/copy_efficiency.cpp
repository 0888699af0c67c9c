#include "runtime/core/copy_efficiency.hpp"

#include <cmath>
#include <cstdlib>

namespace tessera {

double averaged_copy_efficiency(int copies, double batch, double b_noise) {
  if (copies <= 1) return 1.0;
  if (std::isinf(b_noise)) return 1.0;
  return (batch + b_noise) / (copies * batch + b_noise);
}

double averaged_round_value(const std::vector<double>& steps, const std::vector<double>& weights,
                            double batch, double b_noise) {
  double k = 0, var = 0;  // gradient steps of the merged update; its noise in single steps
  for (std::size_t c = 0; c < steps.size() && c < weights.size(); ++c) {
    k += weights[c] * steps[c];
    var += weights[c] * weights[c] * steps[c];
  }
  if (k <= 0 || var <= 0) return 0;
  const double b_eff = batch * k / var;
  return k * (1 + b_noise / batch) / (1 + b_noise / b_eff);
}

std::optional<double> batch_size_of(const std::string& job_type) {
  static const std::string marker = "(batch size ";
  const auto at = job_type.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = job_type.c_str() + at + marker.size();
  char* end = nullptr;
  const double b = std::strtod(begin, &end);
  if (end == begin || *end != ')' || !(b > 0) || !std::isfinite(b)) return std::nullopt;
  return b;
}

double copy_efficiency::factor(const std::string& job_type, int copies) const {
  if (!enabled || copies <= 1) return 1.0;
  return averaged_copy_efficiency(copies, batch_size_of(job_type).value_or(default_batch), b_noise);
}

}  // namespace tessera
