// SPDX-License-Identifier: MIT
// The split's family: how the data are divided. Masks from categorical columns (split_mask), the
// check that named masks share no row (check_disjoint), and this process's rank and world size
// from the launcher (dist_from_env).

#include "binding.hpp"

#include <chunksampler/dist_info.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/split.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace chunksampler::python {
namespace {

// A categorical column as Python passes it: its name, its codes (a 1-D int8, int16, int32 or
// int64 array, read where it lies) and its categories' names (empty: select by code).
using CodesArray = nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using PyColumn = std::tuple<std::string, CodesArray, std::vector<std::string>>;

template <class Code>
std::optional<cs::CategoryColumn> column_as(const PyColumn& column) {
  const auto& [name, codes, categories] = column;
  if (codes.dtype() != nb::dtype<Code>()) return std::nullopt;
  const std::span<const Code> view(static_cast<const Code*>(codes.data()), codes.shape(0));
  return cs::CategoryColumn(name, view, categories);
}

cs::CategoryColumn column_of(const PyColumn& column) {
  std::optional<cs::CategoryColumn> out = column_as<std::int8_t>(column);
  if (!out) out = column_as<std::int16_t>(column);
  if (!out) out = column_as<std::int32_t>(column);
  if (!out) out = column_as<std::int64_t>(column);
  if (!out) throw nb::type_error("chunksampler: a column's codes must be int8, int16, int32 or int64");
  return *std::move(out);
}

// What split_mask returns to Python: the mask's (closed) ranges and the report's five numbers.
using PySplit = std::pair<std::vector<std::pair<std::int64_t, std::int64_t>>,
                          std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, double>>;

// cs::split_mask over the columns, viewed where they lie and scanned without the GIL. With
// `one_column`, each key holds one value and the one-column form is called (its messages name
// the values select[k]).
PySplit split_mask(const std::vector<PyColumn>& py_columns, const std::vector<cs::CategoryKey>& select, bool one_column,
                   std::int64_t chunk_size, std::optional<double> max_short_share) {
  std::vector<cs::CategoryColumn> columns;
  columns.reserve(py_columns.size());
  for (const PyColumn& column : py_columns) columns.push_back(column_of(column));
  std::vector<cs::CategoryValue> values;
  if (one_column)
    for (const cs::CategoryKey& key : select) values.insert(values.end(), key.begin(), key.end());
  const cs::SplitOptions options{.chunk_size = chunk_size, .max_short_share = max_short_share};
  std::optional<cs::Split> split;
  {
    nb::gil_scoped_release release;
    if (one_column && columns.size() == 1) split.emplace(cs::split_mask(columns[0], values, options));
    else split.emplace(cs::split_mask(columns, select, options));
  }
  PySplit out;
  out.first.reserve(split->mask.size());
  for (const cs::Slice& range : split->mask) out.first.emplace_back(range.start, range.stop);
  const cs::SplitReport& r = split->report;
  out.second = {r.runs, r.rows, r.short_runs, r.short_rows, r.short_share};
  return out;
}

}  // namespace

void def_split(nb::module_& m) {
  m.def("split_mask", &split_mask, nb::arg("columns"), nb::arg("select"), nb::arg("one_column"), nb::arg("chunk_size"),
        nb::arg("max_short_share").none(),
        "cs::split_mask: ([(start, stop), ...], (runs, rows, short_runs, short_rows, short_share)) of the rows "
        "whose key is one of `select`; `columns` are (name, codes, categories), the codes viewed, not copied.");
  m.def(
      "check_disjoint",
      [](const std::vector<std::pair<std::string, PyMask>>& masks) {
        std::vector<std::pair<std::string, cs::Ranges>> splits;
        splits.reserve(masks.size());
        for (const auto& [name, mask] : masks) splits.emplace_back(name, *ranges_of(mask));
        cs::check_disjoint(splits);
      },
      nb::arg("masks"), "cs::check_disjoint: raises ConfigError when two of the named masks share a row.");
  m.def(
      "dist_from_env",
      []() {
        const cs::DistInfo info = cs::dist::from_env()();
        return std::pair<std::int64_t, std::int64_t>(info.rank, info.world_size);
      },
      "(rank, world_size) from the launcher's variables (torchrun, OpenMPI, PMI, Slurm), as cs::dist::from_env().");
}

}  // namespace chunksampler::python
