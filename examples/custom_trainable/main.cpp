/// @file main.cpp
/// A researcher's own node binary: the built-in trainables plus `least_squares`, run by the
/// same runtime as `tessera run` (same options; see README.md).

#include <iostream>
#include <string>
#include <vector>

#include "launcher/run_command.hpp"
#include "least_squares.hpp"
#include "runtime/node/train/trainable.hpp"

int main(int argc, char** argv) {
  auto kinds = tessera::train::builtin_trainables();
  if (auto st = kinds.add("least_squares", "linear least squares on synthetic data (example)",
                          example::make_least_squares);
      !st) {
    std::cerr << "custom_trainable: " << st.err().message << '\n';
    return tessera::exit_code::failed;
  }
  // The binary is its own `run` command, so --local re-executes it with no command prefix.
  return tessera::cli::run_command(std::vector<std::string>(argv + 1, argv + argc), kinds, {});
}
