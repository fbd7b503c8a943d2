// SPDX-License-Identifier: MIT
// Starting a launcher and waiting for it, never forever: a job that does not end in time is a
// hang, and everything it started is killed.

#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace chaos {

/// How a launched command ended.
struct Exit {
  bool timed_out = false;
  int status = 0;  ///< waitpid's status
  double seconds = 0;
  int orphans_killed = 0;  ///< timed out: the processes it had started, killed with it

  [[nodiscard]] bool success() const noexcept;
  /// "exit status 0", "exit status 137", "killed by signal 9", "no end after 60 s: killed, ...".
  [[nodiscard]] std::string describe() const;
};

/// Runs `argv` (argv[0] looked up on PATH) with stdout and stderr written to `output`. After
/// `timeout` it SIGKILLs the command and every process it started (OpenMPI puts each rank in a
/// process group of its own, so they are found by parent, not by group) and says it timed out.
Exit run_with_timeout(const std::vector<std::string>& argv, const std::filesystem::path& output,
                      std::chrono::milliseconds timeout);

}  // namespace chaos
