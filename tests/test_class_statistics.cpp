// SPDX-License-Identifier: MIT
// ClassSampler's frequencies against chi-square bounds: classes follow the weights renormalized
// over the classes a range can serve, starts are uniform within a class, and runs are drawn by the
// starts they hold.

#include <chunksampler/class_sampler.hpp>

#include "class_support.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace test_class_statistics {

namespace {

namespace cs = chunksampler;
using namespace support::classes;
using support::chi_square_999;
using support::chi_square_by_key;

// "key:count key:count ..." for messages.
template <class Key, class Value>
std::string show(const std::map<Key, Value>& counts) {
  std::string text;
  for (const auto& [k, v] : counts) text += fmt::format("{}{}:{}", text.empty() ? "" : " ", k, v);
  return text;
}

}  // namespace

TEST_CASE("ClassSampler: class frequencies follow the renormalized weights (chi-square)", "[class]") {
  // Class 5 lives outside the mask below, class 2 is excluded (its runs are short), and classes 3
  // and 4 have runs the mask cuts; runs of a class differ in length, so drawing a run first (as
  // annbatch does) would not be uniform over starts.
  const Codes codes =
      runs_of({{5, 10}, {3, 30}, {0, 8}, {1, 12}, {4, 8}, {2, 3}, {0, 20}, {4, 8}, {1, 9}, {2, 1}, {4, 12}, {3, 25}});
  const std::vector<double> weights{1, 2, 0, 3, 4, 5};
  struct Case {
    std::int64_t chunk, preload, batch;
    std::optional<cs::Slice> mask;
  };
  // g = 1 (a class per batch), g = 2 (chunk 6, batch 4: three batches per class group), and
  // masks that drop class 5 and clip class 3's runs at both ends ([15, 131)), or leave a 4-row
  // piece of class 4's last run that cannot hold a chunk ([17, 113)).
  const Case cases[] = {
      {8, 4, 8, std::nullopt}, {6, 6, 4, std::nullopt}, {8, 4, 8, cs::Slice{15, 131}}, {6, 6, 4, cs::Slice{17, 113}}};
  std::uint64_t seed = 2024;
  for (const Case& k : cases) {
    const cs::Slice range = k.mask.value_or(cs::Slice{0, std::ssize(codes)});
    INFO("chunk " << k.chunk << " batch " << k.batch << " range [" << range.start << ", " << range.stop << ")");
    constexpr std::int64_t n_groups = 20'000;
    const std::int64_t group = k.batch / std::gcd(k.chunk, k.batch);
    cs::ClassSampler sampler(codes, {.chunk_size = k.chunk,
                                     .preload_nchunks = k.preload,
                                     .batch_size = k.batch,
                                     .mask = k.mask,
                                     .seed = seed++,  // class draws depend on the seed and group alone
                                     .num_samples = n_groups * group * k.chunk,
                                     .class_weights = weights});
    const support::EpochRecord rec = support::walk(sampler, std::ssize(codes));
    REQUIRE(std::ssize(rec.chunks) == n_groups * group);

    // One class per group: count the classes of the groups' first chunks.
    std::map<std::int32_t, std::int64_t> per_class;
    std::map<std::int32_t, std::map<std::int64_t, std::int64_t>> per_start;
    for (std::size_t i = 0; i < rec.chunks.size(); ++i) {
      const std::int32_t c = codes[static_cast<std::size_t>(rec.chunks[i].start)];
      if (static_cast<std::int64_t>(i) % group == 0) ++per_class[c];
      ++per_start[c][rec.chunks[i].start];
    }
    const auto probabilities = class_probabilities(codes, weights, k.chunk, range);
    CHECK(probabilities.size() == (k.mask ? 4U : 5U));
    for (const auto& [c, count] : per_class) CHECK(probabilities.contains(c));
    const double stat = chi_square_by_key(per_class, probabilities);
    const double bound = chi_square_999(static_cast<double>(probabilities.size() - 1));
    INFO(fmt::format("class counts {} chi2 {:.2f} bound {:.2f}", show(per_class), stat, bound));
    CHECK(stat < bound);

    // Within each class, every valid start alike (per start), hence runs by their start counts.
    const auto starts = valid_starts(codes, weights, k.chunk, range);
    for (const auto& [c, list] : starts) {
      std::map<std::int64_t, double> uniform;
      for (const std::int64_t s : list) uniform[s] = 1.0 / static_cast<double>(list.size());
      const auto& observed = per_start[c];
      for (const auto& [s, count] : observed) REQUIRE(uniform.contains(s));
      if (list.size() > 1) {
        const double s_stat = chi_square_by_key(observed, uniform);
        const double s_bound = chi_square_999(static_cast<double>(list.size() - 1));
        INFO("class " << c << ": " << list.size() << " starts, chi2 " << s_stat << " bound " << s_bound);
        CHECK(s_stat < s_bound);
      }
      // The runs of the class, each weighted by the starts it holds in the range.
      std::map<std::int64_t, std::int64_t> per_run;
      std::map<std::int64_t, double> run_share;
      for (const std::int64_t s : list) {
        std::int64_t run_start = s;
        while (run_start > 0 && codes[static_cast<std::size_t>(run_start - 1)] == c) --run_start;
        run_share[run_start] += 1.0 / static_cast<double>(list.size());
        per_run[run_start] += observed.contains(s) ? observed.at(s) : 0;
      }
      if (run_share.size() > 1) {
        const double r_stat = chi_square_by_key(per_run, run_share);
        INFO("class " << c << " by run: " << show(per_run) << " chi2 " << r_stat);
        CHECK(r_stat < chi_square_999(static_cast<double>(run_share.size() - 1)));
      }
    }
  }
}

}  // namespace test_class_statistics
