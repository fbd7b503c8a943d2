// SPDX-License-Identifier: MIT
#include "chaos/launch.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <spawn.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX names it

namespace chaos {

namespace {

// Every process descending from `root`, children before grandchildren, read from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // gone meanwhile
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    const std::size_t ppid_at = stat.find(' ', close + 2);
    if (ppid_at == std::string::npos) continue;
    try {
      children[static_cast<pid_t>(std::stol(stat.substr(ppid_at + 1)))].push_back(static_cast<pid_t>(std::stol(name)));
    } catch (const std::logic_error&) {
      continue;  // not a stat line this reader understands: not one of ours
    }
  }
  std::vector<pid_t> found;
  std::vector<pid_t> parents{root};
  while (!parents.empty()) {
    std::vector<pid_t> next;
    for (const pid_t parent : parents)
      for (const pid_t child : children[parent]) {
        found.push_back(child);
        next.push_back(child);
      }
    parents = std::move(next);
  }
  return found;
}

}  // namespace

bool Exit::success() const noexcept { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string Exit::describe() const {
  if (timed_out)
    return fmt::format("no end after {:.0f} s: killed, with {} process{} it had started", seconds, orphans_killed,
                       orphans_killed == 1 ? "" : "es");
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("wait status {}", status);
}

Exit run_with_timeout(const std::vector<std::string>& argv, const std::filesystem::path& output,
                      std::chrono::milliseconds timeout) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));  // posix_spawn's signature
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const auto start = std::chrono::steady_clock::now();
  // The driver's process group: a Ctrl-C at the terminal reaches mpirun too, which passes it on.
  const int error = posix_spawnp(&pid, args.front(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::system_error(error, std::generic_category(), fmt::format("cannot start {}", argv.front()));

  Exit exit;
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (;;) {
    const pid_t done = ::waitpid(pid, &exit.status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
    if (std::chrono::steady_clock::now() - start > timeout) {
      // The processes are found before any dies: an orphan would move to another parent.
      const std::vector<pid_t> started = descendants(pid);
      ::kill(pid, SIGKILL);
      for (const pid_t child : started) exit.orphans_killed += ::kill(child, SIGKILL) == 0 ? 1 : 0;
      while (::waitpid(pid, &exit.status, 0) < 0 && errno == EINTR) {}
      exit.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  exit.seconds = seconds();
  return exit;
}

}  // namespace chaos
