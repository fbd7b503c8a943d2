// Slice, Splits and LoadRequest: the value types a sampler yields.
#include <chunksampler/load_request.hpp>
#include <chunksampler/slice.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <ranges>
#include <span>
#include <vector>

namespace test_load_request {

namespace cs = chunksampler;

namespace {

std::vector<std::int64_t> iota_vector(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{100});
  return v;
}

}  // namespace

TEST_CASE("Slice: size, empty, contains and equality", "[load_request]") {
  constexpr cs::Slice s{.start = 128, .stop = 192};
  STATIC_REQUIRE(s.size() == 64);
  STATIC_REQUIRE_FALSE(s.empty());
  STATIC_REQUIRE(s.contains(128));
  STATIC_REQUIRE(s.contains(191));
  STATIC_REQUIRE_FALSE(s.contains(192));
  STATIC_REQUIRE_FALSE(s.contains(127));

  STATIC_REQUIRE(cs::Slice{}.empty());
  STATIC_REQUIRE(cs::Slice{}.size() == 0);
  STATIC_REQUIRE(cs::Slice{5, 5}.empty());
  STATIC_REQUIRE_FALSE(cs::Slice{5, 5}.contains(5));
  STATIC_REQUIRE(cs::Slice{6, 5}.empty());  // reversed bounds hold nothing
  STATIC_REQUIRE(cs::Slice{5, 6}.size() == 1);
  STATIC_REQUIRE_FALSE(cs::Slice{5, 6}.empty());

  STATIC_REQUIRE(cs::Slice{1, 2} == cs::Slice{1, 2});
  STATIC_REQUIRE(cs::Slice{1, 2} != cs::Slice{1, 3});
  STATIC_REQUIRE(cs::Slice{0, 2} != cs::Slice{1, 2});

  constexpr std::int64_t big = std::int64_t{1} << 62;
  STATIC_REQUIRE(cs::Slice{big - 1, big}.size() == 1);
  STATIC_REQUIRE(cs::Slice{0, big}.contains(big - 1));
}

TEST_CASE("Splits: batch count is ceil(positions / batch_size), the last batch is shorter", "[load_request]") {
  const std::vector<std::int64_t> positions = iota_vector(10);

  SECTION("uneven") {
    const cs::Splits splits(positions, 4);
    REQUIRE(splits.size() == 3);
    REQUIRE_FALSE(splits.empty());
    REQUIRE(splits.batch_size() == 4);
    REQUIRE(splits[0].size() == 4);
    REQUIRE(splits[1].size() == 4);
    REQUIRE(splits[2].size() == 2);
    REQUIRE(splits[0][0] == 100);
    REQUIRE(splits[1][0] == 104);
    REQUIRE(splits[2][0] == 108);
    REQUIRE(splits[2][1] == 109);
    // batches view the buffer itself, not a copy
    REQUIRE(splits[1].data() == positions.data() + 4);
    REQUIRE(splits.positions().data() == positions.data());
    REQUIRE(splits.positions().size() == 10);
  }
  SECTION("even") {
    const cs::Splits splits(positions, 5);
    REQUIRE(splits.size() == 2);
    REQUIRE(splits[1].size() == 5);
  }
  SECTION("batch larger than the buffer") {
    const cs::Splits splits(positions, 64);
    REQUIRE(splits.size() == 1);
    REQUIRE(splits[0].size() == 10);
  }
  SECTION("batch of one") {
    const cs::Splits splits(positions, 1);
    REQUIRE(splits.size() == 10);
    for (std::size_t i = 0; i < splits.size(); ++i) {
      REQUIRE(splits[static_cast<std::ptrdiff_t>(i)].size() == 1);
      REQUIRE(splits[static_cast<std::ptrdiff_t>(i)][0] == positions[i]);
    }
  }
}

TEST_CASE("Splits: size over many lengths and batch sizes", "[load_request]") {
  for (std::int64_t n = 0; n <= 40; ++n) {
    const std::vector<std::int64_t> positions = iota_vector(n);
    for (std::int64_t b = 1; b <= 12; ++b) {
      const cs::Splits splits(positions, b);
      const auto expected = static_cast<std::size_t>((n + b - 1) / b);
      REQUIRE(splits.size() == expected);
      REQUIRE(splits.empty() == (n == 0));
      // batches concatenate back to the buffer, each full but the last
      std::vector<std::int64_t> joined;
      std::size_t index = 0;
      for (std::span<const std::int64_t> batch : splits) {
        if (index + 1 < expected) REQUIRE(batch.size() == static_cast<std::size_t>(b));
        REQUIRE_FALSE(batch.empty());
        joined.insert(joined.end(), batch.begin(), batch.end());
        ++index;
      }
      REQUIRE(index == expected);
      REQUIRE(joined == positions);
    }
  }
}

TEST_CASE("Splits: empty splits", "[load_request]") {
  const cs::Splits none;
  REQUIRE(none.size() == 0);
  REQUIRE(none.empty());
  REQUIRE(none.begin() == none.end());

  const std::vector<std::int64_t> nothing;
  const cs::Splits empty_buffer(nothing, 8);
  REQUIRE(empty_buffer.size() == 0);
  REQUIRE(empty_buffer.empty());
  REQUIRE(empty_buffer.begin() == empty_buffer.end());
}

TEST_CASE("Splits: a random-access, borrowed view of spans", "[load_request]") {
  using It = cs::Splits::iterator;
  STATIC_REQUIRE(std::random_access_iterator<It>);
  STATIC_REQUIRE(std::sized_sentinel_for<It, It>);
  STATIC_REQUIRE(std::same_as<std::iter_value_t<It>, std::span<const std::int64_t>>);
  STATIC_REQUIRE(std::ranges::random_access_range<cs::Splits>);
  STATIC_REQUIRE(std::ranges::sized_range<cs::Splits>);
  STATIC_REQUIRE(std::ranges::common_range<cs::Splits>);
  STATIC_REQUIRE(std::ranges::view<cs::Splits>);
  STATIC_REQUIRE(std::ranges::borrowed_range<cs::Splits>);
  STATIC_REQUIRE(std::same_as<std::ranges::range_value_t<cs::Splits>, std::span<const std::int64_t>>);

  const std::vector<std::int64_t> positions = iota_vector(23);
  const cs::Splits splits(positions, 5);  // 5 batches, the last of 3
  It it = splits.begin();
  REQUIRE(splits.end() - splits.begin() == 5);
  REQUIRE(std::ranges::distance(splits) == 5);
  REQUIRE(std::ranges::size(splits) == 5);
  REQUIRE(it[4].size() == 3);
  REQUIRE((*(it + 2))[0] == 110);
  REQUIRE((2 + it)[0][0] == 110);
  REQUIRE(it < it + 1);
  REQUIRE(it + 5 == splits.end());
  It back = splits.end();
  --back;
  REQUIRE((*back)[0] == 120);
  back -= 2;
  REQUIRE((*back)[0] == 110);
  REQUIRE(back - it == 2);
  REQUIRE((back++)[0][0] == 110);
  REQUIRE((*back)[0] == 115);

  // an iterator outlives the Splits it came from: it refers to the buffer, not to the view
  It kept;
  {
    const cs::Splits temporary(positions, 5);
    kept = temporary.begin() + 1;
  }
  REQUIRE((*kept)[0] == 105);

  // borrowed: algorithms on a temporary return usable iterators
  const auto found =
      std::ranges::find_if(cs::Splits(positions, 5), [](std::span<const std::int64_t> b) { return b.size() < 5; });
  REQUIRE((*found)[0] == 120);

  // views compose
  std::vector<std::size_t> sizes;
  for (const std::size_t size :
       splits | std::views::reverse | std::views::transform([](std::span<const std::int64_t> b) { return b.size(); }))
    sizes.push_back(size);
  REQUIRE(sizes == std::vector<std::size_t>{3, 5, 5, 5, 5});
}

TEST_CASE("LoadRequest: buffer_size sums the chunk sizes, range-for walks its batches", "[load_request]") {
  REQUIRE(cs::LoadRequest{}.buffer_size() == 0);
  REQUIRE(cs::LoadRequest{}.splits.empty());

  const std::vector<cs::Slice> chunks{{10, 20}, {100, 103}, {0, 1}};
  const std::vector<std::int64_t> positions{13, 0, 5, 7, 2, 12, 1, 3, 11, 4, 6, 8, 9, 10};
  const cs::LoadRequest request{.chunks = chunks, .splits = cs::Splits(positions, 4)};
  REQUIRE(request.buffer_size() == 14);
  REQUIRE(request.chunks.size() == 3);

  std::vector<std::vector<std::int64_t>> batches;
  for (std::span<const std::int64_t> batch : request.splits) batches.emplace_back(batch.begin(), batch.end());
  REQUIRE(batches == std::vector<std::vector<std::int64_t>>{{13, 0, 5, 7}, {2, 12, 1, 3}, {11, 4, 6, 8}, {9, 10}});
  for (const auto& batch : batches)
    for (const std::int64_t p : batch) REQUIRE(p < request.buffer_size());

  const std::vector<cs::Slice> huge{{0, std::int64_t{1} << 61}, {std::int64_t{1} << 61, std::int64_t{1} << 62}};
  REQUIRE(cs::LoadRequest{.chunks = huge, .splits = {}}.buffer_size() == std::int64_t{1} << 62);
}

}  // namespace test_load_request
