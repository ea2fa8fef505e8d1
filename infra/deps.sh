#!/usr/bin/env bash
# Installs everything Gleaner needs to build, run and test on Debian 12 (run as root).
# Idempotent: skips apt when every package is already installed.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  clang-14 lld-14 llvm-14 libclang-rt-14-dev
  libcpp-httplib-dev libsqlitecpp-dev libsqlite3-dev sqlite3 libssl-dev openssl
  libcurl4-openssl-dev nlohmann-json3-dev catch2 libtorch-dev
  nodejs npm jq bsdextrautils
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# A local S3-compatible server (s3rver) for the agent's S3 end-to-end test, pinned by
# tests/s3/package-lock.json.
s3dir="$(cd "$(dirname "$0")/.." && pwd)/tests/s3"
if [ -f "$s3dir/package-lock.json" ] && [ ! -x "$s3dir/node_modules/.bin/s3rver" ]; then
  echo "deps: installing s3rver (npm ci in tests/s3)"
  (cd "$s3dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
