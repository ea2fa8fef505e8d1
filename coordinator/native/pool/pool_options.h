// Which pool provider the autoscaler applies its decisions through, and its settings
// (flags --pool-provider, --pool-*, --salad-*, --k8s-*; see docs/operations.md).
#pragma once

#include <memory>
#include <string>

#include "coordinator/native/pool/pool_kubernetes.h"
#include "coordinator/native/pool/pool_local.h"
#include "coordinator/native/pool/pool_provider.h"
#include "coordinator/native/pool/pool_salad.h"

namespace gleaner::native {

struct PoolOptions {
  std::string provider = "none";  // none | local | salad | kubernetes
  LocalPoolOptions local;         // agent_bin "" = gleaner-agent beside this binary;
                                  // dir "" = <data-dir>/pool
  SaladOptions salad;
  KubernetesOptions kubernetes;
  RetryPolicy retry;

  // Checks the chosen provider's required settings. One readable line on error.
  Status Validate() const;
};

// Builds the provider (nullptr for "none"). `coordinator_url` is where local agents connect.
Result<std::unique_ptr<PoolProvider>> MakePoolProvider(PoolOptions options,
                                                       const std::string& coordinator_url,
                                                       const std::string& data_dir);

}  // namespace gleaner::native
