#!/usr/bin/env bash
# The libtorch 2.x leg of CI: the trainer-only configuration (-DGLEANER_TRAINER_ONLY=ON) built and
# tested against Debian 13's libtorch 2.6 (CPU) inside a minimal Debian 13 root (debootstrap),
# from a bind mount of this repository; the reference fixtures beside it are mounted read-only.
# The tests: train_tests (every case that needs no coordinator), images_tests, the fixture checks
# of tests/gpu on CPU (fp32, bf16), byte-identical resume, fp8 frozen weights; the fixture tests
# run a second time with the explicit attention kernel (GLEANER_ATTENTION=explicit).
#
#   bash infra/torch2.sh            make or reuse the root, build into build-torch2/, run the tests
#   bash infra/torch2.sh --shell    the same root with the mounts, an interactive shell
#
# Environment: GLEANER_TORCH2_ROOT (the root; default /var/cache/gleaner/debian13-torch2, kept
# between runs with a ccache inside), GLEANER_TORCH2_BUILD (default build-torch2/ in the
# repository), GLEANER_BUILD_JOBS (2), GLEANER_TEST_JOBS (2), GLEANER_TORCH2_TESTS (a ctest -R
# regex; default all of them).
# Needs root privileges and the network (the Debian mirror of the host's apt sources). Without
# them: exit 77 (SKIP) outside CI, exit 1 in CI (CI set and not 0/false). Exit 1 on a build or
# test failure. Prints how long each stage took.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/infra/debian13_root.sh"
dir=${GLEANER_TORCH2_ROOT:-/var/cache/gleaner/debian13-torch2}
build=${GLEANER_TORCH2_BUILD:-$repo/build-torch2}
jobs=${GLEANER_BUILD_JOBS:-2}
test_jobs=${GLEANER_TEST_JOBS:-2}
fixtures=$(cd "$repo" && readlink -m ../shared/fixtures)
case "$build" in "$repo"/*) ;; *) echo "torch2: GLEANER_TORCH2_BUILD must be inside $repo" >&2; exit 64 ;; esac
rel_build=${build#"$repo"/}

skip_or_fail() {
  case "${CI:-}" in
    "" | 0 | false) echo "SKIP: torch2: $*"; exit 77 ;;
    *) echo "FAIL: torch2 (CI): $*" >&2; exit 1 ;;
  esac
}
t0=$(date +%s)
stage_start=$t0
tick=$(getconf CLK_TCK)
# CPU seconds of the finished child processes (the build's compilers included), from /proc.
cpu_s() { awk -v t="$tick" '{ printf "%d", ($16 + $17) / t }' "/proc/$$/stat"; }
stage_cpu=$(cpu_s)
stage() { # prints the wall and CPU time of the stage that ended
  local now cpu
  now=$(date +%s)
  cpu=$(cpu_s)
  printf 'torch2: %-28s %5d s (CPU %d s)\n' "$1" "$((now - stage_start))" "$((cpu - stage_cpu))"
  stage_start=$now
  stage_cpu=$cpu
}

[ "$(id -u)" = 0 ] || skip_or_fail "needs root privileges (debootstrap, chroot, mount)"
packages=(
  build-essential cmake ninja-build pkg-config ccache ca-certificates
  libtorch-dev nlohmann-json3-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev zlib1g-dev
  jq bsdextrautils
)
trap 'root_unmount_all "$dir" || true' EXIT
root_prepare "$dir" "${packages[@]}" || skip_or_fail "could not make the Debian 13 root in $dir"
# Catch2: the tests use Catch2 2's single header; Debian 13 ships Catch2 3 (another API), so the
# root gets Debian 12's package (header-only, no dependencies), fetched by the host's apt.
if [ ! -f "$dir/usr/include/catch2/catch.hpp" ]; then
  deb_dir=$(mktemp -d)
  if ! (cd "$deb_dir" && apt-get download -qq catch2 >/dev/null 2>&1) ||
     ! ls "$deb_dir"/catch2_2.*.deb >/dev/null 2>&1; then
    rm -rf "$deb_dir"
    skip_or_fail "could not download Catch2 2 (Debian 12's catch2) with the host's apt"
  fi
  cp "$deb_dir"/catch2_2.*.deb "$dir/tmp/catch2.deb"
  rm -rf "$deb_dir"
  root_run "$dir" dpkg -i /tmp/catch2.deb >/dev/null
  root_run "$dir" apt-mark hold catch2 >/dev/null
  rm -f "$dir/tmp/catch2.deb"
fi
stage "root ready"

mount -t proc proc "$dir/proc"
root_mount "$dir" /dev /dev
root_mount "$dir" "$repo" /src
if [ -d "$fixtures" ]; then root_mount "$dir" "$fixtures" /fixtures ro; fi
if [ "${1:-}" = --shell ]; then
  root_run "$dir" bash -c "cd /src && TERM=${TERM:-dumb} exec bash -i"
  exit
fi

# Inside the root: configure once, build only what the tests need, run them.
cat >"$dir/tmp/torch2-build.sh" <<EOF
set -euo pipefail
# ccache with precompiled headers needs these sloppiness settings.
export CCACHE_DIR=/var/cache/ccache CCACHE_MAXSIZE=5G CCACHE_SLOPPINESS=pch_defines,time_macros
cmake -S /src -B /src/$rel_build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLEANER_TRAINER_ONLY=ON -DGLEANER_FIXTURES_DIR=/fixtures -DGLEANER_TORCH_PCH=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build /src/$rel_build -j $jobs -- -k 0
EOF
root_run "$dir" bash /tmp/torch2-build.sh || { echo "FAIL: torch2: the build failed" >&2; exit 1; }
stage "build (libtorch 2.x)"

cat >"$dir/tmp/torch2-test.sh" <<EOF
set -euo pipefail
cd /src/$rel_build
echo "torch2: libtorch-dev \$(dpkg-query -W -f='\${Version}' libtorch-dev 2>/dev/null || echo '?')"
ctest --output-on-failure -j $test_jobs --timeout 600 ${GLEANER_TORCH2_TESTS:+-R "$GLEANER_TORCH2_TESTS"}
EOF
root_run "$dir" bash /tmp/torch2-test.sh || { echo "FAIL: torch2: tests failed" >&2; exit 1; }
stage "tests"
printf 'torch2: %-28s %5d s\n' "total" "$(($(date +%s) - t0))"
