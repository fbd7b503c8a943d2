// SPDX-License-Identifier: MIT
// How closely WeightedClassSampler's requests follow the class weights, independent against
// stratified composition: the comparison table of docs/tutorials/class-batches.md. Not a timing: it counts the classes
// of the chunks of every request of one epoch.
//
//   chunksampler_class_mix                       # 10,000 requests of 32 chunks, seed 0
//   chunksampler_class_mix --windows 1000 --seed 7

#include <chunksampler/weighted_class_sampler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace {

namespace cs = chunksampler;

constexpr std::int64_t chunk_size = 16;
constexpr std::int64_t per_window = 32;                           // chunks per request
const std::vector<double> weights{0.01, 0.25, 0.24, 0.25, 0.25};  // class 0 rare, class 1 a quarter
constexpr std::int64_t run_rows = 4'000;                          // one run per class

struct Spread {
  double rare_none = 0;         // share of requests without the rare class
  double rare_sd = 0;           // standard deviation of its count per request
  double rare_max = 0;          // largest |count - 32 * 0.01|
  double rare_block_max = 0;    // largest |count - 100 * 32 * 0.01| over runs of 100 consecutive requests
  std::int64_t rare_total = 0;  // its count over the epoch
  double quarter_off3 = 0;      // share of requests with |count - 8| >= 3 for the class of weight 0.25
  double quarter_sd = 0;
  double quarter_max = 0;
};

Spread measure(cs::Composition composition, std::int64_t windows, std::uint64_t seed) {
  std::vector<std::int32_t> codes;
  for (std::int32_t c = 0; c < static_cast<std::int32_t>(weights.size()); ++c)
    codes.insert(codes.end(), static_cast<std::size_t>(run_rows), c);
  cs::WeightedClassSampler sampler(codes, {.chunk_size = chunk_size,
                                           .preload_nchunks = per_window,
                                           .batch_size = 64,
                                           .seed = seed,
                                           .num_samples = windows * per_window * chunk_size,
                                           .class_weights = weights,
                                           .composition = composition});
  std::vector<std::int64_t> rare;
  std::vector<std::int64_t> quarter;
  for (const cs::LoadRequest& request : sampler.sample(std::ssize(codes))) {
    std::int64_t r = 0;
    std::int64_t q = 0;
    for (const cs::Slice& chunk : request.chunks) {
      const std::int32_t c = codes[static_cast<std::size_t>(chunk.start)];
      r += c == 0 ? 1 : 0;
      q += c == 1 ? 1 : 0;
    }
    rare.push_back(r);
    quarter.push_back(q);
  }
  const auto n = static_cast<double>(rare.size());
  const double rare_mean = static_cast<double>(per_window) * weights[0];
  const double quarter_mean = static_cast<double>(per_window) * weights[1];
  Spread s;
  double rare_sq = 0;
  double quarter_sq = 0;
  for (std::size_t k = 0; k < rare.size(); ++k) {
    const double dr = static_cast<double>(rare[k]) - rare_mean;
    const double dq = static_cast<double>(quarter[k]) - quarter_mean;
    s.rare_none += rare[k] == 0 ? 1 : 0;
    rare_sq += dr * dr;
    s.rare_max = std::max(s.rare_max, std::abs(dr));
    s.rare_total += rare[k];
    s.quarter_off3 += std::abs(dq) >= 3 ? 1 : 0;
    quarter_sq += dq * dq;
    s.quarter_max = std::max(s.quarter_max, std::abs(dq));
  }
  constexpr std::size_t block = 100;
  std::int64_t in_block = 0;
  for (std::size_t k = 0; k < rare.size(); ++k) {
    in_block += rare[k] - (k >= block ? rare[k - block] : 0);
    if (k + 1 >= block)
      s.rare_block_max =
          std::max(s.rare_block_max, std::abs(static_cast<double>(in_block) - static_cast<double>(block) * rare_mean));
  }
  s.rare_none /= n;
  s.rare_sd = std::sqrt(rare_sq / n);
  s.quarter_off3 /= n;
  s.quarter_sd = std::sqrt(quarter_sq / n);
  return s;
}

// `text` as an integer of at least `least`, or the program stops.
std::int64_t number(std::string_view text, std::int64_t least) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < least) {
    fmt::print(stderr, "not an integer >= {}: {}\n", least, text);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t windows = 10'000;
  std::uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--windows" && i + 1 < argc) {
      windows = number(argv[++i], 1);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = static_cast<std::uint64_t>(number(argv[++i], 0));
    } else {
      fmt::print("usage: {} [--windows N (10000)] [--seed S (0)]\n", argv[0]);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  const Spread ind = measure(cs::Composition::independent, windows, seed);
  const Spread str = measure(cs::Composition::stratified, windows, seed);
  fmt::print("{} requests of {} chunks, weights {}, seed {}\n\n", windows, per_window, fmt::join(weights, "/"), seed);
  fmt::print("| per request | independent | stratified |\n| --- | --- | --- |\n");
  fmt::print("| class of weight 0.01 (0.32 chunks expected): requests without it | {:.1f}% | {:.1f}% |\n",
             100 * ind.rare_none, 100 * str.rare_none);
  fmt::print("| its count: standard deviation | {:.3f} | {:.3f} |\n", ind.rare_sd, str.rare_sd);
  fmt::print("| its count: largest deviation | {:.2f} | {:.2f} |\n", ind.rare_max, str.rare_max);
  fmt::print("| its count in 100 consecutive requests (32 expected): largest deviation | {:.1f} | {:.1f} |\n",
             ind.rare_block_max, str.rare_block_max);
  fmt::print("| its count over the epoch ({:.0f} expected) | {} | {} |\n",
             static_cast<double>(windows * per_window) * weights[0], ind.rare_total, str.rare_total);
  fmt::print("| class of weight 0.25 (8 expected): requests off by 3 or more | {:.1f}% | {:.1f}% |\n",
             100 * ind.quarter_off3, 100 * str.quarter_off3);
  fmt::print("| its count: standard deviation | {:.3f} | {:.3f} |\n", ind.quarter_sd, str.quarter_sd);
  fmt::print("| its count: largest deviation | {:.0f} | {:.0f} |\n", ind.quarter_max, str.quarter_max);
}
