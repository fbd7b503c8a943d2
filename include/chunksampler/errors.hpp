// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace chunksampler {

/// What chunksampler throws. Each type derives from the standard exception a caller would
/// otherwise catch, so `catch (const std::invalid_argument&)` still sees every argument error;
/// the library's types tell the cases apart:
///
///     try {
///       sampler.restore(cs::SamplerState::parse(text));
///     } catch (const cs::StateError& e) {   // stale or torn checkpoint: start the epoch afresh
///       std::cerr << "not resuming: " << e.what() << '\n';
///     }                                      // a ConfigError (a bad option) still stops the job
///
/// Every message names the parameter (or state field), its value and the rule it broke.

/// A bad configuration or argument: an option, `n_obs`, a mask, a `WorkerInfo`, a rank, a
/// `batches_done` the sampler cannot take a state at, a split's selection.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// How well a selection of rows follows the order on disk: what `split_mask`
/// (<chunksampler/split.hpp>) returns beside the mask, and what `FragmentedSplitError` carries.
/// Runs are maximal: adjacent selected rows of different keys form one run, as the mask merges
/// adjacent ranges.
struct SplitReport {
  std::int64_t runs = 0;        ///< maximal runs of selected rows (the mask's ranges)
  std::int64_t rows = 0;        ///< rows selected
  std::int64_t short_runs = 0;  ///< runs shorter than chunk_size
  std::int64_t short_rows = 0;  ///< rows in those runs
  double short_share = 0;       ///< short_rows / rows
};

/// `split_mask` refused a selection that lies scattered on disk: more of its rows than
/// `max_short_share` allows lie in runs shorter than `chunk_size`, each read as short chunks. The
/// remedy is to reorder the data on disk by the selection's columns (sort the rows by them, as
/// the message says); `report()` holds the numbers and `columns()` the columns' names.
class FragmentedSplitError : public ConfigError {
 public:
  FragmentedSplitError(const SplitReport& report, std::vector<std::string> columns, const std::string& what)
      : ConfigError(what),
        report_(report),
        columns_(std::make_shared<const std::vector<std::string>>(std::move(columns))) {}
  /// The selection's report, as `split_mask` would have returned it.
  [[nodiscard]] const SplitReport& report() const noexcept { return report_; }
  /// The names of the columns the data should be sorted by, in the selection's order.
  [[nodiscard]] const std::vector<std::string>& columns() const noexcept { return *columns_; }

 private:
  SplitReport report_;
  // Shared, so copying the exception (as throwing may) cannot throw.
  std::shared_ptr<const std::vector<std::string>> columns_;
};

/// A class sampler refused classes whose runs are shorter than `chunk_size` (a chunk must lie
/// inside one run of its class). `codes()` holds every such class's code, in code order, so a
/// caller names them its own way (a Categorical's labels) without reading the message, which
/// lists the first 20.
class ShortRunsError : public ConfigError {
 public:
  ShortRunsError(std::vector<std::int32_t> codes, const std::string& what)
      : ConfigError(what), codes_(std::make_shared<const std::vector<std::int32_t>>(std::move(codes))) {}
  /// The codes of the classes with short runs, ascending.
  [[nodiscard]] const std::vector<std::int32_t>& codes() const noexcept { return *codes_; }

 private:
  // Shared, so copying the exception (as throwing may) cannot throw.
  std::shared_ptr<const std::vector<std::int32_t>> codes_;
};

/// Something is wrong with a `SamplerState`; one of the two below.
class StateError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A well-formed state that does not fit this sampler: taken under another configuration, seed,
/// dataset size, world size (contiguous mode) or worker, past its epoch's end, or written by
/// another version of chunksampler whose epochs differ.
class StateMismatchError : public StateError {
 public:
  using StateError::StateError;
};

/// State text (or a state's fields) that cannot be read as a state: a missing, malformed or
/// out-of-range field, an unknown header, text after the last field.
class StateFormatError : public StateError {
 public:
  using StateError::StateError;
};

/// A checkpoint file `load_state` cannot read: missing, or unreadable; `code()` holds the
/// operating system's reason (`std::errc::no_such_file_or_directory` for a missing one). A
/// `StateError`, so a job that starts afresh on a torn checkpoint does so on a missing one too.
class StateFileError : public StateError {
 public:
  StateFileError(std::error_code code, const std::string& what) : StateError(what), code_(code) {}
  /// The operating system's error.
  [[nodiscard]] const std::error_code& code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

/// `save_state` or `write_atomically` could not write, sync or rename a checkpoint file (a full
/// disk, no permission); `code()` holds the operating system's error. The previous checkpoint,
/// if any, is still in place, unless only the directory's sync after the rename failed (the new
/// one is then in place, not yet durable). Not a `StateError`: nothing is wrong with the state.
class StateWriteError : public std::system_error {
 public:
  using std::system_error::system_error;
};

/// The launcher's environment, not an argument, is at fault: a rank variable set without its
/// world size, MPI not initialized.
class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace chunksampler
