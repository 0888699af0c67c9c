// Tests of the synthetic data and the CSV reader (runtime/node/train/dataset.cpp).
#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "runtime/node/train/dataset.hpp"
#include "runtime/node/train/models.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::train;
using tessera::test::has;
using tessera::test::same_bits;
using tessera::test::scratch_dir;

namespace {

/// Parses `text` as CSV named "data.csv".
result<dataset> csv(const std::string& text) {
  std::istringstream in(text);
  return parse_csv_dataset(in, "data.csv");
}

/// The CSV error message for `text`; fails the test when it parses.
std::string csv_error(const std::string& text) {
  auto r = csv(text);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::invalid_input);
  return r.err().message;
}

}  // namespace

TEST_CASE("make_blobs is deterministic, shaped as asked, and covers every class", "[train]") {
  blobs_options o;
  o.num_classes = 3;
  o.dim = 5;
  o.train_size = 30;
  o.held_out_size = 12;
  auto a = make_blobs(9, o);
  auto b = make_blobs(9, o);
  auto c = make_blobs(10, o);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->train.size() == 30);
  CHECK(a->held_out.size() == 12);
  CHECK(a->train.x.size() == 30 * 5);
  CHECK(a->train.dim == 5);
  CHECK(a->held_out.num_classes == 3);
  CHECK(std::set<int>(a->train.y.begin(), a->train.y.end()) == std::set<int>{0, 1, 2});
  CHECK(same_bits(a->train.x, b->train.x));
  CHECK(same_bits(a->held_out.x, b->held_out.x));
  CHECK(fingerprint(*a) == fingerprint(*b));
  CHECK_FALSE(same_bits(a->train.x, c->train.x));
  CHECK(fingerprint(*a) != fingerprint(*c));
}

TEST_CASE("make_blobs rejects bad options by name", "[train]") {
  blobs_options o;
  o.dim = 0;
  auto r = make_blobs(1, o);
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "blobs: field 'dim': expected a positive integer, got 0");
  o = {};
  o.spread = -1;
  CHECK_FALSE(make_blobs(1, o));
  o = {};
  o.num_classes = 1;
  CHECK_FALSE(make_blobs(1, o));
}

TEST_CASE("CSV: features then label, header and comments allowed", "[train]") {
  auto r =
      csv("# iris-like\n"
          "sepal, petal, label\n"
          "\n"
          "1.5, 2, 0\n"
          "-3,4e-1,2\r\n"
          "0,0,1\n");
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  CHECK(r->dim == 2);
  CHECK(r->num_classes == 3);
  CHECK(r->y == std::vector<int>{0, 2, 1});
  CHECK(r->x == std::vector<float>{1.5f, 2.0f, -3.0f, 0.4f, 0.0f, 0.0f});

  auto no_header = csv("1,0\n2,1\n");
  REQUIRE(no_header);
  CHECK(no_header->dim == 1);
  CHECK(no_header->size() == 2);
}

TEST_CASE("CSV errors name file, line and field", "[train]") {
  CHECK(csv_error("1,2,0\n3,abc,1\n") ==
        "data.csv:2: field 'feature 2': expected a finite number, got 'abc'");
  CHECK(csv_error("# c\nx,y,cls\n1,2,0\n1,,1\n") ==
        "data.csv:4: field 'y': expected a finite number, got ''");
  CHECK(csv_error("1,2,0\n1,2\n") ==
        "data.csv:2: field 'label': missing (found 2 comma-separated fields, expected 3)");
  CHECK(csv_error("1,2,0\n1,2,1,7\n") ==
        "data.csv:2: field 'label': unexpected text after it (found 4 comma-separated fields, "
        "expected 3)");
  CHECK(csv_error("1,2,0\n1,2,1.5\n") ==
        "data.csv:2: field 'label': expected a class label (an integer in [0, 100000]), got '1.5'");
  CHECK(csv_error("1,2,-1\n") ==
        "data.csv:1: field 'label': expected a class label (an integer in [0, 100000]), got '-1'");
  CHECK(csv_error("1,1e999,0\n") ==
        "data.csv:1: field 'feature 2': expected a finite number, got '1e999'");
  CHECK(csv_error("1,1e39,0\n") ==
        "data.csv:1: field 'feature 2': value '1e39' does not fit in a float");
  CHECK(csv_error("5\n") ==
        "data.csv:1: expected comma-separated features followed by a label, found 1 field");
  CHECK(csv_error("") == "data.csv: no data rows");
  CHECK(csv_error("a,b\n# only a header\n") == "data.csv: no data rows");
  CHECK(csv_error("1,0\n2,0\n") ==
        "data.csv: every label is 0: a classifier needs at least two classes");
}

TEST_CASE("read_csv_dataset reads a file and names a missing one", "[train]") {
  scratch_dir dir("csv");
  const auto path = dir.file("blobs.csv");
  std::ofstream(path) << "f1,f2,label\n0.5,1,1\n-1,2,0\nbad,2,0\n";
  auto r = read_csv_dataset(path);
  REQUIRE_FALSE(r);
  CHECK(r.err().message == path + ":4: field 'f1': expected a finite number, got 'bad'");

  auto missing = read_csv_dataset(dir.file("nope.csv"));
  REQUIRE_FALSE(missing);
  CHECK(missing.err().kind == error_kind::io);
  CHECK(has(missing.err().message, dir.file("nope.csv") + ": cannot open"));
}

TEST_CASE("split_dataset is a seeded shuffle with both parts non-empty", "[train]") {
  dataset d;
  d.dim = 1;
  d.num_classes = 2;
  for (int i = 0; i < 10; ++i) {
    d.x.push_back(static_cast<float>(i));
    d.y.push_back(i % 2);
  }
  auto a = split_dataset(d, 0.3, 1);
  auto b = split_dataset(d, 0.3, 1);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->train.size() == 7);
  CHECK(a->held_out.size() == 3);
  CHECK(a->held_out.x == b->held_out.x);
  std::multiset<float> all(a->train.x.begin(), a->train.x.end());
  all.insert(a->held_out.x.begin(), a->held_out.x.end());
  CHECK(all == std::multiset<float>(d.x.begin(), d.x.end()));
  CHECK_FALSE(split_dataset(d, 0.0, 1));
  CHECK_FALSE(split_dataset(d, 1.0, 1));
  CHECK_FALSE(split_dataset(d, 0.01, 1));  // rounds to an empty held-out set
}

TEST_CASE("a model trains on CSV data, also as a kind registered by the program", "[train]") {
  // Write blobs to CSV, read them back, and train a softmax regression on them.
  auto blobs = make_blobs(3);
  REQUIRE(blobs);
  scratch_dir dir("csv_train");
  const auto path = dir.file("train.csv");
  {
    std::ofstream out(path);
    out << "# features..., label\n";
    const auto& t = blobs->train;
    for (std::size_t i = 0; i < t.size(); ++i) {
      for (int d = 0; d < t.dim; ++d) out << t.row(i)[d] << ",";
      out << t.y[i] << "\n";
    }
  }
  auto split = load_csv_split(path, 0.25, 1);
  REQUIRE(split);
  auto data = std::make_shared<const data_split>(std::move(*split));
  auto reg = builtin_trainables();
  REQUIRE(reg.add("csv_softmax", "softmax regression on " + path,
                  [data](std::uint64_t seed, const trainable_config& c) {
                    return make_softmax_regression(seed, c, data);
                  }));
  auto r = reg.make("csv_softmax", 1, {{"lr", 0.05}});
  REQUIRE(r);
  auto& t = **r;
  const double loss0 = t.loss();
  for (int i = 0; i < 150; ++i) REQUIRE(t.train_step(2));
  CHECK(t.loss() < 0.6 * loss0);
  CHECK(t.held_out_accuracy() > 0.7);

  // With data passed in, data-shaping keys are refused.
  auto bad = reg.make("csv_softmax", 1, {{"dim", 3}});
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message ==
        "softmax_regression config: field 'dim': sets the generated data, but this trainable "
        "was given its data");
}

TEST_CASE("malformed data passed to a model is reported", "[train]") {
  auto d = std::make_shared<data_split>();
  d->train = dataset{2, 2, {1, 2, 3}, {0, 1}};
  auto r = make_mlp(1, {}, d);
  REQUIRE_FALSE(r);
  CHECK(has(r.err().message, "dataset: the training set has 3 feature values"));
  d->train = dataset{2, 2, {1, 2, 3, 4}, {0, 2}};
  CHECK_FALSE(make_mlp(1, {}, d));
  CHECK_FALSE(make_mlp(1, {}, nullptr));
}
