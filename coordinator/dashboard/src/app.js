// Gleaner operator dashboard. Plain JS + uPlot (embedded, no CDN). Every number comes from the
// coordinator's operator API with the token kept in sessionStorage; the page itself holds none.
/* global uPlot */
"use strict";

const TOKEN_KEY = "gleaner-operator-token";
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(500, Number(params.get("poll")) || 5000);
const COLORS = ["#2f6fde", "#e0862d", "#1f8a4c", "#9b4dca", "#c93c3c", "#178f9b", "#b08a00",
                "#5a5f6e", "#d45fa0", "#4c9a2a"];
const $ = (id) => document.getElementById(id);

const state = { charts: {}, selectedJob: null, data: {}, timer: null, nodeColors: new Map() };

// ---- API ------------------------------------------------------------------------------------
class AuthError extends Error {}

async function api(path, opts = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new AuthError("not signed in");
  const res = await fetch(path, {
    method: opts.method || "GET",
    headers: { Authorization: "Bearer " + token,
               ...(opts.body ? { "Content-Type": "application/json" } : {}) },
    body: opts.body ? JSON.stringify(opts.body) : undefined,
    cache: "no-store",
  });
  const text = await res.text();
  if (res.status === 401 || res.status === 403) {
    let msg = "HTTP " + res.status;
    try { msg = JSON.parse(text).error.message; } catch (e) { /* not JSON */ }
    throw new AuthError(msg);
  }
  if (!res.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error.message; } catch (e) { /* not JSON */ }
    throw new Error(`${opts.method || "GET"} ${path}: ${res.status} ${msg}`);
  }
  return opts.raw ? text : JSON.parse(text);
}

// ---- formatting -----------------------------------------------------------------------------
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};
const usd = (v) => (v == null ? "–" : "$" + (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2)
                                             : v.toPrecision(3)));
const num = (v, d = 0) => (v == null ? "–" : Number(v).toFixed(d));
const ts = (s) => (s ? Date.parse(s) / 1000 : null);
function ago(iso) {
  if (!iso) return "–";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return s < 90 ? `${s.toFixed(0)} s ago` : s < 5400 ? `${(s / 60).toFixed(0)} min ago`
       : `${(s / 3600).toFixed(1)} h ago`;
}
function nodeColor(id) {
  if (!state.nodeColors.has(id)) {
    state.nodeColors.set(id, COLORS[state.nodeColors.size % COLORS.length]);
  }
  return state.nodeColors.get(id);
}
// csv.js: formula cells neutralised, numbers kept (the coordinator's reports follow the same rule).
const { csvText } = window.gleanerCsv;
function download(name, text) {
  const a = el("a", { href: URL.createObjectURL(new Blob([text], { type: "text/csv" })),
                      download: name });
  document.body.append(a);
  a.click();
  a.remove();
}

// ---- charts ---------------------------------------------------------------------------------
function chartWidth(id) { return Math.max(320, $(id).clientWidth || 520); }

// Creates or updates a uPlot chart in container `id`; data[0] is the x axis.
function plot(id, opts, data) {
  const box = $(id);
  box.dataset.points = String(data[0].length);
  let c = state.charts[id];
  if (c && c.series.length !== opts.series.length) { c.destroy(); c = null; }
  if (!c) {
    box.textContent = "";
    c = state.charts[id] = new uPlot({ width: chartWidth(id), height: 220, ...opts }, data, box);
  } else {
    c.setData(data);
  }
}

const bars = () => uPlot.paths.bars({ size: [0.7, 60] });
// Small amounts (USD per step is often micro-dollars) in a readable short form.
const short = (v) => (v === 0 ? "0" : Math.abs(v) < 0.01 ? v.toExponential(2) : v.toPrecision(3));
const usdAxis = (label) => ({ label, size: 60, values: (u, splits) => splits.map(short) });
// An x axis of categories 0..n-1, at most ~8 labels.
function indexAxis(labels) {
  const every = Math.max(1, Math.ceil(labels.length / 8));
  return { values: (u, splits) => splits.map((i) => (Number.isInteger(i) && labels[i] != null ? labels[i] : "")),
           splits: () => labels.map((_, i) => i).filter((i) => i % every === 0) };
}

function drawQueue(q) {
  const x = q.points.map((p) => ts(p.at));
  const col = (k) => q.points.map((p) => p[k]);
  plot("chart-queue", {
    series: [{}, { label: "pending", stroke: "#e0862d", width: 2 },
             { label: "running", stroke: "#2f6fde", width: 2 },
             { label: "completed", stroke: "#1f8a4c", width: 2 },
             { label: "failed", stroke: "#c93c3c", width: 2 }],
  }, [x, col("pending"), col("running"), col("completed"), col("failed")]);
}

function drawAutoscaler(a) {
  const ev = a.events;
  plot("chart-autoscaler", {
    series: [{}, { label: "target", stroke: "#9b4dca", width: 2 },
             { label: "current", stroke: "#2f6fde", width: 2 },
             { label: "running + pending", stroke: "#aab", width: 1, dash: [4, 4] }],
  }, [ev.map((e) => ts(e.at)), ev.map((e) => e.target), ev.map((e) => e.current),
      ev.map((e) => e.running + e.pending)]);
}

function drawHistogram(h) {
  const labels = h.bins.map((b) => short((b.lo + b.hi) / 2));
  plot("chart-histogram", {
    scales: { x: { time: false, range: [-0.5, h.bins.length - 0.5] } },
    axes: [{ ...indexAxis(labels), label: "USD per step (bin centre)" }, { label: "jobs" }],
    series: [{ label: "bin" }, { label: "jobs", fill: "#2f6fde88", stroke: "#2f6fde",
                                 paths: bars(), points: { show: false } }],
  }, [h.bins.map((_, i) => i), h.bins.map((b) => b.jobs)]);
  $("chart-histogram").dataset.jobs = String(h.jobs);
}

function drawGpu(r) {
  const g = r.groups;
  plot("chart-gpu", {
    scales: { x: { time: false, range: [-0.5, Math.max(1, g.length) - 0.5] } },
    axes: [indexAxis(g.map((x) => x.key)), usdAxis("USD")],
    series: [{ label: "gpu" },
             { label: "cost", fill: "#2f6fde88", stroke: "#2f6fde", paths: bars(),
               points: { show: false } },
             { label: "wasted", fill: "#c93c3c88", stroke: "#c93c3c", paths: bars(),
               points: { show: false } }],
  }, [g.map((_, i) => i), g.map((x) => x.cost_usd), g.map((x) => x.wasted_cost_usd)]);
  const t = $("table-gpu");
  t.replaceChildren(el("tr", {}, ...["GPU", "steps", "cost", "USD/step", "wasted", "wasted share",
                                     "queue p50 / p95"].map((h) => el("th", {}, h))));
  for (const x of [...g, { ...r.totals, key: "total" }]) {
    t.append(el("tr", {}, el("td", {}, x.key), el("td", {}, x.steps), el("td", {}, usd(x.cost_usd)),
                el("td", {}, usd(x.cost_per_step)), el("td", {}, usd(x.wasted_cost_usd)),
                el("td", {}, x.cost_usd > 0 ? (100 * x.wasted_cost_usd / x.cost_usd).toFixed(1) + " %" : "–"),
                el("td", {}, `${num(x.queue_wait_median_s, 1)} s / ${num(x.queue_wait_p95_s, 1)} s`)));
  }
}

// ---- tables ---------------------------------------------------------------------------------
function jobRows() {
  const perJob = new Map((state.data.byJob?.groups || []).map((g) => [g.key, g]));
  return (state.data.jobs?.jobs || []).map((j) => ({ j, c: perJob.get(j.id) }));
}

function drawJobs() {
  const t = $("table-jobs");
  t.replaceChildren(el("tr", {}, ...["job", "kind", "state", "progress", "attempts", "cost so far",
                                     "USD/step", "created"].map((h) => el("th", {}, h))));
  for (const { j, c } of jobRows()) {
    const pct = j.steps ? Math.round((100 * j.step) / j.steps) : 0;
    const tr = el("tr", { class: "selectable" + (j.id === state.selectedJob ? " selected" : ""),
                          "data-job": j.id, onclick: () => selectJob(j.id) },
      el("td", {}, j.id), el("td", {}, j.kind),
      el("td", { class: "state-" + j.state }, j.state + (j.stalled ? " (stalled)" : "")),
      el("td", {}, el("span", { class: "bar", style: `width:${pct * 0.6}px` }), ` ${j.step}/${j.steps}`),
      el("td", {}, j.attempts), el("td", {}, usd(j.cost_usd)),
      el("td", {}, usd(c ? c.cost_per_step : null)), el("td", {}, ago(j.created_at)));
    t.append(tr);
  }
}

function drawFleet() {
  const t = $("table-fleet");
  t.replaceChildren(el("tr", {}, ...["node", "machine", "GPU", "state", "last heartbeat",
                                     "jobs done", "jobs failed", "running", ""].map((h) => el("th", {}, h))));
  for (const n of state.data.nodes?.nodes || []) {
    const quarantined = n.state === "quarantined";
    const btn = el("button", { class: quarantined ? "" : "danger",
                               [quarantined ? "data-restore" : "data-quarantine"]: n.id,
                               onclick: () => setNodeState(n.id, quarantined ? "restore" : "quarantine") },
                   quarantined ? "Restore" : "Quarantine");
    t.append(el("tr", { "data-node": n.id },
      el("td", {}, el("i", { class: "dot", style: `color:${nodeColor(n.id)}` }, "● "), n.id),
      el("td", {}, n.machine_id), el("td", {}, `${n.gpu.name} (${Math.round(n.gpu.vram_mb / 1024)} GB)`),
      el("td", { class: "state-" + n.state, title: n.state_reason || "" }, n.state),
      el("td", { title: n.last_seen_at || "" }, ago(n.last_seen_at)),
      el("td", {}, n.jobs_completed), el("td", {}, n.jobs_failed),
      el("td", {}, (n.running_jobs || []).join(" ")), el("td", {}, btn)));
  }
}

async function setNodeState(id, action) {
  try {
    await api(`/v1/nodes/${encodeURIComponent(id)}/${action}`,
              { method: "POST", body: { reason: `${action} from the dashboard` } });
    await refresh();
  } catch (e) { showError(e); }
}

function drawSummary() {
  const last = state.data.queue?.points?.at(-1) || {};
  const nodes = state.data.nodes?.nodes || [];
  const tot = state.data.byGpu?.totals || {};
  const cards = [
    ["pending", last.pending], ["running", last.running], ["completed", last.completed],
    ["failed", last.failed],
    ["nodes active", nodes.filter((n) => n.state === "active").length],
    ["quarantined", nodes.filter((n) => n.state === "quarantined").length],
    ["total cost", usd(tot.cost_usd)], ["USD per step", usd(tot.cost_per_step)],
    ["wasted", tot.cost_usd ? `${usd(tot.wasted_cost_usd)} (${(100 * tot.wasted_cost_usd / tot.cost_usd).toFixed(1)} %)` : "–"],
    ["queue wait p50 / p95", `${num(tot.queue_wait_median_s, 1)} / ${num(tot.queue_wait_p95_s, 1)} s`],
    // Replay spot checks, billed apart from training (docs/architecture.md "Verified training").
    ["verification", usd(tot.verification_cost_usd)],
  ];
  $("summary").replaceChildren(...cards.map(([k, v]) => el("div", { "data-summary": k },
                                                            el("b", {}, v ?? "–"), el("span", {}, k))));
}

// ---- job timeline (canvas) ------------------------------------------------------------------
// One lane: grey = waiting in the queue, a bar per lease coloured by machine, ticks = heartbeats
// (spread between the first and last heartbeat), a red mark where a lease ended unfinished.
function timelineSpans(ev) {
  const job = ev.job;
  const spans = [];
  let waitFrom = ts(job.created_at);
  for (const s of ev.segments) {
    const start = ts(s.started_at);
    spans.push({ kind: "queue", from: waitFrom, to: start });
    const end = ts(s.ended_at) ?? Date.now() / 1000;
    spans.push({ kind: "lease", from: start, to: end, s });
    waitFrom = end;
  }
  // A verifying job waits for the replay of its last segment, not in the queue.
  if (!["verifying", "completed", "failed", "canceled"].includes(job.state) &&
      (!ev.segments.length || ev.segments.at(-1).ended_at)) {
    spans.push({ kind: "queue", from: waitFrom, to: Date.now() / 1000 });
  }
  return spans;
}

function drawTimeline() {
  const ev = state.data.events;
  const cv = $("timeline");
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth || 1200, h = 150;
  cv.width = w * dpr; cv.height = h * dpr;
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  if (!ev) { cv.dataset.segments = "0"; return; }
  const vf = ev.job.verification || {};
  // Replays (verified / rejected / unverifiable) and reopens after a forger was found in the lineage.
  const checks = vf.fraction ? ` · replays ${vf.verified ?? 0} verified, ${vf.rejected ?? 0} rejected, ${vf.unverifiable ?? 0} unverifiable` : "";
  const reopened = (ev.reopened || []).length ? ` · reopened ${ev.reopened.length}× (${ev.reopened[0].event})` : "";
  $("timeline-job").textContent = `${ev.job.id} — ${ev.job.state}, ${ev.job.step}/${ev.job.steps} steps, ${usd(ev.job.cost_usd)}${checks}${reopened}`;
  const spans = timelineSpans(ev);
  const t0 = Math.min(...spans.map((s) => s.from)), t1 = Math.max(...spans.map((s) => s.to), t0 + 1);
  const X = (t) => 10 + ((t - t0) / (t1 - t0)) * (w - 20);
  const y = 40, bh = 40;
  g.font = "12px system-ui, sans-serif";
  // Text kept inside the canvas.
  const label = (text, x, ty) => g.fillText(text, Math.max(2, Math.min(x, w - 2 - g.measureText(text).width)), ty);
  for (const sp of spans) {
    if (sp.kind === "queue") {
      g.fillStyle = "#d7dbe3";
      g.fillRect(X(sp.from), y + bh / 3, Math.max(1, X(sp.to) - X(sp.from)), bh / 3);
      continue;
    }
    const s = sp.s;
    g.fillStyle = nodeColor(s.node_id);
    g.fillRect(X(sp.from), y, Math.max(2, X(sp.to) - X(sp.from)), bh);
    g.fillStyle = "#1d2330";
    label(`${s.gpu} · steps ${s.step_start}→${s.step_end}`, X(sp.from) + 2, y - 6);
    const a = ts(s.first_heartbeat_at), b = ts(s.last_heartbeat_at);
    g.strokeStyle = "#1d2330";
    for (let i = 0; i < s.heartbeats && a != null; i++) {
      const t = s.heartbeats === 1 ? a : a + ((b - a) * i) / (s.heartbeats - 1);
      g.beginPath(); g.moveTo(X(t), y + bh); g.lineTo(X(t), y + bh + 8); g.stroke();
    }
    if (s.end_reason && s.end_reason !== "completed") {
      g.fillStyle = "#c93c3c";
      g.fillRect(X(sp.to) - 2, y - 4, 4, bh + 8);
      label(s.end_reason, X(sp.to) + 3, y + bh + 22);
    }
  }
  g.fillStyle = "#6b7385";
  g.fillText(new Date(t0 * 1000).toISOString().slice(11, 19), 10, h - 8);
  const endLabel = new Date(t1 * 1000).toISOString().slice(11, 19);
  g.fillText(endLabel, w - 10 - g.measureText(endLabel).width, h - 8);
  cv.dataset.segments = String(ev.segments.length);
  const legend = [el("span", {}, el("i", { style: "background:#d7dbe3" }), "waiting in the queue"),
                  el("span", {}, el("i", { style: "background:#c93c3c" }), "interrupted")];
  for (const id of new Set(ev.segments.map((s) => s.node_id))) {
    legend.push(el("span", {}, el("i", { style: `background:${nodeColor(id)}` }), id));
  }
  legend.push(el("span", {}, `${ev.segments.reduce((n, s) => n + s.heartbeats, 0)} heartbeats, ` +
                             `${ev.failures.length} failures, ${ev.checkpoints.length} checkpoints`));
  $("timeline-legend").replaceChildren(...legend);
}

// ---- samples gallery ------------------------------------------------------------------------
// The selected job's samples by step, newest first, prompts as captions; a click enlarges one.
// Images are redrawn only when the set of (step, index, sha256) changes: the signed URLs are
// fresh on every poll, and reloading unchanged images would flicker.
function drawSamples() {
  const list = state.data.samples;
  const box = $("samples");
  if (!list) { box.replaceChildren(); box.dataset.images = "0"; $("samples-info").textContent = ""; return; }
  const steps = list.steps || [];
  const images = steps.reduce((n, s) => n + s.images.length, 0);
  $("samples-info").textContent = images
    ? `${images} images at ${steps.length} steps, ${num(list.sampling_s, 1)} s sampling`
    : "(none)";
  const key = list.job_id + ":" + steps.map((s) => s.step + "/" + s.images.map((i) => i.sha256).join(",")).join(";");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...steps.map((s) => el("div", { class: "sample-step", "data-step": s.step },
    el("h3", {}, `step ${s.step}`, el("span", { class: "muted" }, ` · seed ${s.seed} · ${num(s.seconds, 2)} s`)),
    el("div", { class: "sample-row" }, ...s.images.map((i) => {
      const caption = i.prompt + (i.negative_prompt ? ` (not: ${i.negative_prompt})` : "");
      return el("figure", { "data-sha256": i.sha256, "data-step": s.step, "data-index": i.index },
        el("img", { src: i.url, alt: i.prompt, title: caption,
                    onclick: () => enlargeSample(i.url, caption) }),
        el("figcaption", {}, caption));
    })))));
  box.dataset.images = String(images);
}

function enlargeSample(url, caption) {
  const d = $("sample-view");
  d.querySelector("img").src = url;
  d.querySelector("p").textContent = caption;
  d.showModal();
}

async function loadJob(id) {
  const job = encodeURIComponent(id);
  const [events, samples] = await Promise.all([api(`/v1/jobs/${job}/events`),
                                               api(`/v1/jobs/${job}/samples?limit=20`)]);
  Object.assign(state.data, { events, samples });
}

async function selectJob(id) {
  state.selectedJob = id;
  try {
    await loadJob(id);
  } catch (e) { return showError(e); }
  drawJobs();
  drawTimeline();
  drawSamples();
}

// ---- CSV buttons ----------------------------------------------------------------------------
const CSV = {
  queue: () => api("/v1/reports/queue?format=csv", { raw: true }),
  autoscaler: () => api("/v1/reports/autoscaler?format=csv", { raw: true }),
  histogram: () => api("/v1/reports/cost-per-step?format=csv", { raw: true }),
  gpu: () => api("/v1/reports/cost?group_by=gpu&format=csv", { raw: true }),
  jobs: async () => csvText(["id", "kind", "state", "step", "steps", "attempts", "cost_usd", "cost_per_step", "created_at"],
    jobRows().map(({ j, c }) => [j.id, j.kind, j.state, j.step, j.steps, j.attempts, j.cost_usd,
                                 c ? c.cost_per_step : "", j.created_at])),
  fleet: async () => csvText(["id", "machine_id", "gpu", "vram_mb", "state", "last_seen_at", "jobs_completed", "jobs_failed"],
    (state.data.nodes?.nodes || []).map((n) => [n.id, n.machine_id, n.gpu.name, n.gpu.vram_mb, n.state,
                                                n.last_seen_at, n.jobs_completed, n.jobs_failed])),
  timeline: async () => csvText(["epoch", "node_id", "gpu", "started_at", "ended_at", "end_reason", "heartbeats",
                                 "step_start", "step_end", "step_committed", "cost_usd"],
    (state.data.events?.segments || []).map((s) => [s.epoch, s.node_id, s.gpu, s.started_at, s.ended_at,
                                                    s.end_reason, s.heartbeats, s.step_start, s.step_end,
                                                    s.step_committed, s.cost_usd])),
};

// ---- refresh loop ---------------------------------------------------------------------------
function showError(e) {
  if (e instanceof AuthError) return signOut(e.message);
  $("error").textContent = e.message;
}

async function refresh() {
  try {
    const [queue, autoscaler, histogram, byGpu, byJob, jobs, nodes] = await Promise.all([
      api("/v1/reports/queue"), api("/v1/reports/autoscaler"), api("/v1/reports/cost-per-step"),
      api("/v1/reports/cost?group_by=gpu"), api("/v1/reports/cost?group_by=job"),
      api("/v1/jobs?limit=100"), api("/v1/nodes")]);
    Object.assign(state.data, { queue, autoscaler, histogram, byGpu, byJob, jobs, nodes });
    if (state.selectedJob) await loadJob(state.selectedJob);
    $("error").textContent = "";
  } catch (e) { return showError(e); }
  drawSummary();
  drawQueue(state.data.queue);
  drawAutoscaler(state.data.autoscaler);
  drawHistogram(state.data.histogram);
  drawGpu(state.data.byGpu);
  drawJobs();
  drawFleet();
  drawTimeline();
  drawSamples();
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(state.timer);
  for (const c of Object.values(state.charts)) c.destroy();
  state.charts = {};
  state.data = {};
  $("app").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
}

async function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await api("/v1/nodes");  // operator-only: proves the token before showing anything
  } catch (e) {
    return signOut(e instanceof AuthError ? "sign-in failed: " + e.message : e.message);
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  await refresh();
  if (!state.selectedJob && state.data.jobs?.jobs?.length) await selectJob(state.data.jobs.jobs[0].id);
  clearInterval(state.timer);
  state.timer = setInterval(refresh, POLL_MS);
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const t = $("token").value.trim();
  $("token").value = "";
  if (t) signIn(t);
});
$("signout").addEventListener("click", () => signOut());
$("sample-view").addEventListener("click", (e) => {
  if (e.target.tagName !== "IMG") $("sample-view").close();
});
for (const a of document.querySelectorAll("a.csv")) {
  a.addEventListener("click", async (e) => {
    e.preventDefault();
    try { download(`gleaner-${a.dataset.csv}.csv`, await CSV[a.dataset.csv]()); } catch (err) { showError(err); }
  });
}
window.addEventListener("resize", () => {
  for (const [id, c] of Object.entries(state.charts)) c.setSize({ width: chartWidth(id), height: 220 });
  drawTimeline();
});
if (sessionStorage.getItem(TOKEN_KEY)) signIn(sessionStorage.getItem(TOKEN_KEY));
