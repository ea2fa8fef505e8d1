#include "coordinator/core/autoscaler.h"

#include <algorithm>

namespace gleaner::core {

AutoscaleDecision DecideTarget(const AutoscaleInputs& in) {
  const int64_t demand = std::max<int64_t>(0, in.running) + std::max<int64_t>(0, in.pending);
  const int64_t warm = std::max<int64_t>(0, in.warm_nodes);
  AutoscaleDecision d;
  int64_t want = std::max(demand, warm);
  d.reason = demand >= warm ? "demand" : "warm";
  if (want == 0) d.reason = "idle";
  if (want > in.max_nodes) {
    want = in.max_nodes;
    d.reason = "max";
  }
  if (want < in.min_nodes) {
    want = in.min_nodes;
    d.reason = "min";
  }
  d.target = want;
  return d;
}

}  // namespace gleaner::core
