// Nodes: registration (enroll), fleet listing and quarantine/restore (operator).
#include "coordinator/core/ids.h"
#include "coordinator/core/job_view.h"
#include "coordinator/core/repro_class.h"
#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {

// {machine_id, gpu, agent_version, node_secret?} -> {node_id, token, state, node_secret?}.
// One conditional upsert. A new machine_id becomes a new node with a fresh token and a fresh
// node secret (returned once). An existing machine_id keeps its node id and gets a new token
// (the old one stops working) only if the caller proves it is that node: node_secret matches
// the stored hash, or the node predates node secrets and holds no live lease (it then adopts a
// fresh secret). Anyone else, including another agent that holds the enroll token, gets 409
// and changes nothing: the enroll token alone never takes over a node or its lease.
// A new machine_id is refused (403 node_limit) while its enroll key has as many registered,
// unrevoked nodes as its cap (the key's max_nodes, else the enroll-max-nodes setting; 0: no
// limit): counted inside the INSERT's own condition, so concurrent registrations cannot pass
// it together. Operator keys have no cap; a known machine_id registering again is not counted.
// A new node remembers the key that registered it; it starts quarantined when an operator
// quarantined another node of that key with extend_to_enroll_key (a replacement identity).
namespace {
// The registration adds no identity (machine_id ?2 is known), or the key ?10 is not an enroll
// key, or it has fewer unrevoked nodes than its cap (max_nodes, else ?11; 0: no limit).
const char* const kUnderNodeCap =
    "(EXISTS (SELECT 1 FROM nodes WHERE machine_id = ?2) OR NOT EXISTS (SELECT 1 FROM api_keys "
    "k WHERE k.id = ?10 AND k.role = 'enroll' AND COALESCE(k.max_nodes, ?11) > 0 AND (SELECT "
    "count(*) FROM nodes n WHERE n.enroll_key_id = ?10 AND n.revoked_at IS NULL) >= "
    "COALESCE(k.max_nodes, ?11)))";
}  // namespace

Plan HandleRegisterNode(CtxPtr ctx) {
  FieldReader r(ctx->body);
  static const char* const kFields[] = {"machine_id",  "gpu",         "agent_version",
                                        "node_secret", "repro_class", nullptr};
  std::string machine_id, gpu_name, agent_version, secret;
  int64_t vram_mb = 0;
  const Json* gpu = nullptr;
  r.OnlyKeys(kFields);
  r.String("machine_id", &machine_id, true, 256);
  r.Object("gpu", &gpu, true);
  r.String("agent_version", &agent_version, true, 64);
  r.String("node_secret", &secret, false, 256);
  if (!r.ok()) return Plan::Fail(r.status());
  FieldReader g(*gpu, "gpu.");
  static const char* const kGpuFields[] = {"name", "vram_mb", nullptr};
  g.OnlyKeys(kGpuFields);
  g.String("name", &gpu_name, true, 128);
  g.Int("vram_mb", &vram_mb, true, 0, 10000000);
  if (!g.ok()) return Plan::Fail(g.status());
  std::string repro;
  Status rc = ReadReproClass(ctx->body, "repro_class", &repro);
  if (!rc.ok() && rc.code() != Code::kNotFound) return Plan::Fail(rc);
  const SqlValue repro_class = rc.ok() ? SqlValue(repro) : SqlValue::Null();
  std::string id = NewId(ctx->req.entropy, "n");
  std::string token = NewToken(ctx->req.entropy, "node");
  std::string fresh_secret = NewToken(ctx->req.entropy, "node-secret");
  const std::string fresh_hash = Sha256Hex(fresh_secret);
  const SqlValue given = secret.empty() ? SqlValue::Null() : SqlValue(Sha256Hex(secret));
  Batch b;
  b.Add(
      "INSERT INTO nodes (id, machine_id, token_hash, secret_hash, gpu_name, vram_mb, "
      "agent_version, registered_at, last_seen_at, enroll_key_id, repro_class, state, "
      "state_reason, state_changed_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?10, ?12, "
      "CASE WHEN q.id IS NULL THEN 'active' ELSE 'quarantined' END, "
      "CASE WHEN q.id IS NULL THEN NULL ELSE 'replacement of quarantined node ' || q.id || "
      "' (same enroll key)' END, CASE WHEN q.id IS NULL THEN NULL ELSE ?8 END "
      "FROM (SELECT 1) LEFT JOIN (SELECT id FROM nodes WHERE enroll_key_id = ?10 AND "
      "quarantine_extends = 1 AND state = 'quarantined' LIMIT 1) q ON 1 WHERE " +
          std::string(kUnderNodeCap) +
          " "
          "ON CONFLICT (machine_id) DO UPDATE SET token_hash = excluded.token_hash, "
          "secret_hash = COALESCE(nodes.secret_hash, excluded.secret_hash), "
          "gpu_name = excluded.gpu_name, vram_mb = excluded.vram_mb, "
          "agent_version = excluded.agent_version, last_seen_at = excluded.last_seen_at, "
          "repro_class = excluded.repro_class "
          "WHERE nodes.revoked_at IS NULL AND (nodes.secret_hash = ?9 OR (nodes.secret_hash IS "
          "NULL "
          "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.node_id = nodes.id AND "
          "jobs.state = 'running' AND jobs.lease_expires_at >= ?8))) "
          "RETURNING id, state, secret_hash",
      {id, machine_id, Sha256Hex(token), fresh_hash, gpu_name, vram_mb, agent_version, ctx->now(),
       given, ctx->caller.id, ctx->config->enroll_max_nodes, repro_class});
  b.Add("SELECT revoked_at FROM nodes WHERE machine_id = ?", {machine_id});
  b.Add(
      "SELECT COALESCE(k.max_nodes, ?) AS cap, (SELECT count(*) FROM nodes n WHERE "
      "n.enroll_key_id = k.id AND n.revoked_at IS NULL) AS active FROM api_keys k WHERE k.id = ? "
      "AND k.role = 'enroll'",
      {ctx->config->enroll_max_nodes, ctx->caller.id});
  return Plan::Run(
      std::move(b), [ctx, token, fresh_secret, fresh_hash, machine_id](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        const Rows& row = res.results[0];
        if (row.empty()) {
          const Rows& known = res.results[1];
          const Rows& cap = res.results[2];
          if (known.empty() && !cap.empty()) {
            const std::string key = ctx->caller.id;
            return Plan::Respond(ErrorResponse(
                403, "node_limit",
                "enroll key " + key + " already has " +
                    std::to_string(cap.Get(0, "active").AsInt()) +
                    " registered nodes that are not revoked, its limit of " +
                    std::to_string(cap.Get(0, "cap").AsInt()) +
                    "; an operator can raise it (PATCH /v1/keys/" + key +
                    " {\"max_nodes\": N}, or the enroll-max-nodes setting) or revoke nodes it "
                    "no longer uses"));
          }
          if (!known.empty() && !known.Get(0, "revoked_at").is_null()) {
            return Plan::Fail(Status(Code::kPermissionDenied,
                                     "the node of machine_id " + machine_id +
                                         " was revoked by an operator; it cannot register again"));
          }
          return Plan::Fail(Status::Conflict(
              "machine_id " + machine_id +
              " is registered to another agent and this request does not carry its node secret; "
              "run each agent on a machine with its own --machine-id (or its own identity file)"));
        }
        Json out = {{"node_id", row.Get(0, "id").AsText()},
                    {"token", token},
                    {"state", row.Get(0, "state").AsText()}};
        if (row.Get(0, "secret_hash").AsText() == fresh_hash) out["node_secret"] = fresh_secret;
        return RespondJson(200, out);
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
          {"revoked_at", TimeOrNull(get("revoked_at"))},
          {"running_jobs", Json::array()}};
}
const char* const kNodeColumns =
    "id, machine_id, gpu_name, vram_mb, agent_version, state, state_reason, state_changed_at, "
    "jobs_completed, jobs_failed, registered_at, last_seen_at, revoked_at";
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

// POST /v1/nodes/{id}/quarantine {reason?, extend_to_enroll_key?} | restore {reason?}. A
// quarantined node keeps its current lease (it may finish) but gets no new work.
// extend_to_enroll_key: nodes the same enroll key registers from now on start quarantined (a
// machine returning under a new machine_id); restore ends that. Restoring resets the failure
// window: failures before the restore no longer count towards automatic quarantine.
Plan HandleSetNodeState(CtxPtr ctx) {
  const std::string& path = ctx->req.path;
  const std::string action = path.substr(path.rfind('/') + 1);
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"reason", "extend_to_enroll_key", nullptr};
  static const char* const kRestoreKeys[] = {"reason", nullptr};
  r.OnlyKeys(action == "quarantine" ? kKeys : kRestoreKeys);
  std::string reason = action == "quarantine" ? "quarantined by an operator" : "";
  bool extend = false;
  r.String("reason", &reason, false, 1000);
  r.Bool("extend_to_enroll_key", &extend, false);
  if (!r.ok()) return Plan::Fail(r.status());
  std::string state = action == "quarantine" ? "quarantined" : "active";
  Batch b;
  b.Add(std::string("UPDATE nodes SET state = ?, state_reason = ?, state_changed_at = ?, "
                    "quarantine_extends = ? WHERE id = ? RETURNING ") +
            kNodeColumns,
        {state, reason.empty() ? SqlValue::Null() : SqlValue(reason), ctx->now(),
         int64_t(extend ? 1 : 0), ctx->args[0]});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return Plan::Fail(Status::NotFound("no such node"));
    Json n = NodeJson(res.results[0], 0);
    n.erase("running_jobs");
    return RespondJson(200, n);
  });
}

// POST /v1/nodes/{id}/revoke {reason?}: the node's token and node secret stop working for good
// (replaced by values no token hashes to), it is quarantined, and a lease it holds ends now (the
// job is claimed again as a stalled one). Revoking a revoked node changes nothing more.
Plan HandleRevokeNode(CtxPtr ctx) {
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"reason", nullptr};
  r.OnlyKeys(kKeys);
  std::string reason = "revoked by an operator";
  r.String("reason", &reason, false, 1000);
  if (!r.ok()) return Plan::Fail(r.status());
  const int64_t now = ctx->now();
  const std::string& node = ctx->args[0];
  Batch b;
  b.Add(
      "UPDATE jobs SET lease_expires_at = ? WHERE node_id = ? AND state = 'running' AND "
      "lease_expires_at >= ?",
      {now - 1, node, now});
  b.Add(std::string("UPDATE nodes SET token_hash = 'revoked:' || id, secret_hash = 'revoked', "
                    "state = 'quarantined', state_reason = COALESCE(?, state_reason), "
                    "state_changed_at = ?, revoked_at = ? WHERE id = ? AND revoked_at IS NULL "
                    "RETURNING ") +
            kNodeColumns,
        {reason, now, now, node});
  b.Add(std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE id = ?", {node});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[2];
    if (rows.empty()) return Plan::Fail(Status::NotFound("no such node"));
    Json n = NodeJson(rows, 0);
    n.erase("running_jobs");
    return RespondJson(200, n);
  });
}

}  // namespace gleaner::core
