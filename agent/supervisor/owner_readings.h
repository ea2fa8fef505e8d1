// Where the owner controls' readings come from, behind one small interface so tests inject a
// clock and fake process / GPU / idle readings (owner_policy.h decides on them).
//
// SystemReadings reads the real machine:
//   local time     localtime_r (the machine's time zone)
//   processes      /proc/<pid>/comm and the file name of argv[0] from /proc/<pid>/cmdline
//                  (both readable for every user's processes)
//   GPU temperature  NVML (gpu.h); unknown without it
//   input idle     systemd-logind's IdleHint / IdleSinceHintMonotonic (`loginctl show-session`
//                  without a session: the manager's view over every session; logind derives it
//                  from the desktop's idle hint and from terminal activity), else the newest
//                  access/modification time of /dev/input/event* and /dev/pts/N; unknown when
//                  neither answers
// Only what a control needs is read. Thread-compatible: one thread uses one source.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/supervisor/owner_policy.h"

namespace gleaner::agent {

class OwnerReadingSource {
 public:
  virtual ~OwnerReadingSource() = default;
  // Fills `r` (all but r->paused) with what the enabled controls in `c` need.
  virtual void Read(const OwnerControls& c, OwnerReadings* r) = 0;
};

// The real machine (see above). Logs once when a control has no source.
std::unique_ptr<OwnerReadingSource> MakeSystemReadings();

// Running processes from a /proc-like directory.
std::vector<ProcessName> ListProcesses(const std::string& proc_dir = "/proc");

// Idle seconds from `loginctl show-session -p IdleHint -p IdleSinceHintMonotonic` output and the
// current CLOCK_MONOTONIC in microseconds; nullopt when the output has no usable hint.
std::optional<double> ParseLogindIdle(const std::string& output, int64_t now_monotonic_us);

// Idle seconds from the newest atime/mtime of the files matched by the glob patterns, relative
// to `now` (seconds since the epoch); nullopt when none exists.
std::optional<double> IdleFromDeviceTimes(const std::vector<std::string>& patterns, double now);

}  // namespace gleaner::agent
