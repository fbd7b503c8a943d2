// SPDX-License-Identifier: MIT
#include "chaos/launch.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <spawn.h>
#include <fcntl.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
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

// The name of system call `number`, for the calls a rank of a job blocks in; "#<number>" otherwise
// (and off Linux, whose /proc alone says which call a process is in).
std::string syscall_name(long number) {
#if defined(__linux__)
  struct Known {
    long number;
    const char* name;
  };
  static constexpr Known known[] = {
      {SYS_read, "read"},
      {SYS_write, "write"},
      {SYS_openat, "openat"},
      {SYS_close, "close"},
      {SYS_fsync, "fsync"},
      {SYS_fdatasync, "fdatasync"},
      {SYS_renameat2, "renameat2"},
      {SYS_futex, "futex"},
      {SYS_sched_yield, "sched_yield"},
      {SYS_nanosleep, "nanosleep"},
      {SYS_clock_nanosleep, "clock_nanosleep"},
      {SYS_wait4, "wait4"},
      {SYS_ppoll, "ppoll"},
      {SYS_epoll_pwait, "epoll_pwait"},
#ifdef SYS_rename  // not on every architecture (aarch64 has only renameat and renameat2)
      {SYS_rename, "rename"},
#endif
#ifdef SYS_poll
      {SYS_poll, "poll"},
#endif
#ifdef SYS_epoll_wait
      {SYS_epoll_wait, "epoll_wait"},
#endif
  };
  for (const Known& call : known)
    if (call.number == number) return call.name;
#endif
  return fmt::format("#{}", number);
}

// What process `pid` is doing now, from /proc; a process gone meanwhile reads as state '?'.
ProcessState read_state(pid_t pid) {
  const std::filesystem::path proc = std::filesystem::path("/proc") / std::to_string(pid);
  ProcessState found;
  found.pid = pid;
  const auto first_line = [&](const char* file) {
    std::ifstream in(proc / file);
    std::string line;
    std::getline(in, line);
    return line;
  };
  // "pid (comm) state ...": comm may hold spaces and parentheses.
  const std::string stat = first_line("stat");
  const std::size_t open = stat.find('(');
  const std::size_t close = stat.rfind(')');
  if (open != std::string::npos && close != std::string::npos && close > open && close + 2 < stat.size()) {
    found.name = stat.substr(open + 1, close - open - 1);
    found.state = stat[close + 2];
  }
  found.wchan = first_line("wchan");
  if (found.wchan == "0") found.wchan.clear();
  // "<number> <arguments...>", "running", or "-1 ..." (in no call); readable by the process's owner.
  const std::string call = first_line("syscall");
  const std::string number = call.substr(0, call.find(' '));
  if (number == "running") found.syscall = number;
  else if (!number.empty() && number != "-1") {
    try {
      found.syscall = syscall_name(std::stol(number));
    } catch (const std::logic_error&) {
      found.syscall = number;
    }
  }
  return found;
}

}  // namespace

std::string ProcessState::describe() const {
  const char* what = "";
  switch (state) {
    case 'R': what = " (running)"; break;
    case 'S': what = " (sleeping)"; break;
    case 'D': what = " (disk sleep)"; break;
    case 'T': what = " (stopped)"; break;
    case 'Z': what = " (zombie)"; break;
    default: break;
  }
  std::string text = fmt::format("{}{}", state, what);
  if (!syscall.empty() && syscall != "running") text += fmt::format(" in {}", syscall);
  if (!wchan.empty()) text += fmt::format(", kernel wait {}", wchan);
  return text;
}

bool Exit::success() const noexcept { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string Exit::describe() const {
  if (timed_out)
    return fmt::format("no end after {:.0f} s: killed, with {} process{} it had started, after {:.0f} s without "
                       "progress",
                       seconds, orphans_killed, orphans_killed == 1 ? "" : "es", idle_seconds);
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("wait status {}", status);
}

Exit run_with_timeout(const std::vector<std::string>& argv, const std::filesystem::path& output,
                      std::chrono::milliseconds timeout, const std::function<std::string()>& progress) {
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
  // A slow job is not a hung one: under load a rank's fsync can take seconds, and a launch minutes.
  // Its clock restarts whenever `progress` changes; checked every 100 ms, cheaper than each poll.
  std::string seen = progress ? progress() : std::string();
  auto last_change = start;
  auto last_check = start;
  for (;;) {
    const pid_t done = ::waitpid(pid, &exit.status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
    const auto now = std::chrono::steady_clock::now();
    if (progress && now - last_check >= std::chrono::milliseconds(100)) {
      last_check = now;
      if (std::string current = progress(); current != seen) {
        seen = std::move(current);
        last_change = now;
      }
    }
    if (now - last_change > timeout) {
      // The processes are found before any dies: an orphan would move to another parent. What
      // each was waiting for is read first, while they all still wait.
      const std::vector<pid_t> started = descendants(pid);
      exit.processes.push_back(read_state(pid));
      for (const pid_t child : started) exit.processes.push_back(read_state(child));
      exit.idle_seconds = std::chrono::duration<double>(now - last_change).count();
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
