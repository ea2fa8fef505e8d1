#!/usr/bin/env bash
# Configures and builds Gleaner into build/ (binaries in build/bin/). Extra args go to cmake.
# GLEANER_BUILD_TARGETS: the targets to build (space-separated; default all, the tests included).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${GLEANER_BUILD_JOBS:-$(nproc)}
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
targets=()
if [ -n "${GLEANER_BUILD_TARGETS:-}" ]; then read -r -a targets <<<"$GLEANER_BUILD_TARGETS"; targets=(--target "${targets[@]}"); fi
cmake --build "$root/build" -j "$jobs" "${targets[@]}"
