#!/usr/bin/env bash
# Installs everything Gleaner needs to build, run and test on Debian 12 (run as root).
# Idempotent: skips apt when every package is already installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  clang-14 lld-14 llvm-14 libclang-rt-14-dev
  wasi-libc libc++-14-dev-wasm32 libc++abi-14-dev-wasm32 libclang-rt-14-dev-wasm32
  libcpp-httplib-dev libsqlitecpp-dev libsqlite3-dev sqlite3 libssl-dev openssl
  libcurl4-openssl-dev nlohmann-json3-dev catch2 libtorch-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev zlib1g-dev
  nodejs npm jq bsdextrautils
  systemd
  chromium
)
missing=()
for p in "${packages[@]}"; do
  # A Node.js from elsewhere (e.g. NodeSource, which bundles npm) satisfies nodejs and npm.
  if { [ "$p" = nodejs ] && command -v node >/dev/null; } ||
     { [ "$p" = npm ] && command -v npm >/dev/null; }; then
    continue
  fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The edge Worker's local runtime (Miniflare + workerd), pinned by wasm/package-lock.json.
# npm ci reinstalls when the installed Miniflare is not the pinned one.
want=$(sed -n 's/.*"miniflare": "\(.*\)".*/\1/p' "$root/wasm/package.json")
have=$(sed -n 's/^  "version": "\(.*\)".*/\1/p' "$root/wasm/node_modules/miniflare/package.json" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  echo "deps: npm ci in wasm/ (miniflare $want)"
  (cd "$root/wasm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# The dashboard's charting library (embedded into gleaner-coordinator at build time) and the
# browser test's driver (playwright-core; it uses Debian's chromium, never downloaded browsers),
# pinned by coordinator/dashboard/package-lock.json.
dash="$root/coordinator/dashboard"
want=$(cd "$dash" && node -e 'const l=require("./package-lock.json").packages;
  console.log(["uplot","playwright-core"].map(n=>l["node_modules/"+n].version).join(" "))')
have=$(cd "$dash" && node -e 'const v=n=>{try{return require("./node_modules/"+n+"/package.json").version}catch(e){return "-"}};
  console.log(["uplot","playwright-core"].map(v).join(" "))')
if [ "$want" != "$have" ]; then
  echo "deps: npm ci in coordinator/dashboard/ (uplot + playwright-core: $want)"
  (cd "$dash" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# A local S3-compatible server (s3rver) for the agent's S3 end-to-end test, pinned by
# tests/s3/package-lock.json.
s3dir="$(cd "$(dirname "$0")/.." && pwd)/tests/s3"
if [ -f "$s3dir/package-lock.json" ] && [ ! -x "$s3dir/node_modules/.bin/s3rver" ]; then
  echo "deps: installing s3rver (npm ci in tests/s3)"
  (cd "$s3dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
