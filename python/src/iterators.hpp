// SPDX-License-Identifier: MIT
// The iterators sample() and sample_arrays() return, Requests and RequestArrays, and the epoch
// behind them (Source), which they share with the sampler that made them. The
// classes are here because every sampler's family makes them; how they yield is iterators.cpp.

#pragma once

#include "binding.hpp"
#include "splits.hpp"

#include <chunksampler/load_request.hpp>
#include <chunksampler/sampler_state.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chunksampler::python {

// One epoch's requests behind one type, whatever plan the sampler makes, and how far they have
// got: the batches of the requests yielded (the epoch's own count, published under the GIL after
// each request) and, for sample()'s dicts, how far the consumer has taken the last request's
// splits. The iterator and the sampler that made it share it; a new sample() makes another.
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
  // The state after `yielded` of the batches this source yields.
  [[nodiscard]] virtual cs::SamplerState state(std::int64_t yielded) const = 0;
  // Reads the epoch's count of the batches it has yielded; called with the GIL after advance().
  virtual void publish() noexcept = 0;

  // The batches of the requests yielded, as last published.
  [[nodiscard]] std::int64_t yielded() const noexcept { return yielded_; }
  // Batches of the last request's splits the consumer has not taken yet (sample()'s dicts; none
  // for arrays, whose requests count whole).
  [[nodiscard]] virtual std::int64_t untaken() const { return splits_taken ? splits_taken->untaken() : 0; }
  // The batches the consumer has taken, counted from the epoch's start.
  [[nodiscard]] std::int64_t taken() const { return batches_before() + yielded_ - untaken(); }

  std::shared_ptr<Taken> splits_taken;  // sample()'s: the count of the splits taken

 protected:
  std::int64_t yielded_ = 0;
};

// What both Python iterators share: the epoch, whether another thread is inside it. Another
// thread may call next() while one runs without the GIL: that call is refused, as a Python
// generator refuses it, instead of racing on the epoch's buffers.
class EpochIterator {
 public:
  explicit EpochIterator(std::shared_ptr<Source> source) : source_(std::move(source)) {}

  [[nodiscard]] std::int64_t n_batches() const noexcept { return source_->n_batches(); }
  [[nodiscard]] std::int64_t batches_before() const noexcept { return source_->batches_before(); }
  // The state after `yielded` of this iterator's batches. Refused while another thread is inside
  // next(), which moves the epoch the state is read from.
  [[nodiscard]] cs::SamplerState state(std::int64_t yielded) const {
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    return source_->state(yielded);
  }

  // Ends the iteration, as a generator's close() does: later next() calls raise StopIteration.
  void close() {
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    done_ = true;
  }

 protected:
  [[nodiscard]] Source& source() const noexcept { return *source_; }

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
    source_->publish();
    if (!request) done_ = true;
    return request;
  }

 private:
  std::shared_ptr<Source> source_;
  bool busy_ = false;
  bool done_ = false;
};

// annbatch's LoadRequest dicts. The epoch reuses its buffers from request to request, so each
// request's positions are copied once (one memcpy) into an array Python owns, and the splits
// are numpy views into it, in a Splits list that counts the ones its consumer takes.
class Requests : public EpochIterator {
 public:
  explicit Requests(std::shared_ptr<Source> source) : EpochIterator(std::move(source)) {
    this->source().splits_taken = std::make_shared<Taken>();
  }

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
  explicit RequestArrays(std::shared_ptr<Source> source)
      : EpochIterator(source),
        buffers_(std::make_shared<Buffers>(Buffers{.source = std::move(source), .offsets = {}})),
        owner_(new std::shared_ptr<Buffers>(buffers_),
               [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffers>*>(p); }),
        request_arrays_(nb::module_::import_("chunksampler._types").attr("RequestArrays")) {}

  nb::tuple next();

 private:
  struct Buffers {
    std::shared_ptr<Source> source;     // the epoch's chunks and positions
    std::vector<std::int64_t> offsets;  // the current request's batch offsets
  };

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
