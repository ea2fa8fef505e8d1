// Kubernetes provider: the `scale` subresource of a Deployment of agents.
//   GET   {api}/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   spec/status.replicas
//   PATCH  same URL  {"spec": {"replicas": N}}   Content-Type: application/merge-patch+json
//   GET   {api}/api/v1/namespaces/{ns}/pods?labelSelector=<selector>      (instances)
//   DELETE {api}/api/v1/namespaces/{ns}/pods/{machine id}   reallocation: the Deployment
//          replaces the pod (agents set GLEANER_MACHINE_ID to the pod name, downward API)
// Authorization: Bearer <token file, re-read every call (tokens rotate)>; TLS verified with the
// given CA bundle (in a cluster: the service account's ca.crt).
#pragma once

#include <memory>
#include <string>

#include "coordinator/native/pool/pool_http.h"
#include "coordinator/native/pool/pool_provider.h"

namespace gleaner::native {

struct KubernetesOptions {
  std::string api_url = "https://kubernetes.default.svc";
  std::string ns = "default";
  std::string deployment;
  std::string label_selector;  // pods of the deployment, e.g. "app=gleaner-agent" ("" = all)
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file;  // "" = the system's CA store
};

std::unique_ptr<PoolProvider> MakeKubernetesPool(KubernetesOptions options, PoolApi api);

}  // namespace gleaner::native
