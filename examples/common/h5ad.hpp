// SPDX-License-Identifier: MIT
// A sparse AnnData (.h5ad) file read with HDF5's C library, shared by the examples that stream one
// (h5ad/h5ad_stream.cpp, libtorch/train_h5ad.cpp): checked HDF5 calls and owned handles, 1-D
// columns read in contiguous element ranges, and CsrReader, which appends a chunk of rows of the
// CSR matrix X with one read of its X/indptr slice, then one of X/data and one of X/indices.

#pragma once

#include "common/parse.hpp"

#include <chunksampler/slice.hpp>

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace examples::h5ad {

namespace cs = chunksampler;

// --- HDF5: every call checked, every handle closed ----------------------------------------------

// HDF5's own descriptions of what went wrong, innermost first; clears its error stack.
inline std::string hdf5_errors() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        auto& joined = *static_cast<std::string*>(out);
        joined += fmt::format("{}{} ({})", joined.empty() ? "" : "; ", error->desc, error->func_name);
        return 0;
      },
      &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "no HDF5 error recorded" : text;
}

// An exception that says what we were doing, followed by HDF5's error stack (whose automatic
// printing the programs turn off).
[[noreturn]] inline void hdf5_failure(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", what, hdf5_errors()));
}

// HDF5 reports failure as a negative return value.
template <typename R, typename... Args>
R check(R result, fmt::format_string<Args...> what, Args&&... args) {
  static_assert(std::is_signed_v<R> || std::is_enum_v<R>);  // hid_t, herr_t, htri_t, or an enum whose error is < 0
  if (result < 0) hdf5_failure(fmt::format(what, std::forward<Args>(args)...));
  return result;
}

// Owns one HDF5 identifier and closes it with `close`.
template <herr_t (*close_id)(hid_t)>
class Handle {
 public:
  explicit Handle(hid_t id) noexcept : id_(id) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&&) = delete;
  ~Handle() {
    if (id_ >= 0) close_id(id_);
  }
  [[nodiscard]] hid_t get() const noexcept { return id_; }

 private:
  hid_t id_;
};

using File = Handle<H5Fclose>;
using Object = Handle<H5Oclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;

template <typename T>
hid_t memory_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  else {
    static_assert(std::is_same_v<T, std::int64_t>);
    return H5T_NATIVE_INT64;
  }
}

inline File open_h5ad(const std::string& path) {
  if (check(H5Fis_hdf5(path.c_str()), "cannot read {}", path) == 0) bad_argument("{} is not an HDF5 file", path);
  return File(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open {}", path));
}

inline void require_link(hid_t file, const std::string& path, std::string_view why) {
  if (check(H5Lexists(file, path.c_str(), H5P_DEFAULT), "cannot look up {}", path) == 0)
    bad_argument("the file has no {} ({})", path, why);
}

inline Attribute open_attribute(hid_t object, std::string_view object_name, const char* name, std::int64_t elements) {
  if (check(H5Aexists(object, name), "cannot look up attribute {} of {}", name, object_name) == 0)
    bad_argument("{} has no attribute '{}'; is this an AnnData file?", object_name, name);
  Attribute attribute(check(H5Aopen(object, name, H5P_DEFAULT), "cannot open attribute {} of {}", name, object_name));
  const Dataspace space(check(H5Aget_space(attribute.get()), "cannot get the shape of {}'s {}", object_name, name));
  const hssize_t found = check(H5Sget_simple_extent_npoints(space.get()), "cannot size {}'s {}", object_name, name);
  if (found != elements)
    bad_argument("{}'s attribute '{}' has {} elements, expected {}", object_name, name, found, elements);
  return attribute;
}

// h5py writes string attributes as variable-length UTF-8; other writers use fixed-length ones.
inline std::string read_string_attribute(hid_t object, std::string_view object_name, const char* name) {
  const Attribute attribute = open_attribute(object, object_name, name, 1);
  const Datatype type(check(H5Aget_type(attribute.get()), "cannot get the type of {}'s {}", object_name, name));
  if (check(H5Tget_class(type.get()), "cannot classify {}'s {}", object_name, name) != H5T_STRING)
    bad_argument("{}'s attribute '{}' is not a string", object_name, name);
  const Datatype memory(check(H5Tcopy(H5T_C_S1), "cannot copy H5T_C_S1"));
  const H5T_cset_t cset = check(H5Tget_cset(type.get()), "cannot get the character set of {}'s {}", object_name, name);
  check(H5Tset_cset(memory.get(), cset), "cannot set a string type's character set");
  if (check(H5Tis_variable_str(type.get()), "cannot inspect {}'s {}", object_name, name) > 0) {
    check(H5Tset_size(memory.get(), H5T_VARIABLE), "cannot make a variable-length string type");
    char* text = nullptr;
    check(H5Aread(attribute.get(), memory.get(), &text), "cannot read {}'s {}", object_name, name);
    std::string result = text != nullptr ? text : "";
    check(H5free_memory(text), "cannot free {}'s {}", object_name, name);
    return result;
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size == 0) hdf5_failure(fmt::format("cannot size {}'s {}", object_name, name));
  check(H5Tset_size(memory.get(), size), "cannot make a {}-byte string type", size);
  std::string result(size, '\0');
  check(H5Aread(attribute.get(), memory.get(), result.data()), "cannot read {}'s {}", object_name, name);
  result.resize(result.find('\0') == std::string::npos ? size : result.find('\0'));
  return result;
}

// A 1-D dataset read in contiguous ranges of elements; HDF5 converts the file's type to T's.
class Column {
 public:
  Column(hid_t file, std::string path)
      : path_(std::move(path)),
        dataset_(check(H5Dopen2(file, path_.c_str(), H5P_DEFAULT), "cannot open dataset {}", path_)),
        space_(check(H5Dget_space(dataset_.get()), "cannot get the dataspace of {}", path_)) {
    if (check(H5Sget_simple_extent_ndims(space_.get()), "cannot get the rank of {}", path_) != 1)
      bad_argument("{} is not one-dimensional", path_);
    hsize_t extent = 0;
    check(H5Sget_simple_extent_dims(space_.get(), &extent, nullptr), "cannot get the length of {}", path_);
    size_ = static_cast<std::int64_t>(extent);
    const Datatype type(check(H5Dget_type(dataset_.get()), "cannot get the type of {}", path_));
    type_class_ = check(H5Tget_class(type.get()), "cannot classify the type of {}", path_);
    element_bytes_ = static_cast<std::int64_t>(H5Tget_size(type.get()));
    if (element_bytes_ == 0) hdf5_failure(fmt::format("cannot size the type of {}", path_));
    if (type_class_ != H5T_INTEGER && type_class_ != H5T_FLOAT) bad_argument("{} is not numeric", path_);
  }

  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  /// True when the file stores 32-bit (or narrower) floats, which a float holds exactly.
  [[nodiscard]] bool is_single_float() const noexcept { return type_class_ == H5T_FLOAT && element_bytes_ <= 4; }
  /// Bytes this column read from the file, at the file's element size.
  [[nodiscard]] std::int64_t bytes_read() const noexcept { return bytes_read_; }

  /// Reads elements `[first, first + out.size())` into `out`.
  template <typename T>
  void read(std::int64_t first, std::span<T> out) {
    const auto count = static_cast<std::int64_t>(out.size());
    if (first < 0 || first > size_ - count)
      throw std::runtime_error(
          fmt::format("{}: elements [{}, {}) are outside its {} elements", path_, first, first + count, size_));
    if (count == 0) return;  // rows with no stored values: nothing to read, and out.data() may be null
    const auto start = static_cast<hsize_t>(first);
    const auto length = static_cast<hsize_t>(count);
    check(H5Sselect_hyperslab(space_.get(), H5S_SELECT_SET, &start, nullptr, &length, nullptr),
          "cannot select {} [{}, {})", path_, first, first + count);
    const Dataspace memory(check(H5Screate_simple(1, &length, nullptr), "cannot make a {}-element dataspace", count));
    check(H5Dread(dataset_.get(), memory_type<T>(), memory.get(), space_.get(), H5P_DEFAULT, out.data()),
          "cannot read {} [{}, {})", path_, first, first + count);
    bytes_read_ += count * element_bytes_;
  }

 private:
  std::string path_;
  Dataset dataset_;
  Dataspace space_;
  std::int64_t size_ = 0;
  H5T_class_t type_class_ = H5T_NO_CLASS;
  std::int64_t element_bytes_ = 0;
  std::int64_t bytes_read_ = 0;
};

// --- the CSR matrix X, read a chunk of rows at a time ---------------------------------------------

// Rows of a CSR matrix and the observation (row of X) each one is. Filled with clear() and
// push_back/insert/resize, so the vectors keep their capacity: once the largest request and batch
// have been seen, neither a request nor a batch allocates.
template <typename Value>
struct CsrRows {
  std::vector<std::int64_t> indptr{0};  // n_rows() + 1 offsets into data and indices
  std::vector<Value> data;
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> obs;

  void clear() {
    indptr.assign(1, 0);
    data.clear();
    indices.clear();
    obs.clear();
  }
  [[nodiscard]] std::int64_t n_rows() const noexcept { return static_cast<std::int64_t>(obs.size()); }
};

// Reads row ranges of X from a file that inspect_h5ad() accepted.
template <typename Value>
class CsrReader {
 public:
  CsrReader(hid_t file, std::int64_t n_obs)
      : n_obs_(n_obs), indptr_(file, "X/indptr"), data_(file, "X/data"), indices_(file, "X/indices") {}

  [[nodiscard]] std::int64_t n_obs() const noexcept { return n_obs_; }
  [[nodiscard]] std::int64_t bytes_read() const noexcept {
    return indptr_.bytes_read() + data_.bytes_read() + indices_.bytes_read();
  }

  /// Appends rows `[chunk.start, chunk.stop)` of X to `rows`: their stored values in one read
  /// of X/data and one of X/indices.
  void append(cs::Slice chunk, CsrRows<Value>& rows) {
    chunk_indptr_.resize(static_cast<std::size_t>(chunk.size() + 1));
    indptr_.read(chunk.start, std::span(chunk_indptr_));
    const std::int64_t first = chunk_indptr_.front();
    const std::int64_t last = chunk_indptr_.back();
    if (first < 0 || last > data_.size() || !std::ranges::is_sorted(chunk_indptr_))
      throw std::runtime_error(
          fmt::format("X/indptr[{}..{}] is not non-decreasing within [0, {}]", chunk.start, chunk.stop, data_.size()));
    const auto base = static_cast<std::int64_t>(rows.data.size());
    for (std::size_t row = 1; row < chunk_indptr_.size(); ++row)
      rows.indptr.push_back(base + chunk_indptr_[row] - first);
    for (std::int64_t obs = chunk.start; obs < chunk.stop; ++obs) rows.obs.push_back(obs);
    const auto offset = static_cast<std::size_t>(base);
    const auto nnz = static_cast<std::size_t>(last - first);
    rows.data.resize(offset + nnz);
    rows.indices.resize(offset + nnz);
    data_.read(first, std::span(rows.data).subspan(offset));
    indices_.read(first, std::span(rows.indices).subspan(offset));
  }

 private:
  std::int64_t n_obs_;
  Column indptr_;
  Column data_;
  Column indices_;
  std::vector<std::int64_t> chunk_indptr_;
};

// What the file must hold. Every rank checks it before streaming, so a file that is not a CSR
// .h5ad with make_h5ad.py's obs columns is a bad argument on every rank, never a failure midway.
struct H5adLayout {
  std::int64_t n_obs = 0;
  std::int64_t n_vars = 0;    // columns of X (genes)
  std::int64_t nnz = 0;       // stored values of X
  bool single_float = false;  // X/data fits a float without loss
};

inline H5adLayout inspect_h5ad(hid_t file) {
  require_link(file, "X", "AnnData keeps its matrix in X");
  const Object x(check(H5Oopen(file, "X", H5P_DEFAULT), "cannot open X"));
  if (check(H5Iget_type(x.get()), "cannot tell what X is") != H5I_GROUP)
    bad_argument("X is a dense array; this example reads X stored as a CSR sparse matrix (encoding-type csr_matrix)");
  const std::string encoding = read_string_attribute(x.get(), "X", "encoding-type");
  if (encoding != "csr_matrix")
    bad_argument("X is a {}; the examples read rows, so it needs csr_matrix (write X as a scipy.sparse.csr_matrix)",
                 encoding);
  std::int64_t shape[2] = {0, 0};
  const Attribute shape_attribute = open_attribute(x.get(), "X", "shape", 2);
  check(H5Aread(shape_attribute.get(), H5T_NATIVE_INT64, shape), "cannot read X's shape");
  const std::int64_t n_obs = shape[0];
  for (const char* column : {"X/indptr", "X/data", "X/indices"}) require_link(file, column, "a CSR matrix has it");
  for (const char* column : {"obs/row_sum", "obs/nnz"}) require_link(file, column, "make_h5ad.py writes it");
  const Column indptr(file, "X/indptr");
  const Column data(file, "X/data");
  const Column indices(file, "X/indices");
  const Column row_sum(file, "obs/row_sum");
  const Column nnz(file, "obs/nnz");
  if (n_obs < 0 || indptr.size() != n_obs + 1)
    bad_argument("X/indptr has {} elements, but X's shape says {} rows", indptr.size(), n_obs);
  if (data.size() != indices.size())
    bad_argument("X/data ({}) and X/indices ({}) differ in length", data.size(), indices.size());
  if (row_sum.size() != n_obs || nnz.size() != n_obs)
    bad_argument("obs/row_sum ({}) and obs/nnz ({}) must hold one value per cell ({})", row_sum.size(), nnz.size(),
                 n_obs);
  return {.n_obs = n_obs, .n_vars = shape[1], .nnz = data.size(), .single_float = data.is_single_float()};
}

}  // namespace examples::h5ad
