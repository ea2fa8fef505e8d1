#!/usr/bin/env bash
# tests/gpu/run.sh on machines that cannot run it: one line on stderr saying why, exit 2, nothing
# on stdout, no build directory. Cases: no interpreter, no torch (this machine's python3 when it
# has no torch, and a stub), a CPU-only torch, a CUDA torch that sees no GPU (stub interpreters
# answering run.sh's probe as those would). Also: bad flags exit 64.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run_sh=$here/run.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-run-sh-test-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

stub() { # stub NAME LINES...: an interpreter that prints LINES whatever it is asked
  local path=$work/$1
  shift
  printf '#!/bin/sh\ncat >/dev/null\nprintf "%%s\\n"' >"$path"
  printf ' "%s"' "$@" >>"$path"
  printf '\n' >>"$path"
  chmod +x "$path"
  echo "$path"
}

refuses() { # refuses WANT_SUBSTRING PYTHON
  local want=$1 rc=0
  GLEANER_PYTHON=$2 bash "$run_sh" --build-dir "$work/build" >"$work/out" 2>"$work/err" || rc=$?
  [ $rc = 2 ] || fail "GLEANER_PYTHON=$2: exit $rc, want 2 ($(cat "$work/err"))"
  [ ! -s "$work/out" ] || fail "GLEANER_PYTHON=$2: wrote to stdout: $(cat "$work/out")"
  [ "$(wc -l <"$work/err")" = 1 ] || fail "GLEANER_PYTHON=$2: $(wc -l <"$work/err") lines: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "GLEANER_PYTHON=$2: said '$(cat "$work/err")', want '$want'"
  [ ! -e "$work/build" ] || fail "GLEANER_PYTHON=$2: created the build directory"
  echo "ok: $(cat "$work/err")"
}

refuses "'$work/none' not found" "$work/none"
refuses "no PyTorch" "$(stub no-torch "error=ModuleNotFoundError: No module named 'torch'")"
if command -v python3 >/dev/null && ! python3 -c 'import torch' 2>/dev/null; then
  refuses "no PyTorch: 'python3' cannot import torch" python3
fi
refuses "PyTorch 2.4.1+cpu is a CPU-only build" \
  "$(stub cpu-torch torch=2.4.1+cpu cuda= gpus=0 gpu= cudnn= cmake_prefix=/x)"
refuses "no CUDA GPU: PyTorch 2.4.1+cu121 (CUDA 12.1) sees none" \
  "$(stub cuda-torch torch=2.4.1+cu121 cuda=12.1 gpus=0 gpu= cudnn= cmake_prefix=/x)"
refuses "could not run the PyTorch probe" "$(stub silent)"

rc=0
bash "$run_sh" --frobnicate >/dev/null 2>"$work/err" || rc=$?
[ $rc = 64 ] || fail "--frobnicate: exit $rc, want 64"
rc=0
bash "$run_sh" --steps 0 >/dev/null 2>"$work/err" || rc=$?
[ $rc = 64 ] || fail "--steps 0: exit $rc, want 64"
echo "ok: bad flags exit 64"
