#!/usr/bin/env bash
# The trainer-only configuration (-DGLEANER_TRAINER_ONLY=ON, cmake/trainer_only.cmake) needs
# nothing but a C++17 compiler, CMake, libtorch and nlohmann-json: with SQLite, curl, OpenSSL,
# Catch2 and pkg-config made unfindable it must configure and define gleaner-train (without
# prepare-images: the codecs come through pkg-config), bench_train_step and compare_tensors, and
# nothing of the coordinator or the agent; with pkg-config, the image pipeline is back.
#   usage: trainer_only_test.sh [CMAKE]
set -euo pipefail
cmake=${1:-cmake}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-trainer-only-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

configure() { # configure DIR EXTRA_ARGS...
  local dir=$1
  shift
  "$cmake" -S "$repo" -B "$dir" "${generator[@]}" -DGLEANER_TRAINER_ONLY=ON "$@" >"$dir.log" 2>&1 ||
    fail "configure $*: $(grep -m1 -A3 'CMake Error' "$dir.log" || tail -5 "$dir.log")"
  "$cmake" --build "$dir" --target help >"$dir.targets"
}
has() { grep -q "^$2:" "$1.targets"; }

configure "$work/bare" -DCMAKE_DISABLE_FIND_PACKAGE_SQLiteCpp=ON -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
for t in gleaner-train bench_train_step compare_tensors; do
  has "$work/bare" $t || fail "no target $t"
done
for t in gleaner-coordinator gleaner-agent gleaner gleaner_train_images shared_tests; do
  if has "$work/bare" $t; then fail "target $t in a trainer-only build"; fi
done
grep -q "built without prepare-images" "$work/bare.log" || fail "no note that prepare-images is left out"
for pkg in SQLite CURL OpenSSL Catch2 httplib HTTPLIB; do
  if grep -qi "found $pkg" "$work/bare.log"; then fail "the configure looked for $pkg"; fi
done
echo "ok: configures without SQLite, curl, OpenSSL, Catch2 and pkg-config; gleaner-train, bench_train_step, compare_tensors"

configure "$work/codecs"
has "$work/codecs" gleaner_train_images || fail "codecs found but no gleaner_train_images"
echo "ok: with the image codecs, gleaner-train has prepare-images"
