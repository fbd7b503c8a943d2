// SPDX-License-Identifier: MIT
#pragma once

// What the checkpoint tests share: a directory of their own under the system's temporary
// directory (removed with everything in it, also when a test fails), the files in it, and the
// raw bytes of a file.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace support {

/// A new, empty directory under `std::filesystem::temp_directory_path()`, removed with its
/// contents by the destructor. Its name holds the process id (ctest runs test cases in parallel
/// processes) and a count (one process makes many).
class TempDir {
 public:
  TempDir() {
    static std::uint64_t made = 0;
    const std::filesystem::path base = std::filesystem::temp_directory_path();
    // create_directory is false for a name that exists (a crashed run's): the next count is tried.
    do path_ = base / fmt::format("chunksampler-test-{}-{}", ::getpid(), made++);
    while (!std::filesystem::create_directory(path_));
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover directory is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// The names in `dir`, sorted.
[[nodiscard]] inline std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::ranges::sort(names);
  return names;
}

/// The names in `dir` that are `write_atomically`'s temporary files (`<name>.tmp-<pid>-<n>`).
[[nodiscard]] inline std::vector<std::string> temporaries(const std::filesystem::path& dir) {
  std::vector<std::string> names = entries(dir);
  std::erase_if(names, [](const std::string& name) { return name.find(".tmp-") == std::string::npos; });
  return names;
}

/// The bytes of the file at `path`.
[[nodiscard]] inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Replaces the file at `path` with `bytes`, plainly: a file save_state did not write.
inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  REQUIRE(out.good());
}

/// Changes the byte at `offset` of the file at `path` to `byte`, in place (no truncation: ext4
/// flushes a file truncated to 0 and written again when it is closed, which takes milliseconds).
inline void overwrite_byte(const std::filesystem::path& path, std::size_t offset, char byte) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(byte);
  file.close();
  REQUIRE(file.good());
}

}  // namespace support
