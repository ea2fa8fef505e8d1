// Owner controls as a pure decision: given what the PC looks like now (OwnerReadings) and what
// the owner allows (OwnerControls), may the agent work? No I/O, no clock: readings come from
// owner_readings.h in the agent and from literals in tests.
//
// Controls (each off by default):
//   work_hours      time windows in local time, e.g. "Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00";
//                   a window that ends before it starts crosses midnight and belongs to the day
//                   it starts on ("Fri 22:00-07:00" covers Saturday 03:00)
//   pause_programs  process names (case-insensitive) that pause the agent while they run
//   max_gpu_temp_c  pause at or above this temperature; resume at or below limit - hysteresis
//   min_idle_s      work only when the user has been idle this long
// Plus the owner's pause flag (gleaner-agent pause / resume). A reading that is unknown
// (nullopt: no NVML, no idle source) leaves its control inactive.
//
// Threading: OwnerPolicy keeps the temperature hysteresis state; one thread calls Evaluate.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace gleaner::agent {

struct TimeWindow {
  uint8_t days = 0x7f;  // bit d = day d (0 = Sunday ... 6 = Saturday) the window starts on
  int start_min = 0;    // minutes after midnight, 0..1439
  int end_min = 1440;   // 1..1440; <= start_min: crosses midnight into the next day
};

struct OwnerControls {
  std::vector<std::string> gpus;       // CUDA device indices or UUIDs; empty = all
  int64_t max_vram_mb = 0;             // 0 = no ceiling
  std::vector<TimeWindow> work_hours;  // empty = any time
  std::string work_hours_text;         // as configured, for messages
  std::vector<std::string> pause_programs;
  double max_gpu_temp_c = 0;  // 0 = off
  double temp_hysteresis_c = 5;
  double min_idle_s = 0;        // 0 = off
  double check_interval_s = 5;  // how often the agent re-reads the world
};

// One running process as the policy sees it: /proc/<pid>/comm (at most 15 characters) and the
// file name of argv[0].
struct ProcessName {
  std::string comm;
  std::string argv0;
};

struct OwnerReadings {
  int weekday = 0;                     // local time: 0 = Sunday
  int minute_of_day = 0;               // local time: 0..1439
  std::vector<ProcessName> processes;  // only read when pause_programs is set
  std::optional<double> gpu_temp_c;    // hottest selected GPU; nullopt = unknown
  std::optional<double> idle_s;        // user input idle time; nullopt = unknown
  bool paused = false;                 // the owner's pause flag
};

struct OwnerDecision {
  bool allowed = true;
  std::string reason;  // why not ("" when allowed)
};

class OwnerPolicy {
 public:
  explicit OwnerPolicy(OwnerControls controls) : c_(std::move(controls)) {}
  const OwnerControls& controls() const { return c_; }
  // The first control that says no, in this order: paused, work hours, programs, temperature,
  // idle. Updates the temperature hysteresis state.
  OwnerDecision Evaluate(const OwnerReadings& r);

 private:
  OwnerControls c_;
  bool hot_ = false;
};

// "22:00-07:00", "Mon-Fri 09:00-17:00", "Sat 00:00-24:00": windows separated by ','. Days are
// Sun Mon Tue Wed Thu Fri Sat (a range may wrap: "Fri-Mon").
Result<std::vector<TimeWindow>> ParseTimeWindows(const std::string& text);
bool InWindows(const std::vector<TimeWindow>& windows, int weekday, int minute_of_day);

// "0,1" or "GPU-5e3a...,GPU-...": indices or UUIDs (GPU-/MIG- prefixed), separated by ','.
Result<std::vector<std::string>> ParseGpuList(const std::string& text);
// The CUDA_VISIBLE_DEVICES value for a selection ("" = leave it unset).
std::string CudaVisibleDevices(const std::vector<std::string>& gpus);

// Names separated by ','; surrounding blanks trimmed, empty names refused.
Result<std::vector<std::string>> ParseProgramList(const std::string& text);
// The configured name matches comm (also when comm is the name cut at 15 characters) or the
// file name of argv[0]; case-insensitive.
bool ProgramMatches(const std::string& name, const ProcessName& p);

// The VRAM the node advertises when registering: min(detected, ceiling) (ceiling 0 = none).
// The coordinator never hands this node a job whose min_vram_mb is above it.
int64_t AdvertisedVramMb(int64_t detected_mb, int64_t max_vram_mb);

// Config keys of the owner controls (flag names without "--"), nullptr-terminated.
extern const char* const kOwnerConfigKeys[];
// Reads the owner keys from `values` (key → text); one readable line on bad input.
Status ParseOwnerControls(const std::map<std::string, std::string>& values, OwnerControls* out);

}  // namespace gleaner::agent
