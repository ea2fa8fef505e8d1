// API keys (operator): mint, list, revoke. Only a key's SHA-256 is stored; the token is shown
// once, at creation, and never listed.
#include "coordinator/core/ids.h"
#include "coordinator/core/job_view.h"
#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {
Json KeyJson(const Rows& rows, size_t i) {
  const SqlValue& revoked = rows.Get(i, "revoked_at");
  return {
      {"id", rows.Get(i, "id").AsText()},
      {"role", rows.Get(i, "role").AsText()},
      {"name", rows.Get(i, "name").AsText()},
      {"created_at", TimeOrNull(rows.Get(i, "created_at"))},
      {"revoked_at", TimeOrNull(revoked)},
      {"max_nodes", rows.Get(i, "max_nodes").is_null() ? Json(nullptr)
                                                       : Json(rows.Get(i, "max_nodes").AsInt())}};
}
const char* const kKeyColumns = "id, role, name, created_at, revoked_at, max_nodes";

// "max_nodes" of an enroll key: an integer >= 0 (0 = no limit) or null (the operator's
// enroll-max-nodes setting). *set: whether the field was given.
Status ReadMaxNodes(const Json& body, SqlValue* out, bool* set) {
  auto it = body.find("max_nodes");
  *set = it != body.end();
  if (!*set || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000000000) {
    return Status::Invalid(
        "max_nodes must be an integer in [0, 1000000000] (0 = no limit) or "
        "null (the enroll-max-nodes setting)");
  }
  *out = SqlValue(it->get<int64_t>());
  return Status::Ok();
}
}  // namespace

Plan HandleCreateKey(CtxPtr ctx) {
  static const char* const kKeys[] = {"role", "name", "max_nodes", nullptr};
  FieldReader r(ctx->body);
  std::string role, name;
  r.OnlyKeys(kKeys);
  r.String("role", &role, true, 32);
  r.String("name", &name, true, 128);
  if (!r.ok()) return Plan::Fail(r.status());
  if (role != "developer" && role != "enroll" && role != "operator") {
    return Plan::Fail(Status::Invalid("role must be one of: developer, enroll, operator"));
  }
  SqlValue max_nodes;
  bool has_max_nodes = false;
  Status mn = ReadMaxNodes(ctx->body, &max_nodes, &has_max_nodes);
  if (!mn.ok()) return Plan::Fail(mn);
  if (has_max_nodes && role != "enroll") {
    return Plan::Fail(Status::Invalid("max_nodes applies to enroll keys only"));
  }
  std::string id = NewId(ctx->req.entropy, "k");
  std::string token = NewToken(ctx->req.entropy, "key");
  Batch b;
  b.Add(
      "INSERT INTO api_keys (id, token_hash, role, name, created_at, max_nodes) VALUES (?, ?, ?, "
      "?, ?, ?)",
      {id, Sha256Hex(token), role, name, ctx->now(), max_nodes});
  return Plan::Run(std::move(b), [ctx, id, token, role, name, max_nodes](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    return RespondJson(
        201, {{"id", id},
              {"token", token},
              {"role", role},
              {"name", name},
              {"created_at", FormatTime(ctx->now())},
              {"max_nodes", max_nodes.is_null() ? Json(nullptr) : Json(max_nodes.AsInt())}});
  });
}

// PATCH /v1/keys/{id} {max_nodes} -> the key: sets an enroll key's cap on registered,
// unrevoked nodes (0 = no limit, null = the enroll-max-nodes setting). Other keys: 400.
Plan HandleUpdateKey(CtxPtr ctx) {
  static const char* const kKeys[] = {"max_nodes", nullptr};
  FieldReader r(ctx->body);
  r.OnlyKeys(kKeys);
  if (!r.ok()) return Plan::Fail(r.status());
  SqlValue max_nodes;
  bool has_max_nodes = false;
  Status mn = ReadMaxNodes(ctx->body, &max_nodes, &has_max_nodes);
  if (!mn.ok()) return Plan::Fail(mn);
  if (!has_max_nodes) return Plan::Fail(Status::Invalid("nothing to change: give max_nodes"));
  Batch b;
  b.Add(std::string("UPDATE api_keys SET max_nodes = ? WHERE id = ? AND role = 'enroll' "
                    "RETURNING ") +
            kKeyColumns,
        {max_nodes, ctx->args[0]});
  b.Add("SELECT role FROM api_keys WHERE id = ?", {ctx->args[0]});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) return RespondJson(200, KeyJson(res.results[0], 0));
    if (res.results[1].empty()) return Plan::Fail(Status::NotFound("no such key"));
    return Plan::Fail(Status::Invalid("max_nodes applies to enroll keys only; this key is a " +
                                      res.results[1].Get(0, "role").AsText() + " key"));
  });
}

// GET /v1/keys -> {keys: [{id, role, name, created_at, revoked_at}]}, oldest first.
Plan HandleListKeys(CtxPtr) {
  Batch b;
  b.Add(std::string("SELECT ") + kKeyColumns + " FROM api_keys ORDER BY created_at, id");
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    Json keys = Json::array();
    for (size_t i = 0; i < res.results[0].rows.size(); ++i) {
      keys.push_back(KeyJson(res.results[0], i));
    }
    return RespondJson(200, {{"keys", keys}});
  });
}

// POST /v1/keys/{id}/revoke -> the key, revoked (its token is refused from now on: 401).
// Revoking a revoked key keeps the first revocation time.
Plan HandleRevokeKey(CtxPtr ctx) {
  Batch b;
  b.Add(std::string("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? "
                    "RETURNING ") +
            kKeyColumns,
        {ctx->now(), ctx->args[0]});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return Plan::Fail(Status::NotFound("no such key"));
    return RespondJson(200, KeyJson(res.results[0], 0));
  });
}

}  // namespace gleaner::core
