// Soak test: the edge Worker in Miniflare (workerd) serves a sustained mixed load and gives the
// same answers as the native coordinator for the same requests, with no workerd error and no
// crash.
//
//   node tests/conformance/soak.mjs [--requests 20000] [--lanes 16] [--bin PATH]
//        [--targets native,edge] [--literal-sql] [--seconds-limit 300] [--verbose]
//
// The load is LANES concurrent lanes; each lane has its own developer key and node and repeats:
// submit a job (developer), claim one (POST /v1/work: some lane's job, all are alike), heartbeat
// it 8-20 times with rising steps, cancel it (operator), heartbeat once more (200, cancel: true).
// Every lane submits before it claims, so a claim always finds a job, and everything a lane sees
// is determined by its own requests: answers compare lane by lane across the two shells after
// key and node ids are replaced by per-lane ordinals, job ids by one placeholder (a claim may
// hand a lane another lane's job, all are alike), and times and URLs dropped.
//
// --literal-sql runs the Worker with the former wire behaviour (integers written into the SQL
// text, tests/conformance/literal_sql_worker.mjs); GLEANER_MINIFLARE=DIR runs another Miniflare
// package (an older runtime). Together they reproduce the crash the pinned runtime no longer has
// (docs/edge.md). --verbose copies the runtime's whole output (the edge with Miniflare's and
// workerd's own log) to stderr.
//
// Exit 0: every answer matched and the edge logged no error; 1: a failure (printed); 77: skipped
// (no wasm module or Miniflare; a failure in CI).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Connection } from "./keepalive_client.mjs";
import { startTarget } from "./targets.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");
const argv = process.argv.slice(2);
const flag = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const totalRequests = Number(flag("--requests", 20000));
const lanes = Number(flag("--lanes", 16));
const targets = flag("--targets", "native,edge").split(",");
const literalSql = argv.includes("--literal-sql");
const verbose = argv.includes("--verbose");
const secondsLimit = Number(flag("--seconds-limit", 300));

if (targets.includes("edge")) {
  const mf = process.env.GLEANER_MINIFLARE ?? join(repo, "wasm", "node_modules", "miniflare");
  if (!existsSync(join(repo, "wasm", "gleaner_edge.wasm")) || !existsSync(mf)) {
    // Like GLEANER_SKIP (tests/skip.h): a skip locally, a failure in CI.
    const ci = process.env.CI && !["0", "false"].includes(process.env.CI);
    console.error(`soak: ${ci ? "FAIL" : "skipped"}: build wasm/gleaner_edge.wasm (wasm/build.sh), npm ci in wasm/`);
    process.exit(ci ? 1 : 77);
  }
}

// Lines of the runtime's output that mean something went wrong inside workerd or the Worker.
const ERROR_LINE = /error|exception|kj\/|segmentation|sigsegv|uncaught|fatal|assert/i;

// Per-lane normalisation: key and node ids become ordinals in order of first appearance, every
// job id the same placeholder; times, URLs and tokens go.
function normalizer() {
  const ids = new Map();
  const walk = (v, key) => {
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === "object") {
      const out = {};
      for (const k of Object.keys(v).sort()) {
        if (k.endsWith("_at") || k === "url" || k === "token") continue;
        out[k] = walk(v[k], k);
      }
      return out;
    }
    if (typeof v === "string" && /^j_[A-Za-z0-9_]+$/.test(v)) return "j#";
    if (typeof v === "string" && /^[nku]_[A-Za-z0-9_]+$/.test(v)) {
      if (!ids.has(v)) ids.set(v, `${v[0]}#${ids.size}`);
      return ids.get(v);
    }
    return v;
  };
  return (status, body) => {
    let json;
    try {
      json = body ? JSON.parse(body) : null;
    } catch {
      json = body;
    }
    return `${status} ${JSON.stringify(walk(json))}`;
  };
}

// One lane's request sequence (deterministic), run on one keep-alive connection.
async function runLane(conn, lane, quota, keys, record) {
  const json = { "content-type": "application/json" };
  const as = (token) => ({ ...json, authorization: `Bearer ${token}` });
  let sent = 0;
  const call = async (what, method, path, token, body) => {
    const started = performance.now();
    let r;
    try {
      r = await conn.request(method, path, as(token), body === undefined ? "" : JSON.stringify(body));
    } catch (e) {
      const ms = Math.round(performance.now() - started);
      throw new Error(`${what} ${method} ${path} (request ${sent + 1} of the lane, ${ms} ms): ${e.message}`);
    }
    sent++;
    record(what, r, performance.now() - started);
    return r;
  };
  const spec = { kind: "synthetic", params: { steps: 100000, step_ms: 1, checkpoint_every: 1000, seed: 7 } };
  for (let it = 0; sent < quota; it++) {
    await call("submit", "POST", "/v1/jobs", keys.dev, spec);
    const claim = await call("claim", "POST", "/v1/work", keys.node, {});
    if (claim.status !== 200) throw new Error(`lane ${lane}: claim answered ${claim.status} ${claim.body}`);
    const { job, lease } = JSON.parse(claim.body);
    const beats = 8 + ((lane * 7 + it * 5) % 13);
    for (let b = 1; b <= beats; b++) {
      await call("heartbeat", "POST", `/v1/jobs/${job.id}/heartbeat`, keys.node, {
        epoch: lease.epoch,
        step: b * 10,
        ...(b % 3 === 0 ? { loss: 0.5 / b } : {}),
      });
    }
    await call("cancel", "POST", `/v1/jobs/${job.id}/cancel`, keys.op, { reason: "soak" });
    await call("heartbeat", "POST", `/v1/jobs/${job.id}/heartbeat`, keys.node, { epoch: lease.epoch, step: 1 });
  }
}

async function soak(kind) {
  let errorLines = [];
  const target = await startTarget(kind, {
    bin: flag("--bin"),
    timing: { heartbeat_interval_s: 30, stall_after_s: 600 },
    extraArgs: [
      ...(kind === "edge" && literalSql ? ["--worker", join(here, "literal_sql_worker.mjs")] : []),
      ...(kind === "edge" && verbose ? ["--verbose"] : []),
    ],
    output: (text) => {
      if (verbose) process.stderr.write(`[${kind}] ${text}`);
      for (const line of text.split("\n")) {
        if (ERROR_LINE.test(line)) errorLines.push(line.slice(0, 300));
      }
    },
  });
  const port = target.port;
  const setup = new Connection("127.0.0.1", port);
  const post = async (path, token, body) => {
    const r = await setup.request("POST", path, { "content-type": "application/json", authorization: `Bearer ${token}` }, JSON.stringify(body));
    if (r.status >= 300) throw new Error(`setup ${path}: ${r.status} ${r.body}`);
    return JSON.parse(r.body);
  };
  const op = target.operatorToken;
  const enroll = (await post("/v1/keys", op, { role: "enroll", name: "soak" })).token;
  const laneKeys = [];
  for (let i = 0; i < lanes; i++) {
    const dev = (await post("/v1/keys", op, { role: "developer", name: `soak-${i}` })).token;
    const node = (
      await post("/v1/nodes/register", enroll, {
        machine_id: `soak-${kind}-${i}`,
        gpu: { name: "RTX 4090", vram_mb: 24564 },
        agent_version: "soak",
      })
    ).token;
    laneKeys.push({ dev, node, op });
  }
  setup.close();

  const quota = Math.ceil(totalRequests / lanes);
  const answers = Array.from({ length: lanes }, () => []);
  const counts = {};
  let requests = 0;
  const t0 = performance.now();
  const deadline = t0 + secondsLimit * 1000;
  let failure = null;
  const slowest = { ms: 0 };
  let failedLanes = 0;
  await Promise.all(
    laneKeys.map(async (keys, lane) => {
      const conn = new Connection("127.0.0.1", port);
      const norm = normalizer();
      try {
        await runLane(conn, lane, quota, keys, (what, r, ms) => {
          requests++;
          if (ms > slowest.ms) Object.assign(slowest, { ms, what, at: (performance.now() - t0) / 1000 });
          counts[what] = (counts[what] ?? 0) + 1;
          answers[lane].push(`${what} ${norm(r.status, r.body)}`);
          if (performance.now() > deadline) throw new Error(`over the ${secondsLimit} s limit`);
        });
      } catch (e) {
        failedLanes++;
        failure ??= `lane ${lane} at ${((performance.now() - t0) / 1000).toFixed(1)} s: ${e?.message ?? e}`;
      } finally {
        conn.close();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  // Still serving?
  let alive = false;
  try {
    const c = new Connection("127.0.0.1", port);
    alive = (await c.request("GET", "/healthz")).status === 200;
    c.close();
  } catch {
    alive = false;
  }
  const exited = target.exited();
  await target.stop();
  errorLines = errorLines.filter((l) => l.trim());
  if (failedLanes > 1) failure += ` (and ${failedLanes - 1} more lanes failed)`;
  return { kind, requests, seconds, counts, answers, failure, alive, exited, errorLines, slowest };
}

const results = {};
let failed = false;
for (const kind of targets) {
  const r = await soak(kind);
  results[kind] = r;
  console.log(
    `soak ${kind}${kind === "edge" && literalSql ? " (literal SQL)" : ""}: ${r.requests} requests in ` +
      `${r.seconds.toFixed(1)} s (${Math.round(r.requests / r.seconds)}/s) ${JSON.stringify(r.counts)}; slowest ` +
      `${Math.round(r.slowest.ms)} ms (${r.slowest.what} at ${r.slowest.at?.toFixed(1)} s)`,
  );
  if (r.failure) {
    console.log(`  FAIL: ${r.failure}`);
    failed = true;
  }
  if (!r.alive) {
    console.log(`  FAIL: ${kind} no longer answers /healthz (${r.exited ?? "still running"})`);
    failed = true;
  }
  if (r.errorLines.length) {
    console.log(`  FAIL: ${r.errorLines.length} error lines in the runtime's output, first ones:`);
    for (const l of r.errorLines.slice(0, 5)) console.log(`    ${l}`);
    failed = true;
  }
}
if (results.native && results.edge && !results.native.failure && !results.edge.failure) {
  let mismatches = 0;
  for (let lane = 0; lane < lanes; lane++) {
    const a = results.native.answers[lane];
    const b = results.edge.answers[lane];
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (a[i] === b[i]) continue;
      if (mismatches++ < 3) {
        console.log(`  MISMATCH lane ${lane} answer ${i}:\n    native: ${a[i]}\n    edge:   ${b[i]}`);
      }
    }
  }
  if (mismatches) {
    console.log(`  FAIL: ${mismatches} answers differ between native and edge`);
    failed = true;
  } else {
    console.log(`soak: all ${results.edge.requests} answers equal on native and edge`);
  }
}
if (results.edge && results.edge.requests < totalRequests && !failed) {
  console.log(`  FAIL: only ${results.edge.requests} of ${totalRequests} requests ran`);
  failed = true;
}
process.exit(failed ? 1 : 0);
