// The dashboard's CSV exports (coordinator/dashboard/src/csv.js) follow the coordinator's rule
// for CSV cells: every case of tests/unit/core/csv_cells.json (which core_tests checks against
// CsvField and Num), then the fleet and timeline exports with a hostile GPU name and reason.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(import.meta.url);
const { csvCell, csvText } = require(join(root, "coordinator/dashboard/src/csv.js"));
const cells = JSON.parse(readFileSync(join(root, "tests/unit/core/csv_cells.json"), "utf8"));

assert.ok(cells.text.length > 10);
for (const [input, want] of [...cells.text, ...cells.numbers]) {
  assert.equal(csvCell(input), want, `csvCell(${JSON.stringify(input)})`);
}
assert.equal(csvCell(null), "");
assert.equal(csvCell(undefined), "");
assert.equal(csvCell(Number.NaN), "");

// The fleet export as app.js builds it: a node that calls its GPU a formula.
const fleet = csvText(["id", "machine_id", "gpu", "vram_mb", "state"],
  [["n1", "-pc", "=HYPERLINK(\"http://evil/\",\"x\")", 24000, "active"],
   ["n2", "@pc", "+cmd|' /C calc'!A0", -1, "quarantined"]]);
const lines = fleet.trim().split("\n");
assert.equal(lines[1], "n1,'-pc,\"'=HYPERLINK(\"\"http://evil/\"\",\"\"x\"\")\",24000,active");
assert.equal(lines[2], "n2,'@pc,'+cmd|' /C calc'!A0,-1,quarantined");
for (const line of lines.slice(1)) {
  for (const cell of line.split(",")) assert.ok(!/^"?[=+@\t\r]/.test(cell), `unneutralised cell ${cell}`);
}
// The timeline export: a negative cost stays a number.
const timeline = csvText(["epoch", "end_reason", "cost_usd"], [[1, "-fail", -0.5]]);
assert.equal(timeline, "epoch,end_reason,cost_usd\n1,'-fail,-0.5\n");
console.log(`dashboard CSV: ${cells.text.length + cells.numbers.length} shared cases, exports neutralised`);
