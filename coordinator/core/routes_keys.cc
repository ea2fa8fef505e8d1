// POST /v1/keys (operator): mint an API key; only its SHA-256 is stored, the token is shown once.
#include "coordinator/core/ids.h"
#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {

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

}  // namespace gleaner::core
