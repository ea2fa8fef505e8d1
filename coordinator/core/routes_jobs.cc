// Developer submissions: POST /v1/uploads and POST /v1/jobs (with Idempotency-Key).
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/ids.h"
#include "coordinator/core/job_inputs.h"
#include "coordinator/core/job_view.h"
#include "coordinator/core/routes.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

// The caller's active jobs: one counter row (api_keys.active_jobs, kept by triggers; migration
// 0003), whatever the queue holds.
const char* const kActiveCount = "(SELECT active_jobs FROM api_keys WHERE id = ?)";

// Why the INSERT of a submission inserted nothing, read afterwards in a read-only batch: a
// replayed Idempotency-Key (the original job), the active-job limit (429), or an input that is
// not the caller's upload. If the reason went away in between (a job finished), the answer is
// a 409 to retry.
Plan ExplainRefusedJob(CtxPtr ctx, const std::vector<InputRef>& inputs,
                       const std::string& spec_text, int64_t active_limit,
                       const std::string& idem) {
  Batch b;
  struct Explain {
    int prior = -1, uploads = -1, active = -1;
  } at;
  if (!idem.empty()) {
    at.prior = int(b.statements.size());
    b.Add(std::string("SELECT ") + kJobColumns +
              " FROM jobs WHERE owner_key_id = ? AND idempotency_key = ?",
          {ctx->caller.id, idem});
  }
  if (!inputs.empty()) {
    at.uploads = int(b.statements.size());
    InputsUploadsQuery(inputs, *ctx, &b);
  }
  if (active_limit > 0) {
    at.active = int(b.statements.size());
    b.Add(std::string("SELECT ") + kActiveCount + " AS n", {ctx->caller.id});
  }
  b.Add("SELECT 1 AS checked");  // never an empty batch
  return Plan::Run(
      std::move(b), [ctx, inputs, spec_text, active_limit, at](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        if (at.prior >= 0 && !res.results[size_t(at.prior)].empty()) {
          const Rows& prior = res.results[size_t(at.prior)];
          if (prior.Get(0, "spec").AsText() != spec_text) {
            return Plan::Fail(Status::Conflict(
                "Idempotency-Key was already used for a different job submission"));
          }
          HttpResponse resp = HttpResponse::Json(200, JobJson(prior, 0, ctx->now()));
          resp.headers.emplace_back("Idempotent-Replayed", "true");
          return Plan::Respond(std::move(resp));
        }
        if (at.active >= 0 && res.results[size_t(at.active)].Get(0, "n").AsInt() >= active_limit) {
          return Plan::Respond(ErrorResponse(
              429, "too_many_jobs",
              "this key already has " + std::to_string(active_limit) +
                  " pending or running jobs (the limit); wait for some to finish or cancel some"));
        }
        if (at.uploads >= 0) {
          Status why = ExplainInputs(inputs, res.results[size_t(at.uploads)], *ctx);
          if (!why.ok()) return Plan::Fail(why);
        }
        return Plan::Fail(Status::Conflict("the job was not created (concurrent change); retry"));
      });
}

}  // namespace

Plan HandleCreateUpload(CtxPtr ctx) {
  static const char* const kKeys[] = {"name", "size", "sha256", nullptr};
  const CoreConfig& config = *ctx->config;
  FieldReader r(ctx->body);
  std::string name, sha;
  int64_t size = 0;
  r.OnlyKeys(kKeys);
  r.String("name", &name, true, 1024);
  r.Int("size", &size, true, 0, config.max_upload_bytes);
  ReadSha256(r, "sha256", &sha, "");
  if (!r.ok()) return Plan::Fail(r.status());
  std::string id = NewId(ctx->req.entropy, "u");
  std::string key = "uploads/" + id + "/" + SanitizeName(name);
  // A developer's reservations not stored yet (and not yet given up by maintenance) are
  // bounded in number and bytes, in the same statement that reserves (operators: no bound).
  const std::string pending =
      "FROM uploads u WHERE u.owner_key_id = ?2 AND u.created_at >= ?8 AND NOT EXISTS "
      "(SELECT 1 FROM blobs WHERE blobs.key = u.key)";
  const bool limited = ctx->caller.role == kRoleDeveloper;
  const int64_t since = ctx->now() - int64_t(config.blob_gc_grace_s * 1000);
  Batch b;
  b.Add(
      "INSERT INTO uploads (id, owner_key_id, name, key, size, sha256, created_at) "
      "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE ?9 = 0 OR ((SELECT count(*) " +
          pending + ") < ?10 AND (SELECT COALESCE(SUM(u.size), 0) " + pending +
          ") + ?5 <= ?11) RETURNING id",
      {id, ctx->caller.id, name, key, size, sha, ctx->now(), since, int64_t(limited ? 1 : 0),
       config.max_pending_uploads, config.max_pending_upload_bytes});
  b.Add("SELECT count(*) AS n, COALESCE(SUM(u.size), 0) AS bytes " + pending,
        {SqlValue::Null(), ctx->caller.id, SqlValue::Null(), SqlValue::Null(), SqlValue::Null(),
         SqlValue::Null(), SqlValue::Null(), since});
  return Plan::Run(std::move(b), [ctx, id, key, size, sha](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const CoreConfig& c = *ctx->config;
    if (res.results[0].empty()) {
      const int64_t n = res.results[1].Get(0, "n").AsInt();
      if (n >= c.max_pending_uploads) {
        return Plan::Respond(ErrorResponse(
            429, "too_many_uploads",
            "this key holds " + std::to_string(n) + " upload reservations not stored yet (limit " +
                std::to_string(c.max_pending_uploads) + "); store or let them expire first"));
      }
      return Plan::Fail(
          Status(Code::kTooLarge, "pending uploads of this key would exceed " +
                                      std::to_string(c.max_pending_upload_bytes) + " bytes (" +
                                      std::to_string(res.results[1].Get(0, "bytes").AsInt()) +
                                      " reserved, not stored yet)"));
    }
    MintedUrl put = PutUrl(*ctx->config, key, size, sha, ctx->now());
    return RespondJson(201, {{"id", id},
                             {"uri", "blob://" + key},
                             {"key", key},
                             {"size", size},
                             {"sha256", sha},
                             {"url", put.url},
                             {"method", "PUT"},
                             {"expires_at", FormatTime(put.expires_at_ms)}});
  });
}

Plan HandleCreateJob(CtxPtr ctx) {
  static const char* const kKeys[] = {"kind",         "params",          "model",
                                      "dataset",      "requirements",    "priority",
                                      "max_failures", "verify_fraction", nullptr};
  const CoreConfig& config = *ctx->config;
  FieldReader r(ctx->body);
  std::string kind;
  const Json* params = nullptr;
  const Json* req = nullptr;
  int64_t priority = 0, max_failures = config.default_max_failures, min_vram = 0;
  r.OnlyKeys(kKeys);
  r.String("kind", &kind, true, 64);
  r.Object("params", &params, false);
  r.Object("requirements", &req, false);
  r.Int("priority", &priority, false, -1000, 1000);
  r.Int("max_failures", &max_failures, false, 1, 100);
  double verify_fraction = config.verify_fraction;
  r.Number("verify_fraction", &verify_fraction, false, 0, 1);
  if (!r.ok()) return Plan::Fail(r.status());
  static const char* const kReqKeys[] = {"min_vram_mb", nullptr};
  FieldReader rq(*req, "requirements.");
  rq.OnlyKeys(kReqKeys);
  rq.Int("min_vram_mb", &min_vram, false, 0, 10000000);
  if (!rq.ok()) return Plan::Fail(rq.status());
  if (!IsKnownJobKind(kind)) {
    return Plan::Fail(
        Status::Invalid("unknown job kind '" + kind + "' (known: synthetic, lora-sd)"));
  }
  // The model's files say its family (transformer/: FLUX), which decides the params that apply.
  // Params are checked before the inputs, so a message names the param at fault first.
  Result<Json> norm = NormalizeParams(kind, *params, ModelFamilyOfSpec(ctx->body));
  if (!norm.ok()) return Plan::Fail(norm.status());
  int64_t steps = (*norm)["steps"].get<int64_t>();

  Json spec = {{"kind", kind},
               {"params", *norm},
               {"requirements", {{"min_vram_mb", min_vram}}},
               {"priority", priority},
               {"max_failures", max_failures},
               {"verify_fraction", verify_fraction}};
  std::vector<InputRef> inputs;
  for (const char* field : {"model", "dataset"}) {
    bool present = r.Has(field);
    if (!present && JobKindNeedsInputs(kind)) {
      return Plan::Fail(Status::Invalid(std::string(field) + " is required for kind " + kind));
    }
    if (!present) continue;
    Json spec_part;
    Status st = ReadInput(ctx->body, field, std::string(field) == "model" && kind == "lora-sd",
                          config, &inputs, &spec_part);
    if (!st.ok()) return Plan::Fail(st);
    spec[field] = spec_part;
  }
  std::string idem = ctx->req.Header("idempotency-key");
  if (idem.size() > 200)
    return Plan::Fail(Status::Invalid("Idempotency-Key is longer than 200 bytes"));
  std::string spec_text = DumpJson(spec);
  if (int64_t(spec_text.size()) > config.max_spec_bytes) {
    return Plan::Fail(Status(Code::kTooLarge,
                             "the job spec is " + std::to_string(spec_text.size()) +
                                 " bytes; the limit is " + std::to_string(config.max_spec_bytes)));
  }
  std::string id = NewId(ctx->req.entropy, "j");

  // Every input must name an upload this caller may use, with the same sha256 (and, with the
  // built-in store, an object already stored). Checked inside the INSERT: one batch.
  std::string cond = "1";
  std::vector<SqlValue> cond_params;
  // Developers may hold at most max_active_jobs pending or running jobs (operators: no limit):
  // one counter row (api_keys.active_jobs, kept by triggers; migration 0003), whatever the
  // queue holds.
  const int64_t active_limit = IsOperator(ctx->caller) ? 0 : config.max_active_jobs;
  if (active_limit > 0) {
    cond += std::string(" AND ") + kActiveCount + " < ?";
    cond_params = {ctx->caller.id, active_limit};
  }
  InputsExistCondition(inputs, *ctx, &cond, &cond_params);
  // One statement in the common case: the INSERT returns the new row. Only when it inserted
  // nothing does a second, read-only batch find out why (replay, limit, inputs).
  Batch b;
  b.Add(
      "INSERT INTO jobs (id, owner_key_id, idempotency_key, kind, spec, state, priority, "
      "max_failures, min_vram_mb, steps_total, verify_fraction, created_at, updated_at) "
      "SELECT ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ? WHERE " +
          cond + " ON CONFLICT DO NOTHING RETURNING " + kJobColumns,
      Cat({id, ctx->caller.id, idem.empty() ? SqlValue::Null() : SqlValue(idem), kind, spec_text,
           priority, max_failures, min_vram, steps, verify_fraction, ctx->now(), ctx->now()},
          cond_params));
  return Plan::Run(std::move(b),
                   [ctx, inputs, spec_text, active_limit, idem](BatchResult res) -> Plan {
                     if (!res.status.ok()) return DbFail(res.status);
                     if (!res.results[0].empty())
                       return RespondJson(201, JobJson(res.results[0], 0, ctx->now()));
                     return ExplainRefusedJob(ctx, inputs, spec_text, active_limit, idem);
                   });
}

}  // namespace gleaner::core
