#!/usr/bin/env bash
# Builds the edge module: shared/ + coordinator/core + wasm/ for wasm32-wasi (reactor) into
# build-wasm/, and copies the stripped module next to the Worker as wasm/gleaner_edge.wasm.
# Needs the packages from infra/deps.sh. Fails if the module exceeds the 1 MB budget.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build-wasm"
# -O2, not -Oz: the module is about 1.6x larger (still well under the budget) and its JSON and
# SQL handling, which every request pays for in the Worker, about 1.8x faster (docs/edge.md).
cmake -S "$root" -B "$out" -G Ninja -DGLEANER_WASM=ON -DGLEANER_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_TOOLCHAIN_FILE="$root/wasm/toolchain-wasm32-wasi.cmake" >/dev/null
cmake --build "$out" -j "${GLEANER_BUILD_JOBS:-$(nproc)}" --target gleaner_edge
module="$out/bin/gleaner_edge.wasm"
[ -f "$module" ] || module="$out/wasm/gleaner_edge.wasm"
if command -v wasm-opt >/dev/null 2>&1; then
  wasm-opt -O2 --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
    "$module" -o "$root/wasm/gleaner_edge.wasm"
else
  cp "$module" "$root/wasm/gleaner_edge.wasm"
fi
size=$(stat -c %s "$root/wasm/gleaner_edge.wasm")
echo "wasm/gleaner_edge.wasm: $size bytes"
if [ "$size" -gt 1048576 ]; then
  echo "error: the edge module exceeds the 1 MB budget" >&2
  exit 1
fi
