// SPDX-License-Identifier: MIT
#pragma once

// Checkpoint files that survive a crash: a state written atomically and durably, read back
// only whole and unchanged. POSIX file calls (open, fsync, rename): Linux, macOS and the BSDs.
// The umbrella header <chunksampler.hpp> does not include it.

#include <chunksampler/detail/errors.hpp>
#include <chunksampler/sampler_state.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace chunksampler {

namespace detail {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of iSCSI, ext4 and
// LevelDB: it detects every error within 32 consecutive bits, so every changed byte.
inline constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1U) ^ ((crc & 1U) != 0 ? 0x82F63B78U : 0U);
    table[i] = crc;
  }
  return table;
}();

[[nodiscard]] constexpr std::uint32_t crc32c(std::string_view bytes) noexcept {
  std::uint32_t crc = ~std::uint32_t{0};
  for (const char c : bytes) crc = (crc >> 8U) ^ crc32c_table[(crc ^ static_cast<unsigned char>(c)) & 0xFFU];
  return ~crc;
}

inline constexpr std::string_view checkpoint_magic = "chunksampler-checkpoint/";
inline constexpr int checkpoint_version = 1;
// No state text comes near this (a global-mode state names one run per rank it was dealt to);
// a larger file is not a checkpoint, and is refused by its size before it is read (and, should
// it grow while read, when the bytes read pass the limit).
inline constexpr std::int64_t max_checkpoint_bytes = std::int64_t{64} << 20U;

// An open file descriptor, closed on every path out.
class Descriptor {
 public:
  explicit Descriptor(int fd) noexcept : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  // Closes now, for the caller who must see close's error (a write the kernel failed late).
  [[nodiscard]] int close() noexcept {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

// `step` says what failed, for the file at `path`.
[[noreturn]] inline void throw_write(int error, std::string_view step, const std::filesystem::path& path) {
  throw StateWriteError(std::error_code(error, std::generic_category()),
                        fmt::format("write_atomically: {:?}: cannot {}", path.string(), step));
}

// Writes all of `bytes`, through short writes and signals.
inline int write_all(int fd, std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno;
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

inline int fsync_retrying(int fd) noexcept {
  int result = 0;
  do result = ::fsync(fd);
  while (result != 0 && errno == EINTR);
  return result == 0 ? 0 : errno;
}

// Reads the whole file at `path`, or throws `StateFileError` (missing, unreadable) or
// `StateFormatError` (too large to be a checkpoint).
[[nodiscard]] inline std::string read_checkpoint_file(const std::filesystem::path& path) {
  const auto fail = [&](int error, std::string_view what) {
    throw StateFileError(std::error_code(error, std::generic_category()),
                         fmt::format("load_state: checkpoint {:?} {}: {}", path.string(), what,
                                     std::error_code(error, std::generic_category()).message()));
  };
  int fd = -1;
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; a regular file ignores it.
  do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) fail(errno, errno == ENOENT ? "is missing" : "cannot be opened");
  const Descriptor file(fd);
  struct stat status{};
  if (::fstat(file.get(), &status) != 0) fail(errno, "cannot be read");
  // A FIFO or a device has no size to check and may never end: only regular files are read.
  if (S_ISDIR(status.st_mode)) fail(EISDIR, "is a directory");
  if (!S_ISREG(status.st_mode)) fail(EINVAL, "is not a regular file");
  if (status.st_size > max_checkpoint_bytes)
    throw_state_format("load_state: checkpoint {:?} is {} bytes, larger than {} bytes: not a chunksampler checkpoint",
                       path.string(), status.st_size, max_checkpoint_bytes);
  std::string text;
  std::array<char, 4096> block{};
  for (;;) {
    const ssize_t got = ::read(file.get(), block.data(), block.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(errno, "cannot be read");
    if (got == 0) return text;
    text.append(block.data(), static_cast<std::size_t>(got));
    if (static_cast<std::int64_t>(text.size()) > max_checkpoint_bytes)
      throw_state_format("load_state: checkpoint {:?} is larger than {} bytes: not a chunksampler checkpoint",
                         path.string(), max_checkpoint_bytes);
  }
}

// The state text of a checkpoint file's contents, checked whole and unchanged.
[[nodiscard]] inline std::string_view checkpoint_body(const std::filesystem::path& path, std::string_view text) {
  const std::string file = path.string();
  const std::size_t line_end = text.find('\n');
  const std::string_view header = text.substr(0, line_end);
  if (!header.starts_with(checkpoint_magic)) {
    if (text.starts_with("chunksampler-state/"))
      throw_state_format(
          "load_state: checkpoint {:?} holds bare state text with no checksum (not written by save_state); read it "
          "with SamplerState::parse",
          file);
    if (std::string_view(checkpoint_magic).starts_with(text))
      throw_state_format("load_state: checkpoint {:?} is truncated: {} bytes, not even its header", file, text.size());
    throw_state_format("load_state: checkpoint {:?} is not a chunksampler checkpoint: it must start with {:?}", file,
                       std::string(checkpoint_magic));
  }
  if (line_end == std::string_view::npos)
    throw_state_format("load_state: checkpoint {:?} is truncated: {} bytes, within its header line", file, text.size());
  // "<magic><version> bytes=<n> crc32c=<8 hex digits>"
  const std::string_view fields = header.substr(checkpoint_magic.size());
  const std::size_t space = fields.find(' ');
  const std::string_view version = fields.substr(0, space);
  const std::string expected = fmt::to_string(checkpoint_version);
  // Whole of `digits`, in `base`, fits `value`.
  const auto parses = [](std::string_view digits, auto& value, int base) {
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    return !digits.empty() && error == std::errc{} && end == digits.data() + digits.size();
  };
  if (version != expected) {
    int number = 0;
    if (parses(version, number, 10) && number > checkpoint_version)
      throw_state_mismatch(
          "load_state: checkpoint {:?} is of format {}{}, written by a newer version of chunksampler; this one reads "
          "format {}",
          file, checkpoint_magic, std::string(version), checkpoint_version);
    throw_state_format("load_state: checkpoint {:?} is corrupted: its header {:?} names no format this version knows",
                       file, std::string(header));
  }
  std::uint64_t bytes = 0;
  std::uint32_t recorded = 0;
  const std::string_view rest = space == std::string_view::npos ? std::string_view{} : fields.substr(space);
  constexpr std::string_view bytes_key = " bytes=";
  constexpr std::string_view crc_key = " crc32c=";
  const std::size_t crc_at = rest.find(crc_key);
  const std::string_view bytes_text =
      rest.starts_with(bytes_key) ? rest.substr(bytes_key.size(), crc_at - bytes_key.size()) : std::string_view{};
  const std::string_view crc_text =
      crc_at == std::string_view::npos ? std::string_view{} : rest.substr(crc_at + crc_key.size());
  const bool lower_hex =
      crc_text.size() == 8 && crc_text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!rest.starts_with(bytes_key) || crc_at == std::string_view::npos || !parses(bytes_text, bytes, 10) ||
      !lower_hex || !parses(crc_text, recorded, 16))
    throw_state_format(
        "load_state: checkpoint {:?} is corrupted: its header {:?} must read \"{}{} bytes=<n> crc32c=<8 hex digits>\"",
        file, std::string(header), checkpoint_magic, checkpoint_version);
  const std::string_view body = text.substr(line_end + 1);
  if (body.size() < bytes)
    throw_state_format("load_state: checkpoint {:?} is truncated: {} of the {} bytes its header promises after it",
                       file, body.size(), bytes);
  if (body.size() > bytes)
    throw_state_format("load_state: checkpoint {:?} is corrupted: {} bytes after its header, which promises {}", file,
                       body.size(), bytes);
  const std::uint32_t actual = crc32c(body);
  if (actual != recorded)
    throw_state_format(
        "load_state: checkpoint {:?} is corrupted: its state's CRC-32C is {:08x}, its header records {:08x}", file,
        actual, recorded);
  if (!body.ends_with('\n'))
    throw_state_format("load_state: checkpoint {:?} is corrupted: its state does not end its line", file);
  return body.substr(0, body.size() - 1);
}

// Runs `body`; a state error it throws is thrown again, of the same type, naming the file.
template <class Body>
decltype(auto) naming_file(const std::filesystem::path& path, Body body) {
  try {
    return body();
  } catch (const StateMismatchError& e) {
    throw StateMismatchError(fmt::format("load_state: checkpoint {:?}: {}", path.string(), e.what()));
  } catch (const StateFormatError& e) {
    throw StateFormatError(fmt::format("load_state: checkpoint {:?}: {}", path.string(), e.what()));
  }
}

}  // namespace detail

/// Replaces the file at `path` with `bytes` so that a reader, even after a crash or a power cut
/// at any moment, finds the old contents or the new ones, never a mix: the bytes go to a new
/// file beside it (`<name>.tmp-<pid>-<n>`), which is synced, renamed over `path`, and the
/// directory synced. Throws `StateWriteError` naming the step and the file: before the rename the
/// old contents stay in place and the temporary file is removed; after it (syncing the
/// directory failed) the new contents are in place but may not survive a power cut. A process
/// killed mid-write leaves its temporary file behind (nothing reads it). Use it for
/// what is saved with the sampler's state (a model's weights) when it lives in its own file.
///
///     cs::write_atomically("model.pt", bytes);
inline void write_atomically(const std::filesystem::path& path, std::string_view bytes) {
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  static std::atomic<std::uint64_t> counter{0};  // distinct names for the threads of one process
  std::filesystem::path temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temporary = directory / fmt::format("{}.tmp-{}-{}", path.filename().string(), ::getpid(), counter++);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    // EEXIST: left behind by an earlier process of the same pid, killed while writing.
    if (fd < 0 && !((errno == EEXIST && attempt < 100) || errno == EINTR))
      detail::throw_write(errno, fmt::format("create the temporary file {:?}", temporary.string()), path);
  }
  detail::Descriptor file(fd);
  const auto fail = [&](int error, std::string_view step) {
    ::unlink(temporary.c_str());
    detail::throw_write(error, fmt::format("{} the temporary file {:?}", step, temporary.string()), path);
  };
  if (const int error = detail::write_all(file.get(), bytes); error != 0) fail(error, "write");
  if (const int error = detail::fsync_retrying(file.get()); error != 0) fail(error, "sync");
  if (file.close() != 0) fail(errno, "close");
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail(errno, "rename over it");
  // The rename is durable once the directory is: until then a power cut may undo it.
  int dir_fd = -1;
  do dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  while (dir_fd < 0 && errno == EINTR);
  if (dir_fd < 0)
    detail::throw_write(errno, fmt::format("open its directory {:?} to sync it", directory.string()), path);
  const detail::Descriptor dir(dir_fd);
  // EINVAL: a file system that cannot sync a directory (some network ones), where rename is
  // made durable by the server instead.
  if (const int error = detail::fsync_retrying(dir.get()); error != 0 && error != EINVAL)
    detail::throw_write(error, fmt::format("sync its directory {:?}", directory.string()), path);
}

/// Writes `state` to the checkpoint file at `path`, atomically and durably (`write_atomically`):
/// a header line `chunksampler-checkpoint/1 bytes=<n> crc32c=<hex>`, then the state's text
/// (`SamplerState::to_string()`) on a line of its own, which the header's size and CRC-32C
/// cover. Throws `StateWriteError` when the file cannot be written (as `write_atomically`: the
/// previous checkpoint stays in place unless only the directory's sync failed).
///
///     if (++done % 100 == 0 && rank == 0) cs::save_state("job.state", sampler.state(done));
inline void save_state(const std::filesystem::path& path, const SamplerState& state) {
  std::string body = state.to_string();
  body += '\n';
  write_atomically(path, fmt::format("{}{} bytes={} crc32c={:08x}\n{}", detail::checkpoint_magic,
                                     detail::checkpoint_version, body.size(), detail::crc32c(body), body));
}

/// The state in the checkpoint file at `path` (written by `save_state`). Throws, naming the file
/// and what is wrong: `StateFileError` when it is missing or unreadable, `StateFormatError` when
/// it is truncated or corrupted (its size or CRC-32C differs from its header's, or its text is
/// not a state), `StateMismatchError` when another version of chunksampler wrote it. A file cut
/// at any byte, or with any byte changed, is one of these errors, never another state.
///
///     const cs::SamplerState state = cs::load_state("job.state");
[[nodiscard]] inline SamplerState load_state(const std::filesystem::path& path) {
  const std::string text = detail::read_checkpoint_file(path);
  const std::string_view body = detail::checkpoint_body(path, text);
  return detail::naming_file(path, [&] { return SamplerState::parse(body); });
}

/// Reads the checkpoint at `path` and restores `sampler` from it (`sampler.restore(state)`),
/// returning the state. Throws as `load_state` does, and `StateMismatchError` naming the file
/// when the state is of another configuration, seed or world size than `sampler`'s (the next
/// `sample()` refuses another `n_obs` than the state's).
///
///     std::int64_t done = 0;  // batches of the epoch, counted from its start
///     if (std::filesystem::exists("job.state")) done = cs::load_state("job.state", sampler).batches_done();
///     for (const cs::LoadRequest& request : sampler.sample(n_obs)) { /* the rest of the epoch */ }
template <class Sampler>
  requires requires(Sampler& s, const SamplerState& state) { s.restore(state); }
SamplerState load_state(const std::filesystem::path& path, Sampler& sampler) {
  SamplerState state = load_state(path);
  detail::naming_file(path, [&] { sampler.restore(state); });
  return state;
}

}  // namespace chunksampler
