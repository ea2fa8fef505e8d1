#include "coordinator/core/cost.h"

#include <algorithm>

namespace gleaner::core {

void CostFigures::Add(const CostFigures& o) {
  segments += o.segments;
  steps += o.steps;
  billable_seconds += o.billable_seconds;
  cost_usd += o.cost_usd;
  wasted_seconds += o.wasted_seconds;
  wasted_cost_usd += o.wasted_cost_usd;
  sampling_seconds += o.sampling_seconds;
  sampling_cost_usd += o.sampling_cost_usd;
}

CostFigures SegmentCost(const SegmentFacts& s) {
  CostFigures c;
  c.segments = 1;
  c.steps = std::max<int64_t>(0, s.step_end - s.step_start);
  c.billable_seconds = double(s.heartbeats) * s.heartbeat_interval_s;
  c.cost_usd = c.billable_seconds * s.usd_per_hour / 3600.0;
  c.sampling_seconds = std::clamp(s.sampling_s, 0.0, c.billable_seconds);
  c.sampling_cost_usd = c.sampling_seconds * s.usd_per_hour / 3600.0;
  if (s.ended_unfinished) {
    int64_t lost = std::max<int64_t>(0, s.step_end - std::max(s.step_committed, s.step_start));
    double share = double(lost) / double(std::max<int64_t>(1, s.step_end - s.step_start));
    c.wasted_seconds = c.billable_seconds * share;
    c.wasted_cost_usd = c.wasted_seconds * s.usd_per_hour / 3600.0;
  }
  return c;
}

}  // namespace gleaner::core
