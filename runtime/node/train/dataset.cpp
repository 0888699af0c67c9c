#include "runtime/node/train/dataset.hpp"

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <numeric>
#include <optional>

#include "runtime/core/detail/text.hpp"
#include "runtime/node/train/detail/bytes.hpp"
#include "runtime/node/train/detail/random.hpp"

namespace tessera::train {

namespace {

namespace text = ::tessera::detail;  // the shared text helpers (runtime/core/detail/text.hpp)

/// Largest accepted class label, so a stray huge label cannot allocate a huge output layer.
constexpr long long max_label = 100000;
/// Largest accepted synthetic dataset, in floats.
constexpr double max_blob_floats = 1e8;

/// Draws one example of class `label` into `out`.
void draw_example(detail::rng& r, const std::vector<double>& centres, const blobs_options& o,
                  int label, float* out) {
  const auto cluster =
      static_cast<int>(r.below_n(static_cast<std::uint64_t>(o.clusters_per_class)));
  const double* c =
      centres.data() + static_cast<std::size_t>(label * o.clusters_per_class + cluster) * o.dim;
  for (int d = 0; d < o.dim; ++d) out[d] = static_cast<float>(c[d] + o.spread * r.normal());
}

/// Fills `part` with `n` examples whose labels cycle through the classes.
void draw_part(detail::rng& r, const std::vector<double>& centres, const blobs_options& o, int n,
               dataset& part) {
  part.dim = o.dim;
  part.num_classes = o.num_classes;
  part.x.assign(static_cast<std::size_t>(n) * o.dim, 0.0f);
  part.y.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int label = i % o.num_classes;
    part.y[static_cast<std::size_t>(i)] = label;
    draw_example(r, centres, o, label, part.x.data() + static_cast<std::size_t>(i) * o.dim);
  }
}

/// True for lines the CSV reader skips: blank, or a '#' comment.
bool skipped(std::string_view line) {
  const auto t = text::trim(line);
  return t.empty() || t.front() == '#';
}

/// Copies the examples at `idx` of `from` into `to`.
void gather(const dataset& from, const std::vector<std::size_t>& idx, std::size_t begin,
            std::size_t end, dataset& to) {
  to.dim = from.dim;
  to.num_classes = from.num_classes;
  to.x.clear();
  to.y.clear();
  to.x.reserve((end - begin) * static_cast<std::size_t>(from.dim));
  to.y.reserve(end - begin);
  for (std::size_t k = begin; k < end; ++k) {
    const float* row = from.row(idx[k]);
    to.x.insert(to.x.end(), row, row + from.dim);
    to.y.push_back(from.y[idx[k]]);
  }
}

}  // namespace

status check_blobs_options(const blobs_options& o) {
  const std::string src = "blobs";
  if (o.num_classes < 2 || o.num_classes > max_label)
    return input_error(src, 0, "classes",
                       "expected an integer in [2, 100000], got " + std::to_string(o.num_classes));
  if (o.dim < 1)
    return input_error(src, 0, "dim", "expected a positive integer, got " + std::to_string(o.dim));
  if (o.train_size < 1)
    return input_error(src, 0, "train_size",
                       "expected a positive integer, got " + std::to_string(o.train_size));
  if (o.held_out_size < 1)
    return input_error(src, 0, "held_out_size",
                       "expected a positive integer, got " + std::to_string(o.held_out_size));
  if (o.clusters_per_class < 1)
    return input_error(src, 0, "clusters_per_class",
                       "expected a positive integer, got " + std::to_string(o.clusters_per_class));
  if (!std::isfinite(o.separation) || o.separation < 0)
    return input_error(src, 0, "separation",
                       "expected a finite number >= 0, got " + text::format_shortest(o.separation));
  if (!std::isfinite(o.spread) || o.spread < 0)
    return input_error(src, 0, "spread",
                       "expected a finite number >= 0, got " + text::format_shortest(o.spread));
  const double floats = (static_cast<double>(o.train_size) + o.held_out_size +
                         static_cast<double>(o.num_classes) * o.clusters_per_class) *
                        o.dim;
  if (floats > max_blob_floats)
    return input_error(src, 0, "dim",
                       "the data would hold " + text::format_count(floats) +
                           " values (at most 1e8): reduce dim or the set sizes");
  return {};
}

result<data_split> make_blobs(std::uint64_t seed, const blobs_options& o) {
  if (auto st = check_blobs_options(o); !st) return st.err();
  detail::rng r(detail::mix64(seed ^ 0xb10b5b10b5ULL));
  std::vector<double> centres(static_cast<std::size_t>(o.num_classes) * o.clusters_per_class *
                              o.dim);
  for (auto& c : centres) c = o.separation * r.normal();
  data_split out;
  draw_part(r, centres, o, o.train_size, out.train);
  draw_part(r, centres, o, o.held_out_size, out.held_out);
  return out;
}

result<dataset> parse_csv_dataset(std::istream& in, const std::string& name) {
  dataset out;
  std::vector<std::string> header;  // column names, when the file has a header row
  std::size_t fields_per_row = 0;   // 0 until the first data row (or header) fixes it
  bool first = true;
  std::string line;
  int line_no = 0;

  auto field_name = [&](std::size_t i, std::size_t count) -> std::string {
    if (i < header.size() && !header[i].empty()) return header[i];
    if (i + 1 == count) return "label";
    return "feature " + std::to_string(i + 1);
  };

  while (std::getline(in, line)) {
    ++line_no;
    if (skipped(line)) continue;
    const auto fields = text::split(line, ',');
    if (first) {
      first = false;
      bool any_number = false;
      for (auto f : fields) any_number = any_number || text::parse_double(f).has_value();
      if (!any_number) {  // a header row: remember the names for messages
        for (auto f : fields) header.emplace_back(text::trim(f));
        if (fields.size() < 2)
          return input_error(name, line_no, "",
                             "expected at least one feature column and a label column");
        fields_per_row = fields.size();
        out.dim = static_cast<int>(fields_per_row - 1);
        continue;
      }
    }
    if (fields_per_row == 0) {  // the first data row fixes the shape
      if (fields.size() < 2)
        return input_error(name, line_no, "",
                           "expected comma-separated features followed by a label, found " +
                               std::to_string(fields.size()) + " field");
      fields_per_row = fields.size();
      out.dim = static_cast<int>(fields_per_row - 1);
    }
    if (fields.size() != fields_per_row) {
      const std::string count = "(found " + std::to_string(fields.size()) +
                                " comma-separated fields, expected " +
                                std::to_string(fields_per_row) + ")";
      if (fields.size() < fields_per_row)
        return input_error(name, line_no, field_name(fields.size(), fields_per_row),
                           "missing " + count);
      return input_error(name, line_no, field_name(fields_per_row - 1, fields_per_row),
                         "unexpected text after it " + count);
    }
    for (std::size_t i = 0; i + 1 < fields.size(); ++i) {
      const auto v = text::parse_double(fields[i]);
      if (!v)
        return input_error(name, line_no, field_name(i, fields_per_row),
                           "expected a finite number, got " + text::quoted(fields[i]));
      const auto f = static_cast<float>(*v);
      if (!std::isfinite(f))
        return input_error(name, line_no, field_name(i, fields_per_row),
                           "value " + text::quoted(fields[i]) + " does not fit in a float");
      out.x.push_back(f);
    }
    const auto label = text::parse_int(fields.back());
    if (!label || *label < 0 || *label > max_label)
      return input_error(
          name, line_no, field_name(fields_per_row - 1, fields_per_row),
          "expected a class label (an integer in [0, 100000]), got " + text::quoted(fields.back()));
    out.y.push_back(static_cast<int>(*label));
    out.num_classes = std::max(out.num_classes, static_cast<int>(*label) + 1);
  }
  if (in.bad())
    return error{error_kind::io, name + ": read error after line " + std::to_string(line_no)};
  if (out.y.empty()) return input_error(name, 0, "", "no data rows");
  if (out.num_classes < 2)
    return input_error(name, 0, "", "every label is 0: a classifier needs at least two classes");
  return out;
}

result<dataset> read_csv_dataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error{error_kind::io, path + ": cannot open: " + std::strerror(errno)};
  return parse_csv_dataset(in, path);
}

result<data_split> split_dataset(const dataset& data, double held_out_fraction,
                                 std::uint64_t seed) {
  if (!(held_out_fraction > 0 && held_out_fraction < 1))
    return input_error(
        "split", 0, "held_out_fraction",
        "expected a number in (0, 1), got " + text::format_shortest(held_out_fraction));
  const std::size_t n = data.size();
  const auto held =
      static_cast<std::size_t>(std::llround(held_out_fraction * static_cast<double>(n)));
  if (held == 0 || held >= n)
    return input_error("split", 0, "held_out_fraction",
                       text::format_shortest(held_out_fraction) + " of " + std::to_string(n) +
                           " examples leaves an empty training or held-out set");
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  detail::rng r(detail::mix64(seed ^ 0x5b117ULL));
  for (std::size_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[r.below_n(i + 1)]);
  data_split out;
  gather(data, idx, 0, n - held, out.train);
  gather(data, idx, n - held, n, out.held_out);
  return out;
}

result<data_split> load_csv_split(const std::string& path, double held_out_fraction,
                                  std::uint64_t seed) {
  auto d = read_csv_dataset(path);
  if (!d) return d.err();
  return split_dataset(*d, held_out_fraction, seed);
}

std::uint64_t fingerprint(const data_split& data) {
  std::uint64_t h = detail::fnv1a64_basis;
  for (const dataset* part : {&data.train, &data.held_out}) {
    detail::byte_writer w;
    w.u64(static_cast<std::uint64_t>(part->dim));
    w.u64(static_cast<std::uint64_t>(part->num_classes));
    w.u64(part->size());
    for (int label : part->y) w.u32(static_cast<std::uint32_t>(label));
    h = detail::fnv1a64(w.bytes().data(), w.bytes().size(), h);
    h = detail::fnv1a64(part->x.data(), part->x.size() * sizeof(float), h);
  }
  return h;
}

}  // namespace tessera::train
