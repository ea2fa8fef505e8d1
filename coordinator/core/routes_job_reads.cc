// Developer/operator views of jobs: get, list (keyset pagination), cancel, events, result
// (with the samples of the final weights).
// A developer sees only jobs created with their key; another's job is 404 (existence is not
// leaked). Operators see every job.
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/ids.h"
#include "coordinator/core/job_view.h"
#include "coordinator/core/routes.h"
#include "coordinator/core/taint.h"

namespace gleaner::core {
namespace {

// A stored reproducibility class (repro_class.h) as the object it was reported as.
Json ClassOrNull(const SqlValue& v) {
  if (v.is_null()) return nullptr;
  Result<Json> c = ParseJson(v.AsText());
  return c.ok() ? std::move(c).value() : Json(nullptr);
}

// Outputs stored as canonical text (outputs.h), as JSON; null when none.
Json OutputsOrNull(const SqlValue& v) {
  if (v.is_null()) return nullptr;
  Result<Json> j = ParseJson(v.AsText());
  return j.ok() ? *j : Json(nullptr);
}

Plan NoSuchJob() {
  return Plan::Fail(Status::NotFound("no such job"));
}

bool ParseInt(const std::string& s, int64_t min, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

Plan HandleGetJob(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return NoSuchJob();
  Batch b;
  b.Add(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ? AND " + OwnerSql(),
        Cat({ctx->args[0]}, OwnerParams(*ctx)));
  return Plan::Run(std::move(b), [ctx](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return NoSuchJob();
    return RespondJson(200, JobJson(res.results[0], 0, ctx->now()));
  });
}

// GET /v1/jobs?state=&limit=&cursor= : newest first, keyset pagination on (created_at, id),
// so pages are stable while jobs are added. next_cursor is null on the last page.
Plan HandleListJobs(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  std::string state, limit_s, cursor;
  int64_t limit = 50;
  if (q.Get("limit", &limit_s) && !ParseInt(limit_s, 1, 500, &limit)) {
    return Plan::Fail(Status::Invalid("limit must be an integer in [1, 500]"));
  }
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE " + OwnerSql();
  std::vector<SqlValue> params = OwnerParams(*ctx);
  if (q.Get("state", &state)) {
    if (state != "pending" && state != "running" && state != "verifying" && state != "completed" &&
        state != "failed" && state != "canceled") {
      return Plan::Fail(Status::Invalid(
          "state must be one of: pending, running, verifying, completed, failed, canceled"));
    }
    sql += " AND state = ?";
    params.push_back(state);
  }
  if (q.Get("cursor", &cursor)) {
    int64_t created_at = 0;
    std::string id;
    if (!DecodeCursor(cursor, &created_at, &id)) return Plan::Fail(Status::Invalid("bad cursor"));
    sql += " AND (created_at < ? OR (created_at = ? AND id < ?))";
    params = Cat(params, {created_at, created_at, id});
  }
  sql += " ORDER BY created_at DESC, id DESC LIMIT ?";
  params.push_back(limit + 1);
  Batch b;
  b.Add(sql, params);
  return Plan::Run(std::move(b), [ctx, limit](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[0];
    Json jobs = Json::array();
    size_t n = std::min(rows.rows.size(), size_t(limit));
    for (size_t i = 0; i < n; ++i) jobs.push_back(JobJson(rows, i, ctx->now()));
    Json next = nullptr;
    if (rows.rows.size() > size_t(limit)) {
      next = EncodeCursor(rows.Get(n - 1, "created_at").AsInt(), rows.Get(n - 1, "id").AsText());
    }
    return RespondJson(200, {{"jobs", jobs}, {"next_cursor", next}});
  });
}

// Cancel: pending or running -> canceled at once. The lease holder's next heartbeat answers
// {cancel: true}; every other write of that lease is 409. Canceling a canceled job is a no-op
// (200); a completed or failed job cannot be canceled (409).
Plan HandleCancelJob(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return NoSuchJob();
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"reason", nullptr};
  r.OnlyKeys(kKeys);
  std::string reason = "canceled";
  r.String("reason", &reason, false, 1000);
  if (!r.ok()) return Plan::Fail(r.status());
  const std::string& id = ctx->args[0];
  std::string guard = "id = ? AND state IN ('pending', 'running') AND " + OwnerSql();
  std::vector<SqlValue> gp = Cat({id}, OwnerParams(*ctx));
  Batch b;
  b.Add(
      "UPDATE segments SET ended_at = ?, end_reason = 'canceled' WHERE job_id = ? AND "
      "ended_at IS NULL AND EXISTS (SELECT 1 FROM jobs WHERE " +
          guard + ")",
      Cat({ctx->now(), id}, gp));
  b.Add("UPDATE jobs SET state = 'canceled', reason = ?, finished_at = ?, updated_at = ? WHERE " +
            guard,
        Cat({reason, ctx->now(), ctx->now()}, gp));
  b.Add(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ? AND " + OwnerSql(), gp);
  return Plan::Run(std::move(b), [ctx](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& job = res.results[2];
    if (job.empty()) return NoSuchJob();
    const std::string& state = job.Get(0, "state").AsText();
    if (state != "canceled") {
      return Plan::Fail(Status::Conflict("job is already " + state + " and cannot be canceled"));
    }
    return RespondJson(200, JobJson(job, 0, ctx->now()));
  });
}

// Segments (one per lease), failures (node faults) and input errors, for timelines. The price per
// hour a segment was billed at is the operator's business: only an operator sees it (a developer
// sees each cost).
Plan HandleJobEvents(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return NoSuchJob();
  const std::string& id = ctx->args[0];
  std::string owned = "EXISTS (SELECT 1 FROM jobs WHERE id = ? AND " + OwnerSql() + ")";
  std::vector<SqlValue> op = Cat({id}, OwnerParams(*ctx));
  Batch b;
  b.Add(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ? AND " + OwnerSql(), op);
  b.Add(std::string("SELECT s.*, ") + kSegmentCostSql +
            " AS cost_usd FROM segments s WHERE s.job_id = ? AND " + owned + " ORDER BY s.epoch",
        Cat({id}, op));
  b.Add("SELECT node_id, reason, at FROM job_bans WHERE job_id = ? AND " + owned +
            " ORDER BY at, rowid",
        Cat({id}, op));
  b.Add(
      "SELECT step, epoch, sha256, size, outputs, committed_at FROM checkpoints WHERE job_id = ? "
      "AND " +
          owned + " ORDER BY step",
      Cat({id}, op));
  b.Add(std::string("SELECT v.*, ") + kVerificationCostSql +
            " AS cost_usd FROM verifications v WHERE v.job_id = ? AND " + owned +
            " ORDER BY v.created_at, v.id",
        Cat({id}, op));
  b.Add(
      "SELECT node_id, epoch, step, reason, at, outcome, outcome_at FROM input_errors WHERE "
      "job_id = ? AND " +
          owned + " ORDER BY at, epoch",
      Cat({id}, op));
  b.Add("SELECT at, node_id, step, outputs FROM job_reopens WHERE job_id = ? AND " + owned +
            " ORDER BY at, node_id",
        Cat({id}, op));
  return Plan::Run(std::move(b), [ctx](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (res.results[0].empty()) return NoSuchJob();
    Json segments = Json::array();
    const Rows& s = res.results[1];
    for (size_t i = 0; i < s.rows.size(); ++i) {
      auto get = [&](const char* c) -> const SqlValue& { return s.Get(i, c); };
      segments.push_back(
          {{"epoch", get("epoch").AsInt()},
           {"node_id", get("node_id").AsText()},
           {"gpu", get("gpu_name").AsText()},
           {"usd_per_hour", get("usd_per_hour").AsReal()},
           {"heartbeat_interval", get("heartbeat_interval_s").AsReal()},
           {"started_at", TimeOrNull(get("started_at"))},
           {"first_heartbeat_at", TimeOrNull(get("first_heartbeat_at"))},
           {"last_heartbeat_at", TimeOrNull(get("last_heartbeat_at"))},
           {"heartbeats", get("heartbeats").AsInt()},
           {"step_start", get("step_start").AsInt()},
           {"step_end", get("step_end").AsInt()},
           {"step_committed", get("step_committed").AsInt()},
           {"last_loss",
            get("last_loss").is_null() ? Json(nullptr) : Json(get("last_loss").AsReal())},
           {"ended_at", TimeOrNull(get("ended_at"))},
           {"end_reason",
            get("end_reason").is_null() ? Json(nullptr) : Json(get("end_reason").AsText())},
           {"note", get("note").is_null() ? Json(nullptr) : Json(get("note").AsText())},
           {"rework", get("rework").AsInt() != 0},
           {"cost_usd", get("cost_usd").AsReal()}});
      if (!IsOperator(ctx->caller)) segments.back().erase("usd_per_hour");
    }
    Json failures = Json::array();
    const Rows& f = res.results[2];
    for (size_t i = 0; i < f.rows.size(); ++i) {
      failures.push_back({{"node_id", f.Get(i, "node_id").AsText()},
                          {"reason", f.Get(i, "reason").AsText()},
                          {"at", TimeOrNull(f.Get(i, "at"))}});
    }
    Json ckpts = Json::array();
    const Rows& c = res.results[3];
    for (size_t i = 0; i < c.rows.size(); ++i) {
      ckpts.push_back({{"step", c.Get(i, "step").AsInt()},
                       {"epoch", c.Get(i, "epoch").AsInt()},
                       {"sha256", c.Get(i, "sha256").AsText()},
                       {"size", c.Get(i, "size").AsInt()},
                       {"outputs", OutputsOrNull(c.Get(i, "outputs"))},
                       {"committed_at", TimeOrNull(c.Get(i, "committed_at"))}});
    }
    // Replays of segments (verification.h): who trained, who replayed, the verdict.
    Json verifications = Json::array();
    const Rows& v = res.results[4];
    for (size_t i = 0; i < v.rows.size(); ++i) {
      auto get = [&](const char* c) -> const SqlValue& { return v.Get(i, c); };
      auto text = [&](const char* c) {
        return get(c).is_null() ? Json(nullptr) : Json(get(c).AsText());
      };
      verifications.push_back({{"id", get("id").AsText()},
                               {"round", get("round").AsInt()},
                               {"step_from", get("step_from").AsInt()},
                               {"step", get("step").AsInt()},
                               {"trainer_node", get("trainer_node").AsText()},
                               {"trainer_gpu", text("trainer_gpu")},
                               {"trainer_class", ClassOrNull(get("trainer_class"))},
                               {"verifier_class", ClassOrNull(get("verifier_class"))},
                               {"claimed_sha256", get("claimed_sha256").AsText()},
                               {"result_sha256", text("result_sha256")},
                               {"claimed_outputs", OutputsOrNull(get("claimed_outputs"))},
                               {"result_outputs", OutputsOrNull(get("result_outputs"))},
                               {"node_id", text("node_id")},
                               {"state", get("state").AsText()},
                               {"verdict", text("verdict")},
                               {"created_at", TimeOrNull(get("created_at"))},
                               {"started_at", TimeOrNull(get("started_at"))},
                               {"ended_at", TimeOrNull(get("ended_at"))},
                               {"cost_usd", get("cost_usd").AsReal()}});
    }
    // Input errors (attribution.h): each report, and what became of it.
    Json input_errors = Json::array();
    const Rows& e = res.results[5];
    for (size_t i = 0; i < e.rows.size(); ++i) {
      const SqlValue& outcome = e.Get(i, "outcome");
      input_errors.push_back(
          {{"node_id", e.Get(i, "node_id").AsText()},
           {"epoch", e.Get(i, "epoch").AsInt()},
           {"step", e.Get(i, "step").AsInt()},
           {"reason", e.Get(i, "reason").AsText()},
           {"at", TimeOrNull(e.Get(i, "at"))},
           {"outcome", outcome.is_null() ? "awaiting_confirmation" : outcome.AsText()},
           {"outcome_at", TimeOrNull(e.Get(i, "outcome_at"))}});
    }
    // Reopens (taint.h): the job went back to the queue because a node in its lineage was
    // found forging; the outputs it had released then are named so they can be discarded.
    Json reopens = Json::array();
    const Rows& ro = res.results[6];
    for (size_t i = 0; i < ro.rows.size(); ++i) {
      const SqlValue& released = ro.Get(i, "outputs");
      Json files = Json::array();
      if (!released.is_null()) {
        Result<Json> o = ParseJson(released.AsText());
        if (o.ok() && o->is_array()) {
          for (const Json& item : *o) {
            files.push_back({{"name", item.value("name", "")},
                             {"sha256", item.value("sha256", "")},
                             {"size", item.value("size", int64_t(0))}});
          }
        }
      }
      reopens.push_back({{"at", TimeOrNull(ro.Get(i, "at"))},
                         {"event", kReopenedMessage},
                         {"node_id", ro.Get(i, "node_id").AsText()},
                         {"step", ro.Get(i, "step").AsInt()},
                         {"outputs_released", files}});
    }
    return RespondJson(200, {{"job", JobJson(res.results[0], 0, ctx->now())},
                             {"segments", segments},
                             {"reopened", reopens},
                             {"failures", failures},
                             {"input_errors", input_errors},
                             {"checkpoints", ckpts},
                             {"verifications", verifications}});
  });
}

// Download URLs of a completed job's outputs (409 until it is completed).
Plan HandleJobResult(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return NoSuchJob();
  Batch b;
  b.Add("SELECT id, state, outputs FROM jobs WHERE id = ? AND " + OwnerSql(),
        Cat({ctx->args[0]}, OwnerParams(*ctx)));
  // The samples of the final weights (the newest sample step), answered only to the owner.
  const std::string last = "(SELECT MAX(step) FROM sample_steps WHERE job_id = ?)";
  b.Add("SELECT step, seed, seconds, committed_at FROM sample_steps WHERE job_id = ? AND step = " +
            last,
        {ctx->args[0], ctx->args[0]});
  b.Add(
      "SELECT step, idx, key, sha256, size, prompt, negative_prompt FROM samples WHERE "
      "job_id = ? AND step = " +
          last + " ORDER BY idx",
      {ctx->args[0], ctx->args[0]});
  return Plan::Run(std::move(b), [ctx](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[0];
    if (rows.empty()) return NoSuchJob();
    const std::string& state = rows.Get(0, "state").AsText();
    if (state != "completed") {
      return Plan::Fail(
          Status::Conflict("job is " + state + "; results exist once it is completed"));
    }
    Json outputs = Json::array();
    Result<Json> stored = ParseJson(rows.Get(0, "outputs").AsText());
    if (stored.ok() && stored->is_array()) {
      for (const Json& o : *stored) {
        std::string key = o.value("key", "");
        MintedUrl get = GetUrl(*ctx->config, key, ctx->now());
        outputs.push_back({{"name", o.value("name", "")},
                           {"sha256", o.value("sha256", "")},
                           {"size", o.value("size", int64_t(0))},
                           {"url", get.url},
                           {"expires_at", FormatTime(get.expires_at_ms)}});
      }
    }
    Json samples = SampleStepsJson(res.results[1], res.results[2], *ctx);
    return RespondJson(200, {{"job_id", ctx->args[0]},
                             {"outputs", outputs},
                             {"samples", samples.empty() ? Json(nullptr) : samples[0]}});
  });
}

}  // namespace gleaner::core
