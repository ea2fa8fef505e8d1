// SaladCloud container-group provider (DESIGN §8). One container group of agents:
//   GET   {api}/organizations/{org}/projects/{project}/containers/{group}      replicas, state
//   PATCH …/containers/{group}   {"replicas": N}   Content-Type: application/merge-patch+json
//   POST  …/containers/{group}/start | /stop        (target 0 stops the group)
//   GET   …/containers/{group}/instances           {"instances": [{instance_id, machine_id,
//   state}]} POST  …/containers/{group}/instances/{instance_id}/reallocate
// Every call carries `Salad-Api-Key`. Agents register with SALAD_MACHINE_ID, so a quarantined
// node's machine id names the instance to reallocate.
#pragma once

#include <memory>
#include <string>

#include "coordinator/native/pool/pool_http.h"
#include "coordinator/native/pool/pool_provider.h"

namespace gleaner::native {

struct SaladOptions {
  std::string api_url = "https://api.salad.com/api/public";
  std::string organization, project, group;
  std::string api_key;  // environment only (SALAD_API_KEY)
};

std::unique_ptr<PoolProvider> MakeSaladPool(SaladOptions options, PoolApi api);

}  // namespace gleaner::native
