// PoolProvider: the autoscaler's hands. The core decides (coordinator/core/autoscaler.h) how many
// nodes the pool should have and which quarantined machines to recycle; a provider only applies
// that to one kind of pool:
//   local       gleaner-agent processes on this machine (pool_local.h)
//   salad       a SaladCloud container group (pool_salad.cc)
//   kubernetes  the scale subresource of a Deployment (pool_kubernetes.cc)
// Errors are Status values; a provider never throws and never blocks for long (API calls retry
// with backoff a bounded number of times, then fail). The maintenance loop logs failures and
// carries on: an unreachable pool API never stops the coordinator.
// Threading: called from the maintenance thread only; implementations need not be thread-safe.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/core/plan.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::native {

struct PoolInstance {
  std::string id;          // the provider's instance id (Salad instance id, pod name, local id)
  std::string machine_id;  // what the agent registered with (SALAD_MACHINE_ID, pod name, ...)
  std::string state;       // provider's word for it ("running", "stopping", ...)
};

class PoolProvider {
 public:
  virtual ~PoolProvider() = default;
  // "local", "salad", "kubernetes".
  virtual std::string name() const = 0;
  // Nodes the pool has now (running or starting).
  virtual Result<int> Current() = 0;
  // Asks the pool for `target` nodes (0 = stop the pool).
  virtual Status SetTarget(int target) = 0;
  virtual Result<std::vector<PoolInstance>> Instances() = 0;
  // Recycles the instance that runs `machine_id` (a fresh machine replaces it). false when no
  // instance has that machine id (already gone).
  virtual Result<bool> Reallocate(const std::string& machine_id) = 0;
};

// Applies one maintenance tick's pool actions (the core's, core::Plan::pool_actions()) through
// the provider: reallocations first (each machine once per process: `done` remembers), then the
// target. Logs what it did and every failure; returns nothing because nothing stops.
void ApplyPoolActions(PoolProvider* provider, const core::PoolActions& actions,
                      std::set<std::string>* done);

}  // namespace gleaner::native
