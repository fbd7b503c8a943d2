// SPDX-License-Identifier: MIT
// class_options.hpp: ClassOptions and WeightedClassOptions convert into each other field for field
// (every field set away from its default, so a field the conversion forgot shows), and the
// composition defaults to annbatch's.

#include <chunksampler/class_options.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace test_class_options {

namespace {

namespace cs = chunksampler;

const cs::ClassOptions every_field{.chunk_size = 7,
                                   .preload_nchunks = 3,
                                   .batch_size = 21,
                                   .drop_last = true,
                                   .mask = cs::Ranges{cs::Slice{5, 9}, cs::Slice{20, 40}},
                                   .seed = 99,
                                   .num_samples = 1234,
                                   .class_weights = {0.5, 0.0, 2.0}};

void check_same_fields(const cs::ClassOptions& a, const cs::WeightedClassOptions& b) {
  CHECK(a.chunk_size == b.chunk_size);
  CHECK(a.preload_nchunks == b.preload_nchunks);
  CHECK(a.batch_size == b.batch_size);
  CHECK(a.drop_last == b.drop_last);
  CHECK(a.mask == b.mask);
  CHECK(a.seed == b.seed);
  CHECK(a.num_samples == b.num_samples);
  CHECK(a.class_weights == b.class_weights);
}

TEST_CASE("class options convert field for field, the composition aside", "[class_options]") {
  const cs::WeightedClassOptions weighted = cs::weighted_options_of(every_field, cs::Composition::stratified);
  check_same_fields(every_field, weighted);
  CHECK(weighted.composition == cs::Composition::stratified);
  CHECK(cs::weighted_options_of(every_field).composition == cs::Composition::independent);

  const cs::ClassOptions back = cs::class_options_of(weighted);
  check_same_fields(back, weighted);
  // Every field differs from its default, so a conversion that dropped one would fail above.
  const cs::ClassOptions defaults{};
  CHECK(back.chunk_size != defaults.chunk_size);
  CHECK(back.drop_last != defaults.drop_last);
  CHECK(back.mask != defaults.mask);
  CHECK(back.seed != defaults.seed);
  CHECK(back.num_samples != defaults.num_samples);
  CHECK(back.class_weights != defaults.class_weights);
}

}  // namespace

}  // namespace test_class_options
