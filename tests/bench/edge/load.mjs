#!/usr/bin/env node
// Throughput of the coordinator's single writer, measured black-box over HTTP: job submissions,
// claims (POST /v1/work) and heartbeats per second with C concurrent clients.
//
//   node tests/bench/edge/load.mjs --target edge|native [--jobs N] [--clients C] [--seconds S] [--bin PATH]
//   node tests/bench/edge/load.mjs --url https://... --operator-token T [--jobs N] ...
//
// Starts the target like the conformance suite does (fresh database, loopback port), prints
// one JSON line of results. Every request must succeed; any other status aborts the run.
import { startTarget } from "../../conformance/targets.mjs";

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const kind = opt("--target", "edge");
const jobs = Number(opt("--jobs", 1000));
const clients = Number(opt("--clients", 16));
const seconds = Number(opt("--seconds", 5));

// --url measures a running coordinator instead (a staging deployment: it creates keys, nodes
// and jobs there, and leaves the jobs running).
const external = opt("--url");
const target = external
  ? { base: external.replace(/\/$/, ""), operatorToken: opt("--operator-token", process.env.GLEANER_OPERATOR_TOKEN), stop: async () => {} }
  : await startTarget(kind, { bin: opt("--bin"), timing: { heartbeat_interval_s: 30, stall_after_s: 600 } });
const base = target.base;

async function call(method, path, token, body, expect) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!expect.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

async function pool(n, worker) {
  await Promise.all(Array.from({ length: n }, (_, i) => worker(i)));
}

try {
  const op = target.operatorToken;
  const dev = (await call("POST", "/v1/keys", op, { role: "developer", name: "load" }, [201])).json.token;
  // One lease per node: one node per job (max_nodes 0: the key has no cap on its nodes); client
  // i drives nodes i, i + C, i + 2C, ...
  const enroll = (await call("POST", "/v1/keys", op, { role: "enroll", name: "load", max_nodes: 0 }, [201])).json.token;
  const nodes = Array.from({ length: clients }, () => []);
  for (let i = 0; i < jobs; i++) {
    const r = await call("POST", "/v1/nodes/register", enroll,
      { machine_id: `load-${i}-${Date.now()}`, gpu: { name: "RTX 4090", vram_mb: 24000 }, agent_version: "load" }, [200]);
    nodes[i % clients].push(r.json.token);
  }
  const spec = { kind: "synthetic", params: { steps: 1000, step_ms: 1, checkpoint_every: 100, seed: 1 } };

  let t0 = performance.now();
  let next = 0;
  await pool(clients, async () => {
    while (next < jobs) {
      next++;
      await call("POST", "/v1/jobs", dev, spec, [201]);
    }
  });
  const submitS = (performance.now() - t0) / 1000;

  // Claims: every client claims until the queue is empty.
  const leases = Array.from({ length: clients }, () => []);
  t0 = performance.now();
  await pool(clients, async (i) => {
    for (const token of nodes[i]) {
      const r = await call("POST", "/v1/work", token, {}, [200, 204]);
      if (r.status === 204) return;
      leases[i].push({ id: r.json.job.id, epoch: r.json.lease.epoch, token });
    }
  });
  const claimS = (performance.now() - t0) / 1000;
  const claimed = leases.reduce((n, l) => n + l.length, 0);
  if (claimed !== jobs) throw new Error(`claimed ${claimed} of ${jobs} jobs`);
  const distinct = new Set(leases.flat().map((l) => l.id));
  if (distinct.size !== jobs) throw new Error(`${jobs - distinct.size} jobs were claimed twice`);

  // Heartbeats: each client heartbeats its leases round-robin for `seconds`.
  let beats = 0;
  t0 = performance.now();
  const until = t0 + seconds * 1000;
  await pool(clients, async (i) => {
    let k = 0;
    let step = 0;
    while (performance.now() < until && leases[i].length) {
      const l = leases[i][k++ % leases[i].length];
      if (k % leases[i].length === 0) step++;
      await call("POST", `/v1/jobs/${l.id}/heartbeat`, l.token, { epoch: l.epoch, step }, [200]);
      beats++;
    }
  });
  const beatS = (performance.now() - t0) / 1000;
  const round = (x) => Math.round(x);
  console.log(JSON.stringify({
    target: external ?? kind, jobs, clients,
    submits_per_s: round(jobs / submitS),
    claims_per_s: round(claimed / claimS),
    heartbeats_per_s: round(beats / beatS),
  }));
} finally {
  await target.stop();
}
