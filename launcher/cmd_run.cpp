/// @file cmd_run.cpp
/// `tessera run`: the actor runtime on real node processes (actors/run.hpp).

#include "actors/run.hpp"
#include "launcher/commands.hpp"
#include "runtime/train/trainable.hpp"

namespace tessera::cli {

int cmd_run(const std::vector<std::string>& args) {
  return actors::run_command(args, train::builtin_trainables(), {"run"});
}

}  // namespace tessera::cli
