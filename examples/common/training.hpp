// SPDX-License-Identifier: MIT
// What the examples' training loops do around a sampler: fill a request's buffer, take each
// batch's rows from it, and keep the sampler's state in a file between runs. The "rows" here are
// observation ids, which is all the checks need to know of them.

#pragma once

#include <chunksampler.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

namespace cs = chunksampler;

/// Fills `rows` with the observations of `chunks`, in order: the buffer a loader would read.
inline void fill_buffer(std::span<const cs::Slice> chunks, std::vector<std::int64_t>& rows) {
  rows.clear();
  for (const cs::Slice chunk : chunks)
    for (std::int64_t obs = chunk.start; obs < chunk.stop; ++obs) rows.push_back(obs);
}

/// The observations a batch trains on: the buffer's rows at its positions.
inline std::vector<std::int64_t> batch_rows(const std::vector<std::int64_t>& rows,
                                            std::span<const std::int64_t> positions) {
  std::vector<std::int64_t> batch;
  batch.reserve(positions.size());
  for (const std::int64_t position : positions) batch.push_back(rows[static_cast<std::size_t>(position)]);
  return batch;
}

/// The first line of the file at `path`.
inline std::string read_line(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  if (!in || !std::getline(in, line)) throw std::runtime_error(fmt::format("cannot read {}", path));
  return line;
}

/// The sampler state a checkpoint file holds (written by write_state).
inline cs::SamplerState read_state(const std::string& path) { return cs::SamplerState::parse(read_line(path)); }

/// Writes `state` to a checkpoint file, as one line.
inline void write_state(const std::string& path, const cs::SamplerState& state) {
  std::ofstream{path} << state.to_string() << '\n';
}

}  // namespace examples
