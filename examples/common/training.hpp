// SPDX-License-Identifier: MIT
// What the examples' training loops do around a sampler: fill a request's buffer and take each
// batch's rows from it. The "rows" here are observation ids, which is all the checks need to know
// of them. (The sampler's state goes to a file and back with <chunksampler/checkpoint.hpp>.)

#pragma once

#include <chunksampler.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
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

}  // namespace examples
