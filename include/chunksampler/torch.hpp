// SPDX-License-Identifier: MIT
#pragma once

// Optional libtorch integration: include it (and link the `chunksampler::torch` CMake target, or
// libtorch yourself) only where libtorch's DataLoader reads the data. The umbrella header
// <chunksampler.hpp> never includes it.
//
// `adapt(sampler, n_obs)` makes any chunksampler sampler a libtorch sampler whose batch requests
// keep their request's chunks, and `ChunkedDataset` reads each request's chunks once and serves
// that request's batches from the buffer, also when the DataLoader's worker threads serve them.

#include <chunksampler/detail/errors.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>

#include <ATen/core/ivalue.h>
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// One load request as its batches share it: its chunks and positions (immutable), and the
/// slot where a dataset keeps the request's buffer while its batches are served.
class SharedRequest {
 public:
  SharedRequest(const LoadRequest& request, std::int64_t first_batch)
      : chunks_(request.chunks.begin(), request.chunks.end()),
        positions_(request.splits.positions().begin(), request.splits.positions().end()),
        batch_size_(request.splits.batch_size()),
        n_batches_(static_cast<std::int64_t>(request.splits.size())),
        first_batch_(first_batch) {
    offsets_.reserve(chunks_.size() + 1);
    offsets_.push_back(0);
    for (const Slice& chunk : chunks_) offsets_.push_back(offsets_.back() + chunk.size());
  }

  [[nodiscard]] std::span<const Slice> chunks() const noexcept { return chunks_; }
  [[nodiscard]] std::int64_t n_batches() const noexcept { return n_batches_; }
  [[nodiscard]] std::int64_t first_batch() const noexcept { return first_batch_; }
  [[nodiscard]] std::int64_t buffer_size() const noexcept { return offsets_.back(); }

  [[nodiscard]] std::span<const std::int64_t> batch(std::int64_t j) const noexcept {
    return Splits(positions_, batch_size_)[j];
  }

  // The observation at buffer row `position`: the chunk holding it, by the chunks' offsets.
  [[nodiscard]] std::int64_t observation(std::int64_t position) const noexcept {
    const auto next = std::upper_bound(offsets_.begin(), offsets_.end(), position);
    const auto c = static_cast<std::size_t>(std::distance(offsets_.begin(), next) - 1);
    return chunks_[c].start + (position - offsets_[c]);
  }

  // The request's buffer of type `Buffer`, made by `read` the first time any batch asks for it:
  // callers on other threads wait for that read instead of repeating it.
  template <class Buffer, class Read>
  [[nodiscard]] std::shared_ptr<const Buffer> buffer(Read&& read) const {
    const std::lock_guard lock(mutex_);
    if (buffer_ && *type_ == typeid(Buffer)) return std::static_pointer_cast<const Buffer>(buffer_);
    // Another dataset type's buffer (two datasets over one request) is not replaced: read
    // privately, so neither caches the other's rows.
    auto made = std::make_shared<const Buffer>(std::forward<Read>(read)(std::span<const Slice>(chunks_)));
    if (!buffer_) {
      buffer_ = made;
      type_ = &typeid(Buffer);
    }
    return made;
  }

  // Counts a batch served; the last of the request's batches frees the buffer (batches still
  // being made keep their own reference).
  void served() const {
    if (served_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_batches_) {
      const std::lock_guard lock(mutex_);
      buffer_.reset();
    }
  }

 private:
  std::vector<Slice> chunks_;
  std::vector<std::int64_t> positions_;
  std::vector<std::int64_t> offsets_;
  std::int64_t batch_size_;
  std::int64_t n_batches_;
  std::int64_t first_batch_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const void> buffer_;
  mutable const std::type_info* type_ = nullptr;
  mutable std::atomic<std::int64_t> served_ = 0;
};

}  // namespace chunksampler::detail

namespace chunksampler::torch {

/// What the adapter hands the DataLoader for one batch: the batch's positions into its request's
/// buffer, and the request (its chunks, shared by all its batches, never copied per batch).
///
///     std::span<const cs::Slice> chunks = request.chunks();      // read these, concatenated
///     for (std::int64_t p : request.positions()) { /* buffer row p */ }
///     std::vector<std::int64_t> rows = request.indices();        // or the global indices
class BatchRequest {
 public:
  BatchRequest(std::shared_ptr<const detail::SharedRequest> request, std::int64_t batch) noexcept
      : request_(std::move(request)), batch_(batch) {}

  /// The request's chunks, in buffer order: the rows to read, contiguously.
  [[nodiscard]] std::span<const Slice> chunks() const noexcept { return request_->chunks(); }
  /// The batch's rows, as positions into the buffer the chunks make.
  [[nodiscard]] std::span<const std::int64_t> positions() const noexcept { return request_->batch(batch_); }
  /// The batch's global observation indices (computed from the chunks).
  [[nodiscard]] std::vector<std::int64_t> indices() const {
    std::vector<std::int64_t> result;
    result.reserve(size());
    for (const std::int64_t p : positions()) result.push_back(request_->observation(p));
    return result;
  }
  /// Rows in the buffer the chunks make.
  [[nodiscard]] std::int64_t buffer_size() const noexcept { return request_->buffer_size(); }
  /// The batch's number in its epoch, from the epoch's start (restored batches included).
  [[nodiscard]] std::int64_t batch_index() const noexcept { return request_->first_batch() + batch_; }
  /// Positions in the batch (libtorch's DataLoader reads it for `drop_last`).
  [[nodiscard]] std::size_t size() const noexcept { return positions().size(); }

  /// The request's buffer, made by `read(chunks)` once for all of the request's batches (the
  /// first caller reads, concurrent callers wait for it), and kept until `served()` has been
  /// called for each of them. `ChunkedDataset` calls both.
  template <class Buffer, class Read>
  [[nodiscard]] std::shared_ptr<const Buffer> buffer(Read&& read) const {
    return request_->template buffer<Buffer>(std::forward<Read>(read));
  }
  /// Tells the request this batch is made; after its last batch the buffer is freed.
  void served() const { request_->served(); }

 private:
  std::shared_ptr<const detail::SharedRequest> request_;
  std::int64_t batch_;
};

/// What `adapt` takes: a sampler with epochs and exact resume, whose epochs know where they begin
/// (every chunksampler sampler, and `DistributedSampler` of any of them).
template <class S>
concept AdaptableSampler = Sampler<S> && HasEpochs<S> && std::copy_constructible<S> &&
                           requires(S& s, const S& cs, std::int64_t n, const SamplerState& state) {
                             { s.sample(n).batches_before() } -> std::convertible_to<std::int64_t>;
                             { cs.state(n) } -> std::same_as<SamplerState>;
                             s.restore(state);
                           };

/// A chunksampler sampler as a libtorch sampler (`torch::data::samplers::Sampler<BatchRequest>`),
/// over a dataset of `n_obs` observations; `adapt` makes one.
///
///     auto sampler = cs::torch::adapt(cs::RandomSampler({.chunk_size = 64, .preload_nchunks = 8,
///                                                        .batch_size = 128}), n_obs);
///     auto loader = torch::data::make_data_loader(dataset, sampler,
///                                                 torch::data::DataLoaderOptions(128).workers(2));
///     for (int e = 0; e < 2; ++e)
///       for (auto& batch : *loader) { /* train */ }   // each loop: reset(), the next epoch
///     torch::save(sampler, "sampler.pt");                // copies share one state: see below
///
/// The sampler decides the batches: `next(batch_size)` requires the DataLoader's `batch_size` to
/// equal `sampler.batch_size()` (a `ConfigError` names both otherwise). `reset()` starts the
/// next epoch (`set_epoch(e)` pins it), or continues the point `load()` restored; `reset(n)`
/// first checks that the sampler can serve `n` observations (a `ConfigError` otherwise) and
/// samples `n` from then on. `save()` writes the sampler's state text after the batches served
/// so far (key `chunksampler/state`) and their count (`chunksampler/batches_done`); `load()`
/// restores it, so the next `reset()` continues batch for batch. A DataLoader with workers asks
/// for batches ahead of training: save with `save(archive, batches_trained)` there, under
/// `enforce_ordering` (the default), which delivers batches in the sampler's order.
///
/// Copies share one state (the DataLoader takes the sampler by value): keep one to call
/// `set_epoch`, `save` and `load` on, from the thread that iterates the DataLoader (which calls
/// `reset` and `next` there), between its loops or batches.
template <AdaptableSampler S>
class SamplerAdapter final : public ::torch::data::samplers::Sampler<BatchRequest> {
 public:
  /// Adapts a copy of `sampler` to a dataset of `n_obs` observations; throws `ConfigError` if it
  /// cannot serve them.
  SamplerAdapter(S sampler, std::int64_t n_obs) : state_(std::make_shared<Shared>(std::move(sampler), n_obs)) {
    state_->sampler.validate(n_obs);
  }

  /// Starts the next epoch (or the restored point, after `load`); with `new_size`, over that
  /// many observations from now on. Throws `ConfigError` if the sampler cannot serve them.
  void reset(::torch::optional<std::size_t> new_size = ::torch::nullopt) override {
    Shared& s = *state_;
    if (new_size) {
      const std::size_t max = std::size_t{1} << 62;
      if (*new_size > max) detail::throw_config("cs::torch: reset(new_size = {}): new_size must be <= 2^62", *new_size);
      const auto n_obs = static_cast<std::int64_t>(*new_size);
      try {
        s.sampler.validate(n_obs);
      } catch (const ConfigError& e) {
        detail::throw_config("cs::torch: reset(new_size = {}) does not fit the sampler: {}", n_obs, e.what());
      }
      s.n_obs = n_obs;
    }
    s.range.reset();
    s.range.emplace(s.sampler.sample(s.n_obs));
    s.it = s.range->begin();
    s.request.reset();
    s.batches_done = s.range->batches_before();
    s.pending.reset();
  }

  /// The next batch of the epoch, or `nullopt` at its end; starts an epoch if none was.
  /// `batch_size` must equal the sampler's `batch_size()`.
  ::torch::optional<BatchRequest> next(std::size_t batch_size) override {
    Shared& s = *state_;
    if (std::cmp_not_equal(batch_size, s.sampler.batch_size()))
      detail::throw_config(
          "cs::torch: next(batch_size = {}): the DataLoader's batch_size ({}) must equal the sampler's batch_size "
          "({}); the sampler decides the batches",
          batch_size, batch_size, s.sampler.batch_size());
    if (!s.range) reset();
    if (s.request && s.in_request == s.request->n_batches()) {
      s.request.reset();
      ++s.it;
    }
    if (!s.request) {
      if (s.it == s.range->end()) return ::torch::nullopt;
      s.request = std::make_shared<const detail::SharedRequest>(*s.it, s.batches_done);
      s.in_request = 0;
    }
    ++s.batches_done;
    return BatchRequest(s.request, s.in_request++);
  }

  /// Writes the state after the batches served so far (see the class comment).
  void save(::torch::serialize::OutputArchive& archive) const override { save(archive, state_->batches_done); }

  /// Writes the state after the first `batches_done` batches of the current epoch (those
  /// training finished, when the DataLoader runs ahead of it).
  void save(::torch::serialize::OutputArchive& archive, std::int64_t batches_done) const {
    const Shared& s = *state_;
    const SamplerState state = s.pending ? *s.pending : s.sampler.state(s.range ? batches_done : 0);
    archive.write("chunksampler/state", ::torch::IValue(state.to_string()));
    archive.write("chunksampler/batches_done", ::torch::IValue(state.batches_done()));
  }

  /// Restores what `save` wrote: the next `reset()` (the DataLoader's next loop) continues there.
  /// Throws `StateError` for a state of another sampler or dataset size.
  void load(::torch::serialize::InputArchive& archive) override {
    ::torch::IValue text;
    archive.read("chunksampler/state", text);
    if (!text.isString())
      detail::throw_state_format("cs::torch: load: chunksampler/state must be a string, found {}", text.tagKind());
    const SamplerState state = SamplerState::parse(text.toStringRef());
    Shared& s = *state_;
    s.sampler.restore(state);
    s.range.reset();
    s.request.reset();
    s.pending = state;
  }

  /// Pins the next `reset()` to epoch `epoch` (as PyTorch's `set_epoch`).
  void set_epoch(std::uint64_t epoch) { state_->sampler.set_epoch(epoch); }
  /// The epoch the next `reset()` plays.
  [[nodiscard]] std::uint64_t epoch() const { return state_->sampler.epoch(); }
  /// Batches of the current epoch served so far, from its start (restored ones included).
  [[nodiscard]] std::int64_t batches_done() const { return state_->batches_done; }
  /// The dataset size sampled.
  [[nodiscard]] std::int64_t n_obs() const { return state_->n_obs; }
  /// The adapted sampler (read-only: its epoch is the adapter's).
  [[nodiscard]] const S& sampler() const { return state_->sampler; }

 private:
  using range_type = decltype(std::declval<S&>().sample(std::int64_t{}));

  struct Shared {
    Shared(S s, std::int64_t n) : sampler(std::move(s)), n_obs(n) {}
    S sampler;
    std::int64_t n_obs;
    std::optional<range_type> range;
    std::ranges::iterator_t<range_type> it;
    std::shared_ptr<const detail::SharedRequest> request;
    std::int64_t in_request = 0;
    std::int64_t batches_done = 0;
    std::optional<SamplerState> pending;
  };
  std::shared_ptr<Shared> state_;
};

/// Makes `sampler` (copied) a libtorch sampler over `n_obs` observations: pass it to
/// `torch::data::make_data_loader(dataset, adapt(sampler, n_obs), options)`.
///
///     cs::DistributedSampler sampler(base, cs::dist::from_env());
///     auto loader = torch::data::make_data_loader(MyDataset(path), cs::torch::adapt(sampler, n_obs),
///                                                 torch::data::DataLoaderOptions(sampler.batch_size()));
template <AdaptableSampler S>
[[nodiscard]] SamplerAdapter<S> adapt(const S& sampler, std::int64_t n_obs) {
  return SamplerAdapter<S>(sampler, n_obs);
}

/// A libtorch dataset that reads each request's chunks once and serves its batches from them.
/// `Derived` provides:
///
///     void read_chunk(cs::Slice chunk, Buffer& buffer) const;   // appends rows [start, stop)
///     Batch make_batch(const Buffer& buffer, std::span<const std::int64_t> positions) const;
///     torch::optional<size_t> size() const override;             // the dataset's n_obs
///
/// `get_batch` asks the request for its buffer: the first of its batches to arrive reads the
/// chunks, in order, into a new `Buffer` (one read per chunk, so one per chunk per epoch), the
/// others (on any worker thread) wait for that read and share the buffer, and the buffer is freed
/// once the request's last batch is made. The DataLoader copies the dataset into each worker:
/// the buffers live in the requests, so copies share them; any state of `Derived` that the
/// workers share (a counter, a file handle) must be safe to share.
template <class Derived, class Buffer, class Batch = ::torch::data::Example<>>
class ChunkedDataset : public ::torch::data::datasets::BatchDataset<Derived, Batch, BatchRequest> {
 public:
  /// The batch `request` asks for, from its request's buffer.
  Batch get_batch(BatchRequest request) override {
    const Derived& self = static_cast<const Derived&>(*this);
    const std::shared_ptr<const Buffer> buffer = request.buffer<Buffer>([&self](std::span<const Slice> chunks) {
      Buffer made{};
      for (const Slice& chunk : chunks) self.read_chunk(chunk, made);
      return made;
    });
    Batch batch = self.make_batch(*buffer, request.positions());
    request.served();
    return batch;
  }
};

}  // namespace chunksampler::torch
