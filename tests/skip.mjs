// skip(message): this test program cannot run here (a build product or npm package is missing).
// The same rule as tests/skip.h: outside CI it prints "SKIP: <message>" and exits 77, which
// CTest reports as "Skipped"; in CI (CI set and not "0"/"false") every input must be present,
// so it fails (exit 1) instead.
export function inCi() {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
}

export function skip(message) {
  if (inCi()) {
    console.error(`FAIL: missing in CI (every input must be present): ${message}`);
    process.exit(1);
  }
  console.log(`SKIP: ${message}`);
  process.exit(77);
}
