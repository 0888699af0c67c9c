// Statistical side of forking (HadarE), in one process and without the runtime's clock: how
// many rounds a job needs to reach a target training loss when forked into copies that make
// different numbers of steps per round (nodes of different speeds) and merge at every round
// end, under each merge rule (runtime/node/train/fork_merge.hpp), against the same job unforked on
// the fastest node, and against the ideal of running all the copies' steps one after another.
//
//   build/bench_fork_merge_bench [--kind mlp] [--config hidden=16,lr=0.05] [--seeds 7,8,9]
//       [--steps 50,25,12] [--target 0.35] [--rounds 200] [--scale 1]
//
// --steps gives the steps per round of each copy (copy 0 on the fastest node; the defaults are
// the runtime experiment's: 1 s rounds, 0.02 s steps, speeds 1 / 0.5 / 0.25). The copies merge
// through the local aggregator backend (threads), the code path the runtime uses with MPI.
// Prints one JSON object per (seed, variant): rounds to reach the target (-1 = not within
// --rounds), the loss and held-out accuracy at that point (else at the last round).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.hpp"
#include "runtime/node/comm/local_aggregator.hpp"
#include "runtime/node/train/fork_merge.hpp"
#include "runtime/node/train/models.hpp"

using namespace tessera;
using namespace tessera::train;

namespace {

/// Comma-separated words.
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

struct outcome {
  int rounds = -1;  ///< rounds to the target, -1 if never
  double loss = 0;
  double accuracy = 0;
  std::int64_t steps = 0;
};

/// Runs `round(r, model)` until the model's loss reaches `target` or `max_rounds` pass.
outcome run_until(trainable& m, double target, int max_rounds,
                  const std::function<void(trainable&)>& round) {
  outcome o;
  for (int r = 1; r <= max_rounds; ++r) {
    round(m);
    o.loss = m.loss();
    if (o.loss <= target) {
      o.rounds = r;
      break;
    }
  }
  o.accuracy = m.held_out_accuracy();
  o.steps = m.step();
  return o;
}

/// `n` steps of the unforked job (batches in step order).
void steps_in_a_row(trainable& m, int scale, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (auto st = m.train_step(scale); !st) {
      std::fprintf(stderr, "%s\n", st.err().message.c_str());
      std::exit(1);
    }
}

/// One forked round: every copy starts from `m`, copy c makes steps[c] steps on batches
/// start + i * n + c (as the runtime draws them), then all merge under `rule`.
void forked_round(trainable& m, int scale, const std::vector<std::int64_t>& steps,
                  fork_merge_rule rule) {
  const int n = static_cast<int>(steps.size());
  auto world = std::make_shared<comm::local_world>(n);
  comm::group members;
  for (int c = 0; c < n; ++c) members.push_back(c);
  fork_merge_input in;
  in.start_step = m.step();
  std::vector<std::unique_ptr<trainable>> copies;
  for (int c = 0; c < n; ++c) copies.push_back(m.clone());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c)
    threads.emplace_back([&, c] {
      auto& cp = *copies[static_cast<std::size_t>(c)];
      const auto mine = steps[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < mine; ++i)
        if (auto st = cp.train_step_on(scale, in.start_step + i * n + c); !st)
          errors[static_cast<std::size_t>(c)] = st.err().message;
      comm::local_aggregator agg(world, c);
      fork_merge_input own = in;
      own.steps = mine;
      if (auto st = fork_merge(cp, own, rule, agg, members, {}); !st)
        errors[static_cast<std::size_t>(c)] = st.err().message;
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) {
      std::fprintf(stderr, "%s\n", e.c_str());
      std::exit(1);
    }
  // Every copy holds the merged state: carry copy 0's on.
  if (auto st = m.load_state(copies.front()->save_state()); !st) {
    std::fprintf(stderr, "%s\n", st.err().message.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "mlp";
  trainable_config config{{"hidden", 16}, {"lr", 0.05}};
  std::vector<std::uint64_t> seeds{7, 8, 9};
  std::vector<std::int64_t> steps{50, 25, 12};
  double target = 0.35;
  int max_rounds = 200, scale = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::option_value(argc, argv, i); };
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_fork_merge_bench [--kind K] [--config k=v,...] [--seeds 7,8,9]\n"
          "       [--steps 50,25,12] [--target LOSS] [--rounds R] [--scale K]\n"
          "Rounds to a target loss: unforked on the fastest node, forked with each merge rule\n"
          "(mean, weighted), and all copies' steps in a row (ideal). JSON lines.\n");
      return 0;
    } else if (a == "--kind") {
      kind = next();
    } else if (a == "--config") {
      config.clear();
      for (const auto& kv : split(next())) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos) {
          std::fprintf(stderr, "--config: '%s' is not key=value\n", kv.c_str());
          return 2;
        }
        config[kv.substr(0, eq)] = std::atof(kv.c_str() + eq + 1);
      }
    } else if (a == "--seeds") {
      seeds = bench::parse_list<std::uint64_t>(next());
    } else if (a == "--steps") {
      steps = bench::parse_list<std::int64_t>(next());
    } else if (a == "--target") {
      target = std::atof(next().c_str());
    } else if (a == "--rounds") {
      max_rounds = std::atoi(next().c_str());
    } else if (a == "--scale") {
      scale = std::atoi(next().c_str());
    } else {
      std::fprintf(stderr, "unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (steps.empty() || max_rounds < 1 || scale < 1) {
    std::fprintf(stderr, "--steps needs at least one count; --rounds and --scale must be >= 1\n");
    return 2;
  }
  const auto registry = builtin_trainables();
  std::int64_t all_steps = 0;
  for (auto s : steps) all_steps += s;
  for (const auto seed : seeds) {
    auto made = registry.make(kind, seed, config);
    if (!made) {
      std::fprintf(stderr, "%s\n", made.err().message.c_str());
      return 2;
    }
    const auto& initial = *made.value();
    auto report = [&](const std::string& variant, const outcome& o) {
      std::printf(
          "{\"seed\": %llu, \"variant\": \"%s\", \"target\": %g, \"rounds\": %d, "
          "\"steps\": %lld, \"loss\": %.4f, \"accuracy\": %.4f}\n",
          static_cast<unsigned long long>(seed), variant.c_str(), target, o.rounds,
          static_cast<long long>(o.steps), o.loss, o.accuracy);
      std::fflush(stdout);
    };
    {
      auto m = initial.clone();
      report("unforked", run_until(*m, target, max_rounds,
                                   [&](trainable& t) { steps_in_a_row(t, scale, steps.front()); }));
    }
    {
      auto m = initial.clone();
      report("ideal", run_until(*m, target, max_rounds,
                                [&](trainable& t) { steps_in_a_row(t, scale, all_steps); }));
    }
    for (auto rule : {fork_merge_rule::mean, fork_merge_rule::weighted}) {
      auto m = initial.clone();
      report("forked_" + to_string(rule), run_until(*m, target, max_rounds, [&](trainable& t) {
               forked_round(t, scale, steps, rule);
             }));
    }
  }
  return 0;
}
