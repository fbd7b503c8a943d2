// SPDX-License-Identifier: MIT
// The class samplers' family: ClassSampler and WeightedClassSampler, made from one class code per
// observation or from another's runs, and their DistributedSamplers.

#include "binding.hpp"
#include "bound.hpp"

#include <chunksampler/class_options.hpp>
#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/rng.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/weighted_class_sampler.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

namespace chunksampler::python {
namespace {

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

}  // namespace

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

void def_class(nb::module_& m) {
  def_plain_and_distributed<cs::ClassSampler>(m, "A C++ ClassSampler (made from codes or from another's runs).");
  def_plain_and_distributed<cs::WeightedClassSampler>(
      m, "A C++ WeightedClassSampler (made from codes or from another's runs).");
}

}  // namespace chunksampler::python
