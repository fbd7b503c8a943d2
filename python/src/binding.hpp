// SPDX-License-Identifier: MIT
// What every family of the binding needs: nanobind and its casters, the conversions between
// Python's spellings and the C++ types (masks, workers, options), and each family's def_ function,
// which module.cpp calls in the order the classes are registered.

#pragma once

#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/ranges.hpp>
#include <chunksampler/sampler_state.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/worker_info.hpp>

// Every caster in every family's translation unit: a type whose caster is missing would still
// compile, as an unregistered class, and fail only when called.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace nb = nanobind;
namespace cs = chunksampler;

// Named, not anonymous: the families' translation units share these definitions.
namespace chunksampler::python {

// Whether `S` is a DistributedSampler of one of the plain samplers.
template <class S>
inline constexpr bool is_distributed = false;
template <class S>
inline constexpr bool is_distributed<cs::DistributedSampler<S>> = true;

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

inline cs::WorkerInfo worker_of(std::int64_t id, std::int64_t num_workers) {
  return {.id = id, .num_workers = num_workers};
}

// The ranges of `mask` as a cs::Ranges, which checks them (sorted, disjoint, non-empty) and
// merges adjacent ones; None (all of [0, n_obs)) stays std::nullopt.
inline std::optional<cs::Ranges> ranges_of(const std::optional<PyMask>& mask) {
  if (!mask) return std::nullopt;
  std::vector<cs::Slice> ranges;
  ranges.reserve(mask->size());
  for (const auto& [start, stop] : *mask) ranges.push_back(stop ? cs::Slice{start, *stop} : cs::Slice::from(start));
  return cs::Ranges(ranges);
}

// A mask's ranges as Python spells them, or None for all of [0, n_obs).
inline std::optional<PyMask> py_mask(const std::optional<cs::Ranges>& mask) {
  if (!mask) return std::nullopt;
  PyMask out;
  out.reserve(mask->size());
  for (const cs::Slice& range : *mask)
    out.emplace_back(range.start, range.open_ended() ? std::nullopt : std::optional<std::int64_t>(range.stop));
  return out;
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

// A state as the Python samplers hand it out (PyTorch's state_dict): {"state": its text, "epoch":
// ..., "batches_done": ...}, batches_done counted from the epoch's start (state.cpp).
nb::dict state_dict_of(const cs::SamplerState& state);

// The families, in the order module.cpp calls them, which is the order the stub lists their names
// in (after the enums, whose values are default arguments of the samplers' constructors).
void def_splits(nb::module_& m);     // splits.cpp: Splits, the list of a request's splits
void def_iterators(nb::module_& m);  // iterators.cpp: Requests, RequestArrays
void def_plain(nb::module_& m);      // plain.cpp: RandomSampler, SequentialSampler, Distributed...
void def_class(nb::module_& m);      // class.cpp: ClassSampler, WeightedClassSampler, Distributed...
void def_mixture(nb::module_& m);    // mixture.cpp: MixtureSampler, DistributedMixtureSampler
void def_state(nb::module_& m);      // state.cpp: SamplerState and the checkpoint files
void def_split(nb::module_& m);      // split.cpp: split_mask, check_disjoint, dist_from_env

}  // namespace chunksampler::python
