#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan, any report fatal) in build-fuzz/ and runs each for N seconds
# (default 30) on a scratch copy of its committed corpus, so the repository corpus stays small.
# Exit status is non-zero when any target finds a crash; the crashing input is left in
# build-fuzz/artifacts/. Usage: tests/fuzz/run.sh [seconds] [target...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-30}
shift || true
build=${GLEANER_FUZZ_BUILD:-$root/build-fuzz}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in "$root"/tests/fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DGLEANER_WITH_TORCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" \
    -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" >/dev/null
fi
ninja -C "$build" -j "${GLEANER_BUILD_JOBS:-2}" "${targets[@]}"
mkdir -p "$build/artifacts"
failed=0
for t in "${targets[@]}"; do
  corpus=$root/tests/fuzz/corpus/${t%_fuzz}
  scratch=$(mktemp -d)
  echo "== $t: ${secs}s"
  if ! "$build/tests/$t" "$scratch" "$corpus" -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
      2>"$build/artifacts/$t.log"; then
    failed=1
    tail -n 40 "$build/artifacts/$t.log"
  fi
  grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb' \
    "$build/artifacts/$t.log" || true
  rm -rf "$scratch"
done
exit $failed
