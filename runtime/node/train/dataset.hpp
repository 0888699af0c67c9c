#pragma once
/// @file dataset.hpp
/// Labelled classification data for the built-in trainables: a deterministic synthetic
/// generator (Gaussian blobs, one or more per class) and a CSV reader ("features..., label"),
/// each giving a training set and a held-out set.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera::train {

/// A dense classification dataset: `size()` examples of `dim` float features, each with a
/// label in [0, num_classes).
struct dataset {
  int dim = 0;           ///< features per example
  int num_classes = 0;   ///< labels are 0 .. num_classes-1
  std::vector<float> x;  ///< features, row-major: example i is x[i*dim .. i*dim+dim)
  std::vector<int> y;    ///< labels, one per example

  /// Number of examples.
  std::size_t size() const { return y.size(); }
  /// Pointer to the features of example `i`.
  const float* row(std::size_t i) const { return x.data() + i * static_cast<std::size_t>(dim); }
};

/// A training set and a held-out set with the same `dim` and `num_classes`.
struct data_split {
  dataset train;     ///< examples the model is trained on
  dataset held_out;  ///< examples only used to report accuracy
};

/// Shape of the synthetic Gaussian-blob data. Each class has `clusters_per_class` centres
/// drawn from N(0, separation^2) per dimension; an example is its centre plus N(0, spread^2)
/// noise per dimension. With several clusters per class the classes are not linearly
/// separable, which is where the MLP beats softmax regression.
struct blobs_options {
  int num_classes = 4;         ///< C
  int dim = 8;                 ///< D
  int train_size = 512;        ///< training examples
  int held_out_size = 256;     ///< held-out examples
  int clusters_per_class = 1;  ///< blobs per class
  double separation = 1.0;     ///< scale of the cluster centres
  double spread = 1.0;         ///< per-dimension noise around a centre
};

/// Generates Gaussian blobs; the same `seed` and options give bitwise-identical data.
/// Labels cycle 0,1,..,C-1 so every class is represented. Errors (invalid_input) name the
/// offending option.
result<data_split> make_blobs(std::uint64_t seed, const blobs_options& options = {});

/// The checks of make_blobs without generating anything: the same errors, for validating a
/// configuration up front.
status check_blobs_options(const blobs_options& options);

/// Parses CSV text: one example per line, comma-separated numeric features followed by an
/// integer label >= 0. Blank lines and lines starting with '#' are skipped; the first other
/// line may be a header when none of its fields is a number. Every row must have the field
/// count of the first data row. `num_classes` is the largest label + 1. Errors name
/// "<name>:<line>: field '<field>': ..." (fields are 'feature <i>' 1-based, and 'label').
result<dataset> parse_csv_dataset(std::istream& in, const std::string& name);

/// Reads a CSV file (see parse_csv_dataset); errors name the path.
result<dataset> read_csv_dataset(const std::string& path);

/// Splits `data` into training and held-out sets: a seeded shuffle, then the last
/// round(held_out_fraction * size) examples are held out. Both parts must be non-empty.
result<data_split> split_dataset(const dataset& data, double held_out_fraction, std::uint64_t seed);

/// Reads a CSV file and splits it (read_csv_dataset, then split_dataset).
result<data_split> load_csv_split(const std::string& path, double held_out_fraction,
                                  std::uint64_t seed);

/// A 64-bit fingerprint of the data (shape, features, labels of both parts), used to check
/// that saved training state is loaded against the same data.
std::uint64_t fingerprint(const data_split& data);

}  // namespace tessera::train
