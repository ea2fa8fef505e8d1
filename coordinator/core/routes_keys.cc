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
  return {{"id", rows.Get(i, "id").AsText()},
          {"role", rows.Get(i, "role").AsText()},
          {"name", rows.Get(i, "name").AsText()},
          {"created_at", TimeOrNull(rows.Get(i, "created_at"))},
          {"revoked_at", TimeOrNull(revoked)}};
}
const char* const kKeyColumns = "id, role, name, created_at, revoked_at";
}  // namespace

Plan HandleCreateKey(CtxPtr ctx) {
  static const char* const kKeys[] = {"role", "name", nullptr};
  FieldReader r(ctx->body);
  std::string role, name;
  r.OnlyKeys(kKeys);
  r.String("role", &role, true, 32);
  r.String("name", &name, true, 128);
  if (!r.ok()) return Plan::Fail(r.status());
  if (role != "developer" && role != "enroll" && role != "operator") {
    return Plan::Fail(Status::Invalid("role must be one of: developer, enroll, operator"));
  }
  std::string id = NewId(ctx->req.entropy, "k");
  std::string token = NewToken(ctx->req.entropy, "key");
  Batch b;
  b.Add("INSERT INTO api_keys (id, token_hash, role, name, created_at) VALUES (?, ?, ?, ?, ?)",
        {id, Sha256Hex(token), role, name, ctx->now()});
  return Plan::Run(std::move(b), [ctx, id, token, role, name](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    return RespondJson(201, {{"id", id},
                             {"token", token},
                             {"role", role},
                             {"name", name},
                             {"created_at", FormatTime(ctx->now())}});
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
