// The conformance suite: one black-box HTTP test of the coordinator API, run with identical
// expectations against the native gleaner-coordinator and the edge Worker in Miniflare.
//
//   node tests/conformance/conformance.mjs --target native|edge [--bin PATH]
//   node tests/conformance/conformance.mjs --url http://HOST:PORT --operator-token T
//
// Tests run one after another on one server; each creates its own keys and nodes and leaves no
// claimable job behind, so a node of one test never receives another test's job.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { skip } from "../skip.mjs";
import { startTarget, TIMING } from "./targets.mjs";

const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const targetKind = flag("--target");
const external = flag("--url");
if (!targetKind && !external) {
  console.error("usage: conformance.mjs --target native|edge [--bin PATH] | --url URL --operator-token T");
  process.exit(2);
}

if (targetKind === "edge") {
  const { existsSync } = await import("node:fs");
  const wasm = new URL("../../wasm/gleaner_edge.wasm", import.meta.url);
  const mf = new URL("../../wasm/node_modules/miniflare/package.json", import.meta.url);
  if (!existsSync(wasm) || !existsSync(mf)) {
    skip("conformance: build wasm/gleaner_edge.wasm with wasm/build.sh and run npm ci in wasm/");
  }
}

let target;
let base;
let opToken;

before(async () => {
  if (external) {
    base = external.replace(/\/$/, "");
    opToken = flag("--operator-token") ?? process.env.GLEANER_OPERATOR_TOKEN;
  } else {
    target = await startTarget(targetKind, { bin: flag("--bin") });
    base = target.base;
    opToken = target.operatorToken;
  }
});

after(async () => {
  if (target) await target.stop();
});

// ---- helpers ---------------------------------------------------------------------------------

async function call(method, path, { token, body, headers = {}, raw } = {}) {
  const h = { ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  let payload;
  if (raw !== undefined) {
    payload = raw;
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    h["content-type"] = "application/json";
  }
  const res = await fetch(path.startsWith("http") ? path : base + path, {
    method,
    headers: h,
    body: payload,
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

function expectError(res, status, code) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  assert.equal(typeof res.json?.error?.message, "string", `no error envelope: ${res.text}`);
  assert.ok(res.json.error.message.length > 0);
  if (code) assert.equal(res.json.error.code, code, res.text);
}

function expectOk(res, status = 200) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  return res.json;
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
const uid = () => randomBytes(6).toString("hex");

async function newKey(role) {
  return expectOk(await call("POST", "/v1/keys", { token: opToken, body: { role, name: `${role}-${uid()}` } }), 201).token;
}

async function newNode(vram = 24000, gpu = "RTX 4090", repro_class = undefined) {
  const enroll = await newKey("enroll");
  const r = expectOk(
    await call("POST", "/v1/nodes/register", {
      token: enroll,
      body: { machine_id: `m-${uid()}`, gpu: { name: gpu, vram_mb: vram }, agent_version: "0.1.0", repro_class },
    }),
  );
  return { id: r.node_id, token: r.token };
}

// A developer whose jobs are all canceled by cleanup() (terminal jobs answer 409, ignored).
function developer() {
  const jobs = [];
  let token;
  return {
    async token() {
      token ??= await newKey("developer");
      return token;
    },
    async submit(spec, headers) {
      const r = await call("POST", "/v1/jobs", { token: await this.token(), body: spec, headers });
      if (r.status === 201) jobs.push(r.json.id);
      return r;
    },
    async cleanup() {
      for (const id of jobs) await call("POST", `/v1/jobs/${id}/cancel`, { token: opToken, body: {} });
    },
  };
}

const synthetic = (steps = 10, extra = {}) => ({
  kind: "synthetic",
  params: { steps, step_ms: 1, checkpoint_every: 5, seed: 1 },
  ...extra,
});

async function claim(node) {
  return call("POST", "/v1/work", { token: node.token, body: {} });
}

async function tick() {
  return expectOk(await call("POST", "/v1/admin/maintenance", { token: opToken, body: {} }));
}

// ---- the suite -------------------------------------------------------------------------------

test("healthz answers 200 without a token", async () => {
  const r = await call("GET", "/healthz");
  assert.equal(r.status, 200);
  assert.equal(r.json.ok, true);
});

test("unknown routes, wrong methods and malformed paths get error envelopes", async () => {
  expectError(await call("GET", "/v1/nope"), 404, "not_found");
  expectError(await call("GET", "/nothing/here", { token: opToken }), 404, "not_found");
  const m = await call("DELETE", "/v1/keys", { token: opToken });
  expectError(m, 405);
  expectError(await call("GET", "/v1/jobs/%zz", { token: opToken }), 400, "bad_request");
  // Both shells decode the path by the core's rule: escapes are bytes (not UTF-8 checked) and an
  // escaped letter is the letter.
  expectError(await call("GET", "/v1/jobs/%FF", { token: opToken }), 404, "not_found");
  expectOk(await call("GET", "/heal%74hz"));
  expectError(await call("GET", "/blobs/%zz?m=GET&exp=1&sig=x"), 400, "bad_request");
});

test("auth: missing, malformed and unknown tokens are 401; wrong role is 403", async () => {
  expectError(await call("GET", "/v1/jobs"), 401, "unauthenticated");
  expectError(await call("GET", "/v1/jobs", { headers: { authorization: "Basic abc" } }), 401, "unauthenticated");
  expectError(await call("GET", "/v1/jobs", { token: "not-a-real-token" }), 401, "unauthenticated");
  const dev = await newKey("developer");
  expectError(await call("POST", "/v1/keys", { token: dev, body: { role: "developer", name: "x" } }), 403, "forbidden");
  expectError(await call("GET", "/v1/nodes", { token: dev }), 403, "forbidden");
  const node = await newNode();
  expectError(await call("POST", "/v1/jobs", { token: node.token, body: synthetic() }), 403, "forbidden");
  expectError(await call("POST", "/v1/work", { token: dev, body: {} }), 403, "forbidden");
});

test("keys: operator mints developer, enroll and operator keys; bad roles are 400", async () => {
  for (const role of ["developer", "enroll", "operator"]) {
    const k = expectOk(await call("POST", "/v1/keys", { token: opToken, body: { role, name: "k" } }), 201);
    assert.equal(typeof k.id, "string");
    assert.equal(typeof k.token, "string");
    assert.ok(k.token.length >= 20);
  }
  const op2 = await newKey("operator");
  expectOk(await call("GET", "/v1/nodes", { token: op2 }));
  expectError(await call("POST", "/v1/keys", { token: opToken, body: { role: "root", name: "k" } }), 400, "bad_request");
  expectError(await call("POST", "/v1/keys", { token: opToken, body: { role: "developer" } }), 400, "bad_request");
});

test("bad bodies: malformed JSON, wrong types, unknown kinds, absurd numbers are 400", async () => {
  const dev = developer();
  const t = await dev.token();
  const bad = [
    { raw: "{not json", headers: { "content-type": "application/json" } },
    { raw: "[1,2]", headers: { "content-type": "application/json" } },
    { body: { kind: 7, params: {} } },
    { body: { kind: "mine-bitcoin", params: {} } },
    { body: synthetic(-5) },
    { body: synthetic(1e12) },
    { body: { ...synthetic(), priority: "high" } },
    { body: { ...synthetic(), max_failures: 0 } },
  ];
  for (const b of bad) {
    expectError(await call("POST", "/v1/jobs", { token: t, ...b }), 400, "bad_request");
  }
  const list = expectOk(await call("GET", "/v1/jobs", { token: t }));
  assert.equal(list.jobs.length, 0, "a rejected submission created a job");
});

test("bodies with a raw NUL byte or trailing bytes are 400; params over a 24 GB card's bounds are 400", async () => {
  const dev = developer();
  const t = await dev.token();
  const json = { "content-type": "application/json" };
  const valid = JSON.stringify(synthetic());
  for (const raw of [`${valid}\0garbage`, `${valid}\0`, `${valid} garbage`,
                     valid.replace(",", ",\0")]) {
    const res = await call("POST", "/v1/jobs", { token: t, raw: Buffer.from(raw), headers: json });
    expectError(res, 400, "bad_request");
  }
  const nul = await call("POST", "/v1/jobs", { token: t, raw: Buffer.from(`${valid}\0garbage`), headers: json });
  assert.match(nul.json.error.message, /NUL byte/);
  const lora = (params) => ({ kind: "lora-sd", params: { steps: 5, ...params } });
  for (const [params, message] of [
    [{ batch_size: 1024 }, "params.batch_size must be an integer in [1, 64]"],
    [{ batch_size: 65 }, "params.batch_size must be an integer in [1, 64]"],
    [{ rank: 257 }, "params.rank must be an integer in [1, 256]"],
    [{ sample_prompts: ["a"], sample_resolution: 4096 }, "params.sample_resolution must be an integer in [8, 2048]"],
  ]) {
    const res = await call("POST", "/v1/jobs", { token: t, body: lora(params) });
    expectError(res, 400, "bad_request");
    assert.equal(res.json.error.message, message);
  }
  const list = expectOk(await call("GET", "/v1/jobs", { token: t }));
  assert.equal(list.jobs.length, 0, "a rejected submission created a job");
});

test("quarantine extended to an enroll key: the machine's next identity starts quarantined", async () => {
  const owner = await newKey("enroll");
  const register = (machine, token = owner) =>
    call("POST", "/v1/nodes/register", { token, body: { machine_id: machine, gpu: { name: "RTX 3090", vram_mb: 24000 }, agent_version: "0.1.0" } });
  const bad = expectOk(await register(`m-${uid()}`));
  expectOk(await call("POST", `/v1/nodes/${bad.node_id}/quarantine`, { token: opToken, body: { extend_to_enroll_key: true } }));
  const again = expectOk(await register(`m-${uid()}`));
  assert.equal(again.state, "quarantined");
  assert.equal(expectOk(await register(`m-${uid()}`, await newKey("enroll"))).state, "active");
  expectOk(await call("POST", `/v1/nodes/${bad.node_id}/restore`, { token: opToken, body: {} }));
  assert.equal(expectOk(await register(`m-${uid()}`)).state, "active");
});

test("bodies over the limit are 413", async () => {
  const t = await newKey("developer");
  const big = JSON.stringify({ kind: "synthetic", params: {}, pad: "x".repeat(1100000) });
  expectError(await call("POST", "/v1/jobs", { token: t, raw: big, headers: { "content-type": "application/json" } }), 413, "too_large");
});

test("node registration: same machine keeps its id with its node secret, the old token is revoked", async () => {
  const enroll = await newKey("enroll");
  const body = { machine_id: `m-${uid()}`, gpu: { name: "RTX 3090", vram_mb: 24000 }, agent_version: "0.1.0" };
  const a = expectOk(await call("POST", "/v1/nodes/register", { token: enroll, body }));
  assert.equal(typeof a.node_secret, "string");
  // The enroll token alone does not take the machine over.
  const impostor = await call("POST", "/v1/nodes/register", { token: enroll, body });
  expectError(impostor, 409, "conflict");
  assert.match(impostor.json.error.message, /--machine-id/);
  const b = expectOk(await call("POST", "/v1/nodes/register", { token: enroll, body: { ...body, node_secret: a.node_secret } }));
  assert.equal(a.node_id, b.node_id);
  assert.equal(b.node_secret, undefined);
  assert.notEqual(a.token, b.token);
  expectError(await call("POST", "/v1/work", { token: a.token, body: {} }), 401, "unauthenticated");
  const w = await call("POST", "/v1/work", { token: b.token, body: {} });
  assert.ok(w.status === 204 || w.status === 200);
  expectError(
    await call("POST", "/v1/nodes/register", { token: enroll, body: { machine_id: "x", gpu: { name: "g" } } }),
    400,
    "bad_request",
  );
});

test("jobs: submit, idempotency, get, list; other developers see 404", async () => {
  const dev = developer();
  try {
    const created = expectOk(await dev.submit(synthetic(20), { "idempotency-key": "abc-1" }), 201);
    assert.equal(created.state, "pending");
    assert.equal(created.steps, 20);
    // A replay answers the same job (200, not a second 201).
    const again = expectOk(await dev.submit(synthetic(20), { "idempotency-key": "abc-1" }), 200);
    assert.equal(again.id, created.id);
    const got = expectOk(await call("GET", `/v1/jobs/${created.id}`, { token: await dev.token() }));
    assert.equal(got.id, created.id);
    assert.equal(got.lease_epoch, 0);
    const list = expectOk(await call("GET", "/v1/jobs?state=pending&limit=10", { token: await dev.token() }));
    assert.deepEqual(list.jobs.map((j) => j.id), [created.id]);
    const other = await newKey("developer");
    expectError(await call("GET", `/v1/jobs/${created.id}`, { token: other }), 404, "not_found");
    expectOk(await call("GET", `/v1/jobs/${created.id}`, { token: opToken }));
  } finally {
    await dev.cleanup();
  }
});

test("claim: 204 with Retry-After when idle; 200 with lease; fenced heartbeats", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const other = await newNode();
    const job = expectOk(await dev.submit(synthetic(10)), 201);
    const w = expectOk(await claim(node));
    assert.equal(w.job.id, job.id);
    assert.equal(w.lease.epoch, 1);
    assert.equal(w.lease.heartbeat_interval, TIMING.heartbeat_interval_s);
    const idle = await claim(other);
    assert.equal(idle.status, 204);
    assert.ok(Number(idle.headers.get("retry-after")) >= 1);

    const hb = expectOk(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: 1, step: 3, loss: 0.5 } }));
    assert.equal(hb.cancel, false);
    assert.equal(typeof hb.lease_expires_at, "string");
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: 2, step: 4 } }), 409);
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: other.token, body: { epoch: 1, step: 4 } }), 409);
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: 1 } }), 400, "bad_request");
    const got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.state, "running");
    assert.equal(got.step, 3);
  } finally {
    await dev.cleanup();
  }
});

test("claim order: priority first, then age; requirements and quarantine are respected", async () => {
  const dev = developer();
  try {
    const low = expectOk(await dev.submit(synthetic(5)), 201);
    const high = expectOk(await dev.submit(synthetic(5, { priority: 10 })), 201);
    const big = expectOk(await dev.submit(synthetic(5, { priority: 20, requirements: { min_vram_mb: 80000 } })), 201);
    // One lease per node: three small nodes, the third finds only the job it cannot run.
    const small = await newNode(8000, "RTX 3070");
    const small2 = await newNode(8000, "RTX 3070");
    const small3 = await newNode(8000, "RTX 3070");
    assert.equal(expectOk(await claim(small)).job.id, high.id);
    assert.equal(expectOk(await claim(small2)).job.id, low.id);
    assert.equal((await claim(small3)).status, 204);

    const quarantined = await newNode(96000, "H100");
    expectOk(await call("POST", `/v1/nodes/${quarantined.id}/quarantine`, { token: opToken, body: { reason: "test" } }));
    assert.equal((await claim(quarantined)).status, 204);
    expectOk(await call("POST", `/v1/nodes/${quarantined.id}/restore`, { token: opToken, body: {} }));
    assert.equal(expectOk(await claim(quarantined)).job.id, big.id);
  } finally {
    await dev.cleanup();
  }
});

test("one lease per node: six claims from one node get one job; finishing it frees the node", async () => {
  const dev = developer();
  try {
    const jobs = [];
    for (let i = 0; i < 5; i++) jobs.push(expectOk(await dev.submit(synthetic(5)), 201).id);
    const node = await newNode();
    const first = expectOk(await claim(node));
    for (let i = 0; i < 5; i++) {
      const again = await claim(node);
      assert.equal(again.status, 204, again.text);
      assert.equal(again.headers.get("gleaner-lease-held"), `job ${first.job.id}`);
    }
    const running = [];
    for (const id of jobs) {
      if (expectOk(await call("GET", `/v1/jobs/${id}`, { token: opToken })).state === "running") running.push(id);
    }
    assert.deepEqual(running, [first.job.id]);
    expectOk(await call("POST", `/v1/jobs/${first.job.id}/release`, { token: node.token, body: { epoch: first.lease.epoch } }));
    const next = expectOk(await claim(node));
    assert.ok(jobs.includes(next.job.id));
  } finally {
    await dev.cleanup();
  }
});

async function putBlob(url, bytes) {
  return call("PUT", url, { raw: bytes, headers: { "content-type": "application/octet-stream" } });
}

test("checkpoints: upload, commit, stale commits refused, resume handed to the next lease", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(20)), 201);
    const w = expectOk(await claim(node));
    assert.equal(w.job.id, job.id);
    const epoch = w.lease.epoch;
    const data = randomBytes(3000);
    const up = expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: node.token, body: { epoch, step: 10 } }));
    assert.match(up.url, /^http/);
    // Committing before the object exists is refused.
    expectError(
      await call("POST", `/v1/jobs/${job.id}/checkpoints/10/commit`, { token: node.token, body: { epoch, sha256: sha256(data), size: data.length } }),
      400,
    );
    const put = await putBlob(up.url, data);
    assert.ok(put.status >= 200 && put.status < 300, `PUT ${put.status}: ${put.text}`);
    // A tampered URL is refused.
    const forged = up.url.replace(/sig=([0-9a-f])/, (_, c) => `sig=${c === "0" ? "1" : "0"}`);
    assert.notEqual(forged, up.url);
    expectError(await putBlob(forged, data), 403);
    const c = expectOk(
      await call("POST", `/v1/jobs/${job.id}/checkpoints/10/commit`, { token: node.token, body: { epoch, sha256: sha256(data), size: data.length } }),
    );
    assert.equal(c.step, 10);
    // The PUT URL is still valid, but a committed checkpoint is never replaced by other bytes;
    // the same bytes again (a late retry) are fine.
    expectError(await putBlob(up.url, randomBytes(3000)), 409, "conflict");
    const retry = await putBlob(up.url, data);
    assert.ok(retry.status >= 200 && retry.status < 300, `PUT ${retry.status}: ${retry.text}`);
    expectError(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: node.token, body: { epoch, step: 5 } }), 409);
    const got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.latest_checkpoint.step, 10);

    expectOk(await call("POST", `/v1/jobs/${job.id}/release`, { token: node.token, body: { epoch, reason: "preempted" } }));
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch, step: 11 } }), 409);
    const next = await newNode();
    const w2 = expectOk(await claim(next));
    assert.equal(w2.job.id, job.id);
    assert.equal(w2.lease.epoch, epoch + 1);
    assert.equal(w2.resume.step, 10);
    assert.equal(w2.resume.sha256, sha256(data));
    const dl = await fetch(w2.resume.url);
    assert.equal(dl.status, 200);
    assert.equal(sha256(Buffer.from(await dl.arrayBuffer())), sha256(data));
    // The holder can have the download URLs minted again (same shape as the claim's).
    const again = expectOk(await call("POST", `/v1/jobs/${job.id}/downloads`, { token: next.token, body: { epoch: epoch + 1 } }));
    assert.deepEqual(again.inputs, {});
    assert.equal(again.resume.step, 10);
    assert.equal(again.resume.size, data.length);
    const dl2 = await fetch(again.resume.url);
    assert.equal(dl2.status, 200);
    assert.equal(sha256(Buffer.from(await dl2.arrayBuffer())), sha256(data));
    expectError(await call("POST", `/v1/jobs/${job.id}/downloads`, { token: node.token, body: { epoch } }), 409);
    const after = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(after.failures, 0, "release is not a failure");
  } finally {
    await dev.cleanup();
  }
});

test("verification: a replay lease for another node; two replays that disagree with the trainer quarantine it and rewind the job", async () => {
  const dev = developer();
  try {
    const trainer = await newNode();
    const job = expectOk(await dev.submit(synthetic(10, { verify_fraction: 1 })), 201);
    assert.equal(job.verification.fraction, 1);
    const w = expectOk(await claim(trainer));
    assert.equal(w.job.id, job.id);
    const epoch = w.lease.epoch;
    const forged = randomBytes(2000);
    const up = expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: trainer.token, body: { epoch, step: 5 } }));
    assert.ok((await putBlob(up.url, forged)).status < 300);
    expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints/5/commit`, { token: trainer.token, body: { epoch, sha256: sha256(forged), size: forged.length } }));

    // Round 1: another node replays the segment 0 -> 5 (from scratch: no resume).
    const verifyClaim = async (node) => call("POST", "/v1/work", { token: node.token, body: { verify: true } });
    const a = await newNode();
    const va = expectOk(await verifyClaim(a));
    assert.equal(va.job.id, job.id);
    assert.equal(va.job.steps, 10);
    assert.equal(va.verification.stop_step, 5);
    assert.equal(va.verification.round, 1);
    assert.equal(va.resume, undefined);
    const vpath = `/v1/verifications/${va.verification.id}`;
    const ve = va.lease.epoch;
    const hb = expectOk(await call("POST", `${vpath}/heartbeat`, { token: a.token, body: { epoch: ve, step: 3 } }));
    assert.equal(hb.cancel, false);
    expectError(await call("POST", `${vpath}/heartbeat`, { token: a.token, body: { epoch: ve + 1 } }), 409);
    expectError(await call("POST", `${vpath}/heartbeat`, { token: trainer.token, body: { epoch: ve } }), 409);
    expectError(await call("POST", "/v1/verifications/v_0000000000000000/heartbeat", { token: a.token, body: { epoch: 1 } }), 404);
    expectError(await call("POST", `${vpath}/heartbeat`, { token: opToken, body: { epoch: ve } }), 403);
    const honest = randomBytes(2000);
    const vup = expectOk(await call("POST", `${vpath}/checkpoint`, { token: a.token, body: { epoch: ve } }));
    assert.match(vup.key, new RegExp(`^jobs/${job.id}/verify/`));
    expectError(await call("POST", `${vpath}/commit`, { token: a.token, body: { epoch: ve, sha256: sha256(honest), size: honest.length } }), 400);
    assert.ok((await putBlob(vup.url, honest)).status < 300);
    const done = expectOk(await call("POST", `${vpath}/commit`, { token: a.token, body: { epoch: ve, sha256: sha256(honest), size: honest.length } }));
    assert.equal(done.step, 5);
    // A retried commit is fine; the lease is over for anything else.
    expectOk(await call("POST", `${vpath}/commit`, { token: a.token, body: { epoch: ve, sha256: sha256(honest), size: honest.length } }));
    expectError(await call("POST", `${vpath}/heartbeat`, { token: a.token, body: { epoch: ve } }), 409);

    let ev = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.equal(ev.verifications.length, 2);
    assert.equal(ev.verifications[0].verdict, "disagree");
    assert.equal(ev.verifications[0].claimed_sha256, sha256(forged));
    assert.equal(ev.verifications[0].trainer_node, trainer.id);
    assert.equal(ev.verifications[1].round, 2);
    assert.equal(ev.verifications[1].state, "pending");

    // Round 2: a third node (never the trainer or the first verifier) agrees with the first.
    const b = await newNode();
    const vb = expectOk(await verifyClaim(b));
    assert.equal(vb.verification.round, 2);
    assert.equal(vb.verification.id, ev.verifications[1].id);
    const bpath = `/v1/verifications/${vb.verification.id}`;
    const bup = expectOk(await call("POST", `${bpath}/checkpoint`, { token: b.token, body: { epoch: vb.lease.epoch } }));
    assert.ok((await putBlob(bup.url, honest)).status < 300);
    expectOk(await call("POST", `${bpath}/commit`, { token: b.token, body: { epoch: vb.lease.epoch, sha256: sha256(honest), size: honest.length } }));

    // The trainer is quarantined, its lease is over, the job is back at the segment's start.
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: trainer.token, body: { epoch, step: 6 } }), 409);
    const q = await call("POST", "/v1/work", { token: trainer.token, body: {} });
    assert.equal(q.status, 204);
    assert.equal(q.headers.get("gleaner-node-state"), "quarantined");
    ev = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.equal(ev.job.state, "pending");
    assert.equal(ev.job.latest_checkpoint, null);
    assert.deepEqual(ev.checkpoints, []);
    assert.equal(ev.verifications[1].verdict, "trainer_bad");
    assert.equal(ev.job.verification.rejected, 1);
    assert.equal(ev.job.verification.open, 0);
    assert.ok(ev.failures.some((f) => f.node_id === trainer.id));
  } finally {
    await dev.cleanup();
  }
});

test("verification: no replay for a node that held a later lease of the job", async () => {
  const dev = developer();
  try {
    // A GPU model of its own, so that no other test's open replay matches these nodes.
    const gpu = `GPU-${uid()}`;
    const trainer = await newNode(24000, gpu);
    const later = await newNode(24000, gpu);
    const job = expectOk(await dev.submit(synthetic(10, { verify_fraction: 1 })), 201);
    const w = expectOk(await claim(trainer));
    assert.equal(w.job.id, job.id);
    const bytes = randomBytes(500);
    const up = expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: trainer.token, body: { epoch: w.lease.epoch, step: 5 } }));
    assert.ok((await putBlob(up.url, bytes)).status < 300);
    expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints/5/commit`, { token: trainer.token, body: { epoch: w.lease.epoch, sha256: sha256(bytes), size: bytes.length } }));
    expectOk(await call("POST", `/v1/jobs/${job.id}/release`, { token: trainer.token, body: { epoch: w.lease.epoch } }));
    // `later` resumes from checkpoint 5 (it holds the result under check) and keeps the lease.
    const l = expectOk(await claim(later));
    assert.equal(l.job.id, job.id);
    assert.equal(l.resume.step, 5);
    const verifyClaim = async (node) => call("POST", "/v1/work", { token: node.token, body: { verify: true } });
    assert.equal((await verifyClaim(later)).status, 204);
    const fresh = await newNode(24000, gpu);
    const v = expectOk(await verifyClaim(fresh));
    assert.equal(v.job.id, job.id);
    assert.equal(v.verification.stop_step, 5);
  } finally {
    await dev.cleanup();
  }
});

test("quotas: a lease's outputs and uncommitted checkpoints are capped, URLs carry the allowance", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(10)), 201);
    const { lease } = expectOk(await claim(node));
    const epoch = lease.epoch;
    const GiB = 1024 ** 3;
    const out = (name, size) => call("POST", `/v1/jobs/${job.id}/outputs`, { token: node.token, body: size === undefined ? { epoch, name } : { epoch, name, size } });
    // A declared size is what the URL allows; beyond the lease's output bytes is 413.
    const first = expectOk(await out("a.bin", 1000));
    assert.equal(first.max_size, 1000);
    expectError(await out("big.bin", 9 * GiB), 413, "quota_exceeded");
    const rest = expectOk(await out("b.bin"));
    assert.equal(rest.max_size, 8 * GiB - 1000);
    assert.equal(expectOk(await out("b.bin", 10)).max_size, 10);  // its reservation, replaced
    for (let i = 0; i < 6; i++) expectOk(await out(`f${i}.bin`, 1));
    expectError(await out("ninth.bin", 1), 413, "quota_exceeded");
    expectOk(await out("a.bin", 1000));  // asking again for a name it has is no new output
    // Uncommitted checkpoint bytes: two of the largest fill the lease's allowance.
    const ckpt = (step, size) => call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: node.token, body: { epoch, step, size } });
    assert.equal(expectOk(await ckpt(5, 16 * GiB)).max_size, 16 * GiB);
    assert.equal(expectOk(await ckpt(6, 16 * GiB)).max_size, 16 * GiB);
    const over = await ckpt(7, 1);
    expectError(over, 413, "quota_exceeded");
    assert.match(over.json.error.message, /uncommitted/);
    expectError(await ckpt(11, 1), 400);
    // Committing step 5 (smaller than its URL allowed) frees its share; steps up to it are stale.
    const bytes = randomBytes(300);
    const up = expectOk(await ckpt(5, bytes.length));
    assert.ok((await putBlob(up.url, bytes)).status < 300);
    expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints/5/commit`, { token: node.token, body: { epoch, sha256: sha256(bytes), size: bytes.length } }));
    expectError(await ckpt(5, 1), 409, "stale_checkpoint");
    assert.equal(expectOk(await ckpt(7, 1000)).max_size, 1000);
    expectOk(await call("POST", `/v1/jobs/${job.id}/release`, { token: node.token, body: { epoch } }));
  } finally {
    await dev.cleanup();
  }
});

test("samples: captions come from the job, never from the node", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(10, {
      params: { steps: 10, step_ms: 1, checkpoint_every: 5, seed: 1, sample_prompts: ["a cat"], sample_every: 5 },
    })), 201);
    const { lease } = expectOk(await claim(node));
    const epoch = lease.epoch;
    expectError(await call("POST", `/v1/jobs/${job.id}/samples`, { token: node.token, body: { epoch, step: 5, index: 1 } }), 400);
    const up = expectOk(await call("POST", `/v1/jobs/${job.id}/samples`, { token: node.token, body: { epoch, step: 5, index: 0 } }));
    assert.equal(up.max_size, 512 * 512 * 4 + 65536);
    const png = randomBytes(600);
    assert.ok((await putBlob(up.url, png)).status < 300);
    const image = { index: 0, sha256: sha256(png), size: png.length, prompt: "visit evil.example", negative_prompt: "<b>" };
    expectOk(await call("POST", `/v1/jobs/${job.id}/samples/5/commit`, { token: node.token, body: { epoch, seed: 1, seconds: 1, images: [image] } }));
    const list = expectOk(await call("GET", `/v1/jobs/${job.id}/samples`, { token: await dev.token() }));
    assert.equal(list.steps[0].images[0].prompt, "a cat");
    assert.equal(list.steps[0].images[0].negative_prompt, "");
    expectOk(await call("POST", `/v1/jobs/${job.id}/release`, { token: node.token, body: { epoch } }));
  } finally {
    await dev.cleanup();
  }
});

test("bound outputs: the last checkpoint names the outputs, complete must match them, the last replay compares them", async () => {
  const dev = developer();
  try {
    const trainer = await newNode();
    const job = expectOk(await dev.submit(synthetic(5, { verify_fraction: 1 })), 201);
    const w = expectOk(await claim(trainer));
    assert.equal(w.job.id, job.id);
    const epoch = w.lease.epoch;
    const base = `/v1/jobs/${job.id}`;
    const list = (b, name = "chain.txt") => [{ name, sha256: sha256(b), size: b.length }];
    const honest = randomBytes(300), forged = randomBytes(300), ckpt = randomBytes(1000);
    const up = expectOk(await call("POST", `${base}/checkpoints`, { token: trainer.token, body: { epoch, step: 5 } }));
    assert.ok((await putBlob(up.url, ckpt)).status < 300);
    const commit = (body) => call("POST", `${base}/checkpoints/5/commit`, { token: trainer.token, body: { epoch, sha256: sha256(ckpt), size: ckpt.length, ...body } });
    // The last step's checkpoint without outputs, or with malformed ones: 400.
    const bare = await commit({});
    expectError(bare, 400, "bad_request");
    assert.match(bare.json.error.message, /must carry outputs/);
    expectError(await commit({ outputs: [{ name: "../x", sha256: sha256(honest), size: 1 }] }), 400, "bad_request");
    expectOk(await commit({ outputs: list(honest) }));
    // The job completes only with those files.
    const out = expectOk(await call("POST", `${base}/outputs`, { token: trainer.token, body: { epoch, name: "chain.txt" } }));
    assert.ok((await putBlob(out.url, forged)).status < 300);
    const wrong = await call("POST", `${base}/complete`, { token: trainer.token, body: { epoch, outputs: list(forged) } });
    expectError(wrong, 400, "bad_request");
    assert.match(wrong.json.error.message, /differ from the ones the checkpoint of step 5 was committed with/);
    const ev = expectOk(await call("GET", `${base}/events`, { token: await dev.token() }));
    assert.equal(ev.job.state, "running");
    assert.deepEqual(ev.checkpoints[0].outputs, list(honest));
    assert.deepEqual(ev.verifications[0].claimed_outputs, list(honest));

    // The replay of the last segment (0 -> 5) must bring the outputs it exported.
    const v = await newNode();
    const vc = expectOk(await call("POST", "/v1/work", { token: v.token, body: { verify: true } }));
    assert.equal(vc.verification.stop_step, 5);
    const vpath = `/v1/verifications/${vc.verification.id}`;
    const ve = vc.lease.epoch;
    const vup = expectOk(await call("POST", `${vpath}/checkpoint`, { token: v.token, body: { epoch: ve } }));
    assert.ok((await putBlob(vup.url, ckpt)).status < 300);
    const vbare = await call("POST", `${vpath}/commit`, { token: v.token, body: { epoch: ve, sha256: sha256(ckpt), size: ckpt.length } });
    expectError(vbare, 400, "bad_request");
    assert.match(vbare.json.error.message, /commit the outputs/);
    expectOk(await call("POST", `${vpath}/commit`, { token: v.token, body: { epoch: ve, sha256: sha256(ckpt), size: ckpt.length, outputs: list(honest) } }));
    const after = expectOk(await call("GET", `${base}/events`, { token: await dev.token() }));
    assert.equal(after.verifications[0].verdict, "agree");
    assert.deepEqual(after.verifications[0].result_outputs, list(honest));
  } finally {
    await dev.cleanup();
  }
});

// Verified delivery helpers: a node trains a whole synthetic(5) job (one checkpoint, the last,
// with its outputs) and completes; a node takes the open replay and commits its result.
async function finishJob(node, job, epoch, ckpt, out) {
  const base = `/v1/jobs/${job}`;
  const list = [{ name: "chain.txt", sha256: sha256(out), size: out.length }];
  const up = expectOk(await call("POST", `${base}/checkpoints`, { token: node.token, body: { epoch, step: 5 } }));
  assert.ok((await putBlob(up.url, ckpt)).status < 300);
  expectOk(await call("POST", `${base}/checkpoints/5/commit`, { token: node.token, body: { epoch, sha256: sha256(ckpt), size: ckpt.length, outputs: list } }));
  const o = expectOk(await call("POST", `${base}/outputs`, { token: node.token, body: { epoch, name: "chain.txt" } }));
  assert.ok((await putBlob(o.url, out)).status < 300);
  return expectOk(await call("POST", `${base}/complete`, { token: node.token, body: { epoch, outputs: list } }));
}
async function replayLast(node, ckpt, out) {
  const vc = expectOk(await call("POST", "/v1/work", { token: node.token, body: { verify: true } }));
  assert.equal(vc.verification.stop_step, 5);
  const vpath = `/v1/verifications/${vc.verification.id}`;
  const ve = vc.lease.epoch;
  const vup = expectOk(await call("POST", `${vpath}/checkpoint`, { token: node.token, body: { epoch: ve } }));
  assert.ok((await putBlob(vup.url, ckpt)).status < 300);
  const outputs = [{ name: "chain.txt", sha256: sha256(out), size: out.length }];
  return expectOk(await call("POST", `${vpath}/commit`, { token: node.token, body: { epoch: ve, sha256: sha256(ckpt), size: ckpt.length, outputs } }));
}

test("verified delivery: a job is verifying until the replay of its last segment agrees, then its outputs are released", async () => {
  const dev = developer();
  try {
    const gpu = `GPU-${uid()}`;
    const trainer = await newNode(24000, gpu);
    const job = expectOk(await dev.submit(synthetic(5, { verify_fraction: 0.001 })), 201);
    const w = expectOk(await claim(trainer));
    assert.equal(w.job.id, job.id);
    const ckpt = randomBytes(800), out = randomBytes(200);
    const done = await finishJob(trainer, job.id, w.lease.epoch, ckpt, out);
    assert.equal(done.state, "verifying");
    let got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.state, "verifying");
    assert.deepEqual(got.outputs, []);
    assert.equal(got.verification.open, 1);
    expectError(await call("GET", `/v1/jobs/${job.id}/result`, { token: await dev.token() }), 409, "conflict");
    const listed = expectOk(await call("GET", "/v1/jobs?state=verifying", { token: await dev.token() }));
    assert.ok(listed.jobs.some((j) => j.id === job.id));
    await replayLast(await newNode(24000, gpu), ckpt, out);
    got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.state, "completed");
    assert.equal(got.outputs.length, 1);
    assert.equal(got.verification.verified, 1);
    expectOk(await call("GET", `/v1/jobs/${job.id}/result`, { token: await dev.token() }));
  } finally {
    await dev.cleanup();
  }
});

test("taint: a forger caught by two replays reopens the completed jobs it trained, naming the released outputs", async () => {
  const dev = developer();
  try {
    const gpu = `GPU-${uid()}`;
    const forger = await newNode(24000, gpu);
    const a = await newNode(24000, gpu), b = await newNode(24000, gpu);
    // job1: the forger's work agrees with a replay and is released.
    const job1 = expectOk(await dev.submit(synthetic(5, { verify_fraction: 0.001 })), 201);
    const w1 = expectOk(await claim(forger));
    assert.equal(w1.job.id, job1.id);
    const c1 = randomBytes(800), o1 = randomBytes(200);
    assert.equal((await finishJob(forger, job1.id, w1.lease.epoch, c1, o1)).state, "verifying");
    await replayLast(a, c1, o1);
    assert.equal(expectOk(await call("GET", `/v1/jobs/${job1.id}`, { token: await dev.token() })).state, "completed");
    // job2: forged; two honest replays condemn it and quarantine the forger.
    const job2 = expectOk(await dev.submit(synthetic(5, { verify_fraction: 0.001 })), 201);
    const w2 = expectOk(await claim(forger));
    assert.equal(w2.job.id, job2.id);
    const honest = randomBytes(800), o2 = randomBytes(200);
    await finishJob(forger, job2.id, w2.lease.epoch, randomBytes(800), o2);
    await replayLast(a, honest, o2);
    await replayLast(b, honest, o2);
    const q = await call("POST", "/v1/work", { token: forger.token, body: {} });
    assert.equal(q.status, 204);
    assert.equal(q.headers.get("gleaner-node-state"), "quarantined");
    const ev = expectOk(await call("GET", `/v1/jobs/${job1.id}/events`, { token: await dev.token() }));
    assert.equal(ev.job.state, "pending");
    assert.equal(ev.job.latest_checkpoint, null);
    assert.deepEqual(ev.job.outputs, []);
    assert.equal(ev.job.verification.reopened, 1);
    assert.equal(ev.reopened.length, 1);
    assert.equal(ev.reopened[0].event, "reopened: a node in this job's lineage was found forging");
    assert.equal(ev.reopened[0].node_id, forger.id);
    assert.equal(ev.reopened[0].step, 0);
    assert.deepEqual(ev.reopened[0].outputs_released, [{ name: "chain.txt", sha256: sha256(o1), size: o1.length }]);
    assert.ok(ev.segments.every((s) => s.rework === true));
    expectError(await call("GET", `/v1/jobs/${job1.id}/result`, { token: await dev.token() }), 409, "conflict");
  } finally {
    await dev.cleanup();
  }
});

test("reproducibility class: a replay goes only to a node of the trainer's class, and the record keeps it", async () => {
  const dev = developer();
  try {
    const gpu = `GPU-${uid()}`;
    const classA = { gpu_model: gpu, libtorch: "2.6.0+cu124", driver: "550" };
    const classB = { ...classA, driver: "560" };
    expectError(await call("POST", "/v1/nodes/register", { token: await newKey("enroll"), body: { machine_id: `m-${uid()}`, gpu: { name: gpu, vram_mb: 1 }, agent_version: "0.1.0", repro_class: { colour: "red" } } }), 400);
    const trainer = await newNode(24000, gpu, classA);
    const other = await newNode(24000, gpu, classB);
    const job = expectOk(await dev.submit(synthetic(5, { verify_fraction: 0.001 })), 201);
    const w = expectOk(await claim(trainer));
    assert.equal(w.job.id, job.id);
    const ckpt = randomBytes(600), out = randomBytes(100);
    assert.equal((await finishJob(trainer, job.id, w.lease.epoch, ckpt, out)).state, "verifying");
    assert.equal((await call("POST", "/v1/work", { token: other.token, body: { verify: true } })).status, 204);
    await replayLast(await newNode(24000, gpu, classA), ckpt, out);
    const ev = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.equal(ev.job.state, "completed");
    assert.deepEqual(ev.verifications[0].trainer_class, classA);
    assert.deepEqual(ev.verifications[0].verifier_class, classA);
  } finally {
    await dev.cleanup();
  }
});

test("complete: outputs uploaded, result URLs download the same bytes, later writes are 409", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(5)), 201);
    const { lease } = expectOk(await claim(node));
    const bytes = randomBytes(1500);
    const outputs = (b) => [{ name: "lora.safetensors", sha256: sha256(b), size: b.length }];
    const out = expectOk(await call("POST", `/v1/jobs/${job.id}/outputs`, { token: node.token, body: { epoch: lease.epoch, name: "lora.safetensors" } }));
    const put = await putBlob(out.url, bytes);
    assert.ok(put.status >= 200 && put.status < 300, `PUT ${put.status}: ${put.text}`);
    expectError(await call("GET", `/v1/jobs/${job.id}/result`, { token: await dev.token() }), 409, "conflict");
    // Completion before the last step is reported is refused: nothing was trained.
    const early = await call("POST", `/v1/jobs/${job.id}/complete`, { token: node.token, body: { epoch: lease.epoch, outputs: outputs(bytes) } });
    expectError(early, 409, "conflict");
    assert.match(early.json.error.message, /step 0 of 5/);
    expectOk(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: lease.epoch, step: 5 } }));
    expectOk(
      await call("POST", `/v1/jobs/${job.id}/complete`, {
        token: node.token,
        body: { epoch: lease.epoch, outputs: [{ name: "lora.safetensors", sha256: sha256(bytes), size: bytes.length }] },
      }),
    );
    expectError(await putBlob(out.url, randomBytes(1500)), 409, "conflict");
    const res = expectOk(await call("GET", `/v1/jobs/${job.id}/result`, { token: await dev.token() }));
    assert.equal(res.outputs.length, 1);
    const dl = await fetch(res.outputs[0].url);
    assert.equal(dl.status, 200);
    assert.equal(sha256(Buffer.from(await dl.arrayBuffer())), sha256(bytes));
    // Resumable downloads: one byte range, 206; a range past the end is 416.
    const part = await fetch(res.outputs[0].url, { headers: { range: "bytes=10-19" } });
    assert.equal(part.status, 206);
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(10, 20));
    const tail = await fetch(res.outputs[0].url, { headers: { range: "bytes=-5" } });
    assert.equal(tail.status, 206);
    assert.deepEqual(Buffer.from(await tail.arrayBuffer()), bytes.subarray(bytes.length - 5));
    const past = await fetch(res.outputs[0].url, { headers: { range: "bytes=999999-" } });
    assert.equal(past.status, 416);
    await past.arrayBuffer();
    const got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.state, "completed");
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: lease.epoch, step: 5 } }), 409);
    expectError(await call("POST", `/v1/jobs/${job.id}/fail`, { token: node.token, body: { epoch: lease.epoch, reason: "late" } }), 409);
  } finally {
    await dev.cleanup();
  }
});

test("samples: upload + commit under the lease, first commit wins, owner-only listing with signed URLs", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(10, {
      params: { steps: 10, step_ms: 1, checkpoint_every: 5, seed: 1,
                sample_prompts: ["a cat", { prompt: "a dog", negative_prompt: "blur" }], sample_every: 5 },
    })), 201);
    assert.equal(job.params.sample_prompts[0].negative_prompt, "");
    assert.equal(job.params.sample_steps, 25);
    expectError(await dev.submit(synthetic(10, { params: { steps: 10, sample_every: 5 } })), 400, "bad_request");
    const { lease } = expectOk(await claim(node));
    const epoch = lease.epoch;
    const pngs = [randomBytes(700), randomBytes(900)];
    const images = [];
    for (let i = 0; i < 2; i++) {
      const up = expectOk(await call("POST", `/v1/jobs/${job.id}/samples`, { token: node.token, body: { epoch, step: 5, index: i } }));
      assert.match(up.key, new RegExp(`^jobs/${job.id}/samples/e${epoch}/s0000000005/${i}\\.png$`));
      const put = await putBlob(up.url, pngs[i]);
      assert.ok(put.status >= 200 && put.status < 300, `PUT ${put.status}: ${put.text}`);
      images.push({ index: i, sha256: sha256(pngs[i]), size: pngs[i].length, prompt: i ? "a dog" : "a cat",
                    negative_prompt: i ? "blur" : "" });
    }
    const commit = (imgs, t = node.token) => call("POST", `/v1/jobs/${job.id}/samples/5/commit`,
      { token: t, body: { epoch, seed: 1, seconds: 1.5, images: imgs } });
    const other = await newNode();
    expectError(await commit(images, other.token), 409);
    expectError(await commit([{ ...images[0], sha256: sha256(Buffer.from("not stored")) }]), 400);
    assert.equal(expectOk(await commit(images)).committed, true);
    assert.equal(expectOk(await commit(images)).committed, false);
    // A committed image is never replaced by other bytes.
    const again = expectOk(await call("POST", `/v1/jobs/${job.id}/samples`, { token: node.token, body: { epoch, step: 5, index: 0 } }));
    expectError(await putBlob(again.url, randomBytes(700)), 409, "conflict");

    const list = expectOk(await call("GET", `/v1/jobs/${job.id}/samples`, { token: await dev.token() }));
    assert.equal(list.sampling_s, 1.5);
    assert.equal(list.steps.length, 1);
    assert.equal(list.steps[0].step, 5);
    assert.deepEqual(list.steps[0].images.map((i) => [i.index, i.name, i.prompt, i.negative_prompt]),
                     [[0, "samples/5/0.png", "a cat", ""], [1, "samples/5/1.png", "a dog", "blur"]]);
    for (let i = 0; i < 2; i++) {
      const dl = await fetch(list.steps[0].images[i].url);
      assert.equal(dl.status, 200);
      assert.equal(sha256(Buffer.from(await dl.arrayBuffer())), sha256(pngs[i]));
    }
    expectOk(await call("GET", `/v1/jobs/${job.id}/samples?limit=1`, { token: opToken }));
    const stranger = developer();
    try {
      expectError(await call("GET", `/v1/jobs/${job.id}/samples`, { token: await stranger.token() }), 404);
    } finally {
      await stranger.cleanup();
    }
    expectError(await call("GET", `/v1/jobs/${job.id}/samples`, { token: node.token }), 403);
    const got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(got.sampling_s, 1.5);
    assert.equal(got.latest_sample_step, 5);
    expectOk(await call("POST", `/v1/jobs/${job.id}/release`, { token: node.token, body: { epoch, reason: "done here" } }));
  } finally {
    await dev.cleanup();
  }
});

test("fail: bans the node, the job fails for good after max_failures", async () => {
  const dev = developer();
  try {
    const job = expectOk(await dev.submit(synthetic(5, { max_failures: 2 })), 201);
    const a = await newNode();
    const b = await newNode();
    const la = expectOk(await claim(a)).lease;
    const f1 = expectOk(await call("POST", `/v1/jobs/${job.id}/fail`, { token: a.token, body: { epoch: la.epoch, reason: "oom" } }));
    assert.equal(f1.state, "pending");
    assert.equal((await claim(a)).status, 204, "a node never gets a job it failed");
    const lb = expectOk(await claim(b)).lease;
    const f2 = expectOk(await call("POST", `/v1/jobs/${job.id}/fail`, { token: b.token, body: { epoch: lb.epoch, reason: "oom" } }));
    assert.equal(f2.state, "failed");
    const events = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.equal(events.failures.length, 2);
    assert.equal(events.segments.length, 2);
  } finally {
    await dev.cleanup();
  }
});

test("input errors: confirmed by another machine, then failed with the trainer's message; no ban, no quarantine", async () => {
  const dev = developer();
  try {
    const job = expectOk(await dev.submit(synthetic(10, { max_failures: 100, priority: 900 })), 201);
    const a = await newNode();
    const b = await newNode();
    const fail = (node, epoch, reason, cause, step) =>
      call("POST", `/v1/jobs/${job.id}/fail`, { token: node.token, body: { epoch, reason, cause, step } });
    const la = expectOk(await claim(a)).lease;
    const f1 = expectOk(await fail(a, la.epoch, "fail_at_step 1 reached", "input", 0));
    assert.equal(f1.state, "pending");
    assert.equal(f1.cause, "input");
    assert.equal(f1.failures, 0);
    assert.equal(f1.node_quarantined, false);
    const view = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(view.input_error.state, "awaiting_confirmation");
    assert.equal(view.input_error.reason, "fail_at_step 1 reached");
    assert.equal((await claim(a)).status, 204, "the reporter's machine never confirms its own report");
    const wb = expectOk(await claim(b));
    assert.equal(wb.job.id, job.id);
    const f2 = expectOk(await fail(b, wb.lease.epoch, "trainer exited with code 2: fail_at_step 1 reached", "input", 0));
    assert.equal(f2.state, "failed");
    const done = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() }));
    assert.equal(done.reason, "trainer exited with code 2: fail_at_step 1 reached");
    assert.equal(done.failures, 0);
    assert.equal(done.input_error, null);
    const events = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.equal(events.failures.length, 0, "no bans");
    assert.deepEqual(events.input_errors.map((e) => e.outcome), ["confirmed", "confirmed"]);
    assert.deepEqual(events.segments.map((s) => s.end_reason), ["input_error", "input_error"]);
    // Neither node counts it: both stay active and take the next job.
    const { nodes } = expectOk(await call("GET", "/v1/nodes", { token: opToken }));
    for (const n of [a, b]) {
      const row = nodes.find((x) => x.id === n.id);
      assert.ok(row, `node ${n.id} listed`);
      assert.equal(row.state, "active");
      assert.equal(row.jobs_failed, 0);
    }
    const next = expectOk(await dev.submit(synthetic(5, { priority: 900 })), 201);
    assert.equal(expectOk(await claim(a)).job.id, next.id);
    // A cause that is neither is refused; an absent one is a node fault (today's rules).
    expectError(await call("POST", `/v1/jobs/${next.id}/fail`, { token: a.token, body: { epoch: 1, cause: "developer" } }), 400);
  } finally {
    await dev.cleanup();
  }
});

test("input errors: a report another machine trains past quarantines its reporter", async () => {
  const dev = developer();
  try {
    const job = expectOk(await dev.submit(synthetic(20, { priority: 900 })), 201);
    const a = await newNode();
    const b = await newNode();
    const la = expectOk(await claim(a)).lease;
    expectOk(await call("POST", `/v1/jobs/${job.id}/fail`, { token: a.token, body: { epoch: la.epoch, reason: "not a JPEG", cause: "input", step: 2 } }));
    const lb = expectOk(await claim(b)).lease;
    const data = randomBytes(100);
    const up = expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: b.token, body: { epoch: lb.epoch, step: 5 } }));
    await putBlob(up.url, data);
    expectOk(await call("POST", `/v1/jobs/${job.id}/checkpoints/5/commit`, { token: b.token, body: { epoch: lb.epoch, sha256: sha256(data), size: data.length } }));
    const r = await claim(a);
    assert.equal(r.status, 204);
    assert.equal(r.headers.get("gleaner-node-state"), "quarantined");
    const events = expectOk(await call("GET", `/v1/jobs/${job.id}/events`, { token: await dev.token() }));
    assert.deepEqual(events.input_errors.map((e) => e.outcome), ["not_reproduced"]);
    assert.equal(expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: await dev.token() })).state, "running");
  } finally {
    await dev.cleanup();
  }
});

test("model config: a value beyond the trainer's limits is a 400 naming the field and the limit", async () => {
  const dev = developer();
  try {
    const t = await dev.token();
    const up = async (name) => {
      const bytes = Buffer.from(`bytes of ${name}`);
      const u = expectOk(await call("POST", "/v1/uploads", { token: t, body: { name, size: bytes.length, sha256: sha256(bytes) } }), 201);
      await putBlob(u.url, bytes);
      return { uri: u.uri, sha256: sha256(bytes) };
    };
    const model = await up("unet.safetensors");
    const dataset = await up("data.safetensors");
    const spec = (config) => ({ kind: "lora-sd", params: { steps: 5 }, model: { ...model, config }, dataset });
    const r = await dev.submit(spec({ block_out_channels: [32, 65536], cross_attention_dim: 32 }));
    expectError(r, 400);
    assert.equal(r.json.error.message, "model.config.block_out_channels entries must be integers in [1, 8192]");
    expectOk(await dev.submit(spec({ block_out_channels: [32, 8192], cross_attention_dim: 32 })), 201);
  } finally {
    await dev.cleanup();
  }
});

test("claim: the model input says its format (one UNet weights file), the dataset none", async () => {
  const dev = developer();
  try {
    const t = await dev.token();
    const up = async (name) => {
      const bytes = Buffer.from(`bytes of ${name} ${uid()}`);
      const u = expectOk(await call("POST", "/v1/uploads", { token: t, body: { name, size: bytes.length, sha256: sha256(bytes) } }), 201);
      await putBlob(u.url, bytes);
      return { uri: u.uri, sha256: sha256(bytes) };
    };
    const model = await up("unet.safetensors");
    const dataset = await up("data.safetensors");
    const config = { block_out_channels: [32, 64], cross_attention_dim: 32 };
    const job = expectOk(await dev.submit({ kind: "lora-sd", params: { steps: 5 }, priority: 1000, model: { ...model, config }, dataset }), 201);
    const node = await newNode();
    const c = expectOk(await claim(node));
    assert.equal(c.job.id, job.id);
    assert.equal(c.inputs.model.format, "unet-safetensors");
    assert.equal(c.inputs.model.sha256, model.sha256);
    assert.equal(c.inputs.dataset.format, undefined);
    // The fresh-URL route says it again.
    const again = expectOk(await call("POST", `/v1/jobs/${job.id}/downloads`, { token: node.token, body: { epoch: c.lease.epoch } }));
    assert.equal(again.inputs.model.format, "unet-safetensors");
  } finally {
    await dev.cleanup();
  }
});

test("cancel: the next heartbeat answers cancel, later writes are 409", async () => {
  const dev = developer();
  try {
    const node = await newNode();
    const job = expectOk(await dev.submit(synthetic(5)), 201);
    const { lease } = expectOk(await claim(node));
    const c = expectOk(await call("POST", `/v1/jobs/${job.id}/cancel`, { token: await dev.token(), body: {} }));
    assert.equal(c.state, "canceled");
    const hb = expectOk(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: node.token, body: { epoch: lease.epoch, step: 1 } }));
    assert.equal(hb.cancel, true);
    expectError(await call("POST", `/v1/jobs/${job.id}/checkpoints`, { token: node.token, body: { epoch: lease.epoch, step: 2 } }), 409);
    // Canceling again is harmless and leaves it canceled.
    const again = expectOk(await call("POST", `/v1/jobs/${job.id}/cancel`, { token: await dev.token(), body: {} }));
    assert.equal(again.state, "canceled");
  } finally {
    await dev.cleanup();
  }
});

test("stalls: a lease without heartbeats expires; maintenance requeues; a new epoch fences the old", async () => {
  const dev = developer();
  try {
    const a = await newNode();
    const b = await newNode();
    const job = expectOk(await dev.submit(synthetic(5)), 201);
    const la = expectOk(await claim(a)).lease;
    await new Promise((r) => setTimeout(r, TIMING.stall_after_s * 1000 + 300));
    await tick();
    const lb = expectOk(await claim(b)).lease;
    assert.equal(lb.epoch, la.epoch + 1);
    expectError(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: a.token, body: { epoch: la.epoch, step: 2 } }), 409);
    expectOk(await call("POST", `/v1/jobs/${job.id}/heartbeat`, { token: b.token, body: { epoch: lb.epoch, step: 2 } }));
    const got = expectOk(await call("GET", `/v1/jobs/${job.id}`, { token: opToken }));
    assert.equal(got.failures, 0, "a stall is not a failure");
    assert.equal(got.attempts, 2);
  } finally {
    await dev.cleanup();
  }
});

test("model folders: checked at submission in one statement, one download URL per file", async () => {
  const dev = developer();
  try {
    const t = await dev.token();
    const paths = [
      "model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
      "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
      "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt",
    ];
    const files = [];
    for (const path of paths) {
      const bytes = Buffer.from(`bytes of ${path}`);
      const up = expectOk(await call("POST", "/v1/uploads", { token: t, body: { name: path, size: bytes.length, sha256: sha256(bytes) } }), 201);
      if (path !== "tokenizer/merges.txt") {
        const put = await putBlob(up.url, bytes);
        assert.ok(put.status >= 200 && put.status < 300, `PUT ${put.status}: ${put.text}`);
      }
      files.push({ path, uri: up.uri, sha256: sha256(bytes), size: bytes.length, put: up.url, bytes });
    }
    const spec = (fs) => ({
      kind: "lora-sd", params: { steps: 5 }, priority: 1000,
      model: { files: fs.map(({ path, uri, sha256, size }) => ({ path, uri, sha256, size })) },
      dataset: { uri: files[0].uri, sha256: files[0].sha256 },
    });
    // Not yet PUT: 409 naming the file. Then the wrong size, a missing file: 400.
    const notYet = await dev.submit(spec(files));
    expectError(notYet, 409, "conflict");
    assert.match(notYet.json.error.message, /model\.files\[8\] \(tokenizer\/merges\.txt\)\.uri has not been uploaded yet/);
    const last = files[8];
    await putBlob(last.put, last.bytes);
    const wrongSize = structuredClone(files.map(({ path, uri, sha256, size }) => ({ path, uri, sha256, size })));
    wrongSize[3].size += 1;
    const bad = await dev.submit(spec(wrongSize));
    expectError(bad, 400, "bad_request");
    assert.equal(bad.json.error.message, "model.files[3] (vae/config.json).size does not match the upload's size");
    const missing = await dev.submit(spec(files.slice(1)));
    expectError(missing, 400, "bad_request");
    assert.equal(missing.json.error.message, "model.files: not a diffusers folder: missing model_index.json");
    // A file given by url: this server allows no model hosts (the default), whatever the host.
    for (const url of ["https://models.example/s.json", "http://127.0.0.1:8080/", "http://169.254.169.254/", "http://[::1]/"]) {
      const remote = [...files.map(({ path, uri, sha256, size }) => ({ path, uri, sha256, size })),
        { path: "scheduler/scheduler_config.json", url, sha256: sha256(Buffer.from("s")), size: 1 }];
      const refused = await dev.submit({ ...spec(files), model: { files: remote } });
      expectError(refused, 400, "bad_request");
      assert.equal(refused.json.error.message,
        "model.files[9].url: this coordinator allows no model hosts (--model-hosts); upload the file (blob:// uri) instead");
    }
    // Accepted; the claim hands out one signed GET per file, in order.
    const job = expectOk(await dev.submit(spec(files)), 201);
    assert.equal(job.model.files.length, paths.length);
    const node = await newNode();
    const c = expectOk(await claim(node));
    assert.equal(c.job.id, job.id);
    const got = c.inputs.model.files;
    assert.equal(c.inputs.model.format, "diffusers");
    assert.deepEqual(got.map((f) => f.path), paths);
    for (let i = 0; i < paths.length; ++i) {
      assert.equal(got[i].sha256, files[i].sha256);
      assert.equal(got[i].size, files[i].size);
      const body = await call("GET", got[i].url);
      assert.equal(body.status, 200);
    }
  } finally {
    await dev.cleanup();
  }
});

test("model families: a folder with transformer/ is FLUX; params of the other family are 400 naming the field", async () => {
  const dev = developer();
  try {
    const file = (path) => ({ path, uri: "blob://uploads/u0000000000000000/f", sha256: sha256(Buffer.from(path)), size: path.length });
    const sd = ["model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
      "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
      "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt"];
    const flux = ["model_index.json", "transformer/config.json", "transformer/diffusion_pytorch_model.safetensors",
      "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
      "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt",
      "text_encoder_2/config.json", "text_encoder_2/model.safetensors", "tokenizer_2/tokenizer.json"];
    const submit = (paths, params) => dev.submit({
      kind: "lora-sd", params: { steps: 5, ...params },
      model: { files: paths.map(file) }, dataset: { uri: "blob://uploads/u0000000000000000/d", sha256: sha256(Buffer.from("d")) },
    });
    const ddpmOnFlux = await submit(flux, { prediction_type: "v_prediction" });
    expectError(ddpmOnFlux, 400, "bad_request");
    assert.match(ddpmOnFlux.json.error.message, /^params\.prediction_type does not apply to a FLUX model/);
    const fluxOnSd = await submit(sd, { weighting_scheme: "logit_normal" });
    expectError(fluxOnSd, 400, "bad_request");
    assert.equal(fluxOnSd.json.error.message, "params.weighting_scheme applies to FLUX models only (this job's model is an SD/SDXL UNet)");
    const badScheme = await submit(flux, { weighting_scheme: "sigma" });
    expectError(badScheme, 400, "bad_request");
    assert.match(badScheme.json.error.message, /^params\.weighting_scheme must be one of: none, sigma_sqrt, logit_normal, mode, cosmap/);
    const noTokenizer = await submit(flux.slice(0, -1), {});
    expectError(noTokenizer, 400, "bad_request");
    assert.equal(noTokenizer.json.error.message, "model.files: not a diffusers FLUX folder: missing tokenizer_2/tokenizer.json");
  } finally {
    await dev.cleanup();
  }
});

// Its own server: model-hosts set through the environment, as an operator would.
test("model hosts: a model file url is accepted only on a host the operator allows", { skip: !!external }, async () => {
  const env = { GLEANER_MODEL_HOSTS: "models.example, Mirror.Example" };
  const srv = await startTarget(targetKind, { bin: flag("--bin"), env });
  try {
    const b = srv.base;
    const mint = async (role) =>
      expectOk(await call("POST", `${b}/v1/keys`, { token: srv.operatorToken, body: { role, name: `${role}-${uid()}` } }), 201).token;
    const dev = await mint("developer");
    const data = Buffer.from("photos");
    const up = expectOk(await call("POST", `${b}/v1/uploads`, { token: dev, body: { name: "photos.zip", size: data.length, sha256: sha256(data) } }), 201);
    const put = await putBlob(up.url, data);
    assert.ok(put.status >= 200 && put.status < 300, `PUT ${put.status}: ${put.text}`);
    const paths = [
      "model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
      "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
      "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt",
    ];
    const submit = (host) => call("POST", `${b}/v1/jobs`, {
      token: dev,
      body: {
        kind: "lora-sd", params: { steps: 5 },
        model: { files: paths.map((path) => ({ path, url: `https://${host}/sd/${path}`, sha256: sha256(Buffer.from(path)), size: path.length })) },
        dataset: { uri: up.uri, sha256: sha256(data) },
      },
    });
    for (const host of ["evil.example", "127.0.0.1", "10.0.0.1", "169.254.169.254", "[::1]", "models.example@127.0.0.1", "models.example.evil.example"]) {
      const refused = await submit(host);
      expectError(refused, 400, "bad_request");
      assert.match(refused.json.error.message, /^model\.files\[0\]\.url/);
    }
    const named = await submit("evil.example");
    assert.equal(named.json.error.message,
      "model.files[0].url: host 'evil.example' is not allowed; allowed model hosts: models.example, mirror.example");
    const job = expectOk(await submit("MODELS.example:443"), 201);
    expectOk(await submit("mirror.example"), 201);
    // The claim marks files given by url as remote: the node fetches them behind its guard.
    const enroll = await mint("enroll");
    const node = expectOk(await call("POST", `${b}/v1/nodes/register`, {
      token: enroll, body: { machine_id: `m-${uid()}`, gpu: { name: "RTX 4090", vram_mb: 24000 }, agent_version: "0.1.0" },
    }));
    const c = expectOk(await call("POST", `${b}/v1/work`, { token: node.token, body: {} }));
    assert.equal(c.job.id, job.id);
    for (const f of c.inputs.model.files) assert.equal(f.remote, true);
    assert.equal(c.inputs.dataset.remote, undefined);
  } finally {
    await srv.stop();
  }
});

test("blob URLs: wrong method, expired or forged signatures are refused", async () => {
  const t = await newKey("developer");
  const bytes = randomBytes(100);
  const up = expectOk(await call("POST", "/v1/uploads", { token: t, body: { name: "data.bin", size: bytes.length, sha256: sha256(bytes) } }), 201);
  assert.match(up.uri, /^blob:\/\//);
  expectError(await call("GET", up.url), 403);
  expectError(await putBlob(up.url.replace("exp=", "exp=1"), bytes), 403);
  const wrong = randomBytes(100);
  expectError(await putBlob(up.url, wrong), 400, "bad_request");
  const ok = await putBlob(up.url, bytes);
  assert.ok(ok.status >= 200 && ok.status < 300, `PUT ${ok.status}: ${ok.text}`);
  expectError(await putBlob(up.url, Buffer.concat([bytes, bytes])), 413, "too_large");
  // An answered upload holds nothing: the next PUT of the key, sent as soon as the answer is
  // read, is judged on its own (never "an upload to this key is in progress").
  for (let i = 0; i < 20; i++) {
    const b = randomBytes(64);
    const u = expectOk(await call("POST", "/v1/uploads", { token: t, body: { name: `again${i}.bin`, size: b.length, sha256: sha256(b) } }), 201);
    const first = await putBlob(u.url, b);
    assert.ok(first.status >= 200 && first.status < 300, `PUT ${first.status}: ${first.text}`);
    expectError(await putBlob(u.url, Buffer.concat([b, b])), 413, "too_large");
  }
});

test("operator: prices, nodes and the cost report", async () => {
  expectOk(await call("PUT", "/v1/prices", { token: opToken, body: { gpu: "Conformance GPU", usd_per_hour: 1.5 } }));
  const prices = expectOk(await call("GET", "/v1/prices", { token: opToken }));
  assert.ok(prices.prices.some((p) => p.gpu === "Conformance GPU" && p.usd_per_hour === 1.5));
  expectError(await call("PUT", "/v1/prices", { token: opToken, body: { gpu: "x", usd_per_hour: -1 } }), 400);
  const nodes = expectOk(await call("GET", "/v1/nodes", { token: opToken }));
  assert.ok(Array.isArray(nodes.nodes) && nodes.nodes.length > 0);
  expectOk(await call("GET", "/v1/reports/cost?group_by=job&format=json", { token: opToken }));
  const csv = await call("GET", "/v1/reports/cost?group_by=gpu&format=csv", { token: opToken });
  assert.equal(csv.status, 200);
  assert.match(csv.headers.get("content-type"), /csv/);
  expectError(await call("GET", "/v1/reports/cost?group_by=planet", { token: opToken }), 400);
  const m = await tick();
  assert.equal(typeof m, "object");
  // The dashboard's reports and /metrics run the same SQL on SQLite and D1.
  const queue = expectOk(await call("GET", "/v1/reports/queue?points=5", { token: opToken }));
  assert.equal(queue.points.length, 5);
  assert.ok(queue.points.every((p) => Number.isInteger(p.pending) && Number.isInteger(p.running)));
  const scale = expectOk(await call("GET", "/v1/reports/autoscaler?limit=3", { token: opToken }));
  assert.ok(scale.events.length >= 1 && Number.isInteger(scale.events.at(-1).current));
  expectOk(await call("GET", "/v1/reports/cost-per-step?bins=4", { token: opToken }));
  const metrics = await call("GET", "/metrics", { token: opToken });
  assert.equal(metrics.status, 200);
  assert.match(metrics.text, /^gleaner_jobs\{state="pending"\} \d+$/m);
  assert.match(metrics.text, /^gleaner_blob_bytes \d+$/m);
  expectError(await call("GET", "/metrics"), 401, "unauthenticated");
});

// Its own server: a minimum blob rate of 1000 bytes/s after a 0.5 s grace, on both shells.
test("blob transfers: one upload per key at a time, a body slower than the minimum rate is 408", { skip: !!external }, async () => {
  const env = { GLEANER_BLOB_MIN_RATE: "1000", GLEANER_BLOB_RATE_GRACE: "0.5" };
  const slow = await startTarget(targetKind, { bin: flag("--bin"), env });
  try {
    const b = slow.base;
    const key = await call("POST", `${b}/v1/keys`, { token: slow.operatorToken, body: { role: "developer", name: "slow" } });
    assert.equal(key.status, 201);
    const bytes = randomBytes(20000);
    const up = expectOk(await call("POST", `${b}/v1/uploads`, { token: key.json.token, body: { name: "slow.bin", size: bytes.length, sha256: sha256(bytes) } }), 201);
    // A PUT that sends 10 bytes of 20000 and then nothing: it holds the key's upload slot...
    const { request } = await import("node:http");
    const startSlow = () => {
      const put = { done: false };
      put.wrote = new Promise((wrote) => {
        put.answered = new Promise((resolve, reject) => {
          const req = request(new URL(up.url), { method: "PUT", headers: { "content-length": String(bytes.length) } }, (res) => {
            let text = "";
            res.on("data", (d) => (text += d));
            res.on("end", () => resolve({ status: res.statusCode, text }));
            res.on("error", reject);
          });
          req.on("error", reject);
          req.write(bytes.subarray(0, 10), wrote);
        });
      });
      put.answered.then(() => (put.done = true), () => (put.done = true));
      return put;
    };
    // ...so a second PUT of the key meanwhile is told to retry (503, not 409). Requests on two
    // connections may reach the server in either order: when the probe came first (and the slow
    // PUT was refused), start the slow one again. The probe's bytes are other bytes, so a probe
    // that got the slot is refused for its sha256, never stored.
    const other = randomBytes(bytes.length);
    const deadline = Date.now() + 10000;
    let slowPut;
    let busy;
    do {
      slowPut = startSlow();
      await slowPut.wrote;
      do {
        busy = await putBlob(up.url, other);
      } while (busy.status !== 503 && !slowPut.done && Date.now() < deadline);
    } while (busy.status !== 503 && Date.now() < deadline);
    expectError(busy, 503, "unavailable");
    assert.ok(busy.headers.get("retry-after"));
    // ...until the slow one is cut off once it falls below the rate (0.5 s + 10 bytes at 1000/s).
    const t0 = Date.now();
    const first = await slowPut.answered;
    assert.equal(first.status, 408, first.text);
    assert.equal(JSON.parse(first.text).error.code, "request_timeout");
    assert.ok(Date.now() - t0 < 5000);
    // The slot is free again: the whole body at full speed is stored.
    const ok = await putBlob(up.url, bytes);
    assert.ok(ok.status >= 200 && ok.status < 300, `PUT ${ok.status}: ${ok.text}`);
  } finally {
    await slow.stop();
  }
});

// Its own server: the shared one runs without rate limits (see targets.mjs).
test("limits: 429 + Retry-After per token, recovery after the refill; too_many_jobs", { skip: !!external }, async () => {
  // The same environment on both shells: each reads its settings as GLEANER_<NAME>.
  const env = { GLEANER_DEVELOPER_RATE_LIMIT: "2:2", GLEANER_MAX_ACTIVE_JOBS: "1" };
  const limited = await startTarget(targetKind, { bin: flag("--bin"), env });
  try {
    const b = limited.base;
    const mint = async () => {
      const k = await call("POST", `${b}/v1/keys`, {
        token: limited.operatorToken,
        body: { role: "developer", name: "limits" },
      });
      assert.equal(k.status, 201);
      return k.json.token;
    };
    const dev = await mint();
    for (let i = 0; i < 2; i++) assert.equal((await call("GET", `${b}/v1/jobs`, { token: dev })).status, 200);
    const refused = await call("GET", `${b}/v1/jobs`, { token: dev });
    assert.equal(refused.status, 429);
    assert.equal(refused.json.error.code, "rate_limited");
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal((await call("GET", `${b}/v1/jobs`, { token: await mint() })).status, 200);
    const t0 = Date.now();
    let recovered = false;
    while (!recovered && Date.now() - t0 < 5000) {
      await new Promise((r) => setTimeout(r, 100));
      recovered = (await call("GET", `${b}/v1/jobs`, { token: dev })).status === 200;
    }
    assert.ok(recovered, "the token recovers once its bucket refills");
    assert.ok(Date.now() - t0 >= 300, "not before a token is back (0.5 s at 2/s)");

    const submitter = await mint();
    const job = { kind: "synthetic", params: { steps: 10 } };
    assert.equal((await call("POST", `${b}/v1/jobs`, { token: submitter, body: job })).status, 201);
    const second = await call("POST", `${b}/v1/jobs`, { token: submitter, body: job });
    assert.equal(second.status, 429);
    assert.equal(second.json.error.code, "too_many_jobs");
  } finally {
    await limited.stop();
  }
});

test("progress watchdog: a lease whose step does not advance ends, the job is queued again", { skip: !!external }, async () => {
  const limited = await startTarget(targetKind, { bin: flag("--bin"), env: { GLEANER_PROGRESS_TIMEOUT: "1.5" } });
  try {
    const b = limited.base;
    const op = limited.operatorToken;
    const key = async (role) => expectOk(await call("POST", `${b}/v1/keys`, { token: op, body: { role, name: role } }), 201).token;
    const enroll = await key("enroll");
    const register = async (m) => expectOk(await call("POST", `${b}/v1/nodes/register`, {
      token: enroll, body: { machine_id: m, gpu: { name: "RTX 4090", vram_mb: 24000 }, agent_version: "0.1.0" },
    }));
    const stuck = await register("stuck");
    const other = await register("other");
    const dev = await key("developer");
    const job = expectOk(await call("POST", `${b}/v1/jobs`, { token: dev, body: synthetic(10) }), 201);
    const w = expectOk(await call("POST", `${b}/v1/work`, { token: stuck.token, body: {} }));
    const hb = (step) => call("POST", `${b}/v1/jobs/${job.id}/heartbeat`, { token: stuck.token, body: { epoch: w.lease.epoch, step } });
    expectOk(await hb(0));
    await new Promise((r) => setTimeout(r, 1800));
    expectError(await hb(0), 409, "no_progress");
    expectError(await hb(0), 409);
    const got = expectOk(await call("GET", `${b}/v1/jobs/${job.id}`, { token: op }));
    assert.equal(got.state, "pending");
    assert.equal(got.failures, 1);
    const events = expectOk(await call("GET", `${b}/v1/jobs/${job.id}/events`, { token: op }));
    assert.equal(events.segments[0].end_reason, "no_progress");
    assert.equal((await call("POST", `${b}/v1/work`, { token: stuck.token, body: {} })).status, 204);
    assert.equal(expectOk(await call("POST", `${b}/v1/work`, { token: other.token, body: {} })).job.id, job.id);
    const cost = expectOk(await call("GET", `${b}/v1/reports/cost?group_by=job`, { token: op }));
    assert.equal(cost.totals.billable_seconds, TIMING.heartbeat_interval_s, "one heartbeat billed");
  } finally {
    await limited.stop();
  }
});

test("registration limits: a cap of nodes per enroll key an operator raises; per-address rate", { skip: !!external }, async () => {
  const env = { GLEANER_ENROLL_MAX_NODES: "2", GLEANER_ENROLL_ADDRESS_RATE_LIMIT: "0.01:5" };
  const limited = await startTarget(targetKind, { bin: flag("--bin"), env });
  try {
    const b = limited.base;
    const op = limited.operatorToken;
    const mint = async () => expectOk(await call("POST", `${b}/v1/keys`, { token: op, body: { role: "enroll", name: "fleet" } }), 201);
    // The edge reads the client's address from CF-Connecting-IP, the native shell from the socket
    // (it ignores the header): either way every request here comes from one address.
    const register = (key, m) => call("POST", `${b}/v1/nodes/register`, {
      token: key, headers: { "cf-connecting-ip": "203.0.113.9" },
      body: { machine_id: m, gpu: { name: "RTX 4090", vram_mb: 24000 }, agent_version: "0.1.0" },
    });
    const a = await mint();
    const other = await mint();
    expectOk(await register(a.token, `a1-${uid()}`));
    expectOk(await register(a.token, `a2-${uid()}`));
    const over = await register(a.token, `a3-${uid()}`);
    expectError(over, 403, "node_limit");
    assert.match(over.json.error.message, /max_nodes/);
    expectOk(await register(other.token, `b1-${uid()}`));
    const raised = expectOk(await call("PATCH", `${b}/v1/keys/${a.id}`, { token: op, body: { max_nodes: 3 } }));
    assert.equal(raised.max_nodes, 3);
    expectOk(await register(a.token, `a3-${uid()}`));
    // Five registrations from this address so far: the sixth waits, whichever key.
    const limitedAddr = await register(other.token, `b2-${uid()}`);
    expectError(limitedAddr, 429, "rate_limited");
    assert.match(limitedAddr.json.error.message, /address/);
    assert.ok(Number(limitedAddr.headers.get("retry-after")) >= 1);
  } finally {
    await limited.stop();
  }
});
