// SPDX-License-Identifier: MIT
// The state's family: a state text's fields (state_fields), and the checkpoint files of the C++
// library (save_state, load_state, write_atomically).

#include "binding.hpp"

#include <chunksampler/checkpoint.hpp>
#include <chunksampler/sampler_state.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace chunksampler::python {

void def_state(nb::module_& m) {
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
}

}  // namespace chunksampler::python
