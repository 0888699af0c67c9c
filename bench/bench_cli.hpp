#pragma once
// Command-line helpers shared by the bench programs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::bench {

/// Comma-separated numbers ("1,10,100"), empty items skipped.
template <class T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(static_cast<T>(std::atof(item.c_str())));
  return out;
}

/// The median of `v` (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The value of option argv[i], advancing i past it; exits with code 2 naming the option when
/// it has none.
inline std::string option_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s needs a value (see --help)\n", argv[i]);
    std::exit(2);
  }
  return argv[++i];
}

}  // namespace tessera::bench
