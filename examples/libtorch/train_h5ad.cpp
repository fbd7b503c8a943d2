// SPDX-License-Identifier: MIT
// train_h5ad: a data-parallel libtorch training job over the sparse rows of an AnnData (.h5ad)
// file, fed by libtorch's DataLoader through <chunksampler/torch.hpp>.
//
// Each MPI rank takes its place from the launcher's environment (cs::dist::from_env()), drives a
// DataLoader with worker threads through cs::torch::adapt(DistributedSampler), and its dataset,
// a cs::torch::ChunkedDataset, reads each chunk of X with one contiguous HDF5 read (the chunk's
// X/indptr slice, then its X/data and X/indices slices). A linear classifier learns whether a
// cell holds more stored values than the file's mean; the ranks average their gradients with
// MPI_Allreduce, so every rank holds the same model, as under DistributedDataParallel.
//
//   mpirun -np 2 train_h5ad cells.h5ad --epochs 2 --checkpoint job.pt --stop-after 20
//   mpirun -np 2 train_h5ad cells.h5ad --epochs 2 --checkpoint job.pt --resume
//
// Rank 0 prints, per epoch and rank: batches, observations, chunk reads of this run, a checksum of
// the observations trained (batch and position included) and the mean loss. Batches, observations
// and checksum count from the epoch's start, also across a restart, so a crashed and resumed job
// prints the uninterrupted job's numbers. A bad argument is one line on stderr and exit code 2.

#include "common/cli.hpp"
#include "common/h5ad.hpp"
#include "common/mpi_job.hpp"
#include "common/parse.hpp"

#include <chunksampler.hpp>
#include <chunksampler/checkpoint.hpp>
#include <chunksampler/torch.hpp>

#include <fmt/format.h>
#include <hdf5.h>
#include <mpi.h>
// libtorch's headers for what the example uses, not <torch/torch.h>: the whole API's headers
// took clang-tidy 3 minutes over this one file.
#include <torch/data/dataloader.h>
#include <torch/data/dataloader_options.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cs = chunksampler;

namespace {

using examples::h5ad::CsrReader;
using examples::h5ad::CsrRows;

struct Options {
  std::string file;
  std::int64_t epochs = 2;
  std::int64_t chunk_size = 100;
  std::int64_t preload = 2;
  std::int64_t batch_size = 40;
  std::int64_t workers = 2;
  std::uint64_t seed = cs::default_seed;
  std::string checkpoint;
  std::int64_t checkpoint_every = 0;
  std::optional<std::int64_t> stop_after;
  bool resume = false;
};

// The options of `argv`, or nothing when --help was printed (by rank 0, which `speaks`).
std::optional<Options> parse_options(int argc, const char* const* argv, bool speaks) {
  Options o;
  examples::CommandLine cli("train_h5ad",
                            "A data-parallel libtorch job over the sparse rows of an .h5ad file: a DataLoader with\n"
                            "worker threads fed by chunksampler's DistributedSampler, checkpointed mid-epoch.",
                            "Ranks come from the launcher's environment (mpirun, torchrun, srun). Rank 0 prints per\n"
                            "epoch and rank: batches, observations, chunk reads, checksum, mean loss.");
  cli.h5ad_file(o.file);
  cli.integer("--epochs", o.epochs, "epochs to train", std::int64_t{1});
  cli.request_shape(o.chunk_size, o.preload, o.batch_size);
  cli.integer("--workers", o.workers, "DataLoader worker threads", std::int64_t{0}, std::int64_t{64});
  cli.seed(o.seed, "seed of the shuffles and of the model's initial weights");
  cli.app().add_option("--checkpoint", o.checkpoint, "checkpoint file (rank 0 writes it, every rank reads it)");
  cli.integer("--checkpoint-every", o.checkpoint_every, "write the checkpoint every N batches (0: never)",
              std::int64_t{0});
  cli.integer("--stop-after", o.stop_after, "write the checkpoint after N batches and stop, as a crash would",
              std::int64_t{1});
  cli.app().add_flag("--resume", o.resume, "continue from the checkpoint");
  if (!cli.parse(argc, argv, speaks)) return std::nullopt;
  if ((o.resume || o.stop_after || o.checkpoint_every > 0) && o.checkpoint.empty())
    examples::bad_argument("--resume, --stop-after and --checkpoint-every need --checkpoint FILE");
  if (o.resume && !std::filesystem::exists(o.checkpoint))
    examples::bad_argument("--resume: the checkpoint {} does not exist", o.checkpoint);
  return o;
}

// --- the dataset ---------------------------------------------------------------------------------

/// A batch: dense log1p counts, the class of each row, and the observations it holds.
struct Batch {
  torch::Tensor x;
  torch::Tensor y;
  std::vector<std::int64_t> obs;
};

/// The file, shared by the DataLoader's copies of the dataset (one per worker thread). HDF5's
/// serial library is not thread-safe, so reads take turns; they count the chunks read.
struct Source {
  Source(hid_t file, std::int64_t n_obs) : reader(file, n_obs) {}
  std::mutex mutex;
  CsrReader<float> reader;
  std::atomic<std::int64_t> chunk_reads = 0;
};

/// The cells of the file; reads each request's chunks once (ChunkedDataset) and makes its batches.
class Cells : public cs::torch::ChunkedDataset<Cells, CsrRows<float>, Batch> {
 public:
  Cells(std::shared_ptr<Source> source, std::int64_t n_vars, double mean_nnz)
      : source_(std::move(source)), n_vars_(n_vars), mean_nnz_(mean_nnz) {}

  /// Appends rows [chunk.start, chunk.stop) of X: one read of X/indptr, X/data and X/indices each.
  void read_chunk(cs::Slice chunk, CsrRows<float>& buffer) const {
    const std::lock_guard lock(source_->mutex);
    source_->reader.append(chunk, buffer);
    source_->chunk_reads.fetch_add(1, std::memory_order_relaxed);
  }

  [[nodiscard]] Batch make_batch(const CsrRows<float>& buffer, std::span<const std::int64_t> positions) const {
    const auto rows = static_cast<std::int64_t>(positions.size());
    Batch batch{torch::zeros({rows, n_vars_}), torch::empty({rows}, torch::kLong), {}};
    auto x = batch.x.accessor<float, 2>();
    auto y = batch.y.accessor<std::int64_t, 1>();
    for (std::int64_t i = 0; i < rows; ++i) {
      const auto row = static_cast<std::size_t>(positions[static_cast<std::size_t>(i)]);
      const std::int64_t begin = buffer.indptr[row];
      const std::int64_t end = buffer.indptr[row + 1];
      for (std::int64_t k = begin; k < end; ++k) {
        const auto s = static_cast<std::size_t>(k);
        x[i][buffer.indices[s]] = std::log1p(buffer.data[s]);
      }
      y[i] = static_cast<double>(end - begin) > mean_nnz_ ? 1 : 0;
      batch.obs.push_back(buffer.obs[row]);
    }
    return batch;
  }

  [[nodiscard]] torch::optional<std::size_t> size() const override {
    return static_cast<std::size_t>(source_->reader.n_obs());
  }

 private:
  std::shared_ptr<Source> source_;
  std::int64_t n_vars_;
  double mean_nnz_;
};

// --- what an epoch has trained, kept across a restart --------------------------------------------

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

struct Progress {
  std::int64_t batches = 0;
  std::int64_t observations = 0;
  std::uint64_t checksum = 0;  // sum over rows of mix(batch, position, observation)
  double loss = 0;             // summed over batches

  void add(const Batch& batch, double batch_loss) {
    for (std::size_t p = 0; p < batch.obs.size(); ++p)
      checksum += mix(mix((static_cast<std::uint64_t>(batches) << 20U) + p) ^ static_cast<std::uint64_t>(batch.obs[p]));
    observations += static_cast<std::int64_t>(batch.obs.size());
    loss += batch_loss;
    ++batches;
  }
};

// Rank 0 writes the sampler's state after the batches trained (the DataLoader's workers run
// ahead of training, so the adapter is told the count), the model (the same on every rank), the
// epoch and every rank's progress in it. The sampler's state restores every rank: the ranks
// train the same number of batches.
template <class Adapter>
void save_checkpoint(const std::string& path, const Adapter& batches, torch::nn::Linear& model, std::int64_t epoch,
                     const Progress& progress, int rank, int world) {
  const auto per_rank = examples::gather_to_root(
      std::vector<std::int64_t>{progress.observations, std::bit_cast<std::int64_t>(progress.checksum)}, rank, world);
  const auto losses = examples::gather_to_root(std::vector<double>{progress.loss}, rank, world);
  if (rank != 0) return;
  torch::serialize::OutputArchive archive;
  batches.save(archive, progress.batches);
  torch::serialize::OutputArchive weights;
  model->save(weights);
  archive.write("model", weights);
  archive.write("example/epoch", torch::IValue(epoch));
  archive.write("example/per_rank", torch::IValue(per_rank.values));
  archive.write("example/loss", torch::IValue(losses.values));
  std::ostringstream bytes;
  archive.save_to(bytes);
  cs::write_atomically(path, bytes.str());  // a crash while writing keeps the last checkpoint
}

template <class Adapter>
std::int64_t load_checkpoint(const std::string& path, Adapter& batches, torch::nn::Linear& model, Progress& progress,
                             int rank, int world) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  batches.load(archive);
  torch::serialize::InputArchive weights;
  archive.read("model", weights);
  model->load(weights);
  torch::IValue epoch;
  torch::IValue per_rank;
  torch::IValue losses;
  archive.read("example/epoch", epoch);
  archive.read("example/per_rank", per_rank);
  archive.read("example/loss", losses);
  const std::vector<std::int64_t> values = per_rank.toIntVector();
  const std::vector<double> loss = losses.toDoubleVector();
  if (std::cmp_not_equal(loss.size(), world))
    examples::bad_argument("--resume: {} was written by {} ranks, this job has {}", path, loss.size(), world);
  const auto r = static_cast<std::size_t>(rank);
  progress = {.batches =
                  batches.sampler().n_batches(batches.n_obs()) - batches.sampler().n_batches_left(batches.n_obs()),
              .observations = values[2 * r],
              .checksum = std::bit_cast<std::uint64_t>(values[2 * r + 1]),
              .loss = loss[r]};
  return epoch.toInt();
}

// --- the job ---------------------------------------------------------------------------------------

int train(const Options& o, examples::h5ad::File& file, const examples::h5ad::H5adLayout& layout, int rank, int world) {
  cs::DistributedSampler sampler(
      cs::RandomSampler(
          {.chunk_size = o.chunk_size, .preload_nchunks = o.preload, .batch_size = o.batch_size, .seed = o.seed}),
      cs::dist::from_env());
  auto batches = cs::torch::adapt(sampler, layout.n_obs);  // kept for load and save; the loader gets a copy
  auto source = std::make_shared<Source>(file.get(), layout.n_obs);
  const double mean_nnz = static_cast<double>(layout.nnz) / static_cast<double>(layout.n_obs);

  torch::manual_seed(o.seed);  // the same initial model on every rank
  torch::nn::Linear model(layout.n_vars, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  Progress progress;
  std::int64_t epoch = 0;
  if (o.resume) {
    epoch = load_checkpoint(o.checkpoint, batches, model, progress, rank, world);
    if (rank == 0) fmt::print("resumed epoch {} at batch {}\n", epoch, progress.batches);
  }

  auto loader =
      torch::data::make_data_loader(Cells(source, layout.n_vars, mean_nnz), batches,
                                    torch::data::DataLoaderOptions(static_cast<std::size_t>(sampler.batch_size()))
                                        .workers(static_cast<std::size_t>(o.workers)));
  std::int64_t trained_this_run = 0;
  for (; epoch < o.epochs; ++epoch) {
    for (Batch& batch : *loader) {
      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model(batch.x), batch.y);
      loss.backward();
      for (torch::Tensor& parameter : model->parameters()) {   // average the gradients over the ranks
        const torch::Tensor& grad = parameter.mutable_grad();  // a handle: in-place ops reach the gradient
        MPI_Allreduce(MPI_IN_PLACE, grad.data_ptr<float>(), static_cast<int>(grad.numel()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        grad.div_(world);
      }
      optimizer.step();
      progress.add(batch, loss.item<double>());
      ++trained_this_run;
      const bool stop = o.stop_after && trained_this_run == *o.stop_after;
      if (stop || (o.checkpoint_every > 0 && progress.batches % o.checkpoint_every == 0))
        save_checkpoint(o.checkpoint, batches, model, epoch, progress, rank, world);
      if (stop) {
        if (rank == 0)
          fmt::print("stopped in epoch {} after batch {}; checkpoint {}\n", epoch, progress.batches, o.checkpoint);
        return 0;
      }
    }
    const std::int64_t reads = source->chunk_reads.exchange(0);
    const auto per_rank =
        examples::gather_to_root(std::vector<std::int64_t>{progress.batches, progress.observations, reads,
                                                           std::bit_cast<std::int64_t>(progress.checksum)},
                                 rank, world);
    const auto losses = examples::gather_to_root(std::vector<double>{progress.loss}, rank, world);
    if (rank == 0)
      for (std::size_t r = 0; r < static_cast<std::size_t>(world); ++r) {
        const std::span<const std::int64_t> v = per_rank.of(r);
        fmt::print(
            "epoch {} rank {}: {} batches, {} observations, {} chunk reads, checksum {:016x}, mean loss {:.4f}\n",
            epoch, r, v[0], v[1], v[2], std::bit_cast<std::uint64_t>(v[3]),
            losses.values[r] / static_cast<double>(v[0]));
      }
    std::fflush(stdout);
    progress = {};
  }
  return 0;
}

int run(int argc, const char* const* argv, int rank, int world) {
  examples::h5ad::check(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), "cannot turn off HDF5's error printing");
  torch::set_num_threads(1);  // one core per rank: the ranks share the machine
  std::optional<Options> options;
  std::optional<examples::h5ad::File> file;
  examples::h5ad::H5adLayout layout;
  try {
    options = parse_options(argc, argv, rank == 0);
    if (!options) return 0;  // --help: every rank read the same command line
    file.emplace(examples::h5ad::open_h5ad(options->file));
    layout = examples::h5ad::inspect_h5ad(file->get());
  } catch (const std::invalid_argument& e) {
    // Every rank reads the same command line and file, so every rank stops here alike.
    if (rank == 0) examples::print_error("train_h5ad", e.what());
    return 2;
  }
  return train(*options, *file, layout, rank, world);
}

}  // namespace

int main(int argc, char** argv) {
  return examples::mpi_main(argc, argv, "train_h5ad",
                            [&](int rank, int world) { return run(argc, argv, rank, world); });
}
