// Nodes: registration (enroll), fleet listing and quarantine/restore (operator).
#include "coordinator/core/ids.h"
#include "coordinator/core/job_view.h"
#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {

// One upsert: the same machine_id keeps its node id and gets a new token (the old token's hash
// is overwritten, so the old token stops working). State (quarantine) is kept.
Plan HandleRegisterNode(CtxPtr ctx) {
  FieldReader r(ctx->body);
  std::string machine_id, gpu_name, agent_version;
  int64_t vram_mb = 0;
  const Json* gpu = nullptr;
  r.String("machine_id", &machine_id, true, 256);
  r.Object("gpu", &gpu, true);
  r.String("agent_version", &agent_version, true, 64);
  if (!r.ok()) return Plan::Fail(r.status());
  FieldReader g(*gpu, "gpu.");
  g.String("name", &gpu_name, true, 128);
  g.Int("vram_mb", &vram_mb, true, 0, 10000000);
  if (!g.ok()) return Plan::Fail(g.status());
  std::string id = NewId(ctx->req.entropy, "n");
  std::string token = NewToken(ctx->req.entropy, "node");
  Batch b;
  b.Add(
      "INSERT INTO nodes (id, machine_id, token_hash, gpu_name, vram_mb, agent_version, "
      "registered_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (machine_id) DO UPDATE SET token_hash = excluded.token_hash, "
      "gpu_name = excluded.gpu_name, vram_mb = excluded.vram_mb, "
      "agent_version = excluded.agent_version, last_seen_at = excluded.last_seen_at "
      "RETURNING id, state",
      {id, machine_id, Sha256Hex(token), gpu_name, vram_mb, agent_version, ctx->now(), ctx->now()});
  return Plan::Run(std::move(b), [token](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return Plan::Fail(Status::Internal("node upsert returned nothing"));
    return RespondJson(200, {{"node_id", res.results[0].Get(0, "id").AsText()},
                             {"token", token},
                             {"state", res.results[0].Get(0, "state").AsText()}});
  });
}

namespace {
Json NodeJson(const Rows& rows, size_t i) {
  auto get = [&](const char* c) -> const SqlValue& { return rows.Get(i, c); };
  return {{"id", get("id").AsText()},
          {"machine_id", get("machine_id").AsText()},
          {"gpu", {{"name", get("gpu_name").AsText()}, {"vram_mb", get("vram_mb").AsInt()}}},
          {"agent_version", get("agent_version").AsText()},
          {"state", get("state").AsText()},
          {"state_reason",
           get("state_reason").is_null() ? Json(nullptr) : Json(get("state_reason").AsText())},
          {"state_changed_at", TimeOrNull(get("state_changed_at"))},
          {"jobs_completed", get("jobs_completed").AsInt()},
          {"jobs_failed", get("jobs_failed").AsInt()},
          {"registered_at", TimeOrNull(get("registered_at"))},
          {"last_seen_at", TimeOrNull(get("last_seen_at"))},
          {"running_jobs", Json::array()}};
}
const char* const kNodeColumns =
    "id, machine_id, gpu_name, vram_mb, agent_version, state, state_reason, state_changed_at, "
    "jobs_completed, jobs_failed, registered_at, last_seen_at";
}  // namespace

Plan HandleListNodes(CtxPtr ctx) {
  Batch b;
  b.Add(std::string("SELECT ") + kNodeColumns + " FROM nodes ORDER BY registered_at, id");
  b.Add(
      "SELECT id, node_id FROM jobs WHERE state = 'running' AND node_id IS NOT NULL "
      "AND lease_expires_at >= ? ORDER BY id",
      {ctx->now()});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    Json nodes = Json::array();
    const Rows& rows = res.results[0];
    const Rows& running = res.results[1];
    for (size_t i = 0; i < rows.rows.size(); ++i) {
      Json n = NodeJson(rows, i);
      for (size_t k = 0; k < running.rows.size(); ++k) {
        if (running.Get(k, "node_id").AsText() == rows.Get(i, "id").AsText()) {
          n["running_jobs"].push_back(running.Get(k, "id").AsText());
        }
      }
      nodes.push_back(std::move(n));
    }
    return RespondJson(200, {{"nodes", nodes}});
  });
}

// POST /v1/nodes/{id}/quarantine | restore {reason?}. A quarantined node keeps its current
// lease (it may finish) but gets no new work. Restoring resets the failure window: failures
// before the restore no longer count towards automatic quarantine.
Plan HandleSetNodeState(CtxPtr ctx) {
  const std::string& path = ctx->req.path;
  const std::string action = path.substr(path.rfind('/') + 1);
  FieldReader r(ctx->body);
  std::string reason = action == "quarantine" ? "quarantined by an operator" : "";
  r.String("reason", &reason, false, 1000);
  if (!r.ok()) return Plan::Fail(r.status());
  std::string state = action == "quarantine" ? "quarantined" : "active";
  Batch b;
  b.Add(std::string("UPDATE nodes SET state = ?, state_reason = ?, state_changed_at = ? "
                    "WHERE id = ? RETURNING ") +
            kNodeColumns,
        {state, reason.empty() ? SqlValue::Null() : SqlValue(reason), ctx->now(), ctx->args[0]});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return Plan::Fail(Status::NotFound("no such node"));
    Json n = NodeJson(res.results[0], 0);
    n.erase("running_jobs");
    return RespondJson(200, n);
  });
}

}  // namespace gleaner::core
