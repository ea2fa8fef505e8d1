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
