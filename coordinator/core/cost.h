// Billing math, as the field does it (DESIGN §5): billable seconds = heartbeats x interval;
// cost = billable hours x the segment's price per hour; cost per step = cost / steps trained.
// Wasted: for a segment that ended without completing, the share of its billable time spent on
// steps past its last committed checkpoint (those steps are lost and re-trained):
//   wasted_s = billable_s x (step_end - max(step_committed, step_start)) / max(1, step_end -
//   step_start)
// Sampling: the seconds the trainer reported rendering samples during the segment, capped at its
// billable seconds, and their cost at the segment's price (part of cost_usd, shown apart).
#pragma once

#include <cstdint>

namespace gleaner::core {

struct SegmentFacts {
  int64_t heartbeats = 0;
  double heartbeat_interval_s = 0;
  double usd_per_hour = 0;
  int64_t step_start = 0, step_end = 0, step_committed = 0;
  bool ended_unfinished = false;  // ended, and not 'completed'
  double sampling_s = 0;          // wall seconds the trainer spent rendering samples
};

struct CostFigures {
  int64_t segments = 0;
  int64_t steps = 0;
  double billable_seconds = 0;
  double cost_usd = 0;
  double wasted_seconds = 0;
  double wasted_cost_usd = 0;
  double sampling_seconds = 0;   // part of billable_seconds spent sampling (at most all of it)
  double sampling_cost_usd = 0;  // its share of cost_usd
  void Add(const CostFigures& o);
  // cost_usd / steps, or a negative value when no step was trained.
  double CostPerStep() const { return steps > 0 ? cost_usd / double(steps) : -1; }
};

CostFigures SegmentCost(const SegmentFacts& s);

}  // namespace gleaner::core
