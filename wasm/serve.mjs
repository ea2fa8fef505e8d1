#!/usr/bin/env node
// Runs the edge coordinator locally in Miniflare (workerd) with a local D1 database and R2
// bucket: the same Worker and wasm module that `wrangler deploy` ships.
//
//   node wasm/serve.mjs --port 8787 [--host 127.0.0.1] [--persist DIR] [--port-file FILE]
//        [--heartbeat-interval S] [--stall-after S] [--config JSON] [--worker FILE] [--verbose]
//
// Environment: GLEANER_OPERATOR_TOKEN (registered as an operator key), GLEANER_BLOB_SIGNING_KEY
// (default: random, kept in DIR when --persist is given), GLEANER_CONFIG (JSON core settings).
// Maintenance (the cron trigger) runs on demand: POST /v1/admin/maintenance (operator), or
// GET /cdn-cgi/handler/scheduled on Miniflare's entry port (printed at start).
// --port 0 picks a free port; the chosen one is printed and written to --port-file.
// --worker FILE runs another entry module in place of wasm/worker.mjs (tests wrap the Worker);
// --verbose logs what Miniflare and workerd report (each request, runtime diagnostics);
// GLEANER_MINIFLARE names another Miniflare package directory (tests run an older runtime).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..");
const { Miniflare, Log, LogLevel } = await import(
  process.env.GLEANER_MINIFLARE
    ? pathToFileURL(join(process.env.GLEANER_MINIFLARE, "dist", "src", "index.js")).href
    : "miniflare"
);

function usage(message) {
  if (message) console.error(`serve: ${message}`);
  console.error(
    "usage: node wasm/serve.mjs --port P [--host H] [--persist DIR] [--port-file F] " +
      "[--heartbeat-interval S] [--stall-after S] [--config JSON] [--worker FILE] [--verbose]",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { host: "127.0.0.1", port: null };
  const numeric = (name, v) => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < 0) usage(`${name} needs a number`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    switch (a) {
      case "--port": opts.port = numeric(a, v); i++; break;
      case "--host": opts.host = v ?? usage("--host needs a value"); i++; break;
      case "--persist": opts.persist = v ?? usage("--persist needs a directory"); i++; break;
      case "--port-file": opts.portFile = v ?? usage("--port-file needs a path"); i++; break;
      case "--heartbeat-interval": opts.heartbeat = numeric(a, v); i++; break;
      case "--stall-after": opts.stall = numeric(a, v); i++; break;
      case "--config": opts.config = v ?? usage("--config needs JSON"); i++; break;
      case "--worker": opts.worker = resolve(v ?? usage("--worker needs a file")); i++; break;
      case "--verbose": opts.verbose = true; break;
      case "-h": case "--help": usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (opts.port === null || !Number.isInteger(opts.port) || opts.port > 65535) {
    usage("--port is required (0 picks a free port)");
  }
  return opts;
}

function signingKey(persist) {
  if (process.env.GLEANER_BLOB_SIGNING_KEY) return process.env.GLEANER_BLOB_SIGNING_KEY;
  if (!persist) return randomBytes(32).toString("hex");
  const file = join(persist, "blob-signing-key");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  const key = randomBytes(32).toString("hex");
  writeFileSync(`${file}.tmp`, key, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return key;
}

const opts = parseArgs(process.argv.slice(2));
const wasmPath = join(here, "gleaner_edge.wasm");
if (!existsSync(wasmPath)) {
  console.error("serve: wasm/gleaner_edge.wasm is missing; build it with wasm/build.sh");
  process.exit(1);
}
if (opts.persist) mkdirSync(opts.persist, { recursive: true });

let config = {};
try {
  config = JSON.parse(opts.config ?? process.env.GLEANER_CONFIG ?? "{}");
} catch (e) {
  usage(`--config is not valid JSON: ${e.message}`);
}
if (opts.heartbeat !== undefined) config["heartbeat-interval"] = opts.heartbeat;
if (opts.stall !== undefined) config["stall-after"] = opts.stall;

const bindings = {
  GLEANER_BLOB_SIGNING_KEY: signingKey(opts.persist),
  GLEANER_CONFIG: JSON.stringify(config),
};
// Every other GLEANER_* variable reaches the Worker as a variable of the same name: the
// operator token, and any core setting as GLEANER_<NAME> (coordinator/core/settings.h).
for (const [name, value] of Object.entries(process.env)) {
  if (name.startsWith("GLEANER_") && !(name in bindings)) bindings[name] = value;
}

// Requests reach the Worker on a socket of its own, as in production; Miniflare's entry socket
// (which also routes through Miniflare's own entry Worker, and has reset connections under
// sustained load) stays on a free loopback port for the cron trigger only.
const mf = new Miniflare({
  ...(opts.verbose ? { verbose: true, log: new Log(LogLevel.DEBUG) } : {}),
  host: "127.0.0.1",
  port: 0,
  // No request.cf from the network (offline; a placeholder object, as in tests).
  cf: false,
  unsafeDirectSockets: [{ host: opts.host, port: opts.port }],
  compatibilityDate: "2025-01-01",
  modulesRoot: repo,
  modules: [
    { type: "ESModule", path: opts.worker ?? join(here, "worker.mjs") },
    ...(opts.worker ? [{ type: "ESModule", path: join(here, "worker.mjs") }] : []),
    { type: "CompiledWasm", path: wasmPath },
  ],
  bindings,
  d1Databases: { DB: "gleaner" },
  r2Buckets: { BLOBS: "gleaner-blobs" },
  d1Persist: opts.persist ? join(opts.persist, "d1") : false,
  r2Persist: opts.persist ? join(opts.persist, "r2") : false,
  unsafeTriggerHandlers: true,
});

const entry = await mf.ready;
const port = Number((await mf.unsafeGetDirectURL()).port);
console.log(`gleaner edge coordinator (Miniflare) listening on http://${opts.host}:${port}`);
console.log(`maintenance tick: curl http://127.0.0.1:${entry.port}/cdn-cgi/handler/scheduled`);
if (opts.portFile) {
  writeFileSync(`${opts.portFile}.tmp`, `${port}\n`);
  renameSync(`${opts.portFile}.tmp`, opts.portFile);
}

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await mf.dispose();
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
