// CSV text for the dashboard's own exports (fleet, jobs, timeline), built in the browser.
// One rule with the coordinator's CSV reports (coordinator/core/report_util.cc, CsvField and Num;
// both are tested against tests/unit/core/csv_cells.json): a number is written as a number, and
// text that a spreadsheet would run as a formula (starting with =, +, -, @, tab or carriage
// return; OWASP "CSV injection") gets a leading ' so it is shown, not run. A number such as -0.5
// is data, never a formula, so it stays a number. Cells holding a comma, quote or line break are
// quoted. Loaded as a classic script (window.gleanerCsv) and by node's tests (module.exports).
(function (root) {
  "use strict";
  function csvCell(v) {
    if (v == null) return "";
    let s;
    if (typeof v === "number") {
      s = Number.isFinite(v) ? String(v) : "";
    } else {
      s = String(v);
      if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
    }
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  }
  function csvText(header, rows) {
    return [header, ...rows].map((r) => r.map(csvCell).join(",")).join("\n") + "\n";
  }
  const api = { csvCell, csvText };
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.gleanerCsv = api;
  }
})(typeof globalThis !== "undefined" ? globalThis : this);
