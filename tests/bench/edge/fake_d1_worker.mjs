// The edge Worker with D1 replaced by canned answers for heartbeats, for tests/bench/edge
// --overhead: what the Worker costs per heartbeat beyond its D1 round trip (wasm core, JSON wire,
// JavaScript glue). Not a coordinator: every heartbeat of a known node succeeds.
import worker from "../../../wasm/worker.mjs";

const node = { id: "n_fake", gpu_name: "RTX 4090", vram_mb: 24564, state: "active" };

function answer(sql) {
  if (sql.includes("caller_ok")) return [{ caller_ok: 1 }];
  if (sql.startsWith("SELECT id, gpu_name, vram_mb, state FROM nodes")) return [node];
  if (sql.includes("RETURNING lease_expires_at")) return [{ lease_expires_at: Date.now() + 3600000 }];
  if (sql.startsWith("SELECT version FROM schema_migrations")) return [{ version: 1000000 }];
  return [];
}

const fakeDb = {
  prepare(sql) {
    return { bind: () => ({ sql }) };
  },
  async batch(statements) {
    return statements.map((s) => ({ results: answer(s.sql) }));
  },
};

export default {
  fetch(request, env, ctx) {
    return worker.fetch(request, { ...env, DB: fakeDb }, ctx);
  },
};
