// SPDX-License-Identifier: MIT
// The iterators sample() and sample_arrays() return, Requests and RequestArrays, and what they
// share with the sampler that made them (Progress) and with the epoch behind them (Source). The
// classes are here because every sampler's family makes them; how they yield is iterators.cpp.

#pragma once

#include "binding.hpp"

#include <chunksampler/load_request.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chunksampler::python {

// Where a sampler stands in its epoch, for `state()` without an argument: the batches yielded
// so far by the last sample()'s iterator, counted from the epoch's start, of the `whole` epoch's.
// The iterator and the sampler share it; a new sample(), set_epoch() or restore() starts a new one.
struct Progress {
  enum class Since { start, restore, sample };
  Since since = Since::start;
  std::int64_t batches_done = 0;
  std::int64_t whole = 0;
};

// One epoch's requests behind one type, whatever plan the sampler makes.
class Source {
 public:
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  virtual ~Source() = default;
  // The next request, or nullptr after the last; the request stays valid until the next call.
  // Called without the GIL.
  virtual const cs::LoadRequest* advance() = 0;
  [[nodiscard]] virtual std::int64_t n_batches() const noexcept = 0;
  // The epoch's batches before the first this source yields (a restored point's).
  [[nodiscard]] virtual std::int64_t batches_before() const noexcept = 0;
  // The state text after `yielded` of the batches this source yields.
  [[nodiscard]] virtual std::string state(std::int64_t yielded) const = 0;
};

// What both Python iterators share: the epoch, whether another thread is inside it, where it
// stands. Another thread may call next() while one runs without the GIL: that call is refused,
// as a Python generator refuses it, instead of racing on the epoch's buffers.
class EpochIterator {
 public:
  EpochIterator(std::shared_ptr<Source> source, std::shared_ptr<Progress> progress)
      : source_(std::move(source)), progress_(std::move(progress)) {}

  [[nodiscard]] std::int64_t n_batches() const noexcept { return source_->n_batches(); }
  [[nodiscard]] std::int64_t batches_before() const noexcept { return source_->batches_before(); }
  // The state after `yielded` of this iterator's batches. Refused while another thread is inside
  // next(), which moves the epoch the state is read from.
  [[nodiscard]] std::string state(std::int64_t yielded) const {
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    return source_->state(yielded);
  }

  // Ends the iteration, as a generator's close() does: later next() calls raise StopIteration.
  void close() {
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    done_ = true;
  }

 protected:
  // The next request, or nullptr (and StopIteration raised by the caller) at the end. `copy`
  // runs without the GIL too, on the request just produced.
  template <class F>
  const cs::LoadRequest* step(F&& copy) {
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    if (done_) return nullptr;
    busy_ = true;
    const cs::LoadRequest* request = nullptr;
    try {
      nb::gil_scoped_release release;
      request = source_->advance();
      if (request) copy(*request);
    } catch (...) {
      busy_ = false;
      throw;
    }
    busy_ = false;
    if (!request) {
      done_ = true;
      return nullptr;
    }
    progress_->batches_done += static_cast<std::int64_t>(request->splits.size());
    return request;
  }

 private:
  std::shared_ptr<Source> source_;
  std::shared_ptr<Progress> progress_;
  bool busy_ = false;
  bool done_ = false;
};

// annbatch's LoadRequest dicts. The epoch reuses its buffers from request to request, so each
// request's positions are copied once (one memcpy) into an array Python owns, and the splits
// are numpy views into it.
class Requests : public EpochIterator {
 public:
  using EpochIterator::EpochIterator;

  nb::dict next();
};

using Int64View = nb::ndarray<nb::numpy, const std::int64_t, nb::ndim<1>>;

// The fast path: each request as four read-only int64 arrays that view the epoch's own buffers
// (chunk starts, chunk stops, positions, and batch offsets into positions), valid until the next
// request, so no Python object is made per chunk or per batch and nothing is copied. The arrays
// keep the buffers alive through a capsule that shares them, not through the iterator, so the
// iterator's cache of arrays makes no reference cycle.
class RequestArrays : public EpochIterator {
 public:
  RequestArrays(std::unique_ptr<Source> source, std::shared_ptr<Progress> progress)
      : RequestArrays(std::shared_ptr<Source>(std::move(source)), std::move(progress)) {}

  nb::tuple next();

 private:
  struct Buffers {
    std::shared_ptr<Source> source;     // the epoch's chunks and positions
    std::vector<std::int64_t> offsets;  // the current request's batch offsets
  };

  RequestArrays(std::shared_ptr<Source> source, std::shared_ptr<Progress> progress)
      : EpochIterator(source, std::move(progress)),
        buffers_(std::make_shared<Buffers>(Buffers{.source = std::move(source), .offsets = {}})),
        owner_(new std::shared_ptr<Buffers>(buffers_),
               [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffers>*>(p); }),
        request_arrays_(nb::module_::import_("chunksampler._types").attr("RequestArrays")) {}

  // One array, made again only when the memory it views moves or changes length.
  class CachedView {
   public:
    nb::object view(nb::handle owner, const std::int64_t* data, std::size_t size, std::int64_t stride) {
      if (!array_.is_valid() || data != data_ || size != size_) {
        static const std::int64_t empty = 0;
        array_ = nb::cast(Int64View(data == nullptr ? &empty : data, {size}, owner, {stride}));
        data_ = data;
        size_ = size;
      }
      return array_;
    }

   private:
    nb::object array_;
    const std::int64_t* data_ = nullptr;
    std::size_t size_ = 0;
  };

  std::shared_ptr<Buffers> buffers_;
  nb::capsule owner_;
  nb::object request_arrays_;  // the NamedTuple chunksampler.RequestArrays
  CachedView starts_, stops_, positions_, batches_;
};

}  // namespace chunksampler::python
