// The peer: what a plain JavaScript Worker doing Gleaner's three busiest requests against D1
// looks like without the wasm core. The baseline of tests/bench/edge/edge_bench.mjs, run in the
// same workerd as the edge Worker. Not a coordinator: three routes, minimal validation.
//
// It runs the core's SQL (the same statements, in the same batches; copied here on purpose, as a
// reimplementation would) the way a Worker usually authenticates: one batch looks the token's
// SHA-256 up, the next does the work. JavaScript numbers bind as REAL in D1, which these
// statements tolerate (every integer lands in an INTEGER column or a comparison).
//   POST /v1/jobs/{id}/heartbeat {epoch, step, loss?}   (node)
//   POST /v1/work {}                                    (node)
//   POST /v1/jobs {kind: "synthetic", params: {steps, ...}, priority?}   (developer, operator)
// Bindings: DB (a D1 database with Gleaner's schema), GLEANER_CONFIG (stall-after,
// heartbeat-interval, max-active-jobs).

function json(status, body) {
  return Response.json(body, { status });
}
function error(status, code, message) {
  return json(status, { error: { code, message } });
}
function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}
function randomId(prefix) {
  return `${prefix}_${hex(crypto.getRandomValues(new Uint8Array(8)))}`;
}

async function caller(db, request) {
  const auth = request.headers.get("authorization") ?? "";
  if (!auth.startsWith("Bearer ")) return null;
  const hash = hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(auth.slice(7))));
  const [keys, nodes] = await db.batch([
    db.prepare("SELECT id, role FROM api_keys WHERE token_hash = ? AND revoked_at IS NULL").bind(hash),
    db.prepare("SELECT id, gpu_name, vram_mb, state FROM nodes WHERE token_hash = ?").bind(hash),
  ]);
  if (keys.results.length) return { role: keys.results[0].role, id: keys.results[0].id };
  if (nodes.results.length) return { role: "node", ...nodes.results[0] };
  return null;
}

async function heartbeat(db, config, who, jobId, body) {
  const now = Date.now();
  const expires = now + config.stall_after_s * 1000;
  const { epoch, step, loss } = body;
  if (!Number.isInteger(epoch) || !Number.isInteger(step)) return error(400, "bad_request", "epoch and step");
  const [job] = await db.batch([
    db
      .prepare(
        "UPDATE jobs SET lease_expires_at = ?, step_done = MAX(step_done, ?), updated_at = ? " +
          "WHERE id = ? AND lease_epoch = ? AND node_id = ? AND state = 'running' AND " +
          "lease_expires_at >= ? AND ? <= steps_total RETURNING lease_expires_at",
      )
      .bind(expires, step, now, jobId, epoch, who.id, now, step),
    db
      .prepare(
        "UPDATE segments SET first_heartbeat_at = COALESCE(first_heartbeat_at, ?), " +
          "last_heartbeat_at = ?, heartbeats = heartbeats + 1, step_end = MAX(step_end, ?), " +
          "last_loss = COALESCE(?, last_loss) WHERE job_id = ? AND epoch = ? AND ended_at IS NULL " +
          "AND changes() = 1",
      )
      .bind(now, now, step, loss ?? null, jobId, epoch),
    db.prepare("UPDATE nodes SET last_seen_at = ? WHERE id = ? AND changes() = 1").bind(now, who.id),
  ]);
  if (!job.results.length) return error(409, "conflict", "the lease is not held");
  return json(200, {
    lease_expires_at: new Date(job.results[0].lease_expires_at).toISOString(),
    ttl_s: config.stall_after_s,
    cancel: false,
  });
}

async function claim(db, config, who) {
  if (who.state !== "active") return new Response(null, { status: 204 });
  const now = Date.now();
  const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
  const eligible =
    "j.min_vram_mb <= (SELECT n.vram_mb FROM nodes n WHERE n.id = ?2 AND n.state = 'active') " +
    "AND NOT EXISTS (SELECT 1 FROM job_bans b WHERE b.job_id = j.id AND b.node_id = ?2)";
  const [job, , , , sizes] = await db.batch([
    db
      .prepare(
        "UPDATE jobs SET state = 'running', lease_epoch = lease_epoch + 1, lease_nonce = ?1, " +
          "node_id = ?2, lease_expires_at = ?4, attempts = attempts + 1, updated_at = ?3, " +
          "first_started_at = COALESCE(first_started_at, ?3), step_done = COALESCE(ckpt_step, 0) " +
          "WHERE id = COALESCE(" +
          "(SELECT j.id FROM jobs j INDEXED BY jobs_leases WHERE j.state = 'running' AND " +
          `j.lease_expires_at < ?3 AND ${eligible} ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1), ` +
          `(SELECT j.id FROM jobs j WHERE j.state = 'pending' AND ${eligible} ` +
          "ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1)) " +
          "RETURNING id, kind, spec, lease_epoch, steps_total, lease_expires_at, ckpt_step, " +
          "ckpt_key, ckpt_sha256, ckpt_size",
      )
      .bind(nonce, who.id, now, now + config.stall_after_s * 1000),
    db
      .prepare(
        "UPDATE segments SET ended_at = COALESCE(last_heartbeat_at, started_at), " +
          "end_reason = 'stalled' WHERE ended_at IS NULL AND job_id = (SELECT id FROM jobs WHERE " +
          "lease_nonce = ?1) AND epoch < (SELECT lease_epoch FROM jobs WHERE lease_nonce = ?1)",
      )
      .bind(nonce),
    db
      .prepare(
        "INSERT INTO segments (job_id, epoch, node_id, gpu_name, usd_per_hour, " +
          "heartbeat_interval_s, started_at, step_start, step_end, step_committed) " +
          "SELECT j.id, j.lease_epoch, n.id, n.gpu_name, COALESCE((SELECT p.usd_per_hour FROM prices " +
          "p WHERE p.gpu = n.gpu_name), (SELECT p.usd_per_hour FROM prices p WHERE p.gpu = '*'), 0), " +
          "?3, ?4, COALESCE(j.ckpt_step, 0), COALESCE(j.ckpt_step, 0), COALESCE(j.ckpt_step, 0) " +
          "FROM jobs j JOIN nodes n ON n.id = ?2 WHERE j.lease_nonce = ?1",
      )
      .bind(nonce, who.id, config.heartbeat_interval_s, now),
    db.prepare("UPDATE nodes SET last_seen_at = ? WHERE id = ?").bind(now, who.id),
    db
      .prepare(
        "SELECT u.key, u.size FROM uploads u JOIN jobs j ON j.lease_nonce = ? WHERE u.key IN " +
          "(json_extract(j.spec, '$.model.key'), json_extract(j.spec, '$.dataset.key'))",
      )
      .bind(nonce),
  ]);
  if (!job.results.length) return new Response(null, { status: 204, headers: { "retry-after": "5" } });
  const j = job.results[0];
  const spec = JSON.parse(j.spec);
  return json(200, {
    job: { id: j.id, kind: j.kind, params: spec.params ?? {}, steps: j.steps_total },
    lease: {
      epoch: j.lease_epoch,
      expires_at: new Date(j.lease_expires_at).toISOString(),
      ttl_s: config.stall_after_s,
      heartbeat_interval: config.heartbeat_interval_s,
    },
    inputs: Object.fromEntries(sizes.results.map((r) => [r.key, { size: r.size }])),
  });
}

async function submit(db, config, who, body) {
  const steps = body?.params?.steps;
  if (body?.kind !== "synthetic" || !Number.isInteger(steps) || steps < 1) {
    return error(400, "bad_request", "a synthetic job with params.steps");
  }
  const priority = body.priority ?? 0;
  const maxFailures = body.max_failures ?? 3;
  const params = { steps, step_ms: body.params.step_ms ?? 0, checkpoint_every: body.params.checkpoint_every ?? 0, seed: body.params.seed ?? 0 };
  const spec = JSON.stringify({ kind: "synthetic", params, requirements: { min_vram_mb: 0 }, priority, max_failures: maxFailures });
  const id = randomId("j");
  const now = Date.now();
  const limit = who.role === "operator" ? 0 : config.max_active_jobs;
  const statements = [
    db
      .prepare(
        "INSERT INTO jobs (id, owner_key_id, idempotency_key, kind, spec, state, priority, " +
          "max_failures, min_vram_mb, steps_total, created_at, updated_at) " +
          "SELECT ?, ?, NULL, 'synthetic', ?, 'pending', ?, ?, 0, ?, ?, ? WHERE " +
          (limit > 0 ? "(SELECT active_jobs FROM api_keys WHERE id = ?) < ?" : "1") +
          " ON CONFLICT DO NOTHING",
      )
      .bind(id, who.id, spec, priority, maxFailures, steps, now, now, ...(limit > 0 ? [who.id, limit] : [])),
    db.prepare("SELECT id, state, priority, steps_total, created_at FROM jobs WHERE id = ?").bind(id),
  ];
  const [, row] = await db.batch(statements);
  if (!row.results.length) return error(429, "too_many_jobs", "the key holds too many active jobs");
  const r = row.results[0];
  return json(201, {
    id: r.id,
    kind: "synthetic",
    state: r.state,
    priority: r.priority,
    params,
    steps: r.steps_total,
    created_at: new Date(r.created_at).toISOString(),
  });
}

export default {
  async fetch(request, env) {
    const settings = JSON.parse(env.GLEANER_CONFIG ?? "{}");
    const config = {
      heartbeat_interval_s: settings["heartbeat-interval"] ?? 30,
      max_active_jobs: settings["max-active-jobs"] ?? 100,
    };
    config.stall_after_s = settings["stall-after"] ?? 2 * config.heartbeat_interval_s;
    const path = new URL(request.url).pathname;
    if (request.method !== "POST") return error(405, "method_not_allowed", "POST only");
    const who = await caller(env.DB, request);
    if (!who) return error(401, "unauthenticated", "unknown or revoked token");
    let body;
    try {
      body = JSON.parse((await request.text()) || "{}");
    } catch {
      return error(400, "bad_request", "body is not JSON");
    }
    const hb = /^\/v1\/jobs\/([A-Za-z0-9_]+)\/heartbeat$/.exec(path);
    if (hb && who.role === "node") return heartbeat(env.DB, config, who, hb[1], body);
    if (path === "/v1/work" && who.role === "node") return claim(env.DB, config, who);
    if (path === "/v1/jobs" && (who.role === "developer" || who.role === "operator")) {
      return submit(env.DB, config, who, body);
    }
    return error(404, "not_found", "no such route");
  },
};
