// detail/random.hpp and rng.hpp: bounded draws, shuffles, the keyed permutation and key derivation.
// Statistical checks use fixed seeds, so they are deterministic; thresholds are generous (several
// standard deviations) so only a real defect, not bad luck, can trip them.
#include <chunksampler/detail/random.hpp>
#include <chunksampler/rng.hpp>

#include "statistics.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <set>
#include <span>
#include <thread>
#include <vector>

namespace test_detail_random {

namespace cs = chunksampler;
namespace detail = chunksampler::detail;
using support::chi_square;
using support::chi_square_uniform;

namespace {

/// True when `perm` evaluated on [0, n) hits every value of [0, n) exactly once.
template <class Permutation>
bool is_bijection(const Permutation& perm, std::uint64_t n) {
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t x = perm(i);
    if (x >= n || seen[static_cast<std::size_t>(x)] != 0) return false;
    seen[static_cast<std::size_t>(x)] = 1;
  }
  return true;
}

constexpr std::uint64_t two_pow(unsigned k) { return std::uint64_t{1} << k; }

/// 64 bits from two 32-bit draws, high first; two statements, as the order of two calls within
/// one expression is unspecified and the inputs must be the same on every compiler.
template <class Engine>
std::uint64_t next64(Engine& engine) {
  const std::uint64_t high = engine();
  const std::uint64_t low = engine();
  return (high << 32U) | low;
}

}  // namespace

TEST_CASE("bounded: every draw is below the bound", "[detail_random]") {
  const std::uint64_t bound = GENERATE(as<std::uint64_t>{}, 1, 2, 3, two_pow(32) - 1, two_pow(32), two_pow(32) + 1,
                                       two_pow(62), 0xAAAAAAAAAAAAAAABULL, ~std::uint64_t{0});
  CAPTURE(bound);
  detail::Engine engine = detail::make_engine(2024, bound);
  for (int i = 0; i < 20000; ++i) REQUIRE(detail::bounded(engine, bound) < bound);
}

TEST_CASE("bounded: draws are near uniform (chi-square, fixed seed)", "[detail_random]") {
  // Bins: `cells` equal-width ranges (the last possibly narrower), expected count proportional to width.
  const std::uint64_t bound = GENERATE(as<std::uint64_t>{}, 2, 3, 7, two_pow(32) - 1, two_pow(32), two_pow(32) + 1,
                                       two_pow(62), 0xAAAAAAAAAAAAAAABULL);
  CAPTURE(bound);
  constexpr std::int64_t draws = 32000;
  const std::uint64_t cells = std::min<std::uint64_t>(bound, 16);
  const std::uint64_t width = bound / cells + (bound % cells != 0 ? 1 : 0);
  std::vector<std::int64_t> high(static_cast<std::size_t>(cells), 0);
  std::vector<std::int64_t> low(16, 0);
  detail::Engine engine = detail::make_engine(77, bound);
  for (std::int64_t i = 0; i < draws; ++i) {
    const std::uint64_t v = detail::bounded(engine, bound);
    ++high[static_cast<std::size_t>(v / width)];
    ++low[static_cast<std::size_t>(v % 16)];
  }
  std::vector<double> expected(static_cast<std::size_t>(cells));
  for (std::uint64_t c = 0; c < cells; ++c) {
    const std::uint64_t cell_width = std::min(width, bound - c * width);
    expected[static_cast<std::size_t>(c)] =
        static_cast<double>(draws) * static_cast<double>(cell_width) / static_cast<double>(bound);
  }
  // cells - 1 <= 15 degrees of freedom: mean <= 15, sd <= 5.5; 60 is beyond p = 1e-6
  CHECK(chi_square(high, expected) < 60.0);
  if (bound >= two_pow(32) - 1) CHECK(chi_square_uniform(low) < 60.0);  // low bits too
}

TEST_CASE("bounded: bound 1 always gives 0", "[detail_random]") {
  detail::Engine engine = detail::make_engine(5, 5);
  for (int i = 0; i < 1000; ++i) REQUIRE(detail::bounded(engine, 1) == 0);
}

TEST_CASE("partial_shuffle: the result is a permutation of the input", "[detail_random]") {
  detail::Engine engine = detail::make_engine(11, 0);
  for (std::size_t n = 0; n <= 40; ++n) {
    for (std::size_t count = 0; count <= n; ++count) {
      std::vector<std::int64_t> values(n);
      std::iota(values.begin(), values.end(), std::int64_t{0});
      detail::partial_shuffle(engine, std::span<std::int64_t>(values), count);
      if (count == 0) {
        REQUIRE(std::is_sorted(values.begin(), values.end()));
        continue;
      }
      std::vector<std::int64_t> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::int64_t> expected(n);
      std::iota(expected.begin(), expected.end(), std::int64_t{0});
      REQUIRE(sorted == expected);
    }
  }
}

TEST_CASE("partial_shuffle: the selected prefix is a uniform ordered selection", "[detail_random]") {
  detail::Engine engine = detail::make_engine(12, 0);

  SECTION("2 of 6: the 30 ordered pairs are equally likely") {
    std::vector<std::int64_t> counts(36, 0);
    constexpr int trials = 30000;
    for (int t = 0; t < trials; ++t) {
      std::array<int, 6> values{0, 1, 2, 3, 4, 5};
      detail::partial_shuffle(engine, std::span<int>(values), 2);
      ++counts[static_cast<std::size_t>(values[0] * 6 + values[1])];
    }
    std::vector<std::int64_t> pairs;
    for (std::size_t a = 0; a < 6; ++a) {
      REQUIRE(counts[a * 6 + a] == 0);  // never the same element twice
      for (std::size_t b = 0; b < 6; ++b)
        if (a != b) pairs.push_back(counts[a * 6 + b]);
    }
    // 29 degrees of freedom: mean 29, sd 7.6
    CHECK(chi_square_uniform(pairs) < 80.0);
  }

  SECTION("4 of 4: the 24 permutations are equally likely") {
    std::vector<std::int64_t> counts(256, 0);
    constexpr int trials = 24000;
    for (int t = 0; t < trials; ++t) {
      std::array<int, 4> values{0, 1, 2, 3};
      detail::partial_shuffle(engine, std::span<int>(values), 4);
      ++counts[static_cast<std::size_t>(values[0] * 64 + values[1] * 16 + values[2] * 4 + values[3])];
    }
    std::vector<std::int64_t> perms;
    std::array<int, 4> p{0, 1, 2, 3};
    do perms.push_back(counts[static_cast<std::size_t>(p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3])]);
    while (std::next_permutation(p.begin(), p.end()));
    REQUIRE(std::accumulate(perms.begin(), perms.end(), std::int64_t{0}) == trials);  // nothing else occurs
    // 23 degrees of freedom: mean 23, sd 6.8
    CHECK(chi_square_uniform(perms) < 70.0);
  }

  SECTION("3 of 20: every element is selected with probability 3/20") {
    std::vector<std::int64_t> counts(20, 0);
    constexpr int trials = 20000;
    for (int t = 0; t < trials; ++t) {
      std::array<int, 20> values{};
      std::iota(values.begin(), values.end(), 0);
      detail::partial_shuffle(engine, std::span<int>(values), 3);
      for (std::size_t i = 0; i < 3; ++i) ++counts[static_cast<std::size_t>(values[i])];
    }
    CHECK(chi_square_uniform(counts) < 65.0);  // 19 degrees of freedom: mean 19, sd 6.2
  }
}

TEST_CASE("FeistelPermutation: a bijection of 0..n-1 for many n and keys", "[detail_random]") {
  SECTION("listed sizes") {
    for (const std::uint64_t n : std::initializer_list<std::uint64_t>{1, 2, 3, 4, 5, 7, 8, 100, 1000}) {
      for (std::uint64_t key = 0; key < 32; ++key) {
        const detail::FeistelPermutation perm(n, key);
        CAPTURE(n, key);
        REQUIRE(perm.size() == n);
        REQUIRE(is_bijection(perm, n));
      }
    }
  }
  SECTION("every size up to 70") {
    for (std::uint64_t n = 1; n <= 70; ++n)
      for (std::uint64_t key = 0; key < 8; ++key) {
        CAPTURE(n, key);
        REQUIRE(is_bijection(detail::FeistelPermutation(n, detail::mix64(key + 1000)), n));
      }
  }
  SECTION("random sizes up to 1e5") {
    pcg32 config_rng(20240601U);
    for (int trial = 0; trial < 8; ++trial) {
      const std::uint64_t n = 1 + (std::uint64_t{config_rng()} % 100000U);
      const std::uint64_t key = next64(config_rng);
      CAPTURE(n, key);
      REQUIRE(is_bijection(detail::FeistelPermutation(n, key), n));
    }
    // squares and their neighbours: where the side of the square domain changes
    for (const std::uint64_t n :
         std::initializer_list<std::uint64_t>{4095, 4096, 4097, 65535, 65536, 65537, 66049, 66050}) {
      CAPTURE(n);
      REQUIRE(is_bijection(detail::FeistelPermutation(n, 3), n));
    }
  }
}

TEST_CASE("KeyedPermutation: a bijection on both sides of its table limit, shared by copies", "[detail_random]") {
  constexpr std::uint64_t limit = detail::KeyedPermutation::table_limit;
  for (const std::uint64_t n :
       std::initializer_list<std::uint64_t>{1, 2, 3, 17, 1000, limit - 1, limit, limit + 1, 100'003}) {
    for (std::uint64_t key = 0; key < 3; ++key) {
      CAPTURE(n, key);
      const detail::KeyedPermutation perm(n, detail::mix64(key));
      REQUIRE(perm.size() == n);
      REQUIRE(is_bijection(perm, n));
      // A copy made before the table is built and one made after give the same order.
      const detail::KeyedPermutation early(n, detail::mix64(key));
      const detail::KeyedPermutation early_copy = early;  // NOLINT(performance-unnecessary-copy-initialization)
      REQUIRE(early_copy(n - 1) == perm(n - 1));
      REQUIRE(early(0) == perm(0));
    }
  }
  // Above the limit the order is the FeistelPermutation of the same key.
  const detail::KeyedPermutation large(limit + 1, 42);
  const detail::FeistelPermutation feistel(limit + 1, 42);
  for (std::uint64_t i = 0; i < 100; ++i) REQUIRE(large(i) == feistel(i));
}

TEST_CASE("map: many lookups at once equal one at a time, forward and inverse", "[detail_random]") {
  constexpr std::uint64_t limit = detail::KeyedPermutation::table_limit;
  pcg32 config_rng(20261126U);
  // Sizes where the network's walk leaves [0, n) often (n just above a square), the table's
  // sizes, the smallest, and 2^62; lengths that are and are not a whole number of lanes.
  for (const std::uint64_t n : std::initializer_list<std::uint64_t>{1, 2, 3, 17, 257, 66050, limit, limit + 1,
                                                                    1'000'003, std::uint64_t{1} << 62U}) {
    for (const std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{53}}) {
      CAPTURE(n, length);
      std::vector<std::uint64_t> in(length);
      for (std::uint64_t& x : in) x = next64(config_rng) % n;
      const detail::FeistelPermutation feistel(n, 99);
      const detail::KeyedPermutation keyed(n, 99);
      std::vector<std::uint64_t> out(length);
      std::vector<std::uint64_t> back(length);
      feistel.map(in, out);
      feistel.map<true>(out, back);
      for (std::size_t i = 0; i < length; ++i) {
        REQUIRE(out[i] == feistel(in[i]));
        REQUIRE(back[i] == in[i]);
      }
      keyed.map(in, out);
      keyed.map<true>(out, back);
      for (std::size_t i = 0; i < length; ++i) {
        REQUIRE(out[i] == keyed(in[i]));
        REQUIRE(keyed.inverse(out[i]) == in[i]);
        REQUIRE(back[i] == in[i]);
      }
    }
  }
}

TEST_CASE("KeyedPermutation: looked up from several threads at once, before its table exists", "[detail_random]") {
  const detail::KeyedPermutation perm(detail::KeyedPermutation::table_limit, 7);
  std::vector<std::vector<std::uint64_t>> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 1000; ++i) seen[t].push_back(perm(i));
    });
  for (std::thread& thread : threads) thread.join();
  for (const std::vector<std::uint64_t>& values : seen) REQUIRE(values == seen[0]);
}

TEST_CASE("FeistelPermutation: huge n gives in-range, distinct values", "[detail_random]") {
  const std::uint64_t n =
      GENERATE(as<std::uint64_t>{}, two_pow(62), two_pow(62) - 1, two_pow(61) + 1, 3 * two_pow(40) + 7);
  CAPTURE(n);
  const detail::FeistelPermutation perm(n, 0x5eed);
  std::vector<std::uint64_t> positions;
  for (std::uint64_t i = 0; i < 1000; ++i) positions.push_back(i);
  for (std::uint64_t i = 0; i < 1000; ++i) positions.push_back(n - 1 - i);
  detail::Engine engine = detail::make_engine(1, n);
  for (int i = 0; i < 1000; ++i) positions.push_back(detail::bounded(engine, n));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());

  std::set<std::uint64_t> values;
  for (const std::uint64_t i : positions) {
    const std::uint64_t x = perm(i);
    REQUIRE(x < n);
    values.insert(x);
  }
  REQUIRE(values.size() == positions.size());
  // not the identity, nor anywhere near it: the first positions spread over the whole range
  REQUIRE(*values.rbegin() > n / 2);
}

TEST_CASE("FeistelPermutation: different keys give different permutations", "[detail_random]") {
  std::set<std::vector<std::uint64_t>> seen;
  for (std::uint64_t key = 0; key < 64; ++key) {
    const detail::FeistelPermutation perm(1000, key);
    std::vector<std::uint64_t> prefix;
    for (std::uint64_t i = 0; i < 16; ++i) prefix.push_back(perm(i));
    seen.insert(prefix);
  }
  REQUIRE(seen.size() == 64);
}

TEST_CASE("FeistelPermutation: near uniform over keys (chi-square, pairwise order)", "[detail_random]") {
  SECTION("n = 16: where element 0 lands, what lands at 0, and pairwise order") {
    constexpr std::uint64_t n = 16;
    constexpr std::uint64_t keys = 16000;
    std::vector<std::int64_t> landing(n, 0);   // position p with perm(p) == 0
    std::vector<std::int64_t> at_zero(n, 0);   // perm(0)
    std::vector<std::int64_t> less(n * n, 0);  // perm(i) < perm(j)
    // joint values of a few position pairs (neighbours, and positions sharing one half of their bits)
    constexpr std::array<std::array<std::size_t, 2>, 4> pairs{{{0, 1}, {0, 4}, {5, 10}, {3, 15}}};
    std::vector<std::vector<std::int64_t>> joint(pairs.size(), std::vector<std::int64_t>(n * n, 0));
    for (std::uint64_t key = 0; key < keys; ++key) {
      const detail::FeistelPermutation perm(n, key);
      std::array<std::uint64_t, n> values{};
      for (std::uint64_t i = 0; i < n; ++i) values[i] = perm(i);
      ++at_zero[values[0]];
      ++landing[static_cast<std::size_t>(std::find(values.begin(), values.end(), 0U) - values.begin())];
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j)
          if (values[i] < values[j]) ++less[i * n + j];
      for (std::size_t p = 0; p < pairs.size(); ++p) ++joint[p][values[pairs[p][0]] * n + values[pairs[p][1]]];
    }
    // 15 degrees of freedom: mean 15, sd 5.5
    CHECK(chi_square_uniform(landing) < 50.0);
    CHECK(chi_square_uniform(at_zero) < 50.0);
    // (perm(i), perm(j)) is uniform over the 240 pairs of distinct values: 239 degrees of freedom,
    // mean 239, sd 22
    for (std::size_t p = 0; p < pairs.size(); ++p) {
      CAPTURE(pairs[p][0], pairs[p][1]);
      std::vector<std::int64_t> distinct;
      for (std::size_t a = 0; a < n; ++a) {
        REQUIRE(joint[p][a * n + a] == 0);
        for (std::size_t b = 0; b < n; ++b)
          if (a != b) distinct.push_back(joint[p][a * n + b]);
      }
      CHECK(chi_square_uniform(distinct) < 400.0);
    }
    // each pair ~ Binomial(16000, 1/2): sd 0.004 of the fraction; allow 0.03
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j) {
        CAPTURE(i, j);
        CHECK(static_cast<double>(less[i * n + j]) / static_cast<double>(keys) == Approx(0.5).margin(0.03));
      }
  }
  SECTION("n = 1000 (cycle-walking): where position 0 lands, neighbours' order") {
    constexpr std::uint64_t n = 1000;
    constexpr std::uint64_t keys = 4000;
    std::vector<std::int64_t> deciles(10, 0);
    std::vector<std::int64_t> less(16, 0);
    for (std::uint64_t key = 0; key < keys; ++key) {
      const detail::FeistelPermutation perm(n, detail::derive(99, key));
      std::array<std::uint64_t, 17> values{};
      for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = perm(i);
      ++deciles[static_cast<std::size_t>(values[0] / 100)];
      for (std::size_t i = 0; i < 16; ++i)
        if (values[i] < values[i + 1]) ++less[i];
    }
    CHECK(chi_square_uniform(deciles) < 40.0);  // 9 degrees of freedom: mean 9, sd 4.2
    for (std::size_t i = 0; i < 16; ++i) {
      CAPTURE(i);
      // Binomial(4000, ~1/2): sd 0.008
      CHECK(static_cast<double>(less[i]) / static_cast<double>(keys) == Approx(0.5).margin(0.05));
    }
  }
}

TEST_CASE("mix64 and derive: pinned values", "[detail_random]") {
  // mix64 is the splitmix64 finalizer: splitmix64 seeded with 0 outputs mix64(k * 0x9e3779b97f4a7c15)
  // for k = 1, 2, 3, and these are its published first outputs.
  STATIC_REQUIRE(detail::mix64(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL);
  STATIC_REQUIRE(detail::mix64(2 * 0x9e3779b97f4a7c15ULL) == 0x6e789e6aa1b965f4ULL);
  STATIC_REQUIRE(detail::mix64(3 * 0x9e3779b97f4a7c15ULL) == 0x06c45d188009454fULL);
  STATIC_REQUIRE(detail::mix64(0) == 0);
  STATIC_REQUIRE(detail::mix64(1) == 0x5692161d100b05e5ULL);
  // derive's values, pinned: a change here changes every sampler's stream.
  STATIC_REQUIRE(detail::derive(0, 0) == 0x48218226ff3cd4bfULL);
  STATIC_REQUIRE(detail::derive(1, 2) == 0xf2826f98653e9e57ULL);
  STATIC_REQUIRE(detail::derive(2, 1) == 0x081a5c1377856b73ULL);
  STATIC_REQUIRE(cs::detail::RngAccess::key(cs::Rng(7), 3, cs::detail::Purpose{1}) == 0xdfd36d8dc819bc44ULL);
  STATIC_REQUIRE(cs::detail::RngAccess::key(cs::Rng(7).spawn(2), 0, cs::detail::Purpose{2}) == 0xce0d0ae759a863f8ULL);
}

TEST_CASE("mix64: every input bit affects every output bit (avalanche)", "[detail_random]") {
  detail::Engine engine = detail::make_engine(3, 3);
  constexpr int inputs = 200;
  std::array<std::int64_t, 64> flips{};       // output bits flipped, summed, per input bit
  std::array<std::array<int, 64>, 64> hit{};  // input bit i ever flipped output bit j
  for (int t = 0; t < inputs; ++t) {
    const std::uint64_t x = next64(engine);
    const std::uint64_t y = detail::mix64(x);
    for (unsigned bit = 0; bit < 64; ++bit) {
      const std::uint64_t diff = y ^ detail::mix64(x ^ (std::uint64_t{1} << bit));
      flips[bit] += std::popcount(diff);
      for (unsigned out = 0; out < 64; ++out)
        if (((diff >> out) & 1U) != 0) hit[bit][out] = 1;
    }
  }
  for (unsigned bit = 0; bit < 64; ++bit) {
    CAPTURE(bit);
    // 200 * 64 output bits, each flipping with probability ~1/2: mean 32, sd 0.28 per input
    CHECK(static_cast<double>(flips[bit]) / inputs == Approx(32.0).margin(2.0));
    CHECK(std::accumulate(hit[bit].begin(), hit[bit].end(), 0) == 64);
  }
}

TEST_CASE("derive: order matters and distinct inputs give distinct keys", "[detail_random]") {
  STATIC_REQUIRE(detail::derive(1, 2) != detail::derive(2, 1));
  STATIC_REQUIRE(detail::derive(detail::derive(9, 1), 2) != detail::derive(detail::derive(9, 2), 1));
  std::set<std::uint64_t> keys;
  for (std::uint64_t parent = 0; parent < 32; ++parent)
    for (std::uint64_t value = 0; value < 32; ++value) keys.insert(detail::derive(parent, value));
  REQUIRE(keys.size() == 32 * 32);
}

TEST_CASE("Rng: seed, spawn and key are deterministic, and spawn paths are ordered", "[detail_random]") {
  constexpr cs::Rng root(7);
  STATIC_REQUIRE(root.seed() == 7);
  STATIC_REQUIRE(root == cs::Rng(7));
  STATIC_REQUIRE(root != cs::Rng(8));
  STATIC_REQUIRE(cs::Rng() == cs::Rng(cs::default_seed));

  STATIC_REQUIRE(root.spawn(3) == root.spawn(3));
  STATIC_REQUIRE(root.spawn(3) != root.spawn(4));
  STATIC_REQUIRE(root.spawn(3) != root);
  STATIC_REQUIRE(root.spawn(3).seed() == 7);  // spawning keeps the seed, changes the path
  STATIC_REQUIRE(root.spawn(1).spawn(2) != root.spawn(2).spawn(1));
  STATIC_REQUIRE(root.spawn(1).spawn(2) == root.spawn(1).spawn(2));
  STATIC_REQUIRE(root.spawn(0) != root);
  STATIC_REQUIRE(cs::Rng(1).spawn(0) != cs::Rng(0).spawn(1));

  STATIC_REQUIRE(cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{1}) ==
                 cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{1}));
  STATIC_REQUIRE(cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{1}) !=
                 cs::detail::RngAccess::key(root, 1, cs::detail::Purpose{0}));
  STATIC_REQUIRE(cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{1}) !=
                 cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{2}));
  STATIC_REQUIRE(cs::detail::RngAccess::key(root, 0, cs::detail::Purpose{1}) !=
                 cs::detail::RngAccess::key(root.spawn(1), 0, cs::detail::Purpose{1}));

  // different ranks and epochs never share a key, for a run of them
  std::set<std::uint64_t> keys;
  for (std::uint64_t rank = 0; rank < 16; ++rank)
    for (std::uint64_t epoch = 0; epoch < 16; ++epoch)
      for (std::uint64_t purpose = 1; purpose <= 2; ++purpose)
        keys.insert(cs::detail::RngAccess::key(root.spawn(rank), epoch, cs::detail::Purpose{purpose}));
  REQUIRE(keys.size() == 16 * 16 * 2);
}

TEST_CASE("pinned streams: make_engine, bounded, FeistelPermutation, KeyedPermutation, partial_shuffle",
          "[detail_random]") {
  // Computed once and stored: these pin the random streams across compilers, standard libraries and
  // platforms (pcg32 and our own bounded draws are fully specified). If this fails, every
  // sampler's order for a given seed has changed.
  SECTION("raw pcg32 output of make_engine") {
    detail::Engine engine = detail::make_engine(99, 0);
    const std::array<std::uint32_t, 4> expected{3698408441U, 1272162626U, 981622030U, 111686012U};
    for (const std::uint32_t value : expected) REQUIRE(engine() == value);
  }
  SECTION("bounded over both the 32-bit and the 64-bit paths") {
    detail::Engine engine = detail::make_engine(12345, 6);
    const std::array<std::uint64_t, 10> bounds{
        10, 1000, 1, 2, 3, two_pow(32) - 1, two_pow(32), two_pow(32) + 1, two_pow(62), 6};
    const std::array<std::uint64_t, 10> expected{
        0ULL, 39ULL, 0ULL, 0ULL, 1ULL, 297359363ULL, 1248614069ULL, 2681191829ULL, 3026894525833588739ULL, 1ULL};
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      CAPTURE(i);
      REQUIRE(detail::bounded(engine, bounds[i]) == expected[i]);
    }
  }
  SECTION("FeistelPermutation(10, 99) and (100000, 99)") {
    const detail::FeistelPermutation perm(10, 99);
    const std::array<std::uint64_t, 10> expected{3, 0, 9, 8, 1, 6, 4, 7, 5, 2};
    for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(perm(i) == expected[i]);
    const detail::FeistelPermutation large(100'000, 99);
    const std::array<std::uint64_t, 6> large_expected{24329, 18744, 16952, 56439, 71978, 53719};
    for (std::uint64_t i = 0; i < 6; ++i) REQUIRE(large(i) == large_expected[i]);
  }
  SECTION("KeyedPermutation(10, 99): the Fisher-Yates table") {
    const detail::KeyedPermutation perm(10, 99);
    const std::array<std::uint64_t, 10> expected{9, 4, 8, 6, 0, 1, 7, 2, 3, 5};
    for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(perm(i) == expected[i]);
  }
  SECTION("partial_shuffle of 0..9") {
    detail::Engine engine = detail::make_engine(7, 1);
    std::array<std::int64_t, 10> values{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    detail::partial_shuffle(engine, std::span<std::int64_t>(values), 10);
    REQUIRE(values == std::array<std::int64_t, 10>{2, 5, 3, 8, 6, 4, 9, 7, 0, 1});
  }
}

}  // namespace test_detail_random
