// Gleaner's edge shell: a Cloudflare Worker around the portable core (gleaner_edge.wasm).
//
// Only moves bytes (DESIGN §2.1): every decision — routing, auth, validation, scheduling, leases,
// blob URL checks, maintenance — is the core's. This file turns fetch()/scheduled() into calls
// of the core's JSON ABI (wasm/abi.cc, wasm/edge_session.h), runs the SQL batches it returns on
// D1 with db.batch() (atomic), and streams /blobs/<key> bodies to and from R2.
//
// Bindings (infra/wrangler.toml): DB (D1), BLOBS (R2); secrets GLEANER_BLOB_SIGNING_KEY,
// GLEANER_OPERATOR_TOKEN; vars GLEANER_<NAME> for any core setting (coordinator/core/settings.h,
// e.g. GLEANER_PUBLIC_URL: blob URL base, default the request's origin) and GLEANER_CONFIG (a
// JSON object keyed by setting name; the variables win).
import coreModule from "./gleaner_edge.wasm";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Minimal WASI preview1: the core does no I/O; libc may write to stderr when it aborts.
function wasiImports(getMemory) {
  const impl = {
    fd_write(fd, iovs, iovsLen, nwrittenPtr) {
      const view = new DataView(getMemory().buffer);
      let text = "";
      let total = 0;
      for (let i = 0; i < iovsLen; i++) {
        const ptr = view.getUint32(iovs + i * 8, true);
        const len = view.getUint32(iovs + i * 8 + 4, true);
        text += decoder.decode(new Uint8Array(getMemory().buffer, ptr, len));
        total += len;
      }
      if (text.trim()) console.error(`gleaner core (fd ${fd}): ${text.trimEnd()}`);
      view.setUint32(nwrittenPtr, total, true);
      return 0;
    },
    random_get(ptr, len) {
      crypto.getRandomValues(new Uint8Array(getMemory().buffer, ptr, len));
      return 0;
    },
    clock_time_get(_id, _precision, outPtr) {
      new DataView(getMemory().buffer).setBigUint64(outPtr, BigInt(Date.now()) * 1000000n, true);
      return 0;
    },
    environ_sizes_get(countPtr, sizePtr) {
      const view = new DataView(getMemory().buffer);
      view.setUint32(countPtr, 0, true);
      view.setUint32(sizePtr, 0, true);
      return 0;
    },
    environ_get() {
      return 0;
    },
    proc_exit(code) {
      throw new Error(`gleaner core exited with ${code}`);
    },
  };
  const ENOSYS = 52;
  const wasi = {};
  for (const imp of WebAssembly.Module.imports(coreModule)) {
    if (imp.module !== "wasi_snapshot_preview1" || imp.kind !== "function") continue;
    wasi[imp.name] = impl[imp.name] ?? (() => ENOSYS);
  }
  return { wasi_snapshot_preview1: wasi };
}

// One instance of the core per isolate; calls are synchronous, plans live between awaits.
class Core {
  constructor() {
    this.instance = new WebAssembly.Instance(coreModule, wasiImports(() => this.exports.memory));
    this.exports = this.instance.exports;
    this.exports._initialize();
    // Statement texts by id: the core sends a text once, then only its id (wasm/wire_json.h).
    this.sql = [];
  }

  call(name, text, ...leading) {
    const bytes = encoder.encode(text);
    const ptr = this.exports.gl_alloc(bytes.length);
    new Uint8Array(this.exports.memory.buffer, ptr, bytes.length).set(bytes);
    let len;
    try {
      len = this.exports[name](...leading, ptr, bytes.length);
    } finally {
      this.exports.gl_free(ptr);
    }
    const out = this.exports.gl_out_ptr();
    return decoder.decode(new Uint8Array(this.exports.memory.buffer, out, len));
  }

  // Parses a step and learns the statement texts it introduces.
  step(text) {
    const step = JSON.parse(text);
    if (!step.done) {
      for (const s of step.batch) {
        if (s.sql !== undefined && s.id >= 0) this.sql[s.id] = s.sql;
      }
    }
    return step;
  }
  statementText(s) {
    const sql = s.sql ?? this.sql[s.id];
    if (sql === undefined) throw new Error(`the core named unknown statement ${s.id}`);
    return sql;
  }

  init(config) {
    const error = this.call("gl_init", JSON.stringify(config));
    if (error) throw new Error(`gleaner core configuration: ${error}`);
    const value = (name) => this.settings().find((s) => s.name === name).value;
    this.maxBody = Number(value("max-body"));
  }
  // [{name, env, kind, default, doc, value?}] (wasm/edge_session.h).
  settings() {
    return JSON.parse(this.call("gl_settings", ""));
  }
  start(op) {
    return this.step(this.call("gl_start", JSON.stringify(op)));
  }
  continue(handle, result) {
    return this.step(this.call("gl_continue", JSON.stringify(result), handle));
  }
  drop(handle) {
    this.exports.gl_drop(handle);
  }
  authorizeBlob(query) {
    return JSON.parse(this.call("gl_authorize_blob", JSON.stringify(query)));
  }
  // The core's blob policy (coordinator/core/blob_policy.h, wasm/edge_session.h Blob).
  blob(op) {
    return JSON.parse(this.call("gl_blob", JSON.stringify(op)));
  }
}

// D1 error → the BatchResult code the core expects (coordinator/core/sql.h).
function errorCode(message) {
  if (/constraint failed|SQLITE_CONSTRAINT/i.test(message)) return "conflict";
  if (/SQLITE_BUSY|database is locked|overloaded|timed? ?out/i.test(message)) return "unavailable";
  return "internal";
}

// Runs one batch atomically; D1 returns rows as objects, so columns come from their keys
// (the core's SQL names every result column uniquely).
async function runBatch(core, db, batch) {
  if (batch.length === 0) return { results: [] };
  let outcomes;
  try {
    outcomes = await db.batch(batch.map((s) => db.prepare(core.statementText(s)).bind(...s.params)));
  } catch (e) {
    const message = String(e?.message ?? e);
    return { error: { code: errorCode(message), message } };
  }
  return {
    results: outcomes.map((o) => {
      const rows = o.results ?? [];
      if (rows.length === 0) return { columns: [], rows: [] };
      const columns = Object.keys(rows[0]);
      return { columns, rows: rows.map((r) => columns.map((c) => r[c] ?? null)) };
    }),
  };
}

// Runs a plan to its end: batch → D1 → continue, until the core answers.
async function drive(core, db, step) {
  while (!step.done) {
    let result;
    try {
      result = await runBatch(core, db, step.batch);
    } catch (e) {
      core.drop(step.handle);
      throw e;
    }
    step = core.continue(step.handle, result);
  }
  return step;
}

function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

function toResponse(r) {
  const headers = new Headers(r.headers);
  if (r.content_type) headers.set("content-type", r.content_type);
  let body = r.body ?? null;
  if (r.body_base64 !== undefined) {
    body = Uint8Array.from(atob(r.body_base64), (c) => c.charCodeAt(0));
  }
  if (r.status === 204 || r.status === 304) body = null;
  return new Response(body, { status: r.status, headers });
}

// Blob transfers stream here, everything else is a request for the core. Routed on the decoded
// path as the native shell routes; the core decodes the path it gets again (core::DecodePath)
// and answers a malformed one.
function isBlobPath(pathname) {
  try {
    return decodeURIComponent(pathname).startsWith("/blobs/");
  } catch {
    return pathname.startsWith("/blobs/");
  }
}

// The shell's own failures, where no core can answer: it could not be set up, or the shell
// threw while running a request. Every other error response is the core's.
function shellFailure(status, code, message) {
  return Response.json({ error: { code, message } }, { status });
}

// The core, configured, migrated and with the operator key; once per isolate, retried on failure.
let ready = null;

// The core's settings (coordinator/core/settings.h, the table the core exports): the
// GLEANER_CONFIG object (keyed by setting name), each Worker variable GLEANER_<NAME> over it,
// the blob URL base defaulting to the request's origin, and the secrets.
function coreConfig(core, env, origin) {
  const config =
    typeof env.GLEANER_CONFIG === "string" ? JSON.parse(env.GLEANER_CONFIG) : { ...env.GLEANER_CONFIG };
  for (const s of core.settings()) {
    const v = env[s.env];
    if (v !== undefined && v !== "") config[s.name] = String(v);
  }
  config["public-url"] ??= origin;
  config["blob-signing-key"] = env.GLEANER_BLOB_SIGNING_KEY ?? config["blob-signing-key"] ?? "";
  if (env.AWS_ACCESS_KEY_ID) config["aws-access-key-id"] = env.AWS_ACCESS_KEY_ID;
  if (env.AWS_SECRET_ACCESS_KEY) config["aws-secret-access-key"] = env.AWS_SECRET_ACCESS_KEY;
  return config;
}

async function setup(env, origin) {
  const core = new Core();
  core.init(coreConfig(core, env, origin));
  const now = Date.now();
  // A concurrent isolate may win the migration race; its batch fails whole, so run it again.
  for (let attempt = 0; ; attempt++) {
    const done = await drive(core, env.DB, core.start({ op: "migrate" }));
    if (done.response.status === 200) break;
    if (attempt >= 3) throw new Error(`migrations failed: ${done.response.body}`);
  }
  if (env.GLEANER_OPERATOR_TOKEN) {
    const done = await drive(
      core,
      env.DB,
      core.start({ op: "bootstrap", token: env.GLEANER_OPERATOR_TOKEN, now_ms: now }),
    );
    if (done.response.status !== 200) throw new Error(`operator bootstrap: ${done.response.body}`);
  }
  return core;
}

function getCore(env, origin) {
  if (!ready) {
    ready = setup(env, origin);
    ready.catch(() => {
      ready = null;
    });
  }
  return ready;
}

// A maintenance tick's pool actions (the autoscaler's target, quarantined machines to
// reallocate). The edge has no pool provider to apply them to: the providers (local agent
// processes, SaladCloud, Kubernetes) hold API clients and credentials that live in the native
// coordinator, and a Worker cannot start agents. The target is recorded in scaling_events
// (GET /v1/reports/autoscaler) either way; here the actions are logged as one JSON line so an
// operator or an external controller (Workers Logpush) can act on them.
function reportPoolActions(pool) {
  if (pool) console.log(JSON.stringify({ msg: "gleaner pool actions (no provider at the edge)", ...pool }));
}

// Deletes superseded blobs after the response; best effort (a later commit retries nothing).
function deleteBlobs(env, ctx, keys) {
  if (!keys || keys.length === 0) return;
  const work = env.BLOBS.delete(keys).catch((e) => console.error(`blob delete: ${e}`));
  if (ctx?.waitUntil) ctx.waitUntil(work);
}

// Reads at most limit + 1 bytes of a body (the core answers 413 when it sees more than limit).
async function readBody(request, limit) {
  if (!request.body) return new Uint8Array(0);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (Number.isSafeInteger(declared) && declared <= limit) {
    return new Uint8Array(await request.arrayBuffer());
  }
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  while (size <= limit) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.length;
  }
  reader.cancel().catch(() => {});
  const out = new Uint8Array(Math.min(size, limit + 1));
  let at = 0;
  for (const c of chunks) {
    const take = Math.min(c.length, out.length - at);
    out.set(c.subarray(0, take), at);
    at += take;
    if (at === out.length) break;
  }
  return out;
}

const strictDecoder = new TextDecoder("utf-8", { fatal: true });

function bodyField(bytes) {
  if (bytes.length === 0) return {};
  try {
    return { body: strictDecoder.decode(bytes) };
  } catch {
    let bin = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    }
    return { body_base64: btoa(bin) };
  }
}

async function handleApi(core, env, ctx, request, url) {
  const bytes = await readBody(request, core.maxBody);
  const req = {
    method: request.method === "HEAD" ? "GET" : request.method,
    path: url.pathname,
    query: url.search.slice(1),
    headers: [...request.headers],
    now_ms: Date.now(),
    request_id: request.headers.get("cf-ray") ?? "",
    // Cloudflare sets CF-Connecting-IP to the client's address (a client cannot forge it at
    // the edge); the core limits registrations per address with it.
    client_addr: (request.headers.get("cf-connecting-ip") ?? "").slice(0, 64),
    ...bodyField(bytes),
  };
  const done = await drive(core, env.DB, core.start({ op: "request", request: req }));
  deleteBlobs(env, ctx, done.blob_deletes);
  return toResponse(done.response);
}

// The answer the core's blob policy gives for a refusal by name (its error table).
function refusal(core, name) {
  return toResponse(core.blob({ op: "refusal", name }).response);
}

// A stream stage that passes bytes on and errors once they fall below the core's minimum
// average rate (blob-min-rate after blob-rate-grace): checked on every chunk, and by a timer
// while nothing moves (a client dribbling bytes, or a reader that stopped reading).
function rateGuard(core) {
  const start = Date.now();
  let moved = 0;
  let timer;
  let state = "running"; // "running" | "too_slow" | "ended"
  const check = (controller) => {
    clearTimeout(timer);
    if (state !== "running") return false;
    const { budget_ms } = core.blob({ op: "budget", elapsed_ms: Date.now() - start, moved });
    if (budget_ms <= 0) {
      state = "too_slow";
      controller.error(new Error("below the minimum transfer rate"));
      return false;
    }
    timer = setTimeout(() => check(controller), budget_ms);
    return true;
  };
  const stage = new TransformStream({
    start(controller) {
      check(controller);
    },
    transform(chunk, controller) {
      moved += chunk.byteLength;
      if (check(controller)) controller.enqueue(chunk);
    },
    flush() {
      state = "ended";
      clearTimeout(timer);
    },
  });
  stage.tooSlow = () => state === "too_slow";
  stage.stop = () => {
    if (state === "running") state = "ended";
    clearTimeout(timer);
  };
  return stage;
}

// Streams a PUT body into R2 while hashing it (DigestStream), then records it in the core.
// A key that holds a committed checkpoint or output is never written: the body is only hashed,
// and the core answers 409 unless it is the committed bytes again (R2 has no rename, so the
// native shell's "finish, ask, then place" becomes "ask, then hash without storing"). What is
// accepted and every refusal are the core's (blob_policy.h); this only moves bytes.
async function putBlob(core, env, request, grant) {
  const header = Number(request.headers.get("content-length") ?? NaN);
  const length = Number.isSafeInteger(header) && header >= 0 ? header : -1;
  const head = core.blob({ op: "put_head", grant, content_length: length });
  if (!head.ok) return toResponse(head.response);
  const committed = await drive(core, env.DB, core.start({ op: "blob_place", key: grant.key, sha256: "", now_ms: Date.now() }));
  if (committed.response.status !== 409 && committed.response.status !== 204) {
    return toResponse(committed.response);
  }
  const store = committed.response.status === 204;
  const digest = new crypto.DigestStream("SHA-256");
  const sized = new FixedLengthStream(length);
  const guard = rateGuard(core);
  let stored = null;
  try {
    const body = (request.body ?? new Blob([]).stream()).pipeThrough(guard);
    if (store) {
      const [toStore, toHash] = body.tee();
      [stored] = await Promise.all([
        env.BLOBS.put(grant.key, sized.readable),
        toStore.pipeTo(sized.writable),
        toHash.pipeTo(digest),
      ]);
    } else {
      await Promise.all([body.pipeTo(sized.writable), sized.readable.pipeTo(digest)]);
    }
  } catch {
    return refusal(core, guard.tooSlow() ? "too_slow" : "body_unreadable");
  } finally {
    guard.stop();
  }
  const sha256 = hex(await digest.digest);
  const size = stored ? stored.size : length;
  const checked = core.blob({ op: "put_body", grant, size, sha256 });
  if (!checked.ok) {
    if (store) await env.BLOBS.delete(grant.key);
    return toResponse(checked.response);
  }
  if (!store) {
    // The same bytes again (an idempotent retry) answer as a stored upload would; other bytes
    // get the core's 409.
    const place = await drive(core, env.DB, core.start({ op: "blob_place", key: grant.key, sha256, now_ms: Date.now() }));
    if (place.response.status !== 204) return toResponse(place.response);
  }
  const done = await drive(
    core,
    env.DB,
    core.start({ op: "blob_stored", key: grant.key, size, sha256, now_ms: Date.now() }),
  );
  return toResponse(done.response);
}

// GET/HEAD: the core decides the answer's shape (whole object, one range, or 416); the body
// streams from R2 within the minimum rate. done() is called once the transfer has ended.
async function getBlob(core, env, ctx, grant, request, done) {
  const head = request.method === "HEAD";
  const range = request.headers.get("range");
  // Without a Range header the whole object goes out: one R2 call.
  let object = await (range === null && !head ? env.BLOBS.get(grant.key) : env.BLOBS.head(grant.key));
  if (!object) return refusal(core, "no_such_object");
  const read = core.blob({ op: "read", size: object.size, ...(range !== null ? { range } : {}) });
  if (!read.ok) return toResponse(read.response);
  if (range !== null && !head) {
    const part = read.status === 206 ? { range: { offset: read.first, length: read.length } } : undefined;
    object = await env.BLOBS.get(grant.key, part);
    if (!object) return refusal(core, "no_such_object");
  }
  const headers = new Headers(read.headers);
  headers.set("content-type", "application/octet-stream");
  headers.set("etag", object.httpEtag);
  headers.set("content-length", String(read.length));
  if (head) return new Response(null, { status: read.status, headers });
  const guard = rateGuard(core);
  const { readable, writable } = new TransformStream();
  const pumping = object.body
    .pipeThrough(guard)
    .pipeTo(writable)
    .catch(() => {})
    .finally(() => {
      guard.stop();
      done();
    });
  ctx?.waitUntil?.(pumping);
  return { response: new Response(readable, { status: read.status, headers }) };
}

async function handleBlob(core, env, ctx, request, url) {
  const method = request.method === "HEAD" ? "GET" : request.method;
  if (method !== "PUT" && method !== "GET") return refusal(core, "method_not_allowed");
  const auth = core.authorizeBlob({
    method,
    path: url.pathname,
    query: url.search.slice(1),
    now_ms: Date.now(),
  });
  if (!auth.ok) return toResponse(auth.response);
  // One upload per key, bounded reads per key and transfers in all (per isolate).
  const put = method === "PUT";
  const slot = { op: "admit", key: auth.grant.key, put };
  const admitted = core.blob(slot);
  if (!admitted.ok) return toResponse(admitted.response);
  let held = true;
  const release = () => {
    if (held) core.blob({ ...slot, op: "release" });
    held = false;
  };
  let streaming = false;
  try {
    // An upload's slot is free before its answer goes out: the client's next PUT of the key
    // is judged on its own.
    if (put) return await putBlob(core, env, request, auth.grant);
    const got = await getBlob(core, env, ctx, auth.grant, request, release);
    if (got instanceof Response) return got;
    streaming = true; // the slot goes when the body has streamed
    return got.response;
  } finally {
    if (!streaming) release();
  }
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    let core;
    try {
      core = await getCore(env, url.origin);
    } catch (e) {
      console.error(`gleaner edge setup: ${e?.stack ?? e}`);
      return shellFailure(503, "unavailable", `coordinator is starting: ${e?.message ?? e}`);
    }
    try {
      if (isBlobPath(url.pathname)) return await handleBlob(core, env, ctx, request, url);
      return await handleApi(core, env, ctx, request, url);
    } catch (e) {
      console.error(`gleaner edge: ${e?.stack ?? e}`);
      return shellFailure(500, "internal", "the edge shell failed to run the request");
    }
  },

  // Cron trigger: one maintenance tick (reap stalls, quarantine, autoscaler target).
  async scheduled(controller, env, ctx) {
    // Without GLEANER_PUBLIC_URL the blob URL base is the first request's origin, so a cron
    // tick that starts an isolate must not fix it: it gets a core of its own (maintenance
    // mints no URLs).
    const core =
      env.GLEANER_PUBLIC_URL || ready
        ? await getCore(env, env.GLEANER_PUBLIC_URL)
        : await setup(env, "http://localhost");
    const done = await drive(core, env.DB, core.start({ op: "maintenance", now_ms: Date.now() }));
    deleteBlobs(env, ctx, done.blob_deletes);
    reportPoolActions(done.pool);
    if (done.response.status >= 300) throw new Error(`maintenance: ${done.response.body}`);
  },
};
