// Starts a coordinator for the conformance suite: the native binary or the Miniflare edge.
// Both get a fresh database and blob store in a temporary directory, a random operator token,
// the same short heartbeat interval, and a port chosen by the OS (reported via a port file).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

// Leases must outlive the longest test sequence on a loaded CI machine; the stall test waits one.
export const TIMING = { heartbeat_interval_s: 1, stall_after_s: 3 };

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// Returns {base, port, operatorToken, stop(), stderr(), exited()} once /healthz answers 200.
// output(text): every chunk the server writes to stdout or stderr (for tests that scan the
// runtime's log); env: extra environment variables.
export async function startTarget(
  kind,
  { bin, timing = TIMING, extraArgs = [], output, env: extraEnv = {} } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), `gleaner-conf-${kind}-`));
  const portFile = join(dir, "port");
  const operatorToken = `op_${randomBytes(16).toString("hex")}`;
  const env = { ...process.env, ...extraEnv, GLEANER_OPERATOR_TOKEN: operatorToken };
  // Test clients and agents call far faster than production ones: no per-token rate limits
  // unless a test sets them (both shells read GLEANER_<SETTING>; native flags win over it).
  for (const role of ["developer", "node", "operator", "enroll"]) {
    env[`GLEANER_${role.toUpperCase()}_RATE_LIMIT`] ??= "off";
  }
  env.GLEANER_ENROLL_ADDRESS_RATE_LIMIT ??= "off";
  let args;
  let command;
  if (kind === "native") {
    command = bin ?? join(repo, "build", "bin", "gleaner-coordinator");
    if (!existsSync(command)) throw new Error(`no native coordinator at ${command}`);
    args = [
      "serve", "--db", join(dir, "gleaner.db"), "--data-dir", join(dir, "data"),
      "--listen", "127.0.0.1:0", "--port-file", portFile,
      "--heartbeat-interval", String(timing.heartbeat_interval_s),
      "--stall-after", String(timing.stall_after_s), "--maintenance-period", "3600",
      "--log-level", "error",
    ];
  } else if (kind === "edge") {
    command = process.execPath;
    args = [
      join(repo, "wasm", "serve.mjs"), "--port", "0", "--port-file", portFile,
      ...(process.env.GLEANER_EDGE_MEMORY ? [] : ["--persist", join(dir, "edge")]),
      "--heartbeat-interval", String(timing.heartbeat_interval_s),
      "--stall-after", String(timing.stall_after_s),
    ];
  } else {
    throw new Error(`unknown target ${kind} (native or edge)`);
  }
  args.push(...extraArgs);
  const child = spawn(command, args, { env, stdio: ["ignore", output ? "pipe" : "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
    output?.(String(d));
  });
  child.stdout?.on("data", (d) => output(String(d)));
  let exited = null;
  child.on("exit", (code, signal) => {
    exited = `exited with ${code ?? signal}`;
  });
  try {
    const port = await waitFor(
      () => {
        if (exited) throw new Error(`${kind} coordinator ${exited}: ${stderr}`);
        return existsSync(portFile) && Number(readFileSync(portFile, "utf8").trim());
      },
      30000,
      `${kind} port file`,
    );
    const base = `http://127.0.0.1:${port}`;
    await waitFor(
      async () => {
        try {
          return (await fetch(`${base}/healthz`)).status === 200;
        } catch {
          return false;
        }
      },
      30000,
      `${kind} /healthz`,
    );
    const stop = async () => {
      if (!exited) {
        const done = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await done;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    };
    return { base, port, operatorToken, stop, stderr: () => stderr, exited: () => exited };
  } catch (e) {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
