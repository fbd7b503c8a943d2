// SPDX-License-Identifier: MIT
// The mixture's family: MixtureSampler, over datasets laid end to end, and its DistributedSampler,
// each with update_weights.

#include "binding.hpp"
#include "bound.hpp"

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/rng.hpp>

#include <cstdint>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace chunksampler::python {
namespace {

template <class S>
void update_weights(Bound<S>& b, std::vector<double> weights, std::optional<double> temperature) {
  if (temperature) b.get().update_weights(std::move(weights), *temperature);
  else b.get().update_weights(std::move(weights));
}

}  // namespace

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
  // What DistributedMixtureSampler binds beyond every DistributedSampler's members (bound.hpp calls it).
  static void def_distributed(nb::class_<Bound<cs::DistributedSampler<cs::MixtureSampler>>>& cls) {
    cls.def("update_weights", &update_weights<cs::DistributedSampler<cs::MixtureSampler>>, nb::arg("weights"),
            nb::arg("temperature").none() = nb::none(), "The wrapped MixtureSampler's new weights (and temperature).");
  }
};

void def_mixture(nb::module_& m) {
  def_plain_and_distributed<cs::MixtureSampler>(m, "A C++ MixtureSampler over datasets laid end to end.");
}

}  // namespace chunksampler::python
