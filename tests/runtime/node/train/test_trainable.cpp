// Tests of the elastic job API and the built-in models (runtime/node/train/trainable.cpp,
// runtime/node/train/models.cpp): learning, determinism, the shard-order property, resume.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "runtime/node/train/models.hpp"
#include "runtime/node/train/trainable.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::train;
using tessera::test::has;
using tessera::test::make_trainable;
using tessera::test::same_bits;

namespace {

/// Runs `steps` train_step(k) calls, failing the test on error.
void run(trainable& t, int steps, int k) {
  for (int i = 0; i < steps; ++i) {
    auto st = t.train_step(k);
    INFO((st ? std::string() : st.err().message));
    REQUIRE(st);
  }
}

/// A trainable of `kind` loaded from `state` (same seed and configuration as the saver).
std::unique_ptr<trainable> restore(const std::string& kind, std::uint64_t seed,
                                   const std::vector<std::uint8_t>& state,
                                   const trainable_config& config = {}) {
  auto t = make_trainable(kind, seed, config);
  auto st = t->load_state(state);
  INFO((st ? std::string() : st.err().message));
  REQUIRE(st);
  return t;
}

}  // namespace

TEST_CASE("builtin_trainables lists the models, unknown kinds name the valid ones", "[train]") {
  const auto reg = builtin_trainables();
  CHECK(reg.kinds() == std::vector<std::string>{"mlp", "mlp_cuda", "softmax_regression"});
  CHECK(reg.contains("mlp"));
  CHECK_FALSE(reg.description("mlp").empty());
  auto r = reg.make("resnet", 1);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::not_found);
  CHECK(r.err().message ==
        "unknown trainable kind 'resnet'; valid kinds: mlp, mlp_cuda, softmax_regression");
}

TEST_CASE("a program registers its own trainable kind in its own registry value", "[train]") {
  auto reg = builtin_trainables();
  auto wide = [](std::uint64_t seed, const trainable_config& c) {
    trainable_config with = c;
    with["hidden"] = 64;
    return make_mlp(seed, with);
  };
  REQUIRE(reg.add("wide_mlp", "an mlp with 64 hidden units", wide));
  auto t = reg.make("wide_mlp", 3);
  REQUIRE(t);
  CHECK((*t)->kind() == "mlp");
  CHECK((*t)->num_params() == 64 * 8 + 64 + 4 * 64 + 4);

  // The built-in table is not changed by another registry's additions.
  CHECK_FALSE(builtin_trainables().contains("wide_mlp"));

  auto dup = reg.add("mlp", "again", wide);
  REQUIRE_FALSE(dup);
  CHECK(has(dup.err().message, "'mlp' is already registered"));
  CHECK_FALSE(reg.add("", "x", wide));
  CHECK_FALSE(reg.add("has space", "x", wide));
  CHECK_FALSE(reg.add("null", "x", trainable_factory{}));
  REQUIRE(reg.add("broken", "returns null",
                  [](std::uint64_t, const trainable_config&) -> result<std::unique_ptr<trainable>> {
                    return std::unique_ptr<trainable>();
                  }));
  auto broken = reg.make("broken", 1);
  REQUIRE_FALSE(broken);
  CHECK(broken.err().kind == error_kind::internal);
}

TEST_CASE("configuration errors name the key and the valid keys", "[train]") {
  const auto reg = builtin_trainables();
  auto unknown = reg.make("mlp", 1, {{"hiden", 16}});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().kind == error_kind::invalid_input);
  CHECK(unknown.err().message ==
        "mlp config: field 'hiden': unknown key; valid keys: batch_size, classes, "
        "clusters_per_class, data_seed, dim, held_out_size, hidden, lr, momentum, separation, "
        "spread, train_size");
  auto not_int = reg.make("softmax_regression", 1, {{"batch_size", 2.5}});
  REQUIRE_FALSE(not_int);
  CHECK(not_int.err().message ==
        "softmax_regression config: field 'batch_size': expected an integer in [1, 1048576], got "
        "2.5");
  CHECK_FALSE(reg.make("softmax_regression", 1, {{"hidden", 8}}));  // not a key of this kind
  CHECK_FALSE(reg.make("mlp", 1, {{"lr", 0}}));
  CHECK_FALSE(reg.make("mlp", 1, {{"momentum", 1}}));
  CHECK_FALSE(reg.make("mlp", 1, {{"classes", 1}}));
  auto nan = reg.make("mlp", 1, {{"lr", std::nan("")}});
  REQUIRE_FALSE(nan);
  CHECK(has(nan.err().message, "field 'lr'"));
}

TEST_CASE("parameter counts follow the documented layouts", "[train]") {
  CHECK(make_trainable("softmax_regression", 1)->num_params() == 4 * 8 + 4);
  CHECK(make_trainable("mlp", 1)->num_params() == 32 * 8 + 32 + 4 * 32 + 4);
  CHECK(make_trainable("mlp", 1, {{"dim", 3}, {"classes", 5}, {"hidden", 7}})->num_params() ==
        7 * 3 + 7 + 5 * 7 + 5);
}

TEST_CASE("both models learn: loss goes down and held-out accuracy beats chance", "[train]") {
  for (const std::string kind : {"softmax_regression", "mlp"}) {
    SECTION(kind) {
      auto t = make_trainable(kind, 11);
      const double loss0 = t->loss();
      const double acc0 = t->held_out_accuracy();
      CHECK(std::isfinite(loss0));
      run(*t, 100, 4);
      const double loss1 = t->loss();
      run(*t, 100, 4);
      const double loss2 = t->loss();
      INFO(kind << ": loss " << loss0 << " -> " << loss1 << " -> " << loss2 << ", accuracy " << acc0
                << " -> " << t->held_out_accuracy());
      CHECK(loss1 < 0.6 * loss0);
      CHECK(loss2 < loss0);
      CHECK(t->held_out_accuracy() > 0.7);  // 4 classes: chance is 0.25
      CHECK(t->step() == 200);
    }
  }
}

TEST_CASE("the mlp separates classes a linear model cannot", "[train]") {
  // Several blobs per class with a large spread of centres: not linearly separable.
  const trainable_config c = {
      {"clusters_per_class", 4}, {"separation", 3}, {"classes", 2}, {"dim", 2},
      {"spread", 0.3},           {"hidden", 32}};
  auto lin_cfg = c;
  lin_cfg.erase("hidden");
  auto lin = make_trainable("softmax_regression", 5, lin_cfg);
  auto net = make_trainable("mlp", 5, c);
  run(*lin, 400, 2);
  run(*net, 400, 2);
  INFO("softmax_regression " << lin->held_out_accuracy() << ", mlp " << net->held_out_accuracy());
  CHECK(net->held_out_accuracy() > lin->held_out_accuracy() + 0.1);
  CHECK(net->loss() < lin->loss());
}

TEST_CASE("compute_gradient matches a finite-difference gradient of the loss", "[train]") {
  // One training example: every batch draws it, so the K=1 gradient is exactly d loss()/d p.
  auto data = std::make_shared<data_split>();
  data->train = dataset{3, 3, {0.5f, -1.0f, 2.0f}, {1}};
  data->held_out = data->train;
  for (const std::string kind : {"softmax_regression", "mlp"}) {
    SECTION(kind) {
      auto r =
          kind == "mlp" ? make_mlp(2, {{"hidden", 5}}, data) : make_softmax_regression(2, {}, data);
      REQUIRE(r);
      trainable& t = **r;
      // Nudge the parameters away from the initial point so every ReLU is decisive.
      for (std::size_t i = 0; i < t.num_params(); ++i)
        t.params()[i] += 0.05f * static_cast<float>(static_cast<int>(i % 7) - 3);
      std::vector<float> g;
      REQUIRE(t.compute_gradient(0, 1, 0, g));
      REQUIRE(g.size() == t.num_params());
      for (std::size_t i = 0; i < t.num_params(); ++i) {
        const float p = t.params()[i];
        const float h = 1e-3f;
        t.params()[i] = p + h;
        const double up = t.loss();
        t.params()[i] = p - h;
        const double down = t.loss();
        t.params()[i] = p;
        const double numeric = (up - down) / (2.0 * h);
        INFO(kind << " parameter " << i);
        CHECK(g[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
      }
    }
  }
}

TEST_CASE("same seed gives bitwise-identical parameters, another seed does not", "[train]") {
  for (const std::string kind : {"softmax_regression", "mlp"}) {
    SECTION(kind) {
      auto a = make_trainable(kind, 42);
      auto b = make_trainable(kind, 42);
      auto c = make_trainable(kind, 43);
      run(*a, 50, 3);
      run(*b, 50, 3);
      run(*c, 50, 3);
      CHECK(same_bits(a->params(), b->params()));
      CHECK(a->save_state() == b->save_state());
      CHECK(a->loss() == b->loss());
      CHECK_FALSE(same_bits(a->params(), c->params()));
    }
  }
}

TEST_CASE("the same data with another seed changes only the initialisation and batches",
          "[train]") {
  auto a = make_trainable("mlp", 1, {{"data_seed", 9}});
  auto b = make_trainable("mlp", 2, {{"data_seed", 9}});
  CHECK_FALSE(same_bits(a->params(), b->params()));
  run(*a, 150, 2);
  run(*b, 150, 2);
  CHECK(a->held_out_accuracy() == Approx(b->held_out_accuracy()).margin(0.1));
}

TEST_CASE("K=4: shard gradients computed anywhere, in any order, give train_step's bits",
          "[train]") {
  constexpr int k = 4;
  std::mt19937 order_rng(123);
  for (const std::string kind : {"softmax_regression", "mlp"}) {
    SECTION(kind) {
      auto reference = make_trainable(kind, 7);
      auto driver = make_trainable(kind, 7);
      for (int step = 0; step < 25; ++step) {
        REQUIRE(reference->train_step(k));

        // Four copies loaded from the driver's state, one shard each, in a random order.
        const auto state = driver->save_state();
        std::vector<std::unique_ptr<trainable>> copies;
        for (int c = 0; c < k; ++c) copies.push_back(restore(kind, 7, state));
        std::vector<int> order = {0, 1, 2, 3};
        std::shuffle(order.begin(), order.end(), order_rng);
        std::vector<std::vector<float>> grads(k);
        for (int c = 0; c < k; ++c) {
          const int shard = order[static_cast<std::size_t>(c)];
          REQUIRE(copies[static_cast<std::size_t>(c)]->compute_gradient(
              shard, k, driver->step(), grads[static_cast<std::size_t>(shard)]));
        }
        std::vector<float> summed;
        REQUIRE(sum_shard_gradients(grads, summed));
        REQUIRE(driver->apply_gradient(summed, k));
        REQUIRE(same_bits(reference->params(), driver->params()));
      }
      CHECK(reference->save_state() == driver->save_state());
    }
  }
}

TEST_CASE("K=4: shards computed concurrently on threads give train_step's bits", "[train]") {
  constexpr int k = 4;
  auto reference = make_trainable("mlp", 8);
  auto driver = make_trainable("mlp", 8);
  for (int step = 0; step < 10; ++step) {
    REQUIRE(reference->train_step(k));
    std::vector<std::unique_ptr<trainable>> copies;
    for (int c = 0; c < k; ++c) copies.push_back(driver->clone());
    std::vector<std::vector<float>> grads(k);
    std::vector<std::thread> threads;
    std::vector<char> ok(k, 0);
    for (int s = k - 1; s >= 0; --s)  // start them in reverse order
      threads.emplace_back([&, s] {
        const auto i = static_cast<std::size_t>(s);
        // Even steps: one copy per thread. Odd steps: all threads share the driver
        // (compute_gradient is const and keeps no scratch state in the object).
        const trainable& on = step % 2 == 0 ? *copies[i] : *driver;
        ok[i] = on.compute_gradient(s, k, driver->step(), grads[i]).ok();
      });
    for (auto& th : threads) th.join();
    REQUIRE(std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; }));
    std::vector<float> summed;
    REQUIRE(sum_shard_gradients(grads, summed));
    REQUIRE(driver->apply_gradient(summed, k));
  }
  CHECK(same_bits(reference->params(), driver->params()));
}

TEST_CASE("save/load in the middle resumes bitwise-identically to an uninterrupted run",
          "[train]") {
  for (const std::string kind : {"softmax_regression", "mlp"}) {
    SECTION(kind) {
      auto whole = make_trainable(kind, 21);
      run(*whole, 60, 4);

      auto first = make_trainable(kind, 21);
      run(*first, 30, 4);
      const auto state = first->save_state();
      first.reset();  // the job is preempted; a new process picks it up
      auto second = restore(kind, 21, state);
      CHECK(second->step() == 30);
      run(*second, 30, 4);
      CHECK(same_bits(whole->params(), second->params()));
      CHECK(whole->save_state() == second->save_state());

      // clone() carries the same state.
      auto cloned = second->clone();
      run(*second, 5, 4);
      run(*cloned, 5, 4);
      CHECK(same_bits(cloned->params(), second->params()));
    }
  }
}

TEST_CASE("load_state rejects foreign or damaged state and leaves the object unchanged",
          "[train]") {
  auto t = make_trainable("mlp", 4);
  run(*t, 3, 1);
  const auto before = t->save_state();

  auto expect_error = [&](const std::vector<std::uint8_t>& state, const std::string& part) {
    auto st = t->load_state(state);
    REQUIRE_FALSE(st);
    INFO(st.err().message);
    CHECK(st.err().kind == error_kind::invalid_input);
    CHECK(has(st.err().message, part));
    CHECK(t->save_state() == before);
  };
  expect_error(make_trainable("softmax_regression", 4)->save_state(),
               "saved by a 'softmax_regression'");
  expect_error(make_trainable("mlp", 4, {{"lr", 0.05}})->save_state(),
               "different configuration or data");
  expect_error(make_trainable("mlp", 5)->save_state(),
               "different configuration or data");  // other data
  expect_error(make_trainable("mlp", 4, {{"hidden", 16}})->save_state(), "parameters");
  auto cut = before;
  cut.resize(cut.size() - 3);
  expect_error(cut, "truncated");
  auto longer = before;
  longer.push_back(0);
  expect_error(longer, "unexpected bytes");
  expect_error({}, "bad magic");
}

TEST_CASE("bad arguments to the step functions are errors, not crashes", "[train]") {
  auto t = make_trainable("softmax_regression", 1);
  std::vector<float> g;
  CHECK_FALSE(t->compute_gradient(4, 4, 0, g));
  CHECK_FALSE(t->compute_gradient(-1, 4, 0, g));
  CHECK_FALSE(t->compute_gradient(0, 0, 0, g));
  CHECK_FALSE(t->compute_gradient(0, 1, -1, g));
  CHECK_FALSE(t->apply_gradient(std::vector<float>(3, 0.0f), 1));
  CHECK_FALSE(t->apply_gradient(std::vector<float>(t->num_params(), 0.0f), 0));
  CHECK_FALSE(t->train_step(0));
  CHECK(t->step() == 0);
  std::vector<float> out;
  CHECK_FALSE(sum_shard_gradients({}, out));
  CHECK_FALSE(sum_shard_gradients({{1, 2}, {1}}, out));
  REQUIRE(sum_shard_gradients({{1, 2}, {3, 4}, {5, 6}}, out));
  CHECK(out == std::vector<float>{9, 12});
}

TEST_CASE("more shards than batch examples still steps (empty shards add nothing)", "[train]") {
  auto t = make_trainable("softmax_regression", 1, {{"batch_size", 2}});
  std::vector<float> g;
  REQUIRE(t->compute_gradient(0, 5, 0, g));  // shard 0 of 5 over 2 examples: empty
  CHECK(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }));
  REQUIRE(t->train_step(5));
  CHECK(t->step() == 1);
}
