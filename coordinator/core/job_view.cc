#include "coordinator/core/job_view.h"

#include "coordinator/core/http.h"

namespace gleaner::core {

#define VERIFICATION_COST_SQL "v.billed_ms * COALESCE(v.usd_per_hour, 0) / 3600000.0"
const char* const kVerificationCostSql = "(" VERIFICATION_COST_SQL ")";

const char* const kSegmentCostSql =
    "(s.heartbeats * s.heartbeat_interval_s * s.usd_per_hour / 3600.0)";

const char* const kJobColumns =
    "id, owner_key_id, kind, spec, state, priority, max_failures, min_vram_mb, steps_total, "
    "step_done, lease_epoch, node_id, lease_expires_at, attempts, failures, ckpt_step, "
    "ckpt_sha256, ckpt_size, ckpt_committed_at, outputs, reason, created_at, updated_at, "
    "first_started_at, finished_at, "
    "(SELECT COALESCE(SUM(s.heartbeats * s.heartbeat_interval_s * s.usd_per_hour / 3600.0), 0) "
    "FROM segments s WHERE s.job_id = jobs.id AND s.rework = 0) AS cost_usd, "
    "(SELECT COALESCE(SUM(s.heartbeats * s.heartbeat_interval_s * s.usd_per_hour / 3600.0), 0) "
    "FROM segments s WHERE s.job_id = jobs.id AND s.rework = 1) AS rework_cost_usd, "
    "(SELECT COUNT(*) FROM verifications v WHERE v.job_id = jobs.id AND v.state = 'done' AND "
    "v.verdict = 'unverifiable') AS verify_unverifiable, "
    "(SELECT COUNT(*) FROM job_reopens r WHERE r.job_id = jobs.id) AS reopened, "
    "(SELECT COALESCE(SUM(seconds), 0) FROM sample_steps WHERE job_id = jobs.id) AS sampling_s, "
    "(SELECT MAX(step) FROM sample_steps WHERE job_id = jobs.id) AS sample_step, "
    "verify_fraction, "
    "(SELECT COUNT(*) FROM verifications v WHERE v.job_id = jobs.id AND v.state = 'done' AND "
    "v.verdict IN ('agree', 'verifier_bad')) AS verify_agreed, "
    "(SELECT COUNT(*) FROM verifications v WHERE v.job_id = jobs.id AND v.state = 'done' AND "
    "v.verdict IN ('trainer_bad', 'no_majority')) AS verify_rejected, "
    "(SELECT COUNT(*) FROM verifications v WHERE v.job_id = jobs.id AND v.state IN ('pending', "
    "'running')) AS verify_open, "
    "(SELECT COALESCE(SUM(" VERIFICATION_COST_SQL
    "), 0) FROM verifications v WHERE "
    "v.job_id = jobs.id) AS verify_cost_usd, "
    "(SELECT e.reason FROM input_errors e WHERE e.job_id = jobs.id AND e.outcome IS NULL) AS "
    "input_error_reason, "
    "(SELECT e.step FROM input_errors e WHERE e.job_id = jobs.id AND e.outcome IS NULL) AS "
    "input_error_step, "
    "(SELECT e.at FROM input_errors e WHERE e.job_id = jobs.id AND e.outcome IS NULL) AS "
    "input_error_at";

Json TimeOrNull(const SqlValue& v) {
  if (v.is_null()) return nullptr;
  return FormatTime(v.AsInt());
}

Json JobJson(const Rows& rows, size_t i, int64_t now_ms) {
  auto get = [&](const char* c) -> const SqlValue& { return rows.Get(i, c); };
  Json spec = Json::object();
  Result<Json> parsed = ParseJson(get("spec").AsText());
  if (parsed.ok() && parsed->is_object()) spec = std::move(parsed).value();
  Json j = Json::object();
  j["id"] = get("id").AsText();
  j["kind"] = get("kind").AsText();
  j["state"] = get("state").AsText();
  j["priority"] = get("priority").AsInt();
  j["params"] = spec.contains("params") ? spec["params"] : Json::object();
  if (spec.contains("model")) {
    Json m = spec["model"];
    m.erase("key");
    j["model"] = m;
  }
  if (spec.contains("dataset")) {
    Json d = spec["dataset"];
    d.erase("key");
    j["dataset"] = d;
  }
  j["requirements"] = {{"min_vram_mb", get("min_vram_mb").AsInt()}};
  j["steps"] = get("steps_total").AsInt();
  j["step"] = get("step_done").AsInt();
  j["attempts"] = get("attempts").AsInt();
  j["failures"] = get("failures").AsInt();
  j["max_failures"] = get("max_failures").AsInt();
  j["lease_epoch"] = get("lease_epoch").AsInt();
  j["node_id"] = get("node_id").is_null() ? Json(nullptr) : Json(get("node_id").AsText());
  const std::string& state = get("state").AsText();
  bool running = state == "running";
  j["lease_expires_at"] = running ? TimeOrNull(get("lease_expires_at")) : Json(nullptr);
  // A running job whose lease expired is waiting to be claimed again (stalled first).
  j["stalled"] = running && get("lease_expires_at").AsInt() < now_ms;
  if (get("ckpt_step").is_null()) {
    j["latest_checkpoint"] = nullptr;
  } else {
    j["latest_checkpoint"] = {{"step", get("ckpt_step").AsInt()},
                              {"sha256", get("ckpt_sha256").AsText()},
                              {"size", get("ckpt_size").AsInt()},
                              {"committed_at", TimeOrNull(get("ckpt_committed_at"))}};
  }
  Json outputs = Json::array();
  // A 'verifying' job's outputs are released only when the replay of its last segment agrees.
  if (!get("outputs").is_null() && state != "verifying") {
    Result<Json> o = ParseJson(get("outputs").AsText());
    if (o.ok() && o->is_array()) {
      for (const Json& item : *o) {
        outputs.push_back({{"name", item.value("name", "")},
                           {"sha256", item.value("sha256", "")},
                           {"size", item.value("size", int64_t(0))}});
      }
    }
  }
  j["outputs"] = outputs;
  j["reason"] = get("reason").is_null() ? Json(nullptr) : Json(get("reason").AsText());
  // An input error one node reported, awaiting confirmation by a node of another machine
  // (attribution.h); null when none is open, or the job ended otherwise (canceled).
  if (get("input_error_reason").is_null() || (state != "pending" && !running)) {
    j["input_error"] = nullptr;
  } else {
    j["input_error"] = {{"reason", get("input_error_reason").AsText()},
                        {"step", get("input_error_step").AsInt()},
                        {"reported_at", TimeOrNull(get("input_error_at"))},
                        {"state", "awaiting_confirmation"}};
  }
  j["cost_usd"] = get("cost_usd").AsReal();
  // Sampling is reported apart from training: wall seconds spent rendering committed samples,
  // and the newest step that has them (null when none).
  j["sampling_s"] = get("sampling_s").AsReal();
  j["latest_sample_step"] =
      get("sample_step").is_null() ? Json(nullptr) : Json(get("sample_step").AsInt());
  // Verification (replay spot checks) is billed and shown apart from training: segments agreed
  // on (verified), segments found bad (their checkpoints were discarded), replays still open,
  // and what the replays cost.
  j["verification"] = {{"fraction", get("verify_fraction").AsReal()},
                       {"verified", get("verify_agreed").AsInt()},
                       {"rejected", get("verify_rejected").AsInt()},
                       {"open", get("verify_open").AsInt()},
                       {"unverifiable", get("verify_unverifiable").AsInt()},
                       {"cost_usd", get("verify_cost_usd").AsReal()},
                       // Work discarded because a node in the lineage forged (taint.h): not
                       // billed as the job's training (cost_usd), shown here.
                       {"rework_cost_usd", get("rework_cost_usd").AsReal()},
                       {"reopened", get("reopened").AsInt()}};
  j["created_at"] = TimeOrNull(get("created_at"));
  j["updated_at"] = TimeOrNull(get("updated_at"));
  j["started_at"] = TimeOrNull(get("first_started_at"));
  j["finished_at"] = TimeOrNull(get("finished_at"));
  return j;
}

}  // namespace gleaner::core
