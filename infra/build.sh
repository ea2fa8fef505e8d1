#!/usr/bin/env bash
# Configures and builds Gleaner into build/ (binaries in build/bin/). Extra args go to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${GLEANER_BUILD_JOBS:-$(nproc)}
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$root/build" -j "$jobs"
