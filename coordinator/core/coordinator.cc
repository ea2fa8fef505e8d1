#include "coordinator/core/coordinator.h"

#include "coordinator/core/blob_urls.h"
#include "coordinator/core/migrations.h"
#include "coordinator/core/router.h"
#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {

Coordinator::Coordinator(CoreConfig config, RateLimiter* limiter, CallerCache* callers)
    : config_(std::move(config)), limiter_(limiter), callers_(callers) {}

Plan Coordinator::MigrationPlan() const {
  Batch probe;
  probe.Add(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
      "name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
  probe.Add("SELECT version FROM schema_migrations ORDER BY version");
  return Plan::Run(std::move(probe), [](BatchResult r) -> Plan {
    if (!r.status.ok()) return Plan::Fail(r.status);
    int applied = 0;
    for (const auto& row : r.results[1].rows) {
      if (row[0].AsInt() > applied) applied = int(row[0].AsInt());
    }
    Batch apply;
    int count = 0;
    for (const Migration& m : Migrations()) {
      if (m.version <= applied) continue;
      // The version row goes first: a concurrent migrator fails here and rolls back whole.
      apply.Add("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)",
                {m.version, m.name});
      for (std::string& stmt : SplitSqlStatements(m.sql)) apply.Add(std::move(stmt));
      ++count;
    }
    if (count == 0) return Plan::Respond(HttpResponse::Json(200, {{"applied", 0}}));
    return Plan::Run(std::move(apply), [count](BatchResult r2) -> Plan {
      if (!r2.status.ok()) return Plan::Fail(r2.status);
      return Plan::Respond(HttpResponse::Json(200, {{"applied", count}}));
    });
  });
}

namespace {
// Ensures a key of this role and token exists under the id prefix ("k_boot_" + 12 hex of the
// hash), revoking the keys an earlier value created under the same prefix (the value was
// rotated). A key of this token that an operator revoked stays revoked.
Plan EnsureConfiguredKey(const std::string& prefix, const char* role, const char* name,
                         const std::string& token, int64_t now_ms) {
  std::string hash = Sha256Hex(token);
  Batch b;
  b.Add(
      "UPDATE api_keys SET revoked_at = ? WHERE substr(id, 1, ?) = ? AND role = ? AND "
      "token_hash <> ? AND revoked_at IS NULL",
      {now_ms, int64_t(prefix.size()), prefix, role, hash});
  b.Add(
      "INSERT INTO api_keys (id, token_hash, role, name, created_at) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT (token_hash) DO NOTHING",
      {prefix + hash.substr(0, 12), hash, role, name, now_ms});
  return Plan::Run(std::move(b), [](BatchResult r) -> Plan {
    if (!r.status.ok()) return Plan::Fail(r.status);
    return Plan::Respond(HttpResponse::Json(200, {{"ok", true}}));
  });
}
}  // namespace

Plan Coordinator::BootstrapOperatorPlan(const std::string& token, int64_t now_ms) const {
  return EnsureConfiguredKey("k_boot_", "operator", "bootstrap", token, now_ms);
}

Plan Coordinator::PoolEnrollKeyPlan(const std::string& token, int64_t now_ms) const {
  return EnsureConfiguredKey("k_pool_", "enroll", "local-pool", token, now_ms);
}

Plan Coordinator::Handle(const HttpRequest& request) const {
  return RouteRequest(&config_, limiter_, callers_, request);
}

Plan Coordinator::MaintenancePlan(int64_t now_ms, const PoolObservation& pool) const {
  return MaintenanceTick(&config_, now_ms, pool);
}

Result<BlobGrant> Coordinator::AuthorizeBlob(const std::string& method, const std::string& path,
                                             const std::string& query, int64_t now_ms) const {
  return VerifyBlobUrl(config_, method, path, query, now_ms);
}

Plan Coordinator::BlobPlacePlan(const std::string& key, const std::string& sha256) const {
  // Checkpoint, output and sample keys are jobs/<id>/...: the job id keeps the lookups on an
  // index.
  const std::string prefix = "jobs/";
  size_t end = key.find('/', prefix.size());
  if (key.compare(0, prefix.size(), prefix) != 0 || end == std::string::npos) {
    return Plan::Respond(HttpResponse::NoContent());
  }
  const std::string job = key.substr(prefix.size(), end - prefix.size());
  Batch b;
  b.Add("SELECT 1 FROM checkpoints WHERE job_id = ? AND key = ? AND sha256 <> ?",
        {job, key, sha256});
  b.Add(
      "SELECT 1 FROM jobs j, json_each(j.outputs) o WHERE j.id = ? AND j.outputs IS NOT NULL "
      "AND json_extract(o.value, '$.key') = ? AND json_extract(o.value, '$.sha256') <> ?",
      {job, key, sha256});
  b.Add("SELECT 1 FROM samples WHERE job_id = ? AND key = ? AND sha256 <> ?", {job, key, sha256});
  return Plan::Run(std::move(b), [](BatchResult r) -> Plan {
    if (!r.status.ok()) return Plan::Fail(r.status);
    if (!r.results[0].empty() || !r.results[1].empty() || !r.results[2].empty()) {
      return Plan::Fail(Status::Conflict(
          "a committed object with other content is stored at this key; it is not replaced"));
    }
    return Plan::Respond(HttpResponse::NoContent());
  });
}

Plan Coordinator::BlobStoredPlan(const std::string& key, int64_t size, const std::string& sha256,
                                 int64_t now_ms) const {
  Batch b;
  b.Add(
      "INSERT INTO blobs (key, size, sha256, created_at) VALUES (?, ?, ?, ?) "
      "ON CONFLICT (key) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256, "
      "created_at = excluded.created_at",
      {key, size, sha256, now_ms});
  return Plan::Run(std::move(b), [](BatchResult r) -> Plan {
    if (!r.status.ok()) return Plan::Fail(r.status);
    return Plan::Respond(HttpResponse::NoContent());
  });
}

}  // namespace gleaner::core
