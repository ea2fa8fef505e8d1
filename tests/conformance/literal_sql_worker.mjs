// The edge Worker with its former wire behaviour, for reproducing what it did to workerd:
// integer parameters written into the SQL text as literals (the core used to do this because D1
// binds JavaScript numbers as REAL), so nearly every statement of every request is new SQL text.
// Runs the real Worker (wasm/worker.mjs) with D1 wrapped; only for tests/conformance/soak.mjs
// --literal-sql (node wasm/serve.mjs --worker <this file>).
import worker from "../../wasm/worker.mjs";

// "... CAST(?3 AS INTEGER) ... ?4" with params [a, b, "42", d] -> "... (42) ... ?3" with
// [a, b, d]: the core's integers arrive as decimal text under CAST (wasm/wire_json.h, ForD1).
function inlineIntegers(sql, params) {
  const kept = [];
  const renumbered = new Map();
  const text = sql.replace(/CAST\(\?(\d+) AS INTEGER\)|\?(\d+)/g, (_, cast, plain) => {
    if (cast !== undefined) return `(${params[Number(cast) - 1]})`;
    const n = Number(plain);
    if (!renumbered.has(n)) {
      kept.push(params[n - 1]);
      renumbered.set(n, kept.length);
    }
    return `?${renumbered.get(n)}`;
  });
  return [text, kept];
}

function literalD1(db) {
  return {
    prepare(sql) {
      return {
        bind(...params) {
          const [text, kept] = inlineIntegers(sql, params);
          return db.prepare(text).bind(...kept);
        },
      };
    },
    batch(statements) {
      return db.batch(statements);
    },
  };
}

export default {
  fetch(request, env, ctx) {
    return worker.fetch(request, { ...env, DB: literalD1(env.DB) }, ctx);
  },
  scheduled(controller, env, ctx) {
    return worker.scheduled(controller, { ...env, DB: literalD1(env.DB) }, ctx);
  },
};
