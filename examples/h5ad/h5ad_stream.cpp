// SPDX-License-Identifier: MIT
// h5ad_stream: a data-parallel job streaming the sparse rows of an AnnData (.h5ad) file.
//
// Every MPI rank plans its reads with a DistributedSampler, reads each request's chunks of the
// CSR matrix X with one contiguous HDF5 read of X/data and X/indices per chunk, gathers each
// batch's rows from that buffer into a batch CSR, and "trains" on it: a row sum and a count of
// stored values per row. After each epoch rank 0 gathers what every rank trained on and checks
// it against the documented promise for Remainder::drop (every cell of the window read exactly
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
#include "common/h5ad.hpp"
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
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

using Sampler = cs::DistributedSampler<cs::RandomSampler>;

// --- options ------------------------------------------------------------------------------------

using examples::gather_to_root;
using examples::PerRank;
using examples::h5ad::check;
using examples::h5ad::Column;
using examples::h5ad::CsrReader;
using examples::h5ad::CsrRows;
using examples::h5ad::File;
using examples::h5ad::H5adLayout;
using examples::h5ad::inspect_h5ad;
using examples::h5ad::open_h5ad;

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
  cli.h5ad_file(options.file);
  // Zero epochs would check nothing and pass.
  cli.integer("--epochs", options.epochs, "epochs to stream and check", std::int64_t{1});
  cli.request_shape(options.chunk_size, options.preload, options.batch_size);
  cli.mode(options.mode);
  cli.seed(options.seed);
  if (!cli.parse(argc, argv, speaks)) return std::nullopt;
  return options;
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

// The cells Remainder::drop promises to read, [0, window), from the documented formulas (docs/concepts/shard-modes.md)
// (not the sampler's): contiguous shards of round_down(n / W, B) rows each; global, round_down(n, W * B).
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
