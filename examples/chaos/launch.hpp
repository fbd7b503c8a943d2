// SPDX-License-Identifier: MIT
// Starting a launcher and waiting for it, never forever: a job that stops making progress is a
// hang, and everything it started is killed, once the kernel has said what each process was
// waiting for.

#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace chaos {

/// What a process was doing when its launch was called a hang, as /proc said (Linux).
struct ProcessState {
  pid_t pid = 0;
  std::string name;     ///< its command name (comm)
  char state = '?';     ///< R running, S sleeping, D uninterruptible (most often disk I/O), T stopped, Z zombie
  std::string syscall;  ///< the system call its main thread is blocked in ("fsync", "#74"), or "running"
  std::string wchan;    ///< the kernel function it sleeps in, when the kernel shows it

  /// "D (disk sleep) in fsync, kernel wait folio_wait_bit".
  [[nodiscard]] std::string describe() const;
};

/// How a launched command ended.
struct Exit {
  bool timed_out = false;
  int status = 0;  ///< waitpid's status
  double seconds = 0;
  double idle_seconds = 0;              ///< timed out: the time since it last made progress
  int orphans_killed = 0;               ///< timed out: the processes it had started, killed with it
  std::vector<ProcessState> processes;  ///< timed out: what it and each process it had started were doing

  [[nodiscard]] bool success() const noexcept;
  /// "exit status 0", "exit status 137", "killed by signal 9", "no end after 60 s: killed, ...".
  [[nodiscard]] std::string describe() const;
};

/// Runs `argv` (argv[0] looked up on PATH) with stdout and stderr written to `output`. The
/// command has hung when `progress()` (a fingerprint of what it has done so far, such as the sizes
/// of the files it writes) stays the same for `timeout`; without `progress`, when it runs longer
/// than `timeout`. Then it records what the command and each process it started were doing,
/// SIGKILLs them all (OpenMPI puts each rank in a process group of its own, so they are found by
/// parent, not by group) and says it timed out.
Exit run_with_timeout(const std::vector<std::string>& argv, const std::filesystem::path& output,
                      std::chrono::milliseconds timeout, const std::function<std::string()>& progress = {});

}  // namespace chaos
