// SPDX-License-Identifier: MIT
// --codes FILE --select KEY: the mask of a split chosen by categorical columns, as cs::split_mask
// makes it. FILE is a CSV file: a header row of column names, then one row per observation, in the
// order of the rows on disk, of category names; an empty field is a missing value (pandas' NA),
// which no selection matches. From AnnData, in two lines of Python:
//
//   import anndata
//   anndata.read_h5ad("data.h5ad", backed="r").obs[["split", "cell_line"]].to_csv("codes.csv", index=False)
//
// Fields may be quoted as a CSV writer quotes them ("a, b" and "say ""hi""") but --select splits a
// key at its commas, so a category whose name holds one cannot be selected.

#pragma once

#include "options.hpp"

#include <chunksampler.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shard_plan {

// The columns of a codes file that a selection reads: per column its name, its categories (in
// order of first appearance) and a code per row (-1 where the field is empty).
struct CodesFile {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> categories;
  std::vector<std::vector<std::int32_t>> codes;
  std::int64_t rows = 0;
};

// Reads the columns `groupby` of the file at `path` (all of them when empty). A file that cannot
// be read, is not such a CSV file or lacks a column throws examples::BadArgument.
CodesFile read_codes(const std::string& path, const std::vector<std::string>& groupby);

// Options whose --codes and --select have become the mask (and n_obs the file's rows, when
// --n-obs is not given), with the split's report. Throws examples::BadArgument for a bad file and
// the library's cs::ConfigError for a bad selection, or cs::FragmentedSplitError for a
// fragmented one under --max-short-share.
Options with_split(Options o);

}  // namespace shard_plan
