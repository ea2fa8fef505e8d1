// POST /v1/work (node): claim one job in a single conditional batch (DESIGN §2.2).
//
// Order: running jobs whose lease expired (stalled) first, then pending jobs; each by priority
// DESC, then age (created_at, id). Never a job banned for this node (job_bans), never one whose
// min_vram_mb exceeds the node's VRAM, never for a quarantined node (the node's state is checked
// inside the same statement), never one awaiting confirmation of an input error for a node of
// the reporter's machine (attribution.h: a second machine confirms it). The claim bumps lease_epoch
// and stamps a fresh lease_nonce; the rest of the batch selects by that nonce, so it acts only if
// this claim won.
//
// A node that sends {"verify": true} also takes verification work (verification.h) when no job
// is claimable, so verification never delays a job: never one whose segment it trained itself
// (nor, in round 2, one it verified in round 1), nor one of a job it held a lease of since the
// segment's base checkpoint, and only one trained on the device it reports
// (same GPU model, or both CPU). The verification claim is in the same batch,
// guarded by "no job was claimed by this nonce". A replay open longer than verify_max_wait_s
// is overdue: for a verifying node it goes ahead of queued jobs (the job claim is guarded by
// "no overdue replay this node may take"), so a full queue cannot hold checks back for ever.
// Among replays, a round-2 tie-breaker goes first: it settles a disagreement (and quarantines a
// forger, voiding the replays of its other segments) sooner than any round-1 check can, and a
// node holds one lease at a time.
//
// One lease per node: a node that holds a live lease (a running job assigned to it, or a
// running verification, whose lease has not expired) gets nothing more; the condition is part of
// both claims' statements. It gets 204 with Retry-After and a Gleaner-Lease-Held header naming
// the lease it holds ("job <id>" or "verification <id>"). An expired lease of its own does not
// count: the node may take that job back as a stalled one.
//
// POST /v1/jobs/{id}/downloads (lease holder): the claim's download URLs, minted again.
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/ids.h"
#include "coordinator/core/lease.h"
#include "coordinator/core/repro_class.h"
#include "coordinator/core/routes.h"
#include "shared/model_manifest.h"

namespace gleaner::core {
namespace {

// Sizes of the job's inputs (declared at upload, enforced by the upload URL); `job_match`
// selects the job row `j`.
std::string InputSizesSql(const std::string& job_match) {
  return "SELECT u.key, u.size FROM uploads u JOIN jobs j ON " + job_match +
         " WHERE u.key IN (json_extract(j.spec, '$.model.key'), "
         "json_extract(j.spec, '$.dataset.key'))";
}

// A diffusers folder's files (spec model.files): uploads get a minted GET URL, the others
// keep their own url (no expiry) and are marked "remote" (docs/api.md).
Json ModelFileDownloads(const CoreConfig& config, int64_t now, const Json& files) {
  Json out = Json::array();
  if (!files.is_array()) return out;
  for (const Json& f : files) {
    if (!f.is_object()) continue;
    Json o = {{"path", f.value("path", "")},
              {"sha256", f.value("sha256", "")},
              {"size", f.value("size", int64_t(-1))}};
    std::string key = f.value("key", "");
    if (key.empty()) {
      o["url"] = f.value("url", "");
      o["remote"] = true;  // not this coordinator's store: the node fetches it guarded
    } else {
      MintedUrl get = GetUrl(config, key, now);
      o["url"] = get.url;
      o["expires_at"] = FormatTime(get.expires_at_ms);
    }
    out.push_back(std::move(o));
  }
  return out;
}

// Sets body["inputs"] (one freshly minted GET URL per input in the spec) and, when the job has
// a committed checkpoint, body["resume"]. `job` has the ckpt_* columns, `sizes` InputSizesSql.
// The model input says its form ("format", shared/model_manifest.h): a folder of files is a
// diffusers model, one file the UNet weights (its config is job.model.config), so the node
// never guesses it.
void AddDownloads(const CoreConfig& config, int64_t now, const Json& spec, const Rows& job,
                  const Rows& sizes, Json* body) {
  Json inputs = Json::object();
  for (const char* field : {"model", "dataset"}) {
    if (!spec.contains(field)) continue;
    const bool model = std::string(field) == "model";
    if (spec[field].contains("files")) {
      inputs[field] = {{"files", ModelFileDownloads(config, now, spec[field]["files"])}};
      if (model) inputs[field]["format"] = kModelFormatDiffusers;
      continue;
    }
    std::string key = spec[field].value("key", "");
    int64_t size = -1;
    for (size_t i = 0; i < sizes.rows.size(); ++i) {
      if (sizes.Get(i, "key").AsText() == key) size = sizes.Get(i, "size").AsInt();
    }
    MintedUrl get = GetUrl(config, key, now);
    inputs[field] = {{"url", get.url},
                     {"sha256", spec[field].value("sha256", "")},
                     {"size", size},
                     {"expires_at", FormatTime(get.expires_at_ms)}};
    if (model) inputs[field]["format"] = kModelFormatUnetSafetensors;
  }
  (*body)["inputs"] = std::move(inputs);
  if (!job.Get(0, "ckpt_step").is_null()) {
    MintedUrl get = GetUrl(config, job.Get(0, "ckpt_key").AsText(), now);
    (*body)["resume"] = {{"step", job.Get(0, "ckpt_step").AsInt()},
                         {"url", get.url},
                         {"sha256", job.Get(0, "ckpt_sha256").AsText()},
                         {"size", job.Get(0, "ckpt_size").AsInt()},
                         {"expires_at", FormatTime(get.expires_at_ms)}};
  }
}

Json ParseSpec(const std::string& text) {
  Result<Json> parsed = ParseJson(text);
  if (parsed.ok() && parsed->is_object()) return std::move(parsed).value();
  return Json::object();
}

// A claim's answer {job, lease, inputs, resume?} from a row with id, kind, spec, steps_total,
// lease_epoch, lease_expires_at and the ckpt_* columns, and the input sizes (InputSizesSql).
Json ClaimJson(const Ctx& ctx, const Rows& row, const Rows& sizes) {
  const CoreConfig& config = *ctx.config;
  Json spec = ParseSpec(row.Get(0, "spec").AsText());
  Json j = {{"id", row.Get(0, "id").AsText()},
            {"kind", row.Get(0, "kind").AsText()},
            {"params", spec.contains("params") ? spec["params"] : Json::object()},
            {"steps", row.Get(0, "steps_total").AsInt()}};
  if (spec.contains("model") && spec["model"].contains("config")) {
    j["model"] = {{"config", spec["model"]["config"]}};
  }
  Json body = {{"job", j},
               {"lease",
                {{"epoch", row.Get(0, "lease_epoch").AsInt()},
                 {"expires_at", FormatTime(row.Get(0, "lease_expires_at").AsInt())},
                 {"ttl_s", config.stall_after_s},
                 {"heartbeat_interval", config.heartbeat_interval_s}}}};
  AddDownloads(config, ctx.now(), spec, row, sizes, &body);
  return body;
}

// The open verifications `v` (joined with their job `j`) node ?2 may take at time ?3: pending,
// or running with an expired lease; not its own segment, nor, in round 2, one it replayed in
// round 1; not by a node that held a lease of the job since the checkpoint under check was
// committed (the verification opens at that commit) that reached the segment's base (a segment
// row started at or after v.created_at with step_end >= step_from: such a node may have been
// handed the checkpoint under check, or one after it, and could answer without replaying; a
// lease from before the commit cannot have seen those bytes, so a small fleet whose nodes took
// turns on the job can still check each other); the device the segment was trained on
// (results are compared exactly, and only the same device can reproduce them); a job still
// alive; enough VRAM on an active node.
const char* const kVerificationOpenToNode =
    "v.state IN ('pending', 'running') AND (v.state = 'pending' OR v.lease_expires_at < ?3) AND "
    "v.trainer_node <> ?2 AND (v.other_node IS NULL OR v.other_node <> ?2) AND "
    "NOT EXISTS (SELECT 1 FROM segments s WHERE s.job_id = v.job_id AND s.node_id = ?2 AND "
    "s.started_at >= v.created_at AND s.step_end >= v.step_from) AND "
    "(v.trainer_gpu IS NULL OR v.trainer_gpu = (SELECT n.gpu_name FROM nodes n WHERE n.id = "
    "?2)) AND (v.trainer_class IS NULL OR v.trainer_class = (SELECT n.repro_class FROM nodes n "
    "WHERE n.id = ?2)) AND j.state "
    "IN ('pending', 'running', 'verifying', 'completed') AND j.min_vram_mb <= "
    "(SELECT "
    "n.vram_mb FROM nodes n WHERE n.id = ?2 AND n.state = 'active')";

// The node ?2 holds no live lease at ?3: no running job and no running verification assigned to
// it whose lease has not expired (jobs_running_node, verifications_running_node).
const char* const kNoLiveLease =
    "NOT EXISTS (SELECT 1 FROM jobs h WHERE h.node_id = ?2 AND h.state = 'running' AND "
    "h.lease_expires_at >= ?3) AND NOT EXISTS (SELECT 1 FROM verifications hv WHERE "
    "hv.node_id = ?2 AND hv.state = 'running' AND hv.lease_expires_at >= ?3)";

// Statements 6-8 of the claim batch: claim the oldest open verification this node may take
// unless the batch claimed a job; read it with its job; its job's input sizes. Parameters as in
// the claim: ?1 nonce, ?2 node, ?3 now, ?4 expiry.
void AddVerificationClaim(const CtxPtr& ctx, const std::string& nonce, Batch* b) {
  const int64_t now = ctx->now();
  const int64_t expires = now + int64_t(ctx->config->stall_after_s * 1000);
  b->Add(
      "UPDATE verifications SET state = 'running', lease_epoch = lease_epoch + 1, "
      "lease_nonce = ?1, node_id = ?2, lease_expires_at = ?4, started_at = ?3, "
      "gpu_name = (SELECT gpu_name FROM nodes WHERE id = ?2), verifier_class = (SELECT "
      "repro_class FROM nodes WHERE id = ?2), usd_per_hour = "
      "COALESCE((SELECT p.usd_per_hour FROM prices p, nodes n WHERE n.id = ?2 AND p.gpu = "
      "n.gpu_name), (SELECT p.usd_per_hour FROM prices p WHERE p.gpu = '*'), 0) "
      "WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE lease_nonce = ?1) AND " +
          std::string(kNoLiveLease) +
          " AND id = ("
          "SELECT v.id FROM verifications v JOIN jobs j ON j.id = v.job_id WHERE " +
          std::string(kVerificationOpenToNode) +
          " ORDER BY v.round DESC, v.created_at, v.id LIMIT 1)",
      {nonce, ctx->caller.id, now, expires});
  b->Add(
      "SELECT v.id AS verification_id, v.round, v.step, v.lease_epoch, v.lease_expires_at, "
      "CASE WHEN v.from_key IS NULL THEN NULL ELSE v.step_from END AS ckpt_step, "
      "v.from_key AS ckpt_key, v.from_sha256 AS ckpt_sha256, v.from_size AS ckpt_size, "
      "j.id, j.kind, j.spec, j.steps_total FROM verifications v JOIN jobs j ON j.id = v.job_id "
      "WHERE v.lease_nonce = ?",
      {nonce});
  b->Add(InputSizesSql("j.id = (SELECT job_id FROM verifications WHERE lease_nonce = ?)"), {nonce});
}

// The claim's answer for a verification: the job as a resume from checkpoint k, with
// "verification": {id, stop_step, round}. The node trains to stop_step (the job's steps stay
// the job's: a schedule over them must not change) and uploads that checkpoint through the
// verification's routes instead of the job's.
Plan RespondVerificationClaim(const Ctx& ctx, const Rows& v, const Rows& sizes) {
  Json body = ClaimJson(ctx, v, sizes);
  body["verification"] = {{"id", v.Get(0, "verification_id").AsText()},
                          {"stop_step", v.Get(0, "step").AsInt()},
                          {"round", v.Get(0, "round").AsInt()}};
  return RespondJson(200, body);
}

}  // namespace

Plan HandleWork(CtxPtr ctx) {
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"verify", "repro_class", nullptr};
  r.OnlyKeys(kKeys);
  bool verify = false;
  r.Bool("verify", &verify, false);
  if (!r.ok()) return Plan::Fail(r.status());
  // The node's reproducibility class, reported with each claim (repro_class.h): it applies
  // from this claim's replay match and the checkpoints this lease commits on.
  std::string repro;
  Status rc = ReadReproClass(ctx->body, "repro_class", &repro);
  if (!rc.ok() && rc.code() != Code::kNotFound) return Plan::Fail(rc);
  const SqlValue repro_class = rc.ok() ? SqlValue(repro) : SqlValue::Null();
  const CoreConfig& config = *ctx->config;
  const int64_t now = ctx->now();
  const std::string& node = ctx->caller.id;
  if (ctx->caller.node_state != "active") {
    HttpResponse resp = HttpResponse::NoContent();
    resp.headers.emplace_back("Retry-After", std::to_string(int64_t(config.retry_after_s + 0.999)));
    resp.headers.emplace_back("Gleaner-Node-State", ctx->caller.node_state);
    return Plan::Respond(std::move(resp));
  }
  std::string nonce = DeriveHex(ctx->req.entropy, "lease-nonce");
  int64_t stall_ms = int64_t(config.stall_after_s * 1000);
  // Parameters: ?1 nonce, ?2 node, ?3 now, ?4 lease expiry.
  const std::string eligible =
      "j.min_vram_mb <= (SELECT n.vram_mb FROM nodes n WHERE n.id = ?2 AND n.state = 'active') "
      "AND NOT EXISTS (SELECT 1 FROM job_bans b WHERE b.job_id = j.id AND b.node_id = ?2) "
      "AND NOT EXISTS (SELECT 1 FROM input_errors e WHERE e.job_id = j.id AND e.outcome IS NULL "
      "AND (e.node_id = ?2 OR e.machine_id = (SELECT n.machine_id FROM nodes n WHERE n.id = "
      "?2)))";
  // A verifying node takes an overdue replay (opened at or before ?5) before any job.
  const std::string no_overdue_replay =
      verify ? std::string(
                   " AND NOT EXISTS (SELECT 1 FROM verifications v JOIN jobs j ON j.id = "
                   "v.job_id WHERE v.created_at <= ?5 AND ") +
                   kVerificationOpenToNode + ")"
             : std::string();
  Batch b;
  b.Add(
      "UPDATE jobs SET state = 'running', lease_epoch = lease_epoch + 1, lease_nonce = ?1, "
      "node_id = ?2, lease_expires_at = ?4, attempts = attempts + 1, updated_at = ?3, "
      "first_started_at = COALESCE(first_started_at, ?3), step_done = COALESCE(ckpt_step, 0), "
      "progress_at = ?3 WHERE " +
          std::string(kNoLiveLease) +
          " AND id = COALESCE("
          // INDEXED BY: otherwise SQLite walks every running job in queue order (jobs_queue) to
          // find the expired ones; expired leases are few, sorting them is cheap.
          "(SELECT j.id FROM jobs j INDEXED BY jobs_leases WHERE j.state = 'running' AND "
          "j.lease_expires_at < ?3 AND " +
          eligible +
          " ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1), "
          "(SELECT j.id FROM jobs j WHERE j.state = 'pending' AND " +
          eligible + " ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1))" + no_overdue_replay +
          " RETURNING id, kind, spec, lease_epoch, steps_total, lease_expires_at, ckpt_step, "
          "ckpt_key, ckpt_sha256, ckpt_size",
      verify ? std::vector<SqlValue>{nonce, node, now, now + stall_ms,
                                     now - int64_t(config.verify_max_wait_s * 1000)}
             : std::vector<SqlValue>{nonce, node, now, now + stall_ms});
  // A stalled lease taken over: its segment ends as 'stalled' (if maintenance has not yet).
  b.Add(
      "UPDATE segments SET ended_at = COALESCE(last_heartbeat_at, started_at), "
      "end_reason = 'stalled' WHERE ended_at IS NULL AND job_id = (SELECT id FROM jobs WHERE "
      "lease_nonce = ?1) AND epoch < (SELECT lease_epoch FROM jobs WHERE lease_nonce = ?1)",
      {nonce});
  b.Add(
      "INSERT INTO segments (job_id, epoch, node_id, gpu_name, repro_class, usd_per_hour, "
      "heartbeat_interval_s, started_at, step_start, step_end, step_committed) "
      "SELECT j.id, j.lease_epoch, n.id, n.gpu_name, COALESCE(?5, n.repro_class), COALESCE((SELECT "
      "p.usd_per_hour FROM prices "
      "p WHERE p.gpu = n.gpu_name), (SELECT p.usd_per_hour FROM prices p WHERE p.gpu = '*'), 0), "
      "?3, ?4, COALESCE(j.ckpt_step, 0), COALESCE(j.ckpt_step, 0), COALESCE(j.ckpt_step, 0) "
      "FROM jobs j JOIN nodes n ON n.id = ?2 WHERE j.lease_nonce = ?1",
      {nonce, node, config.heartbeat_interval_s, now, repro_class});
  b.Add("UPDATE nodes SET last_seen_at = ?, repro_class = COALESCE(?, repro_class) WHERE id = ?",
        {now, repro_class, node});
  b.Add(InputSizesSql("j.lease_nonce = ?"), {nonce});
  // The live lease that kept this node from a claim, if any (only to say so in the 204).
  b.Add(
      "SELECT 'job ' || id AS lease FROM jobs WHERE node_id = ?2 AND state = 'running' AND "
      "lease_expires_at >= ?3 AND lease_nonce IS NOT ?1 UNION ALL SELECT 'verification ' || id "
      "FROM verifications WHERE node_id = ?2 AND state = 'running' AND lease_expires_at >= ?3 "
      "AND lease_nonce IS NOT ?1 LIMIT 1",
      {nonce, node, now});
  if (verify) AddVerificationClaim(ctx, nonce, &b);
  return Plan::Run(std::move(b), [ctx, verify](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const CoreConfig& config = *ctx->config;
    const Rows& job = res.results[0];
    if (job.empty() && verify && !res.results[7].empty()) {
      return RespondVerificationClaim(*ctx, res.results[7], res.results[8]);
    }
    if (job.empty()) {
      HttpResponse resp = HttpResponse::NoContent();
      resp.headers.emplace_back("Retry-After",
                                std::to_string(int64_t(config.retry_after_s + 0.999)));
      const Rows& held = res.results[5];
      if (!held.empty())
        resp.headers.emplace_back("Gleaner-Lease-Held", held.Get(0, "lease").AsText());
      return Plan::Respond(std::move(resp));
    }
    return RespondJson(200, ClaimJson(*ctx, job, res.results[4]));
  });
}

// POST /v1/jobs/{id}/downloads {epoch} -> {inputs, resume?}: the claim's download URLs minted
// again, for a holder whose first URLs expired during a long download. Read-only.
Plan HandleDownloads(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  int64_t epoch = 0;
  Status body = ReadEpochOnly(ctx->body, &epoch);
  if (!body.ok()) return Plan::Fail(body);
  Batch b;
  b.Add(std::string("SELECT ") + kLeaseColumns + ", ckpt_key, spec FROM jobs WHERE id = ?",
        {ctx->args[0]});
  b.Add(InputSizesSql("j.id = ?"), {ctx->args[0]});
  return Plan::Run(std::move(b), [ctx, epoch](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& job = res.results[0];
    Status st = ExplainLease(job, *ctx, epoch);
    if (!st.ok()) return Plan::Fail(st);
    Json body = Json::object();
    AddDownloads(*ctx->config, ctx->now(), ParseSpec(job.Get(0, "spec").AsText()), job,
                 res.results[1], &body);
    return RespondJson(200, body);
  });
}

}  // namespace gleaner::core
