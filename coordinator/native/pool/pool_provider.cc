#include "coordinator/native/pool/pool_provider.h"

#include <unistd.h>

#include <climits>

#include "coordinator/native/log.h"
#include "coordinator/native/pool/pool_options.h"
#include "shared/native/curl_http.h"

namespace gleaner::native {

void ApplyPoolActions(PoolProvider* provider, const core::PoolActions& actions,
                      std::set<std::string>* done) {
  if (provider == nullptr) return;
  for (const core::PoolActions::Reallocation& node : actions.reallocate) {
    const std::string& machine = node.machine_id;
    if (machine.empty() || done->count(machine)) continue;
    auto r = provider->Reallocate(machine);
    if (!r.ok()) {
      LogWarn("pool: reallocation failed", {{"machine_id", machine},
                                            {"provider", provider->name()},
                                            {"error", r.status().ToString()}});
      continue;  // tried again next tick
    }
    done->insert(machine);
    LogInfo(*r ? "pool: reallocated quarantined node" : "pool: quarantined node has no instance",
            {{"machine_id", machine}, {"node_id", node.node_id}, {"provider", provider->name()}});
  }
  if (actions.target < 0) return;
  const int64_t target = actions.target;
  Status st = provider->SetTarget(int(std::min<int64_t>(target, INT_MAX)));
  if (!st.ok()) {
    LogWarn("pool: applying the target failed",
            {{"target", target}, {"provider", provider->name()}, {"error", st.ToString()}});
  }
}

Status PoolOptions::Validate() const {
  if (provider == "none" || provider == "local") return Status::Ok();
  if (provider == "salad") {
    if (salad.organization.empty() || salad.project.empty() || salad.group.empty()) {
      return Status::Invalid(
          "--pool-provider salad needs --salad-organization, --salad-project and "
          "--salad-container-group");
    }
    if (salad.api_key.empty()) return Status::Invalid("--pool-provider salad needs SALAD_API_KEY");
    return CheckSaladNames(salad);
  }
  if (provider == "kubernetes") {
    if (kubernetes.deployment.empty()) {
      return Status::Invalid("--pool-provider kubernetes needs --k8s-deployment");
    }
    return Status::Ok();
  }
  return Status::Invalid("--pool-provider must be none, local, salad or kubernetes, got '" +
                         provider + "'");
}

Result<std::unique_ptr<PoolProvider>> MakePoolProvider(PoolOptions o,
                                                       const std::string& coordinator_url,
                                                       const std::string& data_dir) {
  GLEANER_RETURN_IF_ERROR(o.Validate());
  if (o.provider == "none") return std::unique_ptr<PoolProvider>();
  if (o.provider == "local") {
    if (o.local.agent_bin.empty()) {
      char self[4096];
      ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
      std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string();
      dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
      o.local.agent_bin = (dir.empty() ? "." : dir) + "/gleaner-agent";
    }
    if (::access(o.local.agent_bin.c_str(), X_OK) != 0) {
      return Status::Invalid("--pool-agent-bin: cannot execute " + o.local.agent_bin);
    }
    if (o.local.dir.empty()) o.local.dir = data_dir + "/pool";
    if (o.local.enroll_token.empty()) {
      return Status::Invalid(
          "--pool-provider local needs GLEANER_POOL_ENROLL_TOKEN (or GLEANER_OPERATOR_TOKEN)");
    }
    o.local.coordinator_url = coordinator_url;
    return MakeLocalPool(std::move(o.local));
  }
  net::CurlOptions curl;
  if (o.provider == "kubernetes") curl.ca_file = o.kubernetes.ca_file;
  PoolApi api(std::make_shared<net::CurlHttpClient>(curl), o.retry);
  if (o.provider == "salad") return MakeSaladPool(std::move(o.salad), std::move(api));
  return MakeKubernetesPool(std::move(o.kubernetes), std::move(api));
}

}  // namespace gleaner::native
