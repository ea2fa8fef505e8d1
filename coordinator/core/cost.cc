#include "coordinator/core/cost.h"

#include <algorithm>
#include <cmath>

namespace gleaner::core {

void CostFigures::Add(const CostFigures& o) {
  segments += o.segments;
  steps += o.steps;
  billable_seconds += o.billable_seconds;
  cost_usd += o.cost_usd;
  wasted_seconds += o.wasted_seconds;
  wasted_cost_usd += o.wasted_cost_usd;
}

CostFigures SegmentCost(const SegmentFacts& s) {
  CostFigures c;
  c.segments = 1;
  c.steps = std::max<int64_t>(0, s.step_end - s.step_start);
  c.billable_seconds = double(s.heartbeats) * s.heartbeat_interval_s;
  c.cost_usd = c.billable_seconds * s.usd_per_hour / 3600.0;
  if (s.ended_unfinished) {
    int64_t lost = std::max<int64_t>(0, s.step_end - std::max(s.step_committed, s.step_start));
    double share = double(lost) / double(std::max<int64_t>(1, s.step_end - s.step_start));
    c.wasted_seconds = c.billable_seconds * share;
    c.wasted_cost_usd = c.wasted_seconds * s.usd_per_hour / 3600.0;
  }
  return c;
}

double QueueSeconds(int64_t started_at_ms, int64_t created_at_ms, int64_t prev_ended_at_ms) {
  int64_t since = std::max(created_at_ms, prev_ended_at_ms);
  return double(std::max<int64_t>(0, started_at_ms - since)) / 1000.0;
}

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  double rank = std::ceil(p / 100.0 * double(samples.size()));
  size_t index = rank < 1 ? 0 : size_t(rank) - 1;
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace gleaner::core
