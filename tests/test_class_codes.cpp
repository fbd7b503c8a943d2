// SPDX-License-Identifier: MIT
// ClassSampler takes class codes of any integral type: AnnData stores categorical codes as int8
// or int16, and a user should not have to copy the column. Every type gives the same epochs for
// the same codes; a code a type can hold but no class can (negative, or 2^31 and above) is refused
// by its position.
#include <chunksampler/class_sampler.hpp>

#include "support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace test_class_codes {

namespace cs = chunksampler;

namespace {

// Runs of 3 classes, each at least a chunk long: 0 x 40, 1 x 25, 2 x 35, 0 x 20.
template <class T>
std::vector<T> codes_as() {
  std::vector<T> codes;
  const int runs[][2] = {{0, 40}, {1, 25}, {2, 35}, {0, 20}};
  for (const auto& [code, length] : runs)
    codes.insert(codes.end(), static_cast<std::size_t>(length), static_cast<T>(code));
  return codes;
}

const cs::ClassOptions options{.chunk_size = 10,
                               .preload_nchunks = 2,
                               .batch_size = 5,
                               .seed = 3,
                               .num_samples = 200,
                               .class_weights = {1.0, 2.0, 1.0}};

template <class T>
std::vector<support::OwnedRequest> epoch_of() {
  const std::vector<T> codes = codes_as<T>();
  cs::ClassSampler sampler(codes, options);
  sampler.set_epoch(2);
  return support::collect(sampler.sample(std::ssize(codes)));
}

}  // namespace

TEST_CASE("ClassSampler gives the same epochs for codes of every integral type", "[class]") {
  const std::vector<support::OwnedRequest> reference = epoch_of<std::int32_t>();
  REQUIRE(reference.size() == 10);
  CHECK(epoch_of<std::int8_t>() == reference);
  CHECK(epoch_of<std::int16_t>() == reference);
  CHECK(epoch_of<std::int64_t>() == reference);
  CHECK(epoch_of<std::uint8_t>() == reference);
  CHECK(epoch_of<std::uint16_t>() == reference);
  CHECK(epoch_of<std::uint32_t>() == reference);
  CHECK(epoch_of<std::uint64_t>() == reference);
  // A span, as a user holding a column's buffer passes it, and a const vector alike.
  const std::vector<std::int8_t> codes = codes_as<std::int8_t>();
  cs::ClassSampler from_span(std::span<const std::int8_t>(codes), options);
  from_span.set_epoch(2);
  CHECK(support::collect(from_span.sample(std::ssize(codes))) == reference);
  CHECK(cs::ClassSampler(codes, options).fingerprint() ==
        cs::ClassSampler(codes_as<std::int32_t>(), options).fingerprint());
}

TEST_CASE("ClassSampler refuses codes no class can have, by position, in every type", "[class][validation]") {
  using Catch::Matchers::Contains;
  std::vector<std::int8_t> negative = codes_as<std::int8_t>();
  negative[57] = -1;
  CHECK_THROWS_AS(cs::ClassSampler(negative, options), cs::ConfigError);
  CHECK_THROWS_WITH(cs::ClassSampler(negative, options), Contains("the classes contain NA values: codes[57] is -1"));

  std::vector<std::int16_t> negative16 = codes_as<std::int16_t>();
  negative16[0] = std::numeric_limits<std::int16_t>::min();
  CHECK_THROWS_AS(cs::ClassSampler(negative16, options), cs::ConfigError);
  CHECK_THROWS_WITH(cs::ClassSampler(negative16, options), Contains("codes[0] (-32768)"));

  std::vector<std::uint32_t> large = codes_as<std::uint32_t>();
  large[99] = std::uint32_t{1} << 31;
  CHECK_THROWS_AS(cs::ClassSampler(large, options), cs::ConfigError);
  CHECK_THROWS_WITH(cs::ClassSampler(large, options), Contains("codes[99] (2147483648) must be in [0, 2^31)"));

  std::vector<std::int64_t> huge = codes_as<std::int64_t>();
  huge[5] = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_AS(cs::ClassSampler(huge, options), cs::ConfigError);
}

TEST_CASE("ClassSampler's codes are integers, not booleans or characters", "[class][api]") {
  STATIC_REQUIRE(cs::ClassCode<std::int8_t>);
  STATIC_REQUIRE(cs::ClassCode<std::uint64_t>);
  STATIC_REQUIRE_FALSE(cs::ClassCode<bool>);
  STATIC_REQUIRE_FALSE(cs::ClassCode<char>);
  STATIC_REQUIRE_FALSE(cs::ClassCode<double>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::ClassSampler, std::vector<bool>, cs::ClassOptions>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cs::ClassSampler, std::vector<float>, cs::ClassOptions>);
}

}  // namespace test_class_codes
