// SPDX-License-Identifier: MIT
// The private module chunksampler._chunksampler: the C++ samplers with Python types, one class
// per sampler type (RandomSampler, ..., DistributedRandomSampler, ...), each copied and pickled
// by its C++ object. It translates types and nothing else; every rule, check and number comes
// from the C++ library.
// The public names live in the plain Python modules beside it (chunksampler/_samplers.py).

#include <chunksampler/checkpoint.hpp>
#include <chunksampler/class_sampler.hpp>
#include <chunksampler/dist_info.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/split.hpp>
#include <chunksampler/weighted_class_sampler.hpp>
#include <chunksampler/worker_info.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace nb = nanobind;
namespace cs = chunksampler;

namespace {

// Whether `S` is a DistributedSampler of one of the plain samplers.
template <class S>
constexpr bool is_distributed = false;
template <class S>
constexpr bool is_distributed<cs::DistributedSampler<S>> = true;

// The plain sampler `s` is, or wraps.
template <class S>
const auto& plain_of(const S& s) {
  if constexpr (is_distributed<S>) return s.sampler();
  else return s;
}

// A range as Python spells it: (start, stop), stop None for slice(start, None).
using PyRange = std::pair<std::int64_t, std::optional<std::int64_t>>;
// A mask as Python spells it: its ranges, in the order given.
using PyMask = std::vector<PyRange>;

cs::WorkerInfo worker_of(std::int64_t id, std::int64_t num_workers) { return {.id = id, .num_workers = num_workers}; }

// The ranges of `mask` as a cs::Ranges, which checks them (sorted, disjoint, non-empty) and
// merges adjacent ones; None (all of [0, n_obs)) stays std::nullopt.
std::optional<cs::Ranges> ranges_of(const std::optional<PyMask>& mask) {
  if (!mask) return std::nullopt;
  std::vector<cs::Slice> ranges;
  ranges.reserve(mask->size());
  for (const auto& [start, stop] : *mask) ranges.push_back(stop ? cs::Slice{start, *stop} : cs::Slice::from(start));
  return cs::Ranges(ranges);
}

// A mask's ranges as Python spells them, or None for all of [0, n_obs).
std::optional<PyMask> py_mask(const std::optional<cs::Ranges>& mask) {
  if (!mask) return std::nullopt;
  PyMask out;
  out.reserve(mask->size());
  for (const cs::Slice& range : *mask)
    out.emplace_back(range.start, range.open_ended() ? std::nullopt : std::optional<std::int64_t>(range.stop));
  return out;
}

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

template <class Range>
class EpochSource final : public Source {
 public:
  explicit EpochSource(Range range) : range_(std::move(range)) {}

  const cs::LoadRequest* advance() override {
    if (!it_) it_ = range_.begin();
    else ++*it_;
    return *it_ == std::default_sentinel ? nullptr : &**it_;
  }
  [[nodiscard]] std::int64_t n_batches() const noexcept override { return range_.n_batches(); }
  [[nodiscard]] std::int64_t batches_before() const noexcept override { return range_.batches_before(); }
  [[nodiscard]] std::string state(std::int64_t yielded) const override { return range_.state(yielded).to_string(); }

 private:
  Range range_;  // never moved once iterated: the source lives on the heap
  std::optional<typename Range::iterator> it_;
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

  nb::dict next() {
    std::unique_ptr<std::int64_t[]> positions;
    std::size_t count = 0;
    const cs::LoadRequest* request = step([&](const cs::LoadRequest& r) {
      const std::span<const std::int64_t> from = r.splits.positions();
      count = from.size();
      positions.reset(new std::int64_t[count == 0 ? 1 : count]);
      if (count != 0) std::memcpy(positions.get(), from.data(), count * sizeof(std::int64_t));
    });
    if (!request) throw nb::stop_iteration();

    nb::list requests;
    for (const cs::Slice& chunk : request->chunks) requests.append(nb::slice(chunk.start, chunk.stop));

    std::int64_t* data = positions.release();
    nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
    nb::object all = nb::cast(nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>(data, {count}, owner));
    nb::list splits;
    const auto batch = static_cast<std::int64_t>(request->splits.batch_size());
    const auto total = static_cast<std::int64_t>(count);
    for (std::int64_t begin = 0; begin < total; begin += batch)
      splits.append(all[nb::slice(begin, begin + batch < total ? begin + batch : total)]);

    nb::dict result;
    result["requests"] = std::move(requests);
    result["splits"] = std::move(splits);
    return result;
  }
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

  nb::tuple next() {
    const cs::LoadRequest* request = step([&](const cs::LoadRequest& r) {
      std::vector<std::int64_t>& offsets = buffers_->offsets;
      const std::size_t n = r.splits.size();
      offsets.resize(n + 1);
      const auto batch = static_cast<std::int64_t>(r.splits.batch_size());
      for (std::size_t b = 0; b < n; ++b) offsets[b] = static_cast<std::int64_t>(b) * batch;
      offsets[n] = static_cast<std::int64_t>(r.splits.positions().size());
    });
    if (!request) throw nb::stop_iteration();
    const std::span<const cs::Slice> chunks = request->chunks;
    const std::span<const std::int64_t> positions = request->splits.positions();
    const std::vector<std::int64_t>& offsets = buffers_->offsets;
    static_assert(sizeof(cs::Slice) == 2 * sizeof(std::int64_t), "starts and stops are strided views of the chunks");
    const std::int64_t* first = chunks.empty() ? nullptr : &chunks.front().start;
    return nb::borrow<nb::tuple>(
        request_arrays_(starts_.view(owner_, first, chunks.size(), 2),
                        stops_.view(owner_, first == nullptr ? nullptr : first + 1, chunks.size(), 2),
                        positions_.view(owner_, positions.data(), positions.size(), 1),
                        batches_.view(owner_, offsets.data(), offsets.size(), 1)));
  }

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

// One bound sampler: the C++ sampler and where the last sample()'s iterator stands. Each C++
// sampler type is its own Python class (def_sampler below binds what they share, Kind<S> what
// only S has). A copy copies the sampler and the progress; no two share anything that changes.
template <class S>
class Bound {
 public:
  explicit Bound(S sampler) : sampler_(std::move(sampler)) {}
  Bound(const Bound& other) : sampler_(other.sampler_), progress_(std::make_shared<Progress>(*other.progress_)) {}
  Bound(Bound&&) noexcept = default;
  Bound& operator=(const Bound&) = delete;
  Bound& operator=(Bound&&) = delete;
  ~Bound() = default;

  [[nodiscard]] const S& get() const noexcept { return sampler_; }
  [[nodiscard]] S& get() noexcept { return sampler_; }

  template <class Iterator>
  Iterator sample(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) {
    auto range = sampler_.sample(n_obs, worker_of(worker, num_workers));
    // Counted from the epoch's start: a pending restore's batches are already behind us.
    const std::int64_t before = range.batches_before();
    progress_ = std::make_shared<Progress>(
        Progress{.since = Progress::Since::sample, .batches_done = before, .whole = before + range.n_batches()});
    std::unique_ptr<Source> source = std::make_unique<EpochSource<decltype(range)>>(std::move(range));
    return Iterator(std::move(source), progress_);
  }
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return sampler_.n_batches(n_obs, worker_of(worker, num_workers));
  }
  [[nodiscard]] std::int64_t n_batches_left(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return sampler_.n_batches_left(n_obs, worker_of(worker, num_workers));
  }
  void validate(std::int64_t n_obs) const { sampler_.validate(n_obs); }
  void set_epoch(std::uint64_t epoch) {
    sampler_.set_epoch(epoch);
    progress_ = std::make_shared<Progress>();
  }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return sampler_.epoch(); }

  // The state after `batches_done` batches of the current epoch; by default after the batches
  // the last sample()'s iterator has yielded.
  [[nodiscard]] std::string state(std::optional<std::int64_t> batches_done) const {
    return sampler_.state(batches_done.value_or(progress_->batches_done)).to_string();
  }
  void restore(const std::string& text) { restore_state(cs::SamplerState::parse(text)); }
  // The batches of the requests the last sample()'s iterator has yielded, counted from the
  // epoch's start (what state() records without an argument).
  [[nodiscard]] std::int64_t batches_yielded() const noexcept { return progress_->batches_done; }
  // The state text where the next sample() begins: a pending restore's point, else the start of
  // the next epoch.
  [[nodiscard]] std::string next_state() const { return sampler_.next_state().to_string(); }
  // "start" (no sample() since construction, set_epoch or restore), "restore", "sample" (the last
  // sample()'s iterator has batches left) or "end" (it has yielded them all: the next sample()
  // plays the next epoch from its start, as after "start").
  [[nodiscard]] const char* since() const noexcept {
    switch (progress_->since) {
      case Progress::Since::start: return "start";
      case Progress::Since::restore: return "restore";
      case Progress::Since::sample: return progress_->batches_done < progress_->whole ? "sample" : "end";
    }
    return "start";
  }

  // A copy at this sampler's point: after `batches_done` batches of the current epoch if given,
  // else where the last sample()'s iterator stands (or the restore pending); between epochs, at
  // the start of the next. What a copy or a pickle continues from.
  [[nodiscard]] Bound at(std::optional<std::int64_t> batches_done) const {
    Bound out(sampler_);
    const std::string_view where = since();
    if (batches_done || where == "restore" || where == "sample")
      out.restore_state(sampler_.state(batches_done.value_or(progress_->batches_done)));
    else out.set_epoch(sampler_.epoch());
    return out;
  }
  // Where at(None) stands, for pickling: ("epoch", n) between epochs, else ("state", text).
  [[nodiscard]] nb::tuple position() const {
    const std::string_view where = since();
    if (where == "restore" || where == "sample") return nb::make_tuple("state", state(std::nullopt));
    return nb::make_tuple("epoch", sampler_.epoch());
  }
  void move_to(const nb::tuple& position) {
    const auto kind = nb::cast<std::string>(position[0]);
    if (kind == "epoch") set_epoch(nb::cast<std::uint64_t>(position[1]));
    else if (kind == "state") restore(nb::cast<std::string>(position[1]));
    else throw nb::value_error("chunksampler: a pickled position is ('epoch', n) or ('state', text)");
  }

 private:
  void restore_state(const cs::SamplerState& state) {
    sampler_.restore(state);
    progress_ =
        std::make_shared<Progress>(Progress{.since = Progress::Since::restore, .batches_done = state.batches_done()});
  }

  S sampler_;
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
};

// The Python exception class `name` of chunksampler._errors (imported when first needed, so the
// classes stay plain Python a reader can open).
nb::object error_class(const char* name) { return nb::module_::import_("chunksampler._errors").attr(name); }

void raise_as(const char* name, const char* message) { PyErr_SetString(error_class(name).ptr(), message); }

// Raises an instance of the class `name`, made from `args` (for the classes that carry more than
// a message).
template <class... Args>
void raise_instance(const char* name, Args&&... args) {
  nb::object cls = error_class(name);
  nb::object error = cls(std::forward<Args>(args)...);
  PyErr_SetObject(cls.ptr(), error.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const cs::StateFileError& e) {
    raise_instance("StateFileError", e.what(), e.code().value());
  } catch (const cs::StateWriteError& e) {
    raise_instance("StateWriteError", e.code().value(), e.what());
  } catch (const cs::StateMismatchError& e) {
    raise_as("StateMismatchError", e.what());
  } catch (const cs::StateFormatError& e) {
    raise_as("StateFormatError", e.what());
  } catch (const cs::StateError& e) {
    raise_as("StateError", e.what());
  } catch (const cs::FragmentedSplitError& e) {
    const cs::SplitReport& r = e.report();
    nb::object report = nb::module_::import_("chunksampler._types")
                            .attr("SplitReport")(r.runs, r.rows, r.short_runs, r.short_rows, r.short_share);
    raise_instance("FragmentedSplitError", e.what(), report, nb::cast(e.columns()));
  } catch (const cs::ConfigError& e) {
    raise_as("ConfigError", e.what());
  } catch (const cs::EnvironmentError& e) {
    raise_as("DistEnvironmentError", e.what());
  }
}

// One class code per observation, of one integer type, viewed where it lies.
template <class Code>
using CodesOf = nb::ndarray<const Code, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A class sampler's kept runs as Python passes them: (n_obs, n_classes, runs_hash, an (n, 3)
// int64 array of (start, stop, code) rows), as `runs` returns them.
using RunsArray = nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using PyRuns = std::tuple<std::int64_t, std::int64_t, std::uint64_t, RunsArray>;

cs::ClassRunTable table_of(const PyRuns& runs) {
  const auto& [n_obs, n_classes, runs_hash, rows] = runs;
  if (rows.shape(1) != 3) throw nb::type_error("chunksampler: runs must be an (n, 3) array of (start, stop, code)");
  cs::ClassRunTable table{.n_obs = n_obs, .n_classes = n_classes, .runs_hash = runs_hash};
  const std::size_t n = rows.shape(0);
  table.runs.reserve(n);
  table.codes.reserve(n);
  const std::int64_t* row = rows.data();
  for (std::size_t i = 0; i < n; ++i, row += 3) {
    table.runs.push_back(cs::Slice{row[0], row[1]});
    // Out of int32's range: -1, which the C++ check refuses by its index.
    table.codes.push_back(
        row[2] < 0 || row[2] > std::numeric_limits<std::int32_t>::max() ? -1 : static_cast<std::int32_t>(row[2]));
  }
  return table;
}

nb::tuple py_runs(const cs::ClassRunTable& table) {
  const std::size_t n = table.runs.size();
  auto* data = new std::int64_t[n == 0 ? 3 : 3 * n];
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
  for (std::size_t i = 0; i < n; ++i) {
    data[3 * i] = table.runs[i].start;
    data[3 * i + 1] = table.runs[i].stop;
    data[3 * i + 2] = table.codes[i];
  }
  nb::object rows = nb::cast(nb::ndarray<nb::numpy, std::int64_t, nb::ndim<2>>(data, {n, 3}, owner));
  return nb::make_tuple(table.n_obs, table.n_classes, table.runs_hash, rows);
}

// The options every sampler has, as options()' keywords: the shape of its requests and batches.
template <class S>
nb::dict shape_options(const S& s) {
  nb::dict d;
  d["chunk_size"] = s.chunk_size();
  d["preload_nchunks"] = s.preload_nchunks();
  d["batch_size"] = s.batch_size();
  d["drop_last"] = s.drop_last();
  return d;
}

// What each sampler type binds beyond the shared members: its constructor (keyword arguments,
// the names of options()), its options as a dict of those keywords, and its own properties.
template <class S>
struct Kind;

template <>
struct Kind<cs::RandomSampler> {
  static constexpr const char* name = "RandomSampler";
  static nb::dict options(const cs::RandomSampler& s) {
    nb::dict d = shape_options(s);
    d["mask"] = py_mask(s.mask());
    d["seed"] = s.rng().seed();
    d["replacement"] = s.replacement();
    d["num_samples"] = s.num_samples();
    d["grid_starts"] = s.grid_starts();
    return d;
  }
  static void def(nb::class_<Bound<cs::RandomSampler>>& cls) {
    cls.def(
           "__init__",
           [](Bound<cs::RandomSampler>* self, std::int64_t chunk_size, std::int64_t preload_nchunks,
              std::int64_t batch_size, bool drop_last, std::optional<PyMask> mask, std::uint64_t seed, bool replacement,
              std::optional<std::int64_t> num_samples, bool grid_starts) {
             new (self) Bound(cs::RandomSampler({.chunk_size = chunk_size,
                                                 .preload_nchunks = preload_nchunks,
                                                 .batch_size = batch_size,
                                                 .drop_last = drop_last,
                                                 .mask = ranges_of(mask),
                                                 .seed = seed,
                                                 .replacement = replacement,
                                                 .num_samples = num_samples,
                                                 .grid_starts = grid_starts}));
           },
           nb::kw_only(), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"),
           nb::arg("drop_last") = false, nb::arg("mask").none() = nb::none(), nb::arg("seed") = cs::default_seed,
           nb::arg("replacement") = false, nb::arg("num_samples").none() = nb::none(), nb::arg("grid_starts") = false,
           "A C++ RandomSampler.")
        .def_prop_ro("replacement", [](const Bound<cs::RandomSampler>& b) { return b.get().replacement(); })
        .def_prop_ro("grid_starts", [](const Bound<cs::RandomSampler>& b) { return b.get().grid_starts(); })
        .def_prop_ro("num_samples", [](const Bound<cs::RandomSampler>& b) { return b.get().num_samples(); });
  }
};

template <>
struct Kind<cs::SequentialSampler> {
  static constexpr const char* name = "SequentialSampler";
  static nb::dict options(const cs::SequentialSampler& s) {
    nb::dict d = shape_options(s);
    d["mask"] = py_mask(s.mask());
    return d;
  }
  static void def(nb::class_<Bound<cs::SequentialSampler>>& cls) {
    cls.def(
        "__init__",
        [](Bound<cs::SequentialSampler>* self, std::int64_t chunk_size, std::int64_t preload_nchunks,
           std::int64_t batch_size, bool drop_last, std::optional<PyMask> mask) {
          new (self) Bound(cs::SequentialSampler({.chunk_size = chunk_size,
                                                  .preload_nchunks = preload_nchunks,
                                                  .batch_size = batch_size,
                                                  .drop_last = drop_last,
                                                  .mask = ranges_of(mask)}));
        },
        nb::kw_only(), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"),
        nb::arg("drop_last") = false, nb::arg("mask").none() = nb::none(), "A C++ SequentialSampler.");
  }
};

// ClassSampler's and WeightedClassSampler's options; `composition` only the weighted one's.
template <class Options>
Options class_options(std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last,
                      const std::optional<PyMask>& mask, std::uint64_t seed, std::int64_t num_samples,
                      std::vector<double> class_weights) {
  return {.chunk_size = chunk_size,
          .preload_nchunks = preload_nchunks,
          .batch_size = batch_size,
          .drop_last = drop_last,
          .mask = ranges_of(mask),
          .seed = seed,
          .num_samples = num_samples,
          .class_weights = std::move(class_weights)};
}

template <class S>
nb::dict class_options_dict(const S& s) {
  nb::dict d = shape_options(s);
  d["mask"] = py_mask(s.mask());
  d["runs"] = py_runs(s.runs());
  d["seed"] = s.rng().seed();
  d["num_samples"] = s.num_samples();
  d["class_weights"] = s.class_weights();
  return d;
}

// A class sampler's constructors: from the codes of one integer type (scanned without the GIL),
// or from the runs of another's `runs`; then its own properties.
template <class S, class Options, class... Extra>
struct ClassKind {
  template <class Code>
  static void def_codes(nb::class_<Bound<S>>& cls, const char* doc, auto... extra_args) {
    cls.def(
        "__init__",
        [](Bound<S>* self, const CodesOf<Code>& codes, std::int64_t chunk_size, std::int64_t preload_nchunks,
           std::int64_t batch_size, bool drop_last, std::optional<PyMask> mask, std::uint64_t seed,
           std::int64_t num_samples, std::vector<double> class_weights, Extra... extra) {
          Options options = class_options<Options>(chunk_size, preload_nchunks, batch_size, drop_last, mask, seed,
                                                   num_samples, std::move(class_weights));
          set_extra(options, extra...);
          const std::span<const Code> view(codes.data(), codes.shape(0));
          nb::gil_scoped_release release;
          new (self) Bound(S(view, options));
        },
        nb::arg("codes"), nb::kw_only(), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"),
        nb::arg("drop_last") = false, nb::arg("mask").none() = nb::none(), nb::arg("seed") = cs::default_seed,
        nb::arg("num_samples"), nb::arg("class_weights") = std::vector<double>{}, extra_args..., doc);
  }
  static void def(nb::class_<Bound<S>>& cls, const char* codes_doc, const char* runs_doc, auto... extra_args) {
    def_codes<std::int8_t>(cls, codes_doc, extra_args...);
    def_codes<std::int16_t>(cls, codes_doc, extra_args...);
    def_codes<std::int32_t>(cls, codes_doc, extra_args...);
    def_codes<std::int64_t>(cls, codes_doc, extra_args...);
    cls.def(
           "__init__",
           [](Bound<S>* self, const PyRuns& runs, std::int64_t chunk_size, std::int64_t preload_nchunks,
              std::int64_t batch_size, bool drop_last, std::optional<PyMask> mask, std::uint64_t seed,
              std::int64_t num_samples, std::vector<double> class_weights, Extra... extra) {
             Options options = class_options<Options>(chunk_size, preload_nchunks, batch_size, drop_last, mask, seed,
                                                      num_samples, std::move(class_weights));
             set_extra(options, extra...);
             new (self) Bound(S(table_of(runs), options));
           },
           nb::kw_only(), nb::arg("runs"), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"),
           nb::arg("drop_last") = false, nb::arg("mask").none() = nb::none(), nb::arg("seed") = cs::default_seed,
           nb::arg("num_samples"), nb::arg("class_weights") = std::vector<double>{}, extra_args..., runs_doc)
        .def_prop_ro("num_samples", [](const Bound<S>& b) { return b.get().num_samples(); })
        .def_prop_ro("class_weights", [](const Bound<S>& b) { return b.get().class_weights(); })
        .def_prop_ro("n_classes", [](const Bound<S>& b) { return b.get().n_classes(); })
        .def_prop_ro(
            "n_obs", [](const Bound<S>& b) { return b.get().runs().n_obs; }, "The number of codes scanned.")
        .def_prop_ro(
            "runs", [](const Bound<S>& b) { return py_runs(b.get().runs()); },
            "(n_obs, n_classes, runs_hash, rows): the kept runs as (start, stop, code) rows, what the constructor "
            "from runs takes.");
  }

 private:
  static void set_extra(Options&) {}
  static void set_extra(Options& options, cs::Composition composition) { options.composition = composition; }
};

template <>
struct Kind<cs::ClassSampler> {
  static constexpr const char* name = "ClassSampler";
  static nb::dict options(const cs::ClassSampler& s) { return class_options_dict(s); }
  static void def(nb::class_<Bound<cs::ClassSampler>>& cls) {
    ClassKind<cs::ClassSampler, cs::ClassOptions>::def(
        cls, "A C++ ClassSampler over one class code per observation (int8, int16, int32 or int64).",
        "A C++ ClassSampler from the runs of another's `runs` (no codes).");
  }
};

template <>
struct Kind<cs::WeightedClassSampler> {
  static constexpr const char* name = "WeightedClassSampler";
  static nb::dict options(const cs::WeightedClassSampler& s) {
    nb::dict d = class_options_dict(s);
    d["composition"] = s.composition();
    return d;
  }
  static void def(nb::class_<Bound<cs::WeightedClassSampler>>& cls) {
    ClassKind<cs::WeightedClassSampler, cs::WeightedClassOptions, cs::Composition>::def(
        cls, "A C++ WeightedClassSampler over one class code per observation (int8, int16, int32 or int64).",
        "A C++ WeightedClassSampler from the runs of another's `runs` (no codes).",
        nb::arg("composition") = cs::Composition::independent);
    cls.def_prop_ro("composition", [](const Bound<cs::WeightedClassSampler>& b) { return b.get().composition(); });
  }
};

template <class S>
void update_weights(Bound<S>& b, std::vector<double> weights, std::optional<double> temperature) {
  if (temperature) b.get().update_weights(std::move(weights), *temperature);
  else b.get().update_weights(std::move(weights));
}

template <>
struct Kind<cs::MixtureSampler> {
  static constexpr const char* name = "MixtureSampler";
  static nb::dict options(const cs::MixtureSampler& s) {
    nb::dict d = shape_options(s);
    d["sizes"] = s.sizes();
    d["seed"] = s.rng().seed();
    d["num_samples"] = s.num_samples();
    d["weights"] = s.weights();
    d["temperature"] = s.temperature();
    return d;
  }
  static void def(nb::class_<Bound<cs::MixtureSampler>>& cls) {
    cls.def(
           "__init__",
           [](Bound<cs::MixtureSampler>* self, std::vector<std::int64_t> sizes, std::int64_t chunk_size,
              std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last, std::uint64_t seed,
              std::optional<std::int64_t> num_samples, std::vector<double> weights, double temperature) {
             new (self) Bound(cs::MixtureSampler(std::move(sizes), {.chunk_size = chunk_size,
                                                                    .preload_nchunks = preload_nchunks,
                                                                    .batch_size = batch_size,
                                                                    .drop_last = drop_last,
                                                                    .seed = seed,
                                                                    .num_samples = num_samples,
                                                                    .weights = std::move(weights),
                                                                    .temperature = temperature}));
           },
           nb::kw_only(), nb::arg("sizes"), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"),
           nb::arg("drop_last") = false, nb::arg("seed") = cs::default_seed, nb::arg("num_samples").none() = nb::none(),
           nb::arg("weights") = std::vector<double>{}, nb::arg("temperature") = 1.0,
           "A C++ MixtureSampler over datasets laid end to end.")
        .def_prop_ro("sizes", [](const Bound<cs::MixtureSampler>& b) { return b.get().sizes(); })
        .def_prop_ro("weights", [](const Bound<cs::MixtureSampler>& b) { return b.get().weights(); })
        .def_prop_ro("temperature", [](const Bound<cs::MixtureSampler>& b) { return b.get().temperature(); })
        .def_prop_ro("num_samples", [](const Bound<cs::MixtureSampler>& b) { return b.get().num_samples(); })
        .def("update_weights", &update_weights<cs::MixtureSampler>, nb::arg("weights"),
             nb::arg("temperature").none() = nb::none(), "New weights (and temperature) for later epochs.");
  }
};

template <class S>
struct Kind<cs::DistributedSampler<S>> {
  static nb::dict options(const cs::DistributedSampler<S>& d) {
    nb::dict out;
    out["sampler"] = nb::cast(Bound<S>(d.sampler()));
    out["rank"] = d.rank();
    out["world_size"] = d.world_size();
    out["enforce_equal_batches"] = d.options().enforce_equal_batches;
    out["mode"] = d.options().mode;
    out["remainder"] = d.options().remainder;
    return out;
  }
  static void def(nb::class_<Bound<cs::DistributedSampler<S>>>& cls) {
    using B = Bound<cs::DistributedSampler<S>>;
    cls.def(
           "__init__",
           [](B* self, const Bound<S>& sampler, std::int64_t rank, std::int64_t world_size, bool enforce_equal_batches,
              cs::ShardMode mode, cs::Remainder remainder) {
             new (self) B(cs::DistributedSampler<S>(
                 sampler.get(), cs::DistInfo{.rank = rank, .world_size = world_size},
                 {.enforce_equal_batches = enforce_equal_batches, .mode = mode, .remainder = remainder}));
           },
           nb::arg("sampler"), nb::kw_only(), nb::arg("rank"), nb::arg("world_size"),
           nb::arg("enforce_equal_batches") = true, nb::arg("mode") = cs::ShardMode::contiguous,
           nb::arg("remainder") = cs::Remainder::drop, "A C++ DistributedSampler wrapping a copy of `sampler`.")
        .def_prop_ro("rank", [](const B& b) { return b.get().rank(); })
        .def_prop_ro("world_size", [](const B& b) { return b.get().world_size(); })
        .def_prop_ro("enforce_equal_batches", [](const B& b) { return b.get().options().enforce_equal_batches; })
        .def_prop_ro("mode", [](const B& b) { return b.get().options().mode; })
        .def_prop_ro("remainder", [](const B& b) { return b.get().options().remainder; })
        .def_prop_ro(
            "sampler", [](const B& b) { return Bound<S>(b.get().sampler()); },
            "A copy of the wrapped sampler (its weights as updated here).")
        .def(
            "shard", [](const B& b, std::int64_t n_obs) { return py_mask(b.get().shard(n_obs)); }, nb::arg("n_obs"),
            "The observations this rank reads in the next epoch (contiguous mode), or all ranks together (global).");
    if constexpr (std::is_same_v<S, cs::MixtureSampler>)
      cls.def("update_weights", &update_weights<cs::DistributedSampler<S>>, nb::arg("weights"),
              nb::arg("temperature").none() = nb::none(),
              "The wrapped MixtureSampler's new weights (and temperature).");
  }
};

// The members every sampler type shares, then its own (Kind<S>::def).
template <class S>
void def_sampler(nb::module_& m, const char* name, const char* doc) {
  using B = Bound<S>;
  nb::class_<B> cls(m, name, doc);
  Kind<S>::def(cls);
  cls.def("sample", &B::template sample<Requests>, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
          "The requests of the next epoch (worker `worker` of `num_workers`'s share); moves to the epoch after.")
      .def("sample_arrays", &B::template sample<RequestArrays>, nb::arg("n_obs"), nb::arg("worker"),
           nb::arg("num_workers"), "As sample(), each request as arrays.")
      .def("n_batches", &B::n_batches, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches one epoch over `n_obs` observations yields, counted from its start.")
      .def("n_batches_left", &B::n_batches_left, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches the next sample() yields: n_batches less a pending restore's batches_done.")
      .def("validate", &B::validate, nb::arg("n_obs"), "Raises ConfigError if an epoch cannot be served.")
      .def("set_epoch", &B::set_epoch, nb::arg("epoch"), "Pins the next sample() to `epoch`.")
      .def("state", &B::state, nb::arg("batches_done").none(),
           "The state text after `batches_done` batches of the current epoch (default: those yielded so far).")
      .def("restore", &B::restore, nb::arg("text"), "Makes the next sample() continue after the state.")
      .def("next_state", &B::next_state,
           "The state text where the next sample() begins: a pending restore's, else the next epoch's start.")
      .def("at", &B::at, nb::arg("batches_done").none() = nb::none(),
           "A copy at this sampler's point: after `batches_done` batches if given, else where the last sample() "
           "stands (a restore pending); between epochs, at the next one's start.")
      .def(
          "options", [](const B& b) { return Kind<S>::options(b.get()); },
          "The constructor's keyword arguments that make this sampler again (at epoch 0).")
      .def("__copy__", [](const B& b) { return B(b); })
      .def(
          "__deepcopy__", [](const B& b, nb::handle) { return B(b); }, nb::arg("memo"))
      .def(
          "__getstate__", [](const B& b) { return nb::make_tuple(Kind<S>::options(b.get()), b.position()); },
          "(options, position): the options, and ('epoch', n) or ('state', text) where at() stands.")
      .def(
          "__setstate__",
          [](B& self, const nb::tuple& state) {
            const nb::object made = nb::type<B>()(**nb::borrow<nb::dict>(state[0]));
            B& from = nb::cast<B&>(made);
            new (&self) B(from);
            self.move_to(nb::borrow<nb::tuple>(state[1]));
          },
          nb::arg("state"))
      .def_prop_ro("since", &B::since,
                   "'start', 'restore', 'sample' or 'end' (the last sample() yielded all): what last moved the epoch.")
      .def_prop_ro("epoch", &B::epoch, "The epoch the next sample() plays.")
      .def_prop_ro("batches_yielded", &B::batches_yielded,
                   "The batches of the requests the last sample() has yielded, from the epoch's start.")
      .def_prop_ro("batch_size", [](const B& b) { return plain_of(b.get()).batch_size(); })
      .def_prop_ro("chunk_size", [](const B& b) { return plain_of(b.get()).chunk_size(); })
      .def_prop_ro("preload_nchunks", [](const B& b) { return plain_of(b.get()).preload_nchunks(); })
      .def_prop_ro("drop_last", [](const B& b) { return plain_of(b.get()).drop_last(); })
      .def_prop_ro("shuffle", [](const B& b) { return plain_of(b.get()).shuffle(); })
      .def_prop_ro(
          "mask", [](const B& b) { return py_mask(plain_of(b.get()).mask()); },
          "[(start, stop or None), ...], or None for all of [0, n_obs).")
      .def_prop_ro(
          "seed", [](const B& b) { return plain_of(b.get()).rng().seed(); },
          "The seed every random choice descends from.")
      .def_prop_ro(
          "fingerprint", [](const B& b) { return b.get().fingerprint(); },
          "A hash of every setting that shapes the epochs (the seed aside), as states carry it.");
}

template <class S>
void def_plain_and_distributed(nb::module_& m, const char* doc) {
  def_sampler<S>(m, Kind<S>::name, doc);
  static const std::string distributed = std::string("Distributed") + Kind<S>::name;
  def_sampler<cs::DistributedSampler<S>>(m, distributed.c_str(),
                                         "A C++ DistributedSampler of the sampler type its name ends with.");
}

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

template <class Iterator>
void def_iterator(nb::module_& m, const char* name, const char* doc) {
  nb::class_<Iterator>(m, name, doc)
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &Iterator::next)
      .def("close", &Iterator::close, "Ends the iteration, as a generator's close(): later next() calls stop.")
      .def_prop_ro("n_batches", &Iterator::n_batches, "Batches the iterator yields in all.")
      .def_prop_ro("batches_before", &Iterator::batches_before,
                   "The epoch's batches before the first this iterator yields (a restored point's).")
      .def("state", &Iterator::state, nb::arg("yielded"),
           "The state text after `yielded` of this iterator's batches (0 <= yielded <= n_batches).");
}

}  // namespace

NB_MODULE(_chunksampler, m) {
  m.doc() = "The C++ samplers of chunksampler, bound with nanobind. Private: use the names of `chunksampler`.";
  nb::register_exception_translator(translate);

  nb::enum_<cs::ShardMode>(m, "ShardMode", "How DistributedSampler splits the data among ranks.")
      .value("contiguous", cs::ShardMode::contiguous, "each rank reads its own contiguous slice (annbatch)")
      // `global` is a Python keyword, and stubgen hides names with a trailing underscore.
      .value("global_mode", cs::ShardMode::global, "one shared permutation of all chunks, dealt in blocks of batches");
  nb::enum_<cs::Remainder>(m, "Remainder", "What happens to observations that do not divide evenly among ranks.")
      .value("drop", cs::Remainder::drop, "left out: the range's tail (annbatch)")
      .value("pad", cs::Remainder::pad, "nothing left out: a few rows repeat")
      .value("rotate", cs::Remainder::rotate, "left out from the tail in even epochs, the head in odd ones");
  nb::enum_<cs::Composition>(m, "Composition", "How WeightedClassSampler chooses the classes of a request's chunks.")
      .value("independent", cs::Composition::independent, "each chunk draws its class by weight (annbatch)")
      .value("stratified", cs::Composition::stratified,
             "every request's and the epoch's class counts within one chunk of the weights");

  def_iterator<Requests>(m, "Requests", "One epoch's load requests: an iterator of LoadRequest dicts.");
  def_iterator<RequestArrays>(m, "RequestArrays",
                              "One epoch's load requests as (starts, stops, positions, offsets) int64 arrays "
                              "viewing the epoch's buffers, valid until the next request.");

  def_plain_and_distributed<cs::RandomSampler>(m, "A C++ RandomSampler.");
  def_plain_and_distributed<cs::SequentialSampler>(m, "A C++ SequentialSampler.");
  def_plain_and_distributed<cs::ClassSampler>(m, "A C++ ClassSampler (made from codes or from another's runs).");
  def_plain_and_distributed<cs::WeightedClassSampler>(
      m, "A C++ WeightedClassSampler (made from codes or from another's runs).");
  def_plain_and_distributed<cs::MixtureSampler>(m, "A C++ MixtureSampler over datasets laid end to end.");
  m.def(
      "state_fields",
      [](const std::string& text) {
        const cs::SamplerState state = cs::SamplerState::parse(text);
        nb::dict fields;
        fields["fingerprint"] = state.fingerprint();
        fields["order_generation"] = state.order_generation();
        fields["seed"] = state.seed();
        fields["epoch"] = state.epoch();
        fields["n_obs"] = state.n_obs();
        fields["batches_done"] = state.batches_done();
        fields["world_size"] = state.world_size();
        fields["num_workers"] = state.num_workers();
        fields["worker"] = state.worker();
        return fields;
      },
      nb::arg("text"), "The fields of a state text, read by cs::SamplerState::parse (StateFormatError if not one).");
  // Checkpoint files, the C++ library's format: a Python job's and a C++ job's read each other's.
  m.def(
      "save_state",
      [](const std::string& path, const std::string& text) {
        const cs::SamplerState state = cs::SamplerState::parse(text);
        nb::gil_scoped_release release;
        cs::save_state(path, state);
      },
      nb::arg("path"), nb::arg("text"), "cs::save_state of the state text (StateFormatError if not one).");
  m.def(
      "load_state",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return cs::load_state(path).to_string();
      },
      nb::arg("path"), "The state text of the checkpoint file, read by cs::load_state.");
  m.def(
      "write_atomically",
      [](const std::string& path, const nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig>& bytes) {
        // Read where it lies: the caller's object holds the buffer for the call.
        const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        nb::gil_scoped_release release;
        cs::write_atomically(path, view);
      },
      nb::arg("path"), nb::arg("data"), "cs::write_atomically of a contiguous byte buffer, viewed, not copied.");
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
