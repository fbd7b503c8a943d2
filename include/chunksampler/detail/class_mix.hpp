// SPDX-License-Identifier: MIT
#pragma once

#include <chunksampler/detail/random.hpp>
#include <chunksampler/detail/shares.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::detail {

/// The class of every chunk of a stratified epoch, window by window, any window computable alone
/// in O(P log classes) after O(classes) work per epoch.
///
/// An epoch of `T` chunks is `K = T / P` whole windows (requests) of `P` chunks and, when
/// `m = T mod P > 0`, a last window of `m`. Class `c` has the share `s_c = q_c / Q` (exact
/// integers, so every platform rounds alike). The guarantee: every window of `n` chunks holds
/// `floor(n s_c)` or `ceil(n s_c)` chunks of class `c`, and the epoch `floor(T s_c)` or
/// `ceil(T s_c)`: each within one chunk of the weights, exactly `n s_c` when that is whole.
///
/// Windows. Each holds `floor(n s_c)` chunks of every class plus one "extra" chunk for some
/// classes: the fractions `f_c = frac(P s_c)` of a whole window sum to a whole number `R` of
/// extras (those of the last window, `g_c = frac(m s_c)`, to `R'`), which go to `R` distinct
/// classes with `f_c > 0`. Whichever they are, every count is `floor` or `ceil` of `n s_c`.
///
/// The epoch (the fractions carried from window to window). Class `c` gets `E_c` extras in all,
/// `floor` or `ceil` of `tau_c = K f_c + g_c`, so its epoch count
/// `K floor(P s_c) + floor(m s_c) + E_c` is within one of `T s_c`. `E` is systematic sampling:
/// the fractions `frac(tau_c)` laid end to end (their sum `U` is whole) and cut by the points
/// `u + j`, `j = 0..U-1`, `u` uniform in `[0, 1)`; a class rounds up when a point lands in its
/// segment, with probability `frac(tau_c)`, so the epoch's expected count is exactly `T s_c`.
///
/// The last window. `E_c` splits into `b_c` (0 or 1, the last window's extra, only if `g_c > 0`)
/// and `e_c = E_c - b_c` (the whole windows' extras, `0 <= e_c <= K`, 0 if `f_c = 0`), with
/// `sum b = R'`. Some classes have no choice: with `f_c = 0` (or `K = 0`) `b_c = E_c`; with
/// `tau_c < 1`, `E_c = 0` forces `b_c = 0`; with `tau_c > K`, `E_c = K + 1` forces `b_c = 1`.
/// Laying the segments out as [`tau < 1`][`f = 0`][`tau > K`][the rest] makes them fit. The
/// forced ones (`f = 0` with `E = 1`, `tau > K` with `E = K + 1`) are rounded up inside the stretch
/// [`f = 0`][`tau > K`], no longer than the sum of their `g_c` (`frac(tau_c) <= g_c` there), so
/// there are at most `R'` of them, a whole number at least that sum. The forced zeros (`f = 0` or
/// `tau < 1`, with `E = 0`) are rounded down inside the stretch [`tau < 1`][`f = 0`], where
/// `1 - frac(tau_c) <= 1 - g_c`, so there are at most `#{g > 0} - R'` of them. What the forced
/// ones leave of `R'` goes to a uniform choice among the classes with a choice, which are enough.
///
/// Spreading `e` over the whole windows. The `e_c` are laid end to end on slots `[0, K R)`;
/// window `k` takes the slots `sigma(k) + i K`, `i = 0..R-1`: `R` slots, each of another class,
/// since a class's `e_c <= K` slots are consecutive. `sigma(k) = (g k + h) mod K` with `g` near
/// `K / phi` and coprime with `K` (a golden-ratio stride), `h` uniform: it spreads each class's
/// extras evenly over the epoch, so any run of windows (a rank's block in global mode) and every
/// worker's share (windows `i, i + W, ...`) also stays close to the weights.
///
/// Why not the per-class closed form `N_c(k) = floor(k P s_c + u_c)` (extras in windows
/// `[0, k)`): it keeps each class within one, but the classes' counts in a window need not sum to
/// `P`, and no choice of offsets fixes that for three classes or more.
class ClassMix {
 public:
  /// The mix of an epoch of `n_chunks` chunks in windows of `per_window`, over classes with the
  /// shares `shares` (each >= 1, their sum below 2^63), drawn from the key `key`.
  ClassMix(std::span<const std::uint64_t> shares, std::int64_t per_window, std::int64_t n_chunks, std::uint64_t key)
      : per_window_(per_window), full_windows_(n_chunks / per_window), last_chunks_(n_chunks % per_window) {
    const std::size_t n = shares.size();
    const std::uint64_t total = std::accumulate(shares.begin(), shares.end(), std::uint64_t{0});
    const auto k_windows = static_cast<std::uint64_t>(full_windows_);
    enum class Kind : std::uint8_t { fixed, below_one, last_only, above_k, other };
    std::vector<Kind> kind(n, Kind::fixed);
    std::vector<std::int64_t> rounded(n);    // floor(tau_c)
    std::vector<std::uint64_t> fraction(n);  // frac(tau_c) * total
    std::vector<std::int64_t> last_base(n);  // floor(m s_c)
    std::vector<bool> last_fraction(n);      // g_c > 0
    // R and R' are what the floors leave of a window: sums of the fractions times `total`
    // would pass 2^64 with a few hundred classes.
    std::int64_t whole_floors = 0;
    std::int64_t last_floors = 0;
    for (std::size_t c = 0; c < n; ++c) {
      const QuotientRemainder whole = mul_div(static_cast<std::uint64_t>(per_window), shares[c], total);
      const QuotientRemainder last = mul_div(static_cast<std::uint64_t>(last_chunks_), shares[c], total);
      const std::uint64_t f = full_windows_ > 0 ? whole.remainder : 0;
      if (full_windows_ > 0 && whole.quotient > 0) base_.push_back({c, static_cast<std::int64_t>(whole.quotient)});
      last_base[c] = static_cast<std::int64_t>(last.quotient);
      last_fraction[c] = last.remainder > 0;
      whole_floors += static_cast<std::int64_t>(whole.quotient);
      last_floors += static_cast<std::int64_t>(last.quotient);
      // tau_c * total = K f + g, below (K + 1) * total: its quotient fits, its remainder is frac.
      const QuotientRemainder tau = div_wide(add_wide(mul_wide(k_windows, f), {0, last.remainder}), total);
      rounded[c] = static_cast<std::int64_t>(tau.quotient);
      fraction[c] = tau.remainder;
      if (last.remainder > 0 && f == 0) kind[c] = Kind::last_only;
      else if (last.remainder > 0 && tau.quotient == 0) kind[c] = Kind::below_one;
      else if (last.remainder > 0 && tau.quotient == k_windows && tau.remainder > 0) kind[c] = Kind::above_k;
      else if (f > 0 || last.remainder > 0) kind[c] = Kind::other;
    }
    extras_ = per_window_ - whole_floors;
    const std::int64_t last_extras = last_chunks_ - last_floors;

    // E: systematic sampling over frac(tau), in the order that lets the forced classes fit.
    std::vector<std::size_t> order;
    order.reserve(n);
    for (const Kind k : {Kind::below_one, Kind::last_only, Kind::above_k, Kind::other})
      for (std::size_t c = 0; c < n; ++c)
        if (kind[c] == k) order.push_back(c);
    Engine offset_engine = make_engine(key, 0);
    const std::uint64_t u = bounded(offset_engine, total);
    // Points u, u + total, u + 2 total, ... below x (in units of 1 / total).
    const auto points_below = [&](Wide x) -> std::uint64_t {
      if (x.hi == 0 && x.lo <= u) return 0;
      const Wide past = add_wide(x, {~std::uint64_t{0}, ~u});  // x - u - 1, modulo 2^128
      return div_wide(past, total).quotient + 1;
    };
    std::vector<std::int64_t> extras(n);  // E_c, then e_c
    Wide cumulative{0, 0};
    std::uint64_t below = 0;
    for (const std::size_t c : order) {
      cumulative = add_wide(cumulative, {0, fraction[c]});
      const std::uint64_t now = points_below(cumulative);
      extras[c] = rounded[c] + static_cast<std::int64_t>(now - below);
      below = now;
    }

    // The last window's extras: the forced ones, then a uniform choice among the free ones.
    std::vector<std::int64_t> last_extra(n, 0);
    std::vector<std::size_t> choosable;
    std::int64_t forced = 0;
    for (std::size_t c = 0; c < n; ++c) {
      if (!last_fraction[c]) continue;
      const bool must =
          kind[c] == Kind::last_only ? extras[c] == 1 : kind[c] == Kind::above_k && extras[c] == full_windows_ + 1;
      const bool may = kind[c] != Kind::last_only && extras[c] >= 1 && !must;
      if (must) {
        last_extra[c] = 1;
        ++forced;
      } else if (may) {
        choosable.push_back(c);
      }
    }
    const std::int64_t chosen = last_extras - forced;  // in [0, choosable.size()], by the layout above
    Engine choice_engine = make_engine(key, 1);
    partial_shuffle(choice_engine, std::span<std::size_t>(choosable), static_cast<std::size_t>(chosen));
    for (std::int64_t i = 0; i < chosen; ++i) last_extra[choosable[static_cast<std::size_t>(i)]] = 1;

    extras_end_.resize(n);
    std::int64_t end = 0;
    for (std::size_t c = 0; c < n; ++c) {
      const std::int64_t y = last_base[c] + last_extra[c];
      if (last_chunks_ > 0 && y > 0) last_.push_back({c, y});
      if (full_windows_ > 0) end += extras[c] - last_extra[c];
      extras_end_[c] = end;
    }
    if (full_windows_ > 0) {
      stride_ = mul_wide(k_windows, 0x9e3779b97f4a7c15ULL).hi;  // floor(K / phi)
      if (stride_ == 0) stride_ = 1;
      while (std::gcd(stride_, k_windows) != 1) ++stride_;
      Engine shift_engine = make_engine(key, 2);
      shift_ = bounded(shift_engine, k_windows);
    }
  }

  /// Chunks per whole window.
  [[nodiscard]] std::int64_t per_window() const noexcept { return per_window_; }
  /// Whole windows: requests `[0, full_windows())` hold `per_window()` chunks.
  [[nodiscard]] std::int64_t full_windows() const noexcept { return full_windows_; }
  /// Chunks of the last, partial window (request `full_windows()`), 0 if there is none.
  [[nodiscard]] std::int64_t last_chunks() const noexcept { return last_chunks_; }

  /// The classes of window `k`'s chunks (indices into the shares), in a fixed order: the
  /// `floor(n s_c)` of every class, then the extras. `out` holds the window's chunks.
  void classes_of(std::int64_t k, std::span<std::int64_t> out) const noexcept {
    std::size_t at = 0;
    const auto put = [&](std::size_t c, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i) out[at++] = static_cast<std::int64_t>(c);
    };
    if (k == full_windows_) {
      for (const auto& [c, count] : last_) put(c, count);
      return;
    }
    for (const auto& [c, count] : base_) put(c, count);
    const auto windows = static_cast<std::uint64_t>(full_windows_);
    const std::uint64_t slot = (mul_div(stride_, static_cast<std::uint64_t>(k), windows).remainder + shift_) % windows;
    for (std::int64_t i = 0; i < extras_; ++i) {
      const std::int64_t s = static_cast<std::int64_t>(slot) + i * full_windows_;
      const auto c = std::ranges::upper_bound(extras_end_, s) - extras_end_.begin();
      put(static_cast<std::size_t>(c), 1);
    }
  }

 private:
  std::int64_t per_window_;
  std::int64_t full_windows_;
  std::int64_t last_chunks_;
  std::int64_t extras_ = 0;                                 // R: extras per whole window
  std::vector<std::pair<std::size_t, std::int64_t>> base_;  // (class, floor(P s_c)) where > 0
  std::vector<std::int64_t> extras_end_;                    // class c's slots end here
  std::vector<std::pair<std::size_t, std::int64_t>> last_;  // (class, count) of the last window
  std::uint64_t stride_ = 1;
  std::uint64_t shift_ = 0;
};

}  // namespace chunksampler::detail
