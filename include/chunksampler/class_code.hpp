// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>

namespace chunksampler {

/// A type that categorical codes (class codes, categories of a column) may have: any integer type
/// but `bool` and the character types, which hold text or truth values rather than codes.
/// AnnData's categorical codes are `int8` or `int16`; `ClassSampler` and `CategoryColumn` take it.
template <class T>
concept ClassCode = std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char> && !std::same_as<T, char8_t> &&
                    !std::same_as<T, char16_t> && !std::same_as<T, char32_t> && !std::same_as<T, wchar_t>;

}  // namespace chunksampler
