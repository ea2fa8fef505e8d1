// SaladCloud container-group provider (DESIGN §8). One container group of agents:
//   GET   {api}/organizations/{org}/projects/{project}/containers/{group}      replicas, state
//   PATCH …/containers/{group}   {"replicas": N}   Content-Type: application/merge-patch+json
//   POST  …/containers/{group}/start | /stop        (target 0 stops the group)
//   GET   …/containers/{group}/instances           {"instances": [{id, machine_id, state}]}
//                                                  (older API versions: instance_id, read too)
//   POST  …/containers/{group}/instances/{id}/reallocate
// Every call carries `Salad-Api-Key`. Agents register with SALAD_MACHINE_ID, so a quarantined
// node's machine id names the instance to reallocate. Current() counts running and starting
// instances (current_state.instance_status_counts: running, allocating, creating), as the
// provider contract asks. Organization, project and group names must be SaladCloud names
// (lowercase letters, digits and '-', starting with a letter, not ending with '-', at most 63
// characters); otherwise every call fails with InvalidArgument and nothing is sent.
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

// Ok if organization, project and group are SaladCloud names (see above).
Status CheckSaladNames(const SaladOptions& options);

}  // namespace gleaner::native
