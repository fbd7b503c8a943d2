// SPDX-License-Identifier: MIT
#pragma once

// The statistics of the uniformity tests: one chi-square statistic, the Wilson-Hilferty
// approximation that relates a chi-square to the standard normal (a z-score of a statistic, and
// the statistic's 0.999 quantile), and the z-score of a count of fair coin tosses. Every test that
// compares counts with their expectation uses these, so a threshold reads the same everywhere.
// Tests whose bounds are exact tabulated quantiles (27.877 for 9 degrees of freedom, say) keep
// them as literals: the approximation is above the exact quantile for few degrees of freedom,
// which would loosen them.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace support {

/// Pearson's chi-square statistic, sum over the cells of (observed - expected)^2 / expected, of
/// counts `observed` against the counts `expected` of the same cells. `Count` is any arithmetic
/// type; it defaults to double so that braced lists of doubles can be passed.
template <class Count = double>
[[nodiscard]] double chi_square(const std::vector<Count>& observed, const std::vector<double>& expected) {
  if (observed.size() != expected.size())
    throw std::invalid_argument("chi_square: observed and expected differ in size");
  double sum = 0.0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double d = static_cast<double>(observed[i]) - expected[i];
    sum += d * d / expected[i];
  }
  return sum;
}

/// `chi_square` against the uniform distribution: every cell expects the mean count.
template <class Count>
[[nodiscard]] double chi_square_uniform(const std::vector<Count>& observed) {
  const Count total = std::accumulate(observed.begin(), observed.end(), Count{0});
  const double mean = static_cast<double>(total) / static_cast<double>(observed.size());
  return chi_square(observed, std::vector<double>(observed.size(), mean));
}

/// `chi_square` of `observed` counts against `probabilities` over the same keys: a key missing
/// from `observed` counts 0, and each expected count is its probability times the total.
template <class Key>
[[nodiscard]] double chi_square_by_key(const std::map<Key, std::int64_t>& observed,
                                       const std::map<Key, double>& probabilities) {
  std::int64_t n = 0;
  for (const auto& [k, count] : observed) n += count;
  std::vector<std::int64_t> counts;
  std::vector<double> expected;
  for (const auto& [k, p] : probabilities) {
    const auto it = observed.find(k);
    counts.push_back(it == observed.end() ? 0 : it->second);
    expected.push_back(p * static_cast<double>(n));
  }
  return chi_square(counts, expected);
}

/// The standard normal's 0.999 quantile.
inline constexpr double normal_quantile_999 = 3.090232306167813;

/// The z-score of a chi-square statistic `chi` with `df` degrees of freedom, by Wilson and
/// Hilferty: (chi / df)^(1/3) is nearly normal with mean 1 - a and variance a, a = 2 / (9 df).
[[nodiscard]] inline double wilson_hilferty_z(double chi, double df) {
  const double a = 2.0 / (9.0 * df);
  return (std::cbrt(chi / df) - (1.0 - a)) / std::sqrt(a);
}

/// `chi_square_by_key` as its Wilson-Hilferty z-score, with one degree of freedom fewer than keys.
template <class Key>
[[nodiscard]] double chi_square_z(const std::map<Key, std::int64_t>& observed,
                                  const std::map<Key, double>& probabilities) {
  return wilson_hilferty_z(chi_square_by_key(observed, probabilities), static_cast<double>(probabilities.size() - 1));
}

/// The 0.999 quantile of chi-square with `df` degrees of freedom, the inverse of
/// `wilson_hilferty_z` at z = 3.09: df (1 - a + z sqrt(a))^3. Within 3% of the exact quantile from
/// df = 1 on, above it for small df.
[[nodiscard]] inline double chi_square_999(double df) {
  const double a = 2.0 / (9.0 * df);
  const double t = 1.0 - a + normal_quantile_999 * std::sqrt(a);
  return df * t * t * t;
}

/// |z| of `heads` in `tosses` tosses of a fair coin: |2 heads - tosses| / sqrt(tosses), the normal
/// approximation of Binomial(tosses, 1/2).
[[nodiscard]] inline double fair_coin_z(std::int64_t heads, std::int64_t tosses) {
  const auto total = static_cast<double>(tosses);
  return std::abs(2.0 * static_cast<double>(heads) - total) / std::sqrt(total);
}

}  // namespace support
