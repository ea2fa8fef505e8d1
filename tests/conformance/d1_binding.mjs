// What D1 (the pinned Miniflare/workerd) does with the values the edge Worker binds, checked in
// the runtime itself: the assumptions of the wire layer's D1 form (wasm/wire_json.h, ForD1).
//
//   node tests/conformance/d1_binding.mjs
//
// The D1 form binds an integer as its decimal text under CAST(?N AS INTEGER). That must be exact
// for every int64 (2^53 + 1, negatives, the extremes) and mean what an integer means in SQL
// (typeof, 'e' || n, integer division, MAX against a column, comparison with an INTEGER
// column), stored and read back as text. Also printed, as facts for docs/edge.md: a JavaScript
// number binds as REAL, a BigInt is refused, and an integer read back as a number is exact only
// to 2^53. Exit 0 when every check holds, 1 otherwise, 77 when Miniflare is missing (a failure
// in CI).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const mfDir = process.env.GLEANER_MINIFLARE ?? join(repo, "wasm", "node_modules", "miniflare");
if (!existsSync(mfDir)) {
  const ci = process.env.CI && !["0", "false"].includes(process.env.CI);
  console.error(`d1_binding: ${ci ? "FAIL" : "skipped"}: no Miniflare (npm ci in wasm/)`);
  process.exit(ci ? 1 : 77);
}
const { Miniflare } = await import(pathToFileURL(join(mfDir, "dist", "src", "index.js")).href);

const script = `export default {
  async fetch(request, env) {
    const db = env.DB;
    const { sql, params } = await request.json();
    try {
      const values = params.map((p) => (p !== null && typeof p === "object" ? BigInt(p.bigint) : p));
      const rows = await db.batch([db.prepare(sql).bind(...values)]);
      return Response.json({ rows: rows[0].results });
    } catch (e) {
      return Response.json({ error: String(e.message ?? e) });
    }
  },
};`;
const mf = new Miniflare({ modules: true, script, d1Databases: { DB: "binding" }, compatibilityDate: "2025-01-01" });
// Parameters go as JSON; {bigint: "digits"} becomes a BigInt inside the Worker.
async function run(sql, params = []) {
  const r = await mf.dispatchFetch("http://binding/", { method: "POST", body: JSON.stringify({ sql, params }) });
  return r.json();
}

let failures = 0;
async function check(what, fn) {
  try {
    await fn();
    console.log(`ok   ${what}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${what}: ${e.message}`);
  }
}

try {
  await run("CREATE TABLE t (v INTEGER, s TEXT)");
  const values = ["0", "-1", "9007199254740993", "-9007199254740993", "9223372036854775807", "-9223372036854775808"];
  for (const v of values) {
    await check(`${v} bound as text under CAST is the integer ${v}`, async () => {
      const r = await run(
        "SELECT typeof(CAST(?1 AS INTEGER)) AS type, CAST(CAST(?1 AS INTEGER) AS TEXT) AS text, " +
          "'e' || CAST(?1 AS INTEGER) AS tagged, CAST(CAST(?1 AS INTEGER) / 2 AS TEXT) AS half, " +
          "CAST(MAX(CAST(?1 AS INTEGER), -5) AS TEXT) AS mx",
        [v],
      );
      assert.equal(r.error, undefined);
      const row = r.rows[0];
      assert.equal(row.type, "integer");
      assert.equal(row.text, v);
      assert.equal(row.tagged, `e${v}`);
      assert.equal(row.half, String(BigInt(v) / 2n));
      assert.equal(row.mx, String(BigInt(v) > -5n ? BigInt(v) : -5n));
    });
    await check(`${v} stored in an INTEGER column and compared there stays exact`, async () => {
      await run("DELETE FROM t");
      const ins = await run("INSERT INTO t (v, s) VALUES (CAST(?1 AS INTEGER), 'x') RETURNING CAST(v AS TEXT) AS text", [v]);
      assert.equal(ins.rows[0].text, v);
      const eq = await run("SELECT count(*) AS n FROM t WHERE v = CAST(?1 AS INTEGER) AND typeof(v) = 'integer'", [v]);
      assert.equal(eq.rows[0].n, 1);
    });
  }

  // Facts about the runtime, printed for the docs (the D1 form does not depend on them).
  const number = await run("SELECT typeof(?1) AS type, ?1 || '' AS text", [5]);
  console.log(`info a JavaScript number binds as: ${JSON.stringify(number.rows?.[0] ?? number)}`);
  const big = await run("SELECT 9007199254740993 AS v");
  console.log(`info SELECT 9007199254740993 reads back as the number ${big.rows[0].v}`);
  const bigint = await run("SELECT ?1 AS v", [{ bigint: "9007199254740993" }]);
  console.log(`info a BigInt parameter: ${JSON.stringify(bigint)}`);
} finally {
  await mf.dispose();
}
console.log(failures ? `d1_binding: ${failures} checks failed` : "d1_binding: all checks passed");
process.exit(failures ? 1 : 0);
