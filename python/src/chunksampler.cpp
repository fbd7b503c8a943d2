// SPDX-License-Identifier: MIT
// The private module chunksampler._chunksampler: the C++ samplers with Python types. It
// translates types and nothing else; every rule, check and number comes from the C++ library.
// The public names live in the plain Python modules beside it (chunksampler/_samplers.py).

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
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace nb = nanobind;
namespace cs = chunksampler;

namespace {

using AnySampler =
    std::variant<cs::RandomSampler, cs::SequentialSampler, cs::ClassSampler, cs::WeightedClassSampler,
                 cs::MixtureSampler, cs::DistributedSampler<cs::RandomSampler>,
                 cs::DistributedSampler<cs::SequentialSampler>, cs::DistributedSampler<cs::ClassSampler>,
                 cs::DistributedSampler<cs::WeightedClassSampler>, cs::DistributedSampler<cs::MixtureSampler>>;

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

// Any of the bound samplers behind one Python type; each method forwards to the C++ one.
class Sampler {
 public:
  explicit Sampler(AnySampler sampler) : sampler_(std::move(sampler)) {}

  [[nodiscard]] const AnySampler& get() const noexcept { return sampler_; }
  [[nodiscard]] AnySampler& get() noexcept { return sampler_; }

  template <class Iterator>
  Iterator sample(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) {
    return std::visit(
        [&](auto& s) {
          const cs::WorkerInfo info = worker_of(worker, num_workers);
          auto range = s.sample(n_obs, info);
          // Counted from the epoch's start: a pending restore's batches are already behind us.
          const std::int64_t before = range.batches_before();
          progress_ = std::make_shared<Progress>(
              Progress{.since = Progress::Since::sample, .batches_done = before, .whole = before + range.n_batches()});
          std::unique_ptr<Source> source = std::make_unique<EpochSource<decltype(range)>>(std::move(range));
          return Iterator(std::move(source), progress_);
        },
        sampler_);
  }
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return std::visit([&](const auto& s) { return s.n_batches(n_obs, worker_of(worker, num_workers)); }, sampler_);
  }
  [[nodiscard]] std::int64_t n_batches_left(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return std::visit([&](const auto& s) { return s.n_batches_left(n_obs, worker_of(worker, num_workers)); }, sampler_);
  }
  void validate(std::int64_t n_obs) const {
    std::visit([&](const auto& s) { s.validate(n_obs); }, sampler_);
  }
  void set_epoch(std::uint64_t epoch) {
    std::visit([&](auto& s) { s.set_epoch(epoch); }, sampler_);
    progress_ = std::make_shared<Progress>();
  }
  [[nodiscard]] std::uint64_t epoch() const {
    return std::visit([](const auto& s) { return s.epoch(); }, sampler_);
  }

  // The state after `batches_done` batches of the current epoch; by default after the batches
  // the last sample()'s iterator has yielded.
  [[nodiscard]] std::string state(std::optional<std::int64_t> batches_done) const {
    const std::int64_t done = batches_done.value_or(progress_->batches_done);
    return std::visit([&](const auto& s) { return s.state(done).to_string(); }, sampler_);
  }
  void restore(const std::string& text) {
    const cs::SamplerState state = cs::SamplerState::parse(text);
    std::visit([&](auto& s) { s.restore(state); }, sampler_);
    progress_ =
        std::make_shared<Progress>(Progress{.since = Progress::Since::restore, .batches_done = state.batches_done()});
  }
  // The batches of the requests the last sample()'s iterator has yielded, counted from the
  // epoch's start (what state() records without an argument).
  [[nodiscard]] std::int64_t batches_yielded() const noexcept { return progress_->batches_done; }
  // The state text where the next sample() begins: a pending restore's point, else the start of
  // the next epoch.
  [[nodiscard]] std::string next_state() const {
    return std::visit([](const auto& s) { return s.next_state().to_string(); }, sampler_);
  }
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

 private:
  AnySampler sampler_;
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
};

// `f` applied to the plain sampler (or the one a DistributedSampler wraps).
template <class F>
auto visit_plain(const Sampler& sampler, F&& f) {
  return std::visit([&](const auto& s) { return f(plain_of(s)); }, sampler.get());
}

// The distributed sampler's extra members, for the samplers it may wrap.
template <class F>
auto visit_distributed(const Sampler& sampler, F&& f) {
  using R = decltype(f(std::declval<const cs::DistributedSampler<cs::RandomSampler>&>()));
  return std::visit(
      [&](const auto& s) -> R {
        using S = std::decay_t<decltype(s)>;
        if constexpr (is_distributed<S>) return f(s);
        else throw nb::type_error("chunksampler: not a DistributedSampler");
      },
      sampler.get());
}

// The Python exception class `name` of chunksampler._errors (imported when first needed, so the
// classes stay plain Python a reader can open).
void raise_as(const char* name, const char* message) {
  nb::object cls = nb::module_::import_("chunksampler._errors").attr(name);
  PyErr_SetString(cls.ptr(), message);
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
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
    nb::object cls = nb::module_::import_("chunksampler._errors").attr("FragmentedSplitError");
    nb::object error = cls(e.what(), report, nb::cast(e.columns()));
    PyErr_SetObject(cls.ptr(), error.ptr());
  } catch (const cs::ConfigError& e) {
    raise_as("ConfigError", e.what());
  } catch (const cs::EnvironmentError& e) {
    raise_as("DistEnvironmentError", e.what());
  }
}

// One class code per observation, of one integer type, viewed where it lies.
template <class Code>
using CodesOf = nb::ndarray<const Code, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A ClassSampler or WeightedClassSampler over `codes`, scanned without the GIL.
template <class S, class Code, class Options>
Sampler class_sampler(const CodesOf<Code>& codes, const Options& options) {
  const std::span<const Code> view(codes.data(), codes.shape(0));
  nb::gil_scoped_release release;
  return Sampler(S(view, options));
}

template <class Code>
void def_class_sampler(nb::module_& m) {
  m.def(
      "class_sampler",
      [](const CodesOf<Code>& codes, std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size,
         bool drop_last, std::optional<PyMask> mask, std::uint64_t seed, std::int64_t num_samples,
         std::vector<double> class_weights) {
        return class_sampler<cs::ClassSampler>(codes, cs::ClassOptions{.chunk_size = chunk_size,
                                                                       .preload_nchunks = preload_nchunks,
                                                                       .batch_size = batch_size,
                                                                       .drop_last = drop_last,
                                                                       .mask = ranges_of(mask),
                                                                       .seed = seed,
                                                                       .num_samples = num_samples,
                                                                       .class_weights = std::move(class_weights)});
      },
      nb::arg("codes"), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), nb::arg("seed"), nb::arg("num_samples"), nb::arg("class_weights"),
      "A C++ ClassSampler over one class code per observation (int8, int16, int32 or int64).");
  m.def(
      "weighted_class_sampler",
      [](const CodesOf<Code>& codes, std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size,
         bool drop_last, std::optional<PyMask> mask, std::uint64_t seed, std::int64_t num_samples,
         std::vector<double> class_weights, cs::Composition composition) {
        return class_sampler<cs::WeightedClassSampler>(
            codes, cs::WeightedClassOptions{.chunk_size = chunk_size,
                                            .preload_nchunks = preload_nchunks,
                                            .batch_size = batch_size,
                                            .drop_last = drop_last,
                                            .mask = ranges_of(mask),
                                            .seed = seed,
                                            .num_samples = num_samples,
                                            .class_weights = std::move(class_weights),
                                            .composition = composition});
      },
      nb::arg("codes"), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), nb::arg("seed"), nb::arg("num_samples"), nb::arg("class_weights"), nb::arg("composition"),
      "A C++ WeightedClassSampler over one class code per observation (int8, int16, int32 or int64).");
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

  nb::class_<Sampler>(m, "Sampler", "A C++ sampler, plain or distributed.")
      .def("sample", &Sampler::sample<Requests>, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "The requests of the next epoch (worker `worker` of `num_workers`'s share); moves to the epoch after.")
      .def("sample_arrays", &Sampler::sample<RequestArrays>, nb::arg("n_obs"), nb::arg("worker"),
           nb::arg("num_workers"), "As sample(), each request as arrays.")
      .def("n_batches", &Sampler::n_batches, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches one epoch over `n_obs` observations yields, counted from its start.")
      .def("n_batches_left", &Sampler::n_batches_left, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches the next sample() yields: n_batches less a pending restore's batches_done.")
      .def("validate", &Sampler::validate, nb::arg("n_obs"), "Raises ConfigError if an epoch cannot be served.")
      .def("set_epoch", &Sampler::set_epoch, nb::arg("epoch"), "Pins the next sample() to `epoch`.")
      .def("state", &Sampler::state, nb::arg("batches_done").none(),
           "The state text after `batches_done` batches of the current epoch (default: those yielded so far).")
      .def("restore", &Sampler::restore, nb::arg("text"), "Makes the next sample() continue after the state.")
      .def("next_state", &Sampler::next_state,
           "The state text where the next sample() begins: a pending restore's, else the next epoch's start.")
      .def_prop_ro("since", &Sampler::since,
                   "'start', 'restore', 'sample' or 'end' (the last sample() yielded all): what last moved the epoch.")
      .def_prop_ro("epoch", &Sampler::epoch, "The epoch the next sample() plays.")
      .def_prop_ro("batches_yielded", &Sampler::batches_yielded,
                   "The batches of the requests the last sample() has yielded, from the epoch's start.")
      .def_prop_ro("batch_size",
                   [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.batch_size(); }); })
      .def_prop_ro("chunk_size",
                   [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.chunk_size(); }); })
      .def_prop_ro("preload_nchunks",
                   [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.preload_nchunks(); }); })
      .def_prop_ro("drop_last",
                   [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.drop_last(); }); })
      .def_prop_ro("shuffle",
                   [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.shuffle(); }); })
      .def_prop_ro(
          "mask", [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return py_mask(p.mask()); }); },
          "[(start, stop or None), ...], or None for all of [0, n_obs).")
      .def_prop_ro(
          "seed", [](const Sampler& s) { return visit_plain(s, [](const auto& p) { return p.rng().seed(); }); },
          "The seed every random choice descends from.")
      .def_prop_ro(
          "fingerprint",
          [](const Sampler& s) { return std::visit([](const auto& x) { return x.fingerprint(); }, s.get()); },
          "A hash of every setting that shapes the epochs (the seed aside), as states carry it.")
      .def_prop_ro("rank",
                   [](const Sampler& s) { return visit_distributed(s, [](const auto& d) { return d.rank(); }); })
      .def_prop_ro("world_size",
                   [](const Sampler& s) { return visit_distributed(s, [](const auto& d) { return d.world_size(); }); })
      .def(
          "shard",
          [](const Sampler& s, std::int64_t n_obs) {
            return visit_distributed(s, [&](const auto& d) { return py_mask(d.shard(n_obs)); });
          },
          nb::arg("n_obs"),
          "The observations this rank reads in the next epoch (contiguous mode), or all ranks together (global).")
      .def(
          "update_weights",
          [](Sampler& s, std::vector<double> weights, std::optional<double> temperature) {
            std::visit(
                [&](auto& x) {
                  using S = std::decay_t<decltype(x)>;
                  if constexpr (std::is_same_v<S, cs::MixtureSampler> ||
                                std::is_same_v<S, cs::DistributedSampler<cs::MixtureSampler>>) {
                    if (temperature) x.update_weights(std::move(weights), *temperature);
                    else x.update_weights(std::move(weights));
                  } else {
                    throw nb::type_error("chunksampler: update_weights is a MixtureSampler's");
                  }
                },
                s.get());
          },
          nb::arg("weights"), nb::arg("temperature").none(), "A MixtureSampler's new weights (and temperature).")
      .def_prop_ro(
          "mixture",
          [](const Sampler& s) {
            return visit_plain(s, [](const auto& p) {
              using P = std::decay_t<decltype(p)>;
              if constexpr (std::is_same_v<P, cs::MixtureSampler>) return std::make_pair(p.weights(), p.temperature());
              else throw nb::type_error("chunksampler: not a MixtureSampler");
              return std::make_pair(std::vector<double>{}, 0.0);
            });
          },
          "A MixtureSampler's (weights, temperature).")
      .def_prop_ro(
          "composition",
          [](const Sampler& s) {
            return visit_plain(s, [](const auto& p) {
              using P = std::decay_t<decltype(p)>;
              if constexpr (std::is_same_v<P, cs::WeightedClassSampler>) return p.composition();
              else throw nb::type_error("chunksampler: not a WeightedClassSampler");
              return cs::Composition::independent;
            });
          },
          "A WeightedClassSampler's composition.");

  m.def(
      "random_sampler",
      [](std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last,
         std::optional<PyMask> mask, std::uint64_t seed, bool replacement, std::optional<std::int64_t> num_samples,
         bool grid_starts) {
        return Sampler(cs::RandomSampler({.chunk_size = chunk_size,
                                          .preload_nchunks = preload_nchunks,
                                          .batch_size = batch_size,
                                          .drop_last = drop_last,
                                          .mask = ranges_of(mask),
                                          .seed = seed,
                                          .replacement = replacement,
                                          .num_samples = num_samples,
                                          .grid_starts = grid_starts}));
      },
      nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), nb::arg("seed"), nb::arg("replacement"), nb::arg("num_samples").none(),
      nb::arg("grid_starts") = false, "A C++ RandomSampler.");
  m.def(
      "sequential_sampler",
      [](std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last,
         std::optional<PyMask> mask) {
        return Sampler(cs::SequentialSampler({.chunk_size = chunk_size,
                                              .preload_nchunks = preload_nchunks,
                                              .batch_size = batch_size,
                                              .drop_last = drop_last,
                                              .mask = ranges_of(mask)}));
      },
      nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), "A C++ SequentialSampler.");
  def_class_sampler<std::int8_t>(m);
  def_class_sampler<std::int16_t>(m);
  def_class_sampler<std::int32_t>(m);
  def_class_sampler<std::int64_t>(m);
  m.def(
      "mixture_sampler",
      [](std::vector<std::int64_t> sizes, std::int64_t chunk_size, std::int64_t preload_nchunks,
         std::int64_t batch_size, bool drop_last, std::uint64_t seed, std::optional<std::int64_t> num_samples,
         std::vector<double> weights, double temperature) {
        return Sampler(cs::MixtureSampler(std::move(sizes), {.chunk_size = chunk_size,
                                                             .preload_nchunks = preload_nchunks,
                                                             .batch_size = batch_size,
                                                             .drop_last = drop_last,
                                                             .seed = seed,
                                                             .num_samples = num_samples,
                                                             .weights = std::move(weights),
                                                             .temperature = temperature}));
      },
      nb::arg("sizes"), nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("seed"), nb::arg("num_samples").none(), nb::arg("weights"), nb::arg("temperature"),
      "A C++ MixtureSampler over datasets laid end to end.");
  m.def(
      "distributed_sampler",
      [](const Sampler& sampler, std::int64_t rank, std::int64_t world_size, bool enforce_equal_batches,
         cs::ShardMode mode, cs::Remainder remainder) {
        const cs::DistInfo info{.rank = rank, .world_size = world_size};
        const cs::DistributedOptions options{.enforce_equal_batches = enforce_equal_batches,
                                             .mode = mode,
                                             .remainder = remainder};
        return std::visit(
            [&](const auto& s) -> Sampler {
              using S = std::decay_t<decltype(s)>;
              if constexpr (is_distributed<S>)
                throw nb::type_error("chunksampler: a DistributedSampler cannot wrap another DistributedSampler");
              else return Sampler(cs::DistributedSampler<S>(s, info, options));
            },
            sampler.get());
      },
      nb::arg("sampler"), nb::arg("rank"), nb::arg("world_size"), nb::arg("enforce_equal_batches"), nb::arg("mode"),
      nb::arg("remainder"), "A C++ DistributedSampler wrapping a copy of `sampler`.");
  m.def(
      "state_fields",
      [](const std::string& text) {
        const cs::SamplerState state = cs::SamplerState::parse(text);
        nb::dict fields;
        fields["fingerprint"] = state.fingerprint();
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
