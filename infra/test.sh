#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test. `.ci/run` calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/infra/deps.sh"
bash "$root/infra/build.sh"
# The portable core must keep building for wasm32-wasi (no exceptions, threads, files).
cmake -S "$root" -B "$root/build-wasm" -G Ninja -DGLEANER_WASM=ON -DGLEANER_TESTS=OFF \
  -DCMAKE_TOOLCHAIN_FILE="$root/wasm/toolchain-wasm32-wasi.cmake" >/dev/null
cmake --build "$root/build-wasm" -j "${GLEANER_BUILD_JOBS:-$(nproc)}"
cd "$root/build"
ctest --output-on-failure -j "${GLEANER_TEST_JOBS:-2}" --timeout 600
