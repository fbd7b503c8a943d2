// SPDX-License-Identifier: MIT
// The state's family: the C++ SamplerState as a value (its fields, parse, text, pickle), the dict
// the samplers' state_dict() returns, and the checkpoint files of the C++ library (save_state,
// load_state, write_atomically).

#include "binding.hpp"

#include <chunksampler/checkpoint.hpp>
#include <chunksampler/sampler_state.hpp>

#include <nanobind/operators.h>

#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <string_view>

namespace chunksampler::python {

nb::dict state_dict_of(const cs::SamplerState& state) {
  nb::dict out;
  out["state"] = state.to_string();
  out["epoch"] = state.epoch();
  out["batches_done"] = state.batches_done();
  return out;
}

void def_state(nb::module_& m) {
  nb::class_<cs::SamplerState>(m, "SamplerState",
                               "A sampler's point in its epochs, as C++'s cs::SamplerState: the fields of a state text "
                               "(parse), the text (text, str()), compared by value and pickled as its text.")
      .def_static(
          "parse", [](const std::string& text) { return cs::SamplerState::parse(text); }, nb::arg("text"),
          "The state of a state text (StateFormatError naming the first field that is not one).")
      .def_prop_ro("text", &cs::SamplerState::to_string, "The state's text, what state_dict()['state'] holds.")
      .def("__str__", &cs::SamplerState::to_string)
      .def("__repr__",
           [](const cs::SamplerState& s) {
             return std::string("SamplerState.parse(") + nb::repr(nb::str(s.to_string().c_str())).c_str() + ")";
           })
      .def(nb::self == nb::self)  // NOLINT(misc-redundant-expression): nanobind's spelling of __eq__
      .def("__hash__", [](const cs::SamplerState& s) { return nb::hash(nb::str(s.to_string().c_str())); })
      .def("__getstate__", &cs::SamplerState::to_string)
      .def(
          "__setstate__",
          [](cs::SamplerState& self, const std::string& text) {
            new (&self) cs::SamplerState(cs::SamplerState::parse(text));
          },
          nb::arg("text"))
      .def_prop_ro("fingerprint", &cs::SamplerState::fingerprint,
                   "The hash of the settings that shape the epochs of the sampler it was taken from.")
      .def_prop_ro("order_generation", &cs::SamplerState::order_generation,
                   "The generation of the order the sampler drew.")
      .def_prop_ro("seed", &cs::SamplerState::seed, "The sampler's seed.")
      .def_prop_ro("epoch", &cs::SamplerState::epoch, "The epoch the state is a point of.")
      .def_prop_ro("n_obs", &cs::SamplerState::n_obs,
                   "The observations of the epoch it was taken in; None at an epoch's start no sample() had begun.")
      .def_prop_ro("batches_done", &cs::SamplerState::batches_done,
                   "Batches of its epoch done, from the epoch's start.")
      .def_prop_ro("world_size", &cs::SamplerState::world_size, "The ranks it was taken on.")
      .def_prop_ro("num_workers", &cs::SamplerState::num_workers, "The workers the epoch was dealt to.")
      .def_prop_ro("worker", &cs::SamplerState::worker, "The worker whose point it is.");
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
        std::optional<cs::SamplerState> state;
        {
          nb::gil_scoped_release release;
          state = cs::load_state(path);
        }
        return state_dict_of(*state);
      },
      nb::arg("path"), "The state dict of the checkpoint file, read by cs::load_state.");
  m.def(
      "write_atomically",
      [](const std::string& path, const nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig>& bytes) {
        // Read where it lies: the caller's object holds the buffer for the call.
        const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        nb::gil_scoped_release release;
        cs::write_atomically(path, view);
      },
      nb::arg("path"), nb::arg("data"), "cs::write_atomically of a contiguous byte buffer, viewed, not copied.");
}

}  // namespace chunksampler::python
