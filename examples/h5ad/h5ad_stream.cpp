// SPDX-License-Identifier: MIT
// h5ad_stream: a data-parallel job streaming the sparse rows of an AnnData (.h5ad) file.
//
// Every MPI rank plans its reads with a DistributedSampler, reads each request's chunks of the
// CSR matrix X with one contiguous HDF5 read of X/data and X/indices per chunk, gathers each
// batch's rows from that buffer into a batch CSR, and "trains" on it: a row sum and a count of
// stored values per row. After each epoch rank 0 gathers what every rank trained on and checks
// it against the README's promise for Remainder::drop (every cell of the window read exactly
// once, equal full batches on every rank, a new order every epoch) and against the obs/row_sum
// and obs/nnz columns that make_h5ad.py computed independently, in Python.
//
//   /usr/bin/python3 examples/h5ad/make_h5ad.py cells.h5ad --cells 6000 --genes 2000 --density 0.05 --seed 1
//   mpirun -np 4 build/dev/examples/h5ad/h5ad_stream cells.h5ad --epochs 2
//
// Options (defaults, `h5ad_stream --help` lists them): --epochs N (2) --chunk-size C (50)
// --preload P (4) --batch-size B (50) --mode contiguous|global (contiguous) --seed S (0). Prints
// PASS and exits 0, or FAIL and 1; a bad argument or a file that is not a CSR .h5ad is one line on
// stderr and exit code 2.

#include "common/cli.hpp"
#include "common/failures.hpp"
#include "common/mpi_job.hpp"
#include "common/parse.hpp"

#include <chunksampler.hpp>
#include <chunksampler/mpi.hpp>

#include <fmt/format.h>
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

using Sampler = cs::DistributedSampler<cs::RandomSampler>;

// --- options ------------------------------------------------------------------------------------

using examples::bad_argument;
using examples::gather_to_root;
using examples::PerRank;

struct Options {
  std::string file;
  std::int64_t epochs = 2;
  std::int64_t chunk_size = 50;
  std::int64_t preload = 4;
  std::int64_t batch_size = 50;
  cs::ShardMode mode = cs::ShardMode::contiguous;
  std::uint64_t seed = cs::default_seed;
};

// The options of `argv`, or nothing when --help was printed (by rank 0, which `speaks`). Bad
// arguments and files that are not a CSR .h5ad are the user's to fix: std::invalid_argument,
// reported in one line with exit code 2. Everything else is a std::runtime_error and aborts the job.
std::optional<Options> parse_options(int argc, const char* const* argv, bool speaks) {
  Options options;
  examples::CommandLine cli("h5ad_stream",
                            "A data-parallel job streaming the sparse rows of an AnnData (.h5ad) file: every MPI rank\n"
                            "reads its DistributedSampler's requests, and rank 0 checks what they trained on.",
                            "Prints PASS and exits 0, or FAIL and 1; a bad argument or a file that is not a CSR .h5ad\n"
                            "is one line on stderr and exit code 2.");
  cli.app()
      .add_option("file", options.file, "the .h5ad file; X must be a CSR matrix (anndata's csr_matrix)")
      ->type_name("FILE.h5ad")
      ->required()
      ->check(CLI::Validator(CLI::ExistingFile).description(""));
  // Zero epochs would check nothing and pass.
  cli.integer("--epochs", options.epochs, "epochs to stream and check", std::int64_t{1});
  cli.request_shape(options.chunk_size, options.preload, options.batch_size);
  cli.mode(options.mode);
  cli.seed(options.seed);
  if (!cli.parse(argc, argv, speaks)) return std::nullopt;
  return options;
}

// --- HDF5: every call checked, every handle closed ----------------------------------------------

// HDF5's own descriptions of what went wrong, innermost first; clears its error stack.
std::string hdf5_errors() {
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
// printing run() turns off).
[[noreturn]] void hdf5_failure(const std::string& what) {
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

File open_h5ad(const std::string& path) {
  if (check(H5Fis_hdf5(path.c_str()), "cannot read {}", path) == 0) bad_argument("{} is not an HDF5 file", path);
  return File(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open {}", path));
}

void require_link(hid_t file, const std::string& path, std::string_view why) {
  if (check(H5Lexists(file, path.c_str(), H5P_DEFAULT), "cannot look up {}", path) == 0)
    bad_argument("the file has no {} ({})", path, why);
}

Attribute open_attribute(hid_t object, std::string_view object_name, const char* name, std::int64_t elements) {
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
std::string read_string_attribute(hid_t object, std::string_view object_name, const char* name) {
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
  bool single_float = false;  // X/data fits a float without loss
};

H5adLayout inspect_h5ad(hid_t file) {
  require_link(file, "X", "AnnData keeps its matrix in X");
  const Object x(check(H5Oopen(file, "X", H5P_DEFAULT), "cannot open X"));
  if (check(H5Iget_type(x.get()), "cannot tell what X is") != H5I_GROUP)
    bad_argument("X is a dense array; h5ad_stream reads X stored as a CSR sparse matrix (encoding-type csr_matrix)");
  const std::string encoding = read_string_attribute(x.get(), "X", "encoding-type");
  if (encoding != "csr_matrix")
    bad_argument("X is a {}; h5ad_stream reads rows, so it needs csr_matrix (write X as a scipy.sparse.csr_matrix)",
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
  return {.n_obs = n_obs, .single_float = data.is_single_float()};
}

// --- one epoch: read, assemble, train -----------------------------------------------------------

// What this rank trained on, row by row, in the order it trained.
struct Trained {
  std::vector<std::int64_t> batch_sizes;
  std::vector<std::int64_t> obs;
  std::vector<double> sums;
  std::vector<std::int64_t> nnz;

  // Empties the record and makes room for an epoch's rows, so that no batch allocates.
  void start_epoch(std::int64_t batches, std::int64_t batch_size) {
    const auto rows = static_cast<std::size_t>(batches * batch_size);
    batch_sizes.clear();
    obs.clear();
    sums.clear();
    nnz.clear();
    batch_sizes.reserve(static_cast<std::size_t>(batches));
    obs.reserve(rows);
    sums.reserve(rows);
    nnz.reserve(rows);
  }
};

// Copies the buffer rows at `positions` into `batch`: the batch a training step consumes.
template <typename Value>
void gather_batch(const CsrRows<Value>& buffer, std::span<const std::int64_t> positions, CsrRows<Value>& batch) {
  batch.clear();
  for (const std::int64_t position : positions) {
    if (position < 0 || position >= buffer.n_rows())
      throw std::runtime_error(
          fmt::format("batch position {} is outside the {}-row buffer", position, buffer.n_rows()));
    const auto row = static_cast<std::size_t>(position);
    const std::int64_t begin = buffer.indptr[row];
    const std::int64_t end = buffer.indptr[row + 1];
    batch.data.insert(batch.data.end(), buffer.data.begin() + begin, buffer.data.begin() + end);
    batch.indices.insert(batch.indices.end(), buffer.indices.begin() + begin, buffer.indices.begin() + end);
    batch.indptr.push_back(static_cast<std::int64_t>(batch.data.size()));
    batch.obs.push_back(buffer.obs[row]);
  }
}

// The stand-in for a training step: it touches every stored value of the batch, as a forward
// pass would, and records per row what the checks compare with the file.
template <typename Value>
void train_step(const CsrRows<Value>& batch, Trained& trained) {
  trained.batch_sizes.push_back(batch.n_rows());
  for (std::size_t row = 0; row < batch.obs.size(); ++row) {
    double sum = 0;
    for (auto i = batch.indptr[row]; i < batch.indptr[row + 1]; ++i) sum += batch.data[static_cast<std::size_t>(i)];
    trained.obs.push_back(batch.obs[row]);
    trained.sums.push_back(sum);
    trained.nnz.push_back(batch.indptr[row + 1] - batch.indptr[row]);
  }
}

// Streams one epoch of this rank; returns its wall time in seconds.
template <typename Value>
double stream_epoch(Sampler& sampler, CsrReader<Value>& reader, CsrRows<Value>& buffer, CsrRows<Value>& batch,
                    Trained& trained) {
  const auto begin = std::chrono::steady_clock::now();
  for (const cs::LoadRequest& request : sampler.sample(reader.n_obs())) {
    buffer.clear();
    for (const cs::Slice chunk : request.chunks) reader.append(chunk, buffer);
    if (buffer.n_rows() != request.buffer_size())
      throw std::runtime_error(
          fmt::format("the buffer holds {} rows, the request's chunks {}", buffer.n_rows(), request.buffer_size()));
    for (const std::span<const std::int64_t> positions : request.splits) {
      gather_batch(buffer, positions, batch);
      train_step(batch, trained);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// --- checks on rank 0 ---------------------------------------------------------------------------

// One named property of an epoch: how often it failed and the first few offenders.
class Check : public examples::Failures {
 public:
  explicit Check(std::string name) : Failures(5), name_(std::move(name)) {}

  [[nodiscard]] bool ok() const noexcept { return passed(); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::string report() const {
    std::string joined;
    for (const std::string& example : shown()) joined += (joined.empty() ? "" : "; ") + example;
    return fmt::format("{}: {} failure{}, first: {}", name_, failures(), failures() == 1 ? "" : "s", joined);
  }

 private:
  std::string name_;
};

// The file's own per-cell answers, computed by make_h5ad.py, not by this program.
struct Reference {
  std::vector<double> row_sum;
  std::vector<std::int64_t> nnz;
};

Reference read_reference(hid_t file, std::int64_t n_obs) {
  Reference reference{std::vector<double>(static_cast<std::size_t>(n_obs)),
                      std::vector<std::int64_t>(static_cast<std::size_t>(n_obs))};
  Column row_sum(file, "obs/row_sum");
  Column nnz(file, "obs/nnz");
  row_sum.read(0, std::span(reference.row_sum));
  nnz.read(0, std::span(reference.nnz));
  return reference;
}

// The cells Remainder::drop promises to read, [0, window), from the README's formulas (not the
// sampler's): contiguous shards of round_down(n / W, B) rows each; global, round_down(n, W * B).
std::int64_t drop_window(std::int64_t n_obs, std::int64_t world, std::int64_t batch, cs::ShardMode mode) {
  if (mode == cs::ShardMode::contiguous) return world * (n_obs / world / batch * batch);
  return n_obs / (world * batch) * (world * batch);
}

struct Epoch {
  PerRank<std::int64_t> batch_sizes;
  PerRank<std::int64_t> obs;
  PerRank<double> sums;
  PerRank<std::int64_t> nnz;
};

// Checks one epoch on rank 0; prints its line and returns the names of the failed checks.
std::vector<std::string> check_epoch(std::int64_t epoch, const Epoch& got, const Epoch* previous,
                                     const Reference& reference, const Options& options) {
  const std::size_t world = got.obs.counts.size();
  const auto n_obs = static_cast<std::int64_t>(reference.nnz.size());
  const std::int64_t window = drop_window(n_obs, static_cast<std::int64_t>(world), options.batch_size, options.mode);

  Check equal_batches("equal batch counts on every rank");
  Check full_batches("every batch full");
  for (std::size_t r = 0; r < world; ++r) {
    if (got.batch_sizes.counts[r] != got.batch_sizes.counts[0])
      equal_batches.fail("rank {} yielded {} batches, rank 0 {}", r, got.batch_sizes.counts[r],
                         got.batch_sizes.counts[0]);
    const std::span<const std::int64_t> sizes = got.batch_sizes.of(r);
    for (std::size_t b = 0; b < sizes.size(); ++b)
      if (sizes[b] != options.batch_size) full_batches.fail("rank {} batch {} has {} rows", r, b, sizes[b]);
  }

  Check in_range(fmt::format("observation ids in [0, {})", n_obs));
  Check rows_match("row sums and nnz equal obs/row_sum and obs/nnz");
  std::vector<std::int64_t> reads(static_cast<std::size_t>(n_obs), 0);
  for (std::size_t i = 0; i < got.obs.values.size(); ++i) {
    const std::int64_t cell = got.obs.values[i];
    if (cell < 0 || cell >= n_obs) {
      in_range.fail("id {}", cell);
      continue;
    }
    const auto c = static_cast<std::size_t>(cell);
    ++reads[c];
    const double expected = reference.row_sum[c];
    if (std::abs(got.sums.values[i] - expected) > 1e-9 * std::abs(expected) || got.nnz.values[i] != reference.nnz[c])
      rows_match.fail("cell {}: sum {} nnz {}, the file says {} and {}", cell, got.sums.values[i], got.nnz.values[i],
                      expected, reference.nnz[c]);
  }

  Check once(fmt::format("cells [0, {}) read exactly once, the rest never (drop)", window));
  for (std::int64_t cell = 0; cell < n_obs; ++cell)
    if (reads[static_cast<std::size_t>(cell)] != (cell < window ? 1 : 0))
      once.fail("cell {} read {} times", cell, reads[static_cast<std::size_t>(cell)]);

  Check reshuffled("each rank's order differs from its previous epoch's");
  if (previous != nullptr)
    for (std::size_t r = 0; r < world; ++r)
      if (std::ranges::equal(got.obs.of(r), previous->obs.of(r))) reshuffled.fail("rank {}", r);

  const std::array checks{&equal_batches, &full_batches, &in_range, &once, &rows_match, &reshuffled};
  std::vector<std::string> failed;
  for (const Check* check : checks)
    if (!check->ok()) failed.push_back(check->name());
  if (failed.empty()) {
    fmt::print("epoch {}: {} of {} cells read exactly once on {} ranks ({} left out, as drop promises); "
               "{} batches of {} per rank; row sums and nnz match the file\n",
               epoch, window, n_obs, world, n_obs - window, got.batch_sizes.counts[0], options.batch_size);
  } else {
    fmt::print("epoch {}: {} of {} checks failed\n", epoch, failed.size(), checks.size());
    for (const Check* check : checks)
      if (!check->ok()) fmt::print("  {}\n", check->report());
  }
  return failed;
}

// --- the job ------------------------------------------------------------------------------------

// A bad argument shows on every rank alike, but they agree anyway so that none waits in a
// collective for one that quit; the lowest rank that saw it says why.
bool bad_argument_anywhere(const std::string& error, int rank, int world) {
  int first = error.empty() ? world : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == rank) examples::print_error("h5ad_stream", error);
  return first < world;
}

template <typename Value>
bool stream(Sampler& sampler, hid_t file, std::int64_t n_obs, const Options& options, int rank, int world) {
  CsrReader<Value> reader(file, n_obs);
  const Reference reference = rank == 0 ? read_reference(file, n_obs) : Reference{};
  CsrRows<Value> buffer;
  CsrRows<Value> batch;
  Trained trained;
  double seconds = 0;
  std::int64_t rows_trained = 0;
  std::optional<Epoch> previous;
  std::vector<std::string> failures;

  for (std::int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    trained.start_epoch(sampler.n_batches(n_obs), options.batch_size);
    seconds += stream_epoch(sampler, reader, buffer, batch, trained);

    Epoch got{.batch_sizes = gather_to_root(trained.batch_sizes, rank, world),
              .obs = gather_to_root(trained.obs, rank, world),
              .sums = gather_to_root(trained.sums, rank, world),
              .nnz = gather_to_root(trained.nnz, rank, world)};
    if (rank == 0) {
      rows_trained += static_cast<std::int64_t>(got.obs.values.size());
      for (const std::string& name : check_epoch(epoch, got, previous ? &*previous : nullptr, reference, options))
        failures.push_back(fmt::format("epoch {}: {}", epoch, name));
      previous = std::move(got);
    }
  }

  double slowest = 0;
  std::int64_t bytes = 0;
  const std::int64_t my_bytes = reader.bytes_read();
  MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&my_bytes, &bytes, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  int pass = failures.empty() ? 1 : 0;
  if (rank == 0) {
    const double mb = static_cast<double>(bytes) / 1e6;
    fmt::print("read {} rows, {:.1f} MB in {:.3f} s: {:.0f} rows/s, {:.0f} MB/s\n", rows_trained, mb, slowest,
               static_cast<double>(rows_trained) / slowest, mb / slowest);
    std::string list;
    for (const std::string& failure : failures) list += (list.empty() ? "" : "; ") + failure;
    fmt::print("{}\n", failures.empty() ? "PASS" : fmt::format("FAIL ({})", list));
    std::fflush(stdout);
  }
  MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return pass != 0;
}

int run(int argc, const char* const* argv, int rank, int world) {
  // Our exceptions say what failed and carry HDF5's own error stack, so its printing is redundant.
  check(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), "cannot turn off HDF5's error printing");
  std::string error;
  std::optional<Options> parsed;
  std::optional<Sampler> sampler;
  std::optional<File> file;
  H5adLayout layout;
  try {
    parsed = parse_options(argc, argv, rank == 0);
    if (!parsed) return 0;  // --help: every rank read the same command line
    const Options& options = *parsed;
    sampler.emplace(cs::RandomSampler({.chunk_size = options.chunk_size,
                                       .preload_nchunks = options.preload,
                                       .batch_size = options.batch_size,
                                       .seed = options.seed}),
                    cs::dist::from_mpi(), cs::DistributedOptions{.mode = options.mode});
    file.emplace(open_h5ad(options.file));
    layout = inspect_h5ad(file->get());
    sampler->validate(layout.n_obs);
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  if (bad_argument_anywhere(error, rank, world)) return 2;
  const Options& options = *parsed;
  const bool pass = layout.single_float ? stream<float>(*sampler, file->get(), layout.n_obs, options, rank, world)
                                        : stream<double>(*sampler, file->get(), layout.n_obs, options, rank, world);
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::mpi_main(argc, argv, "h5ad_stream",
                            [&](int rank, int world) { return run(argc, argv, rank, world); });
}
