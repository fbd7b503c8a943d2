// SPDX-License-Identifier: MIT
// The private module chunksampler._chunksampler: the C++ samplers with Python types. It
// translates types and nothing else; every rule, check and number comes from the C++ library.
// The public names live in the plain Python modules beside it (chunksampler/_samplers.py).

#include <chunksampler/dist_info.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/epoch.hpp>
#include <chunksampler/errors.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <type_traits>
#include <optional>
#include <utility>
#include <variant>

namespace nb = nanobind;
namespace cs = chunksampler;

namespace {

using Range = cs::Epoch<cs::ChunkPlan>;
using AnySampler = std::variant<cs::RandomSampler, cs::SequentialSampler, cs::DistributedSampler<cs::RandomSampler>,
                                cs::DistributedSampler<cs::SequentialSampler>>;
// Whether `S` is one of the plain samplers, not a DistributedSampler of one.
template <class S>
constexpr bool is_plain = std::is_same_v<S, cs::RandomSampler> || std::is_same_v<S, cs::SequentialSampler>;

// A mask as Python spells it: (start, stop), stop None for slice(start, None).
using PyMask = std::pair<std::int64_t, std::optional<std::int64_t>>;

cs::WorkerInfo worker_of(std::int64_t id, std::int64_t num_workers) { return {.id = id, .num_workers = num_workers}; }

std::optional<cs::Slice> slice_of(const std::optional<PyMask>& mask) {
  if (!mask) return std::nullopt;
  return mask->second ? cs::Slice{mask->first, *mask->second} : cs::Slice::from(mask->first);
}

std::optional<PyMask> py_mask(const std::optional<cs::Slice>& mask) {
  if (!mask) return std::nullopt;
  return PyMask{mask->start, mask->open_ended() ? std::nullopt : std::optional<std::int64_t>(mask->stop)};
}

// One epoch's requests as a Python iterator of annbatch LoadRequest dicts. The C++ range reuses
// its buffers from request to request, so each request's positions are copied once (one memcpy)
// into an array Python owns, and the splits are numpy views into it.
class Requests {
 public:
  explicit Requests(Range range) : range_(std::make_unique<Range>(std::move(range))) {}

  [[nodiscard]] std::int64_t n_batches() const noexcept { return range_->n_batches(); }

  nb::dict next() {
    // Another thread may call next() while this one runs without the GIL: refuse, as a
    // Python generator does, instead of racing on the range's buffers.
    if (busy_) throw nb::value_error("chunksampler: this sample() iterator is already executing");
    if (done_) throw nb::stop_iteration();
    busy_ = true;
    std::unique_ptr<std::int64_t[]> positions;
    std::size_t count = 0;
    try {
      nb::gil_scoped_release release;
      if (!it_) it_ = range_->begin();
      else ++*it_;
      if (*it_ != std::default_sentinel) {
        const std::span<const std::int64_t> from = (**it_).splits.positions();
        count = from.size();
        positions.reset(new std::int64_t[count == 0 ? 1 : count]);
        if (count != 0) std::memcpy(positions.get(), from.data(), count * sizeof(std::int64_t));
      }
    } catch (...) {
      busy_ = false;
      throw;
    }
    busy_ = false;
    if (*it_ == std::default_sentinel) {
      done_ = true;
      throw nb::stop_iteration();
    }
    const cs::LoadRequest& request = **it_;

    nb::list requests;
    for (const cs::Slice& chunk : request.chunks) requests.append(nb::slice(chunk.start, chunk.stop));

    std::int64_t* data = positions.release();
    nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
    nb::object all = nb::cast(nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>(data, {count}, owner));
    nb::list splits;
    const std::int64_t* base = request.splits.positions().data();
    for (const std::span<const std::int64_t> batch : request.splits) {
      const std::int64_t begin = batch.data() - base;
      splits.append(all[nb::slice(begin, begin + static_cast<std::int64_t>(batch.size()))]);
    }

    nb::dict result;
    result["requests"] = std::move(requests);
    result["splits"] = std::move(splits);
    return result;
  }

 private:
  std::unique_ptr<Range> range_;  // on the heap: its iterator points at it
  std::optional<Range::iterator> it_;
  bool busy_ = false;
  bool done_ = false;
};

// Any of the bound samplers behind one Python type; each method forwards to the C++ one.
class Sampler {
 public:
  explicit Sampler(AnySampler sampler) : sampler_(std::move(sampler)) {}

  [[nodiscard]] const AnySampler& get() const noexcept { return sampler_; }

  Requests sample(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) {
    return std::visit([&](auto& s) { return Requests(s.sample(n_obs, worker_of(worker, num_workers))); }, sampler_);
  }
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return std::visit([&](const auto& s) { return s.n_batches(n_obs, worker_of(worker, num_workers)); }, sampler_);
  }
  void validate(std::int64_t n_obs) const {
    std::visit([&](const auto& s) { s.validate(n_obs); }, sampler_);
  }
  void set_epoch(std::uint64_t epoch) {
    std::visit([&](auto& s) { s.set_epoch(epoch); }, sampler_);
  }
  [[nodiscard]] std::uint64_t epoch() const {
    return std::visit([](const auto& s) { return s.epoch(); }, sampler_);
  }
  [[nodiscard]] std::int64_t batch_size() const {
    return std::visit([](const auto& s) { return s.batch_size(); }, sampler_);
  }
  [[nodiscard]] std::int64_t chunk_size() const {
    return std::visit([](const auto& s) { return s.chunk_size(); }, sampler_);
  }
  [[nodiscard]] std::int64_t preload_nchunks() const {
    return std::visit([](const auto& s) { return s.preload_nchunks(); }, sampler_);
  }
  [[nodiscard]] bool shuffle() const {
    return std::visit([](const auto& s) { return s.shuffle(); }, sampler_);
  }
  [[nodiscard]] std::optional<PyMask> mask() const {
    return std::visit([](const auto& s) { return py_mask(s.mask()); }, sampler_);
  }
  [[nodiscard]] std::uint64_t seed() const {
    return std::visit([](const auto& s) { return s.rng().seed(); }, sampler_);
  }

 private:
  AnySampler sampler_;
};

// The distributed sampler's extra members, for the two samplers it may wrap.
template <class F>
auto visit_distributed(const Sampler& sampler, F&& f) {
  using R = decltype(f(std::declval<const cs::DistributedSampler<cs::RandomSampler>&>()));
  return std::visit(
      [&](const auto& s) -> R {
        using S = std::decay_t<decltype(s)>;
        if constexpr (is_plain<S>)
          throw nb::type_error("chunksampler: not a DistributedSampler");
        else
          return f(s);
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
  } catch (const cs::ConfigError& e) {
    raise_as("ConfigError", e.what());
  } catch (const cs::EnvironmentError& e) {
    raise_as("DistEnvironmentError", e.what());
  }
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

  nb::class_<Requests>(m, "Requests", "One epoch's load requests: an iterator of LoadRequest dicts.")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &Requests::next)
      .def_prop_ro("n_batches", &Requests::n_batches, "Batches the iterator yields in all.");

  nb::class_<Sampler>(m, "Sampler", "A C++ sampler: RandomSampler, SequentialSampler or a DistributedSampler of one.")
      .def("sample", &Sampler::sample, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "The requests of the next epoch (worker `worker` of `num_workers`'s share); moves to the epoch after.")
      .def("n_batches", &Sampler::n_batches, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches one epoch over `n_obs` observations yields.")
      .def("validate", &Sampler::validate, nb::arg("n_obs"), "Raises ConfigError if an epoch cannot be served.")
      .def("set_epoch", &Sampler::set_epoch, nb::arg("epoch"), "Pins the next sample() to `epoch`.")
      .def_prop_ro("epoch", &Sampler::epoch, "The epoch the next sample() plays.")
      .def_prop_ro("batch_size", &Sampler::batch_size)
      .def_prop_ro("chunk_size", &Sampler::chunk_size)
      .def_prop_ro("preload_nchunks", &Sampler::preload_nchunks)
      .def_prop_ro("shuffle", &Sampler::shuffle)
      .def_prop_ro("mask", &Sampler::mask, "(start, stop or None), or None for all of [0, n_obs).")
      .def_prop_ro("seed", &Sampler::seed, "The seed every random choice descends from.")
      .def_prop_ro("drop_last",
                   [](const Sampler& s) {
                     return std::visit(
                         [](const auto& x) {
                           using S = std::decay_t<decltype(x)>;
                           if constexpr (is_plain<S>)
                             return x.drop_last();
                           else
                             return x.sampler().drop_last();
                         },
                         s.get());
                   })
      .def_prop_ro("rank", [](const Sampler& s) { return visit_distributed(s, [](const auto& d) { return d.rank(); }); })
      .def_prop_ro("world_size",
                   [](const Sampler& s) { return visit_distributed(s, [](const auto& d) { return d.world_size(); }); })
      .def(
          "shard",
          [](const Sampler& s, std::int64_t n_obs) {
            return visit_distributed(s, [&](const auto& d) { return py_mask(d.shard(n_obs)); });
          },
          nb::arg("n_obs"),
          "The observations this rank reads in the next epoch (contiguous mode), or all ranks together (global).");

  m.def(
      "random_sampler",
      [](std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last,
         std::optional<PyMask> mask, std::uint64_t seed, bool replacement, std::optional<std::int64_t> num_samples) {
        return Sampler(cs::RandomSampler({.chunk_size = chunk_size,
                                          .preload_nchunks = preload_nchunks,
                                          .batch_size = batch_size,
                                          .drop_last = drop_last,
                                          .mask = slice_of(mask),
                                          .seed = seed,
                                          .replacement = replacement,
                                          .num_samples = num_samples}));
      },
      nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), nb::arg("seed"), nb::arg("replacement"), nb::arg("num_samples").none(),
      "A C++ RandomSampler.");
  m.def(
      "sequential_sampler",
      [](std::int64_t chunk_size, std::int64_t preload_nchunks, std::int64_t batch_size, bool drop_last,
         std::optional<PyMask> mask) {
        return Sampler(cs::SequentialSampler({.chunk_size = chunk_size,
                                              .preload_nchunks = preload_nchunks,
                                              .batch_size = batch_size,
                                              .drop_last = drop_last,
                                              .mask = slice_of(mask)}));
      },
      nb::arg("chunk_size"), nb::arg("preload_nchunks"), nb::arg("batch_size"), nb::arg("drop_last"),
      nb::arg("mask").none(), "A C++ SequentialSampler.");
  m.def(
      "distributed_sampler",
      [](const Sampler& sampler, std::int64_t rank, std::int64_t world_size, bool enforce_equal_batches,
         cs::ShardMode mode, cs::Remainder remainder) {
        const cs::DistInfo info{.rank = rank, .world_size = world_size};
        const cs::DistributedOptions options{
            .enforce_equal_batches = enforce_equal_batches, .mode = mode, .remainder = remainder};
        return std::visit(
            [&](const auto& s) -> Sampler {
              using S = std::decay_t<decltype(s)>;
              if constexpr (is_plain<S>)
                return Sampler(cs::DistributedSampler<S>(s, info, options));
              else
                throw nb::type_error("chunksampler: a DistributedSampler cannot wrap another DistributedSampler");
            },
            sampler.get());
      },
      nb::arg("sampler"), nb::arg("rank"), nb::arg("world_size"), nb::arg("enforce_equal_batches"), nb::arg("mode"),
      nb::arg("remainder"), "A C++ DistributedSampler wrapping a copy of `sampler`.");
  m.def(
      "dist_from_env",
      []() {
        const cs::DistInfo info = cs::dist::from_env()();
        return std::pair<std::int64_t, std::int64_t>(info.rank, info.world_size);
      },
      "(rank, world_size) from the launcher's variables (torchrun, OpenMPI, PMI, Slurm), as cs::dist::from_env().");
}
