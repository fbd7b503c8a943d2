// SPDX-License-Identifier: MIT
// The plain samplers' family: RandomSampler and SequentialSampler, and their DistributedSamplers.

#include "binding.hpp"
#include "bound.hpp"

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/sequential_sampler.hpp>

#include <cstdint>
#include <new>
#include <optional>

namespace chunksampler::python {

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

void def_plain(nb::module_& m) {
  def_plain_and_distributed<cs::RandomSampler>(m, "A C++ RandomSampler.");
  def_plain_and_distributed<cs::SequentialSampler>(m, "A C++ SequentialSampler.");
}

}  // namespace chunksampler::python
