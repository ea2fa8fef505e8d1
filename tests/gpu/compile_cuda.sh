#!/usr/bin/env bash
# The CUDA trainer compiles and links: gleaner-train with -DGLEANER_WITH_CUDA=ON (trainer-only
# configuration) inside a Debian 13 root (infra/debian13_root.sh) against Debian's CUDA libtorch
# (libtorch-cuda-dev, contrib) and CUDA toolkit (nvidia-cuda-toolkit, non-free). Nothing runs: no
# GPU is needed. Too large for every CI run (several GB of packages): run it whenever CUDA code or
# the libtorch compatibility layer changes, and record the date, commit and result in
# docs/benchmarks.md ("CUDA compile").
#
#   bash tests/gpu/compile_cuda.sh
#
# Environment: GLEANER_CUDA_ROOT (default /var/cache/gleaner/debian13-cuda; kept between runs,
# with a ccache inside), GLEANER_CUDA_BUILD (default build-cuda/ in the repository),
# GLEANER_BUILD_JOBS (2). Needs root privileges and the network. Exit 0 built and linked, 1 it did
# not, 77 no root privileges or network outside CI (1 in CI). Prints how long each stage took.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/infra/debian13_root.sh"
dir=${GLEANER_CUDA_ROOT:-/var/cache/gleaner/debian13-cuda}
build=${GLEANER_CUDA_BUILD:-$repo/build-cuda}
jobs=${GLEANER_BUILD_JOBS:-2}
case "$build" in "$repo"/*) ;; *) echo "compile_cuda: GLEANER_CUDA_BUILD must be inside $repo" >&2; exit 64 ;; esac
rel_build=${build#"$repo"/}
skip_or_fail() {
  case "${CI:-}" in
    "" | 0 | false) echo "SKIP: compile_cuda: $*"; exit 77 ;;
    *) echo "FAIL: compile_cuda (CI): $*" >&2; exit 1 ;;
  esac
}
t0=$(date +%s)
[ "$(id -u)" = 0 ] || skip_or_fail "needs root privileges (debootstrap, chroot, mount)"
trap 'root_unmount_all "$dir" || true' EXIT
# nvidia-cudnn (a dependency of libtorch-cuda) downloads cuDNN from NVIDIA when its license is
# accepted; declined, nothing is downloaded and the package holds no library. Nothing here runs,
# so the link allows libtorch_cuda's references into cuDNN to stay unresolved (below).
export ROOT_DEBCONF="nvidia-cudnn nvidia-cudnn/question select I Decline"
root_prepare "$dir" build-essential cmake ninja-build pkg-config ccache ca-certificates \
  libtorch-cuda-dev nvidia-cuda-toolkit nlohmann-json3-dev \
  libjpeg62-turbo-dev libpng-dev libwebp-dev zlib1g-dev ||
  skip_or_fail "could not make the Debian 13 CUDA root in $dir"
t1=$(date +%s)
echo "compile_cuda: root ready in $((t1 - t0)) s"

mount -t proc proc "$dir/proc"
root_mount "$dir" /dev /dev
root_mount "$dir" "$repo" /src
cat >"$dir/tmp/compile-cuda.sh" <<EOF
set -euo pipefail
export CCACHE_DIR=/var/cache/ccache CCACHE_MAXSIZE=5G CCACHE_SLOPPINESS=pch_defines,time_macros
echo "compile_cuda: \$(dpkg-query -W -f='\${Package} \${Version}; ' libtorch-cuda-dev nvidia-cuda-toolkit | tr '\n' ' ')"
# No tests: compare_tensors and bench_train_step would link the same libraries; gleaner-train is
# what a GPU machine runs.
cmake -S /src -B /src/$rel_build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLEANER_TRAINER_ONLY=ON -DGLEANER_WITH_CUDA=ON -DGLEANER_TESTS=OFF -DGLEANER_TORCH_PCH=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
cmake --build /src/$rel_build -j $jobs --target gleaner-train -- -k 0
# Linked against the CUDA libraries, not the CPU ones alone.
ldd /src/$rel_build/bin/gleaner-train | grep -E 'libtorch_cuda|libc10_cuda'
EOF
if root_run "$dir" bash /tmp/compile-cuda.sh; then
  echo "compile_cuda: ok: gleaner-train built and linked with CUDA in $(($(date +%s) - t1)) s"
else
  echo "FAIL: compile_cuda: the CUDA build of gleaner-train failed" >&2
  exit 1
fi
