// Drives the operator dashboard in headless Chromium (playwright-core, no bundled browsers):
// sign-in, charts rendered with data, a CSV download, a job's timeline, quarantining a node from
// the page (checked through the API), a job's samples gallery (every image loads and is
// byte-for-byte the stored one), sign-out; writes a full-page screenshot.
//   node dashboard.mjs --url URL --token OPERATOR_TOKEN --node NODE_ID --samples-job JOB_ID
//                      --out FILE.png
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "../../coordinator/dashboard/package.json"));
const { chromium } = require("playwright-core");

const arg = (name) => {
  const i = process.argv.indexOf("--" + name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`missing --${name}`);
  return process.argv[i + 1];
};
const url = arg("url"), token = arg("token"), nodeId = arg("node"), out = arg("out");
const samplesJob = arg("samples-job");
const executablePath = process.env.GLEANER_CHROMIUM || "/usr/bin/chromium";

async function api(path, opts = {}) {
  const res = await fetch(url + path, { ...opts, headers: { Authorization: "Bearer " + token } });
  assert.ok(res.ok, `${path}: ${res.status}`);
  return res.json();
}

const step = (msg) => console.log(`[dashboard] ${msg}`);
const profile = mkdtempSync(join(tmpdir(), "gleaner-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  acceptDownloads: true,
  viewport: { width: 1400, height: 1000 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = context.pages()[0] || await context.newPage();
  // Waits are on conditions; the generous limit only matters on a heavily loaded machine,
  // where Playwright's 30 s default was seen to run out.
  page.setDefaultTimeout(100000);
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });

  await page.goto(url + "/?poll=700");
  assert.equal(await page.title(), "Gleaner", "the placeholder page was served: uPlot not embedded?");
  assert.ok(await page.isVisible("#signin"));
  assert.ok(await page.isHidden("#app"), "nothing is shown before sign-in");
  step("sign-in form shown");

  await page.fill("#token", "not-a-valid-token-000000");
  await page.click("#signin-form button");
  await page.waitForFunction(() => document.getElementById("signin-error").textContent.length > 0);
  assert.ok(await page.isHidden("#app"));
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  problems.length = 0;  // the 401 above is expected in the console
  step("a wrong token is refused");

  await page.fill("#token", token);
  await page.click("#signin-form button");
  await page.waitForSelector("#app", { state: "visible" });
  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1);
  step("signed in");

  for (const id of ["chart-queue", "chart-autoscaler", "chart-histogram", "chart-gpu"]) {
    const info = await page.evaluate((id) => {
      const box = document.getElementById(id);
      const canvas = box.querySelector("canvas");
      if (!canvas) return { points: box.dataset.points, painted: 0 };
      const d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
      return { points: Number(box.dataset.points), painted };
    }, id);
    assert.ok(info.points >= 1, `${id}: no data points`);
    assert.ok(info.painted > 500, `${id}: nothing drawn (${info.painted} pixels)`);
    step(`${id}: ${info.points} points, ${info.painted} pixels drawn`);
  }
  assert.ok(Number(await page.getAttribute("#chart-histogram", "data-jobs")) >= 1);
  const jobRows = await page.locator("#table-jobs tr[data-job]").count();
  const nodeRows = await page.locator("#table-fleet tr[data-node]").count();
  assert.ok(jobRows >= 3, `jobs table has ${jobRows} rows`);
  assert.ok(nodeRows >= 2, `fleet table has ${nodeRows} rows`);
  const completed = await page.textContent('[data-summary="completed"] b');
  assert.ok(Number(completed) >= 1, `summary completed = ${completed}`);
  step(`tables: ${jobRows} jobs, ${nodeRows} nodes`);

  // The timeline of the job with the most leases (an interruption).
  const jobs = (await api("/v1/jobs?limit=100")).jobs;
  const rank = (j) => j.attempts * 2 + (j.state === "completed" ? 1 : 0);
  const busiest = jobs.reduce((a, b) => (rank(b) > rank(a) ? b : a));
  await page.click(`#table-jobs tr[data-job="${busiest.id}"]`);
  await page.waitForFunction((n) => Number(document.getElementById("timeline").dataset.segments) === n,
                             busiest.attempts);
  step(`timeline of ${busiest.id}: ${busiest.attempts} segments`);

  // The samples gallery beside the timeline: newest step first, prompts as captions, every
  // image decoded by the browser and byte-for-byte the stored object.
  const listing = await api(`/v1/jobs/${samplesJob}/samples`);
  const expected = listing.steps.flatMap((s) => s.images.map((i) => ({ step: s.step, ...i })));
  assert.deepEqual(listing.steps.map((s) => s.step), [30, 20, 10]);
  await page.click(`#table-jobs tr[data-job="${samplesJob}"]`);
  await page.waitForFunction((n) => Number(document.getElementById("samples").dataset.images) === n &&
    [...document.querySelectorAll("#samples img")].every((i) => i.complete && i.naturalWidth > 0),
  expected.length);
  const shown = await page.evaluate(async () => {
    const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
    const out = [];
    for (const f of document.querySelectorAll("#samples figure")) {
      const img = f.querySelector("img");
      const bytes = await (await fetch(img.currentSrc)).arrayBuffer();
      out.push({ step: Number(f.dataset.step), index: Number(f.dataset.index), width: img.naturalWidth,
                 height: img.naturalHeight, caption: f.querySelector("figcaption").textContent,
                 sha256: hex(await crypto.subtle.digest("SHA-256", bytes)), size: bytes.byteLength });
    }
    return out;
  });
  assert.deepEqual(shown.map((s) => [s.step, s.index]), expected.map((e) => [e.step, e.index]));
  for (const [k, s] of shown.entries()) {
    const e = expected[k];
    assert.equal(s.width, 32);
    assert.equal(s.height, 32);
    assert.equal(s.caption, e.prompt);
    assert.equal(s.size, e.size);
    assert.equal(s.sha256, e.sha256, `step ${e.step} image ${e.index} differs from the stored one`);
    // And the stored object itself, fetched outside the browser.
    const stored = Buffer.from(await (await fetch(new URL(e.url, url))).arrayBuffer());
    assert.equal(createHash("sha256").update(stored).digest("hex"), s.sha256);
  }
  await page.click("#samples figure[data-step='20'][data-index='1'] img");
  await page.waitForSelector("#sample-view[open]");
  const big = await page.evaluate(() => {
    const img = document.querySelector("#sample-view img");
    return { w: img.getBoundingClientRect().width, caption: document.querySelector("#sample-view p").textContent };
  });
  assert.equal(big.caption, "a blue jay");
  assert.ok(big.w > 200, `enlarged image is ${big.w}px wide`);
  await page.click("#sample-view button");
  await page.waitForSelector("#sample-view:not([open])", { state: "attached" });
  step(`samples of ${samplesJob}: ${shown.length} images at steps 30/20/10, byte-identical, enlarged on click`);

  // CSV behind a chart.
  const [download] = await Promise.all([page.waitForEvent("download"),
                                        page.click('a[data-csv="queue"]')]);
  const csv = readFileSync(await download.path(), "utf8");
  assert.match(csv, /^at,pending,running,completed,failed,canceled\n/);
  assert.ok(csv.trim().split("\n").length > 2);
  step(`queue CSV: ${csv.trim().split("\n").length - 1} rows`);

  // Quarantine from the page; the API agrees.
  await page.click(`button[data-quarantine="${nodeId}"]`);
  await page.waitForSelector(`button[data-restore="${nodeId}"]`);
  const node = (await api("/v1/nodes")).nodes.find((n) => n.id === nodeId);
  assert.equal(node.state, "quarantined");
  assert.match(node.state_reason, /dashboard/);
  step(`node ${nodeId} quarantined from the page`);

  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 3);  // live polling
  await page.screenshot({ path: out, fullPage: true });
  step(`screenshot: ${out}`);

  await page.click("#signout");
  assert.ok(await page.isVisible("#signin"));
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  assert.deepEqual(problems, []);
  step("signed out; no page errors");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
