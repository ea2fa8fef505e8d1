#!/usr/bin/env node
// bench edge: the edge Worker against a peer Worker in one workerd, and the edge's submission
// rate as the queue grows. A measurement, not a test.
//
//   node tests/bench/edge/edge_bench.mjs [--seconds 8] [--connections 16] [--rounds 2]
//        [--phases heartbeat,submit,claim] [--queue 0,10000,100000] [--queue-seconds 6]
//        [--memory] [--floor]
//
// One Miniflare (one workerd process) runs, each on a socket of its own:
//   edge  wasm/worker.mjs + gleaner_edge.wasm on D1 database "edge"
//   peer  tests/bench/edge/peer_worker.mjs (plain JavaScript, the same SQL) on D1 database "peer"
//   setup the edge Worker on database "peer": fills the peer's database through the core's API,
//         so both databases hold the same schema, keys, nodes and jobs
//   floor (--floor) a Worker that only runs one db.batch() of one or of three statements per
//         request: what a D1 round trip costs in this workerd
// Each phase runs CONNECTIONS keep-alive connections for SECONDS against the edge, then the
// peer, ROUNDS times alternating, and reports requests/s and workerd CPU per request (from
// /proc/<pid>/stat, so the figure holds on a machine shared with the load generator); the edge/
// peer ratio compares both in the same run. Then the edge's submissions/s with QUEUE pending jobs
// of the submitting developer (bulk-inserted through D1). Prints a Markdown table and one JSON
// line. Databases are on disk in a temporary directory (--memory: in memory).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Connection } from "../../conformance/keepalive_client.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const argv = process.argv.slice(2);
const flag = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const seconds = Number(flag("--seconds", 8));
const connections = Number(flag("--connections", 16));
const rounds = Number(flag("--rounds", 2));
const phases = flag("--phases", "heartbeat,submit,claim").split(",").filter(Boolean);
const queue = flag("--queue", "0,10000,100000").split(",").filter(Boolean).map(Number);
const queueSeconds = Number(flag("--queue-seconds", 6));
const memory = argv.includes("--memory");
const floor = argv.includes("--floor");
const overhead = argv.includes("--overhead");

const mfDir = process.env.GLEANER_MINIFLARE ?? join(repo, "wasm", "node_modules", "miniflare");
const { Miniflare } = await import(pathToFileURL(join(mfDir, "dist", "src", "index.js")).href);
const operatorToken = "op_bench_0123456789abcdef";
const config = { "heartbeat-interval": 30, "stall-after": 3600, "max-active-jobs": 100000000 };
for (const role of ["developer", "node", "operator", "enroll"]) config[`${role}-rate-limit`] = "off";
config["enroll-address-rate-limit"] = "off";
config["enroll-max-nodes"] = 0;

const dir = mkdtempSync(join(tmpdir(), "gleaner-edge-bench-"));
const edgeModules = [
  { type: "ESModule", path: join(repo, "wasm", "worker.mjs") },
  { type: "CompiledWasm", path: join(repo, "wasm", "gleaner_edge.wasm") },
];
const edgeBindings = {
  GLEANER_BLOB_SIGNING_KEY: "bench-signing-key-0123456789abcdef",
  GLEANER_OPERATOR_TOKEN: operatorToken,
  GLEANER_CONFIG: JSON.stringify(config),
};
const socket = [{ host: "127.0.0.1", port: 0 }];
const workers = [
  { name: "edge", modulesRoot: repo, modules: edgeModules, bindings: edgeBindings, d1Databases: { DB: "edge" }, r2Buckets: { BLOBS: "edge" }, unsafeDirectSockets: socket },
  { name: "peer", modulesRoot: repo, modules: [{ type: "ESModule", path: join(here, "peer_worker.mjs") }], bindings: { GLEANER_CONFIG: JSON.stringify(config) }, d1Databases: { DB: "peer" }, unsafeDirectSockets: socket },
  { name: "setup", modulesRoot: repo, modules: edgeModules, bindings: edgeBindings, d1Databases: { DB: "peer" }, r2Buckets: { BLOBS: "peer" }, unsafeDirectSockets: socket },
];
if (floor) {
  workers.push({
    name: "floor",
    modules: true,
    script: `export default { async fetch(request, env) {
      const db = env.DB;
      const n = new URL(request.url).pathname === "/three" ? 3 : 1;
      const s = [];
      for (let i = 0; i < n; i++) s.push(db.prepare("UPDATE t SET v = v + 1 WHERE id = ?").bind(i));
      await db.batch(s);
      return Response.json({ ok: true });
    } };`,
    d1Databases: { DB: "floor" },
    unsafeDirectSockets: socket,
  });
}
if (overhead) {
  // The edge Worker with canned D1 answers, and a Worker that only answers: the cost of the
  // Worker itself per heartbeat, and of workerd's HTTP handling.
  workers.push({ name: "nodb", modulesRoot: repo, modules: [{ type: "ESModule", path: join(here, "fake_d1_worker.mjs") }, ...edgeModules], bindings: edgeBindings, unsafeDirectSockets: socket });
  workers.push({ name: "hello", modules: true, script: "export default { fetch() { return Response.json({ ok: true }); } };", unsafeDirectSockets: socket });
}
const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  compatibilityDate: "2025-01-01",
  workers,
  d1Persist: memory ? false : join(dir, "d1"),
  r2Persist: memory ? false : join(dir, "r2"),
});
await mf.ready;

function workerdPid() {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (stat.includes("(workerd)") && Number(fields[1]) === process.pid) return Number(entry);
    } catch {}
  }
  throw new Error("no workerd child process found");
}
const pid = workerdPid();
const clockTicks = 100; // USER_HZ on Linux
function cpuSeconds() {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / clockTicks;
}

const ports = {};
for (const w of workers) ports[w.name] = Number((await mf.unsafeGetDirectURL(w.name)).port);

async function api(port, method, path, token, body) {
  const c = new Connection("127.0.0.1", port);
  try {
    const r = await c.request(method, path, { authorization: `Bearer ${token}`, "content-type": "application/json" }, body === undefined ? "" : JSON.stringify(body));
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.body}`);
    return r.body ? JSON.parse(r.body) : null;
  } finally {
    c.close();
  }
}

const spec = { kind: "synthetic", params: { steps: 1000000, step_ms: 1, checkpoint_every: 1000, seed: 1 } };

// Keys, CONNECTIONS nodes each holding one running lease, through the core's API on `port`.
async function prepare(port, db) {
  const dev = (await api(port, "POST", "/v1/keys", operatorToken, { role: "developer", name: "bench" })).token;
  const devId = (await db.prepare("SELECT id FROM api_keys WHERE role = 'developer'").first()).id;
  const enroll = (await api(port, "POST", "/v1/keys", operatorToken, { role: "enroll", name: "bench" })).token;
  const nodes = [];
  for (let i = 0; i < connections; i++) {
    const n = await api(port, "POST", "/v1/nodes/register", enroll, { machine_id: `bench-${i}`, gpu: { name: "RTX 4090", vram_mb: 24564 }, agent_version: "bench" });
    await api(port, "POST", "/v1/jobs", dev, spec);
    const w = await api(port, "POST", "/v1/work", n.token, {});
    nodes.push({ token: n.token, job: w.job.id, epoch: w.lease.epoch });
  }
  return { dev, devId, nodes, db };
}

// `count` more pending jobs of the developer, copied from one of its jobs in SQL.
async function addPending(db, count) {
  for (let done = 0; done < count; ) {
    const n = Math.min(50000, count - done);
    await db
      .prepare(
        "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ?1 - 1) " +
          "INSERT INTO jobs (id, owner_key_id, kind, spec, state, priority, max_failures, " +
          "min_vram_mb, steps_total, created_at, updated_at) SELECT 'j_q' || ?2 || '_' || i, " +
          "owner_key_id, kind, spec, 'pending', priority, max_failures, min_vram_mb, steps_total, " +
          "created_at + i, updated_at FROM s, (SELECT * FROM jobs ORDER BY created_at LIMIT 1)",
      )
      .bind(String(n), String(Date.now()) + String(done))
      .run();
    done += n;
  }
}

// CONNECTIONS connections for `secs` seconds; request(c, n) -> [method, path, token, body].
async function load(port, secs, request, ok) {
  let requests = 0;
  let errors = 0;
  let firstError = null;
  const cpu0 = cpuSeconds();
  const t0 = performance.now();
  const until = t0 + secs * 1000;
  await Promise.all(
    Array.from({ length: connections }, async (_, c) => {
      const conn = new Connection("127.0.0.1", port);
      for (let n = 0; performance.now() < until; n++) {
        const [method, path, token, body] = request(c, n);
        try {
          const r = await conn.request(method, path, { authorization: `Bearer ${token}`, "content-type": "application/json" }, JSON.stringify(body));
          if (ok(r.status)) requests++;
          else {
            errors++;
            firstError ??= `${r.status} ${r.body.slice(0, 200)}`;
          }
        } catch (e) {
          errors++;
          firstError ??= e.message;
        }
      }
      conn.close();
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds() - cpu0;
  return { rps: requests / wall, cpu_ms: requests ? (cpu * 1000) / requests : 0, requests, errors, firstError };
}

const setups = {};
setups.edge = await prepare(ports.edge, await mf.getD1Database("DB", "edge"));
setups.peer = await prepare(ports.setup, await mf.getD1Database("DB", "peer"));

function phaseRequest(phase, s) {
  if (phase === "heartbeat") {
    return (c, n) => {
      const node = s.nodes[c];
      return ["POST", `/v1/jobs/${node.job}/heartbeat`, node.token, { epoch: node.epoch, step: (n % 1000000) + 1 }];
    };
  }
  if (phase === "submit") return () => ["POST", "/v1/jobs", s.dev, spec];
  return (c) => ["POST", "/v1/work", s.nodes[c].token, {}];
}
// A node holds one lease at a time: after its first claim the edge answers it 204 (lease held),
// which is that rule's SQL at work; the peer Worker predates the rule and keeps handing out jobs.
const okStatus = { heartbeat: (st) => st === 200, submit: (st) => st === 201, claim: (st) => st === 200 || st === 204 };

const results = { phases: {}, queue: [] };
for (const phase of phases) {
  if (phase === "claim") {
    for (const t of ["edge", "peer"]) await addPending(setups[t].db, 40000);
  }
  const runs = { edge: [], peer: [] };
  for (let r = 0; r < rounds; r++) {
    for (const t of ["edge", "peer"]) {
      runs[t].push(await load(ports[t], seconds, phaseRequest(phase, setups[t]), okStatus[phase]));
    }
  }
  const mean = (xs, k) => xs.reduce((a, x) => a + x[k], 0) / xs.length;
  const summary = {};
  for (const t of ["edge", "peer"]) {
    summary[t] = { rps: mean(runs[t], "rps"), cpu_ms: mean(runs[t], "cpu_ms"), errors: runs[t].reduce((a, x) => a + x.errors, 0), first_error: runs[t].find((x) => x.firstError)?.firstError ?? null, runs: runs[t].map((x) => Math.round(x.rps)) };
  }
  summary.ratio_rps = summary.edge.rps / summary.peer.rps;
  summary.ratio_cpu = summary.peer.cpu_ms / summary.edge.cpu_ms;
  results.phases[phase] = summary;
}

if (floor) {
  const f = await mf.getD1Database("DB", "floor");
  await f.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)");
  await f.exec("INSERT INTO t VALUES (0, 0), (1, 0), (2, 0)");
  for (const path of ["/one", "/three"]) {
    results[`floor${path.replace("/", "_")}`] = await load(ports.floor, seconds, () => ["POST", path, "x", {}], (st) => st === 200);
  }
}

if (overhead) {
  const beat = (c, n) => ["POST", "/v1/jobs/j_fake/heartbeat", `glt_fake_${c}`, { epoch: 1, step: n + 1 }];
  results.overhead_worker = await load(ports.nodb, seconds, beat, (st) => st === 200);
  results.overhead_http = await load(ports.hello, seconds, beat, (st) => st === 200);
}

// Submissions/s as the developer's queue grows (edge).
let pending = Number((await setups.edge.db.prepare("SELECT count(*) AS n FROM jobs WHERE state = 'pending'").first()).n);
for (const q of queue) {
  if (q > pending) await addPending(setups.edge.db, q - pending);
  pending = Number((await setups.edge.db.prepare("SELECT count(*) AS n FROM jobs WHERE state = 'pending'").first()).n);
  const r = await load(ports.edge, queueSeconds, phaseRequest("submit", setups.edge), okStatus.submit);
  results.queue.push({ pending_at_start: pending, rps: r.rps, cpu_ms: r.cpu_ms, errors: r.errors });
  pending += r.requests;
}

await mf.dispose();
rmSync(dir, { recursive: true, force: true });

const workerdBin = join(mfDir, "..", "@cloudflare", "workerd-linux-64", "bin", "workerd");
let runtime = "";
try {
  runtime = execFileSync(workerdBin, ["--version"]).toString().trim();
} catch {}
const miniflareVersion = JSON.parse(readFileSync(join(mfDir, "package.json"), "utf8")).version;
let commit = "";
try {
  commit = execFileSync("git", ["-C", repo, "rev-parse", "--short", "HEAD"]).toString().trim();
} catch {}
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);
console.log(`edge bench ${new Date().toISOString().slice(0, 10)}, miniflare ${miniflareVersion} (${runtime}), commit ${commit}, ` +
  `${connections} connections, ${seconds} s x ${rounds} rounds, D1 ${memory ? "in memory" : "on disk"}\n`);
console.log("| phase | edge req/s | peer req/s | edge/peer | edge CPU ms/req | peer CPU ms/req | errors |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const [phase, s] of Object.entries(results.phases)) {
  console.log(`| ${phase} | ${Math.round(s.edge.rps)} | ${Math.round(s.peer.rps)} | ${f2(s.ratio_rps)} | ${f2(s.edge.cpu_ms)} | ${f2(s.peer.cpu_ms)} | ${s.edge.errors + s.peer.errors} |`);
}
if (floor) {
  console.log(`\nD1 floor: one batch of 1 statement ${Math.round(results.floor_one.rps)} req/s at ${f2(results.floor_one.cpu_ms)} ms CPU; ` +
    `of 3 statements ${Math.round(results.floor_three.rps)} req/s at ${f2(results.floor_three.cpu_ms)} ms CPU`);
}
if (overhead) {
  console.log(`\nWorker without D1 (canned answers): ${Math.round(results.overhead_worker.rps)} heartbeats/s at ` +
    `${f2(results.overhead_worker.cpu_ms)} ms CPU; a Worker that only answers: ${Math.round(results.overhead_http.rps)} req/s at ` +
    `${f2(results.overhead_http.cpu_ms)} ms CPU`);
}
if (results.queue.length) {
  console.log("\n| pending jobs of the key | edge submissions/s | CPU ms/req |");
  console.log("|---:|---:|---:|");
  for (const q of results.queue) console.log(`| ${q.pending_at_start} | ${f1(q.rps)} | ${f2(q.cpu_ms)} |`);
}
console.log(JSON.stringify({ date: new Date().toISOString(), miniflare: miniflareVersion, runtime, commit, connections, seconds, rounds, memory, ...results }));
