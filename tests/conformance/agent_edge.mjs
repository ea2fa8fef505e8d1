// The real gleaner-agent (with gleaner-train) completes synthetic jobs against the edge
// coordinator in Miniflare: checkpoints go to R2, and a job whose agent is SIGKILLed resumes on
// another agent from its last committed checkpoint.
//
//   node tests/conformance/agent_edge.mjs [--bin-dir build/bin]
// Skipped (exit 77; a failure in CI) when the agent, the trainer, the wasm module or Miniflare is
// missing.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { skip } from "../skip.mjs";
import { startTarget } from "./targets.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const i = process.argv.indexOf("--bin-dir");
const binDir = i > 0 ? process.argv[i + 1] : join(repo, "build", "bin");
const agentBin = join(binDir, "gleaner-agent");
const trainBin = join(binDir, "gleaner-train");
for (const f of [agentBin, trainBin, join(repo, "wasm", "gleaner_edge.wasm"),
                 join(repo, "wasm", "node_modules", "miniflare")]) {
  if (!existsSync(f)) skip(`agent_edge: ${f} is missing`);
}

const deadline = Date.now() + 90000;
async function until(what, predicate) {
  for (;;) {
    const v = await predicate();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const target = await startTarget("edge", {
  timing: { heartbeat_interval_s: 0.5, stall_after_s: 1.5 },
  extraArgs: ["--config", JSON.stringify({ "retry-after": 0.1 })],
});
const dir = mkdtempSync(join(tmpdir(), "gleaner-agent-edge-"));
const agents = [];
try {
  const api = async (method, path, token, body) => {
    const res = await fetch(target.base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const op = target.operatorToken;
  const dev = (await api("POST", "/v1/keys", op, { role: "developer", name: "e2e" })).token;
  const enroll = (await api("POST", "/v1/keys", op, { role: "enroll", name: "e2e" })).token;
  const jobs = [];
  for (let k = 0; k < 3; k++) {
    const spec = { kind: "synthetic", params: { steps: 60, step_ms: 25, checkpoint_every: 10, seed: k } };
    jobs.push((await api("POST", "/v1/jobs", dev, spec)).id);
  }
  const startAgent = (name) => {
    const child = spawn(agentBin, [
      "--coordinator", target.base, "--enroll-token", enroll,
      "--state-dir", join(dir, name), "--machine-id", name, "--trainer", trainBin,
      "--max-poll-interval", "0.1", "--shutdown-deadline", "10",
    ], { stdio: ["ignore", "ignore", "inherit"] });
    agents.push(child);
    return child;
  };
  const victim = startAgent("agent-a");
  // Kill agent-a as soon as one of its jobs has a committed checkpoint.
  const killed = await until("a committed checkpoint", async () => {
    for (const id of jobs) {
      const j = await api("GET", `/v1/jobs/${id}`, dev);
      if (j.state === "running" && j.latest_checkpoint) return j;
    }
    return null;
  });
  victim.kill("SIGKILL");
  startAgent("agent-b");
  startAgent("agent-c");
  const final = await until("every job completed", async () => {
    const all = await Promise.all(jobs.map((id) => api("GET", `/v1/jobs/${id}`, dev)));
    return all.every((j) => j.state === "completed") && all;
  });
  const events = await api("GET", `/v1/jobs/${killed.id}/events`, dev);
  const resumed = events.segments.filter((s) => s.epoch > 1);
  assert.ok(resumed.length >= 1, "the killed job was not taken over");
  assert.ok(resumed[0].step_start >= killed.latest_checkpoint.step,
            `resumed at step ${resumed[0].step_start}, checkpoint was ${killed.latest_checkpoint.step}`);
  for (const j of final) {
    const r = await api("GET", `/v1/jobs/${j.id}/result`, dev);
    for (const o of r.outputs) assert.equal((await fetch(o.url)).status, 200);
  }
  console.log(`agent_edge: ${jobs.length} jobs completed on the edge; ${killed.id} resumed from ` +
              `step ${resumed[0].step_start} after SIGKILL (epochs ${events.segments.map((s) => s.epoch).join(",")})`);
} finally {
  for (const a of agents) if (a.exitCode === null) a.kill("SIGKILL");
  await target.stop();
  rmSync(dir, { recursive: true, force: true });
}
