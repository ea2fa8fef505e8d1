// The autoscaler's decision (DESIGN §4 step 9): how many nodes the pool should have.
//
//   demand = running + pending
//   warm   = nodes that completed a job within idle_window (kept so new work starts at once)
//   target = clamp(max(demand, warm), min, max)
// With no work for idle_window, warm drops to 0 and the pool scales to `min` (zero by default).
// Pure function of its inputs (the maintenance tick reads them from the database at now_ms), so
// tests drive it with any clock they like. The shell's pool provider only applies the target.
#pragma once

#include <cstdint>
#include <string>

namespace gleaner::core {

struct AutoscaleInputs {
  int64_t running = 0;     // jobs in state running (including stalled leases)
  int64_t pending = 0;     // jobs waiting for a node
  int64_t warm_nodes = 0;  // distinct nodes with a completed lease ending within idle_window
  int64_t min_nodes = 0;
  int64_t max_nodes = 0;
};

struct AutoscaleDecision {
  int64_t target = 0;
  std::string reason;  // "demand", "warm", "min", "max", "idle"
};

AutoscaleDecision DecideTarget(const AutoscaleInputs& in);

}  // namespace gleaner::core
