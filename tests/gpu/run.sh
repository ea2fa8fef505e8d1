#!/usr/bin/env bash
# The GPU check. On a machine with an NVIDIA GPU and a CUDA PyTorch, builds gleaner-train against
# that PyTorch's libtorch (trainer-only configuration, Ninja, its own build directory) and then,
# in about 10 minutes on one H100:
#   1. the UNet reference fixtures on CUDA: fp32 with the fused attention and again with
#      GLEANER_ATTENTION=explicit (the CPU bounds), and bf16 autocast (docs/training.md, "GPU");
#   2. resume is exact on this GPU with deterministic algorithms on (fp32 and bf16);
#   3. bench_train_step --full: SD 1.5 at 512x512 (batch 1 and 4, checkpointing off and on, bf16)
#      and SDXL at 1024x1024 (batch 1, checkpointing on, bf16; skipped with a line when this
#      bench_train_step has no --sdxl).
# It writes OUT/gpu-report.json and OUT/gpu-report.md (s/step, images/s, peak allocated memory,
# every check's figures; GPU name, driver, CUDA, cuDNN and torch versions), logs beside them.
#
#   tests/gpu/run.sh [--out DIR] [--build-dir DIR] [--fixtures DIR] [--steps N] [--no-bench]
#
# Defaults: --build-dir build-gpu, --out BUILD_DIR/report, --fixtures ../shared/fixtures (beside
# the repository), --steps 10 (timed steps per benchmark row). Needs python3 importing a CUDA
# torch (GLEANER_PYTHON names another interpreter), a GPU it can see, cmake, ninja, a C++17
# compiler, the nlohmann-json headers and the CUDA toolkit the PyTorch CMake package asks for.
# Exit 0: every check within its bounds; 1: a check failed or could not run (the report says
# which); 2: this machine cannot run it (one line on stderr, nothing built); 64: usage.
# GLEANER_GPU_CHECK_REHEARSAL=1 runs the same steps without a GPU, to check this script: the
# libtorch CMake finds by itself, no CUDA, the checks on the CPU, the reduced benchmark.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prog=tests/gpu/run.sh
build="" out="" fixtures="$root/../shared/fixtures" steps=10 bench=1
usage() {
  echo "usage: $prog [--out DIR] [--build-dir DIR] [--fixtures DIR] [--steps N] [--no-bench]" >&2
  exit 64
}
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench)
      bench=0
      shift
      ;;
    --out | --build-dir | --fixtures | --steps)
      [ $# -ge 2 ] && [ -n "$2" ] || usage
      case "$1" in
        --out) out=$2 ;;
        --build-dir) build=$2 ;;
        --fixtures) fixtures=$2 ;;
        --steps) [[ "$2" =~ ^[1-9][0-9]{0,3}$ ]] || usage; steps=$2 ;;
      esac
      shift 2
      ;;
    *) usage ;;
  esac
done
build=${build:-$root/build-gpu}
out=${out:-$build/report}
cannot() { # one line, exit 2: this machine cannot run the GPU check
  echo "$prog: $*" >&2
  exit 2
}

# ---- can this machine run it? (nothing is built or written before this passes) ----
py=${GLEANER_PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || cannot "needs python3 with a CUDA PyTorch; '$py' not found"
device=cuda cuda_flag=ON torch_dir=() bench_args=(--full) sd15_res=512x512 sdxl_res=1024x1024
if [ "${GLEANER_GPU_CHECK_REHEARSAL:-0}" = 1 ]; then
  device=cpu cuda_flag=OFF bench_args=(--size 16) steps=1 sd15_res="128x128 (reduced UNet)"
  sdxl_res="1024x1024 (rehearsal: 128x128)"
  probe=$'torch=rehearsal\ncuda=none\ngpus=0'
else
  probe=$("$py" - 2>/dev/null <<'EOF' || true
import sys
try:
    import torch
except Exception as e:
    print("error=%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    sys.exit(0)
print("torch=" + torch.__version__)
print("cuda=" + (torch.version.cuda or ""))
ok = torch.cuda.is_available()
print("gpus=%d" % (torch.cuda.device_count() if ok else 0))
print("gpu=" + (torch.cuda.get_device_name(0) if ok else ""))
print("cudnn=" + (str(torch.backends.cudnn.version()) if ok else ""))
print("cmake_prefix=" + torch.utils.cmake_prefix_path)
EOF
  )
fi
field() { echo "$probe" | sed -n "s/^$1=//p" | head -n 1; }
[ -n "$probe" ] || cannot "'$py' could not run the PyTorch probe"
err=$(field error)
[ -z "$err" ] || cannot "no PyTorch: '$py' cannot import torch ($err)"
torch_version=$(field torch) cuda_version=$(field cuda)
[ -n "$cuda_version" ] ||
  cannot "PyTorch $torch_version is a CPU-only build (torch.version.cuda is None); a CUDA build is needed"
[ "$(field gpus)" != 0 ] || [ $device = cpu ] ||
  cannot "no CUDA GPU: PyTorch $torch_version (CUDA $cuda_version) sees none (torch.cuda.is_available() is False)"
[ $device = cpu ] || torch_dir=(-DTorch_DIR="$(field cmake_prefix)/Torch")
for tool in cmake ninja; do
  command -v $tool >/dev/null 2>&1 || cannot "needs $tool"
done

# ---- build ----
mkdir -p "$out"
rm -f "$out"/*.jsonl
log=$out/build.log
echo "== build: trainer-only, libtorch $torch_version (CUDA $cuda_version) into $build"
start=$SECONDS
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
json_dir=()
[ -z "${GLEANER_JSON_INCLUDE_DIR:-}" ] || json_dir=(-DGLEANER_JSON_INCLUDE_DIR="$GLEANER_JSON_INCLUDE_DIR")
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLEANER_TRAINER_ONLY=ON \
  -DGLEANER_WITH_CUDA=$cuda_flag "${torch_dir[@]}" \
  -DGLEANER_FIXTURES_DIR="$fixtures" "${launcher[@]}" "${json_dir[@]}" >"$log" 2>&1; then
  echo "$prog: configure failed: $(grep -m1 -A2 'CMake Error' "$log" | tr '\n' ' ' | cut -c1-300) (log: $log)" >&2
  exit 1
fi
if ! cmake --build "$build" --target gleaner-train bench_train_step compare_tensors >>"$log" 2>&1; then
  echo "$prog: build failed: $(grep -m1 'error' "$log" | cut -c1-300) (log: $log)" >&2
  exit 1
fi
build_s=$((SECONDS - start))
bin=$build/bin

# ---- checks ----
status=0
phase() { echo "== $*"; }
phase "UNet fixtures on $device (fp32 fused, fp32 explicit, bf16)"
fixture_run() { # fixture_run LABEL DTYPE [ENV...]
  local label=$1 dtype=$2 rc=0
  shift 2
  env "$@" bash "$root/tests/gpu/check_unet_fixtures.sh" --bin "$bin" --fixtures "$fixtures" \
    --device $device --dtype "$dtype" --report "$out/fixtures-$label.jsonl" || rc=$?
  if [ $rc = 77 ]; then
    printf '{"label":"no fixtures under %s","ok":false}\n' "$fixtures" >>"$out/fixtures-$label.jsonl"
    status=1
  elif [ $rc != 0 ]; then
    status=1
  fi
}
fixture_run fused-fp32 fp32 GLEANER_ATTENTION=auto
fixture_run explicit-fp32 fp32 GLEANER_ATTENTION=explicit
fixture_run fused-bf16 bf16 GLEANER_ATTENTION=auto

phase "resume exactness (deterministic algorithms)"
for p in no bf16; do
  bash "$root/tests/gpu/check_resume.sh" --bin "$bin" --precision $p --report "$out/resume.jsonl" ||
    status=1
done

: >"$out/bench-rows.txt"
if [ $bench = 1 ]; then
  bench_run() { # bench_run MODEL RESOLUTION ARGS...
    local model=$1 res=$2 rc=0
    shift 2
    phase "bench_train_step: $model $res"
    timeout 420 "$build/bench/bench_train_step" "${bench_args[@]}" --steps "$steps" --precision bf16 "$@" \
      >"$out/bench-$model.log" 2>&1 || rc=$?
    cat "$out/bench-$model.log"
    grep '^| [0-9]' "$out/bench-$model.log" | while IFS= read -r row; do
      printf '%s\t%s\t%s\n' "$model" "$res" "$row"
    done >>"$out/bench-rows.txt"
    if [ $rc != 0 ]; then
      printf '%s\t%s\tfailed: exit %s: %s\n' "$model" "$res" $rc "$(tail -n 1 "$out/bench-$model.log")" \
        >>"$out/bench-rows.txt"
      status=1
    fi
  }
  bench_run sd15 "$sd15_res" --batches 1,4 --checkpointing off,on
  if "$build/bench/bench_train_step" --help 2>&1 | grep -q -- --sdxl; then
    bench_run sdxl "$sdxl_res" --sdxl --size 128 --batches 1 --checkpointing on
  else
    echo "skip: SDXL rows: this bench_train_step has no --sdxl (SDXL support not built)"
    printf 'sdxl\t%s\tnot run: bench_train_step has no --sdxl\n' "$sdxl_res" >>"$out/bench-rows.txt"
  fi
fi

# ---- report ----
driver="" smi_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  IFS=, read -r smi_name driver < <(nvidia-smi --query-gpu=name,driver_version \
    --format=csv,noheader 2>/dev/null | head -n 1) || true
fi
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
GPU_NAME=${smi_name:-$(field gpu)} GPU_DRIVER=${driver# } TORCH_VERSION=$torch_version \
  CUDA_VERSION=$cuda_version CUDNN_VERSION=$(field cudnn) COMMIT=$commit BUILD_S=$build_s \
  OUT=$out STATUS=$status "$py" - <<'EOF'
import datetime, glob, json, os
out = os.environ["OUT"]
def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []
fixtures = []
for path in sorted(glob.glob(os.path.join(out, "fixtures-*.jsonl"))):
    run = os.path.basename(path)[len("fixtures-"):-len(".jsonl")]
    for r in lines(path):
        r["run"] = run
        fixtures.append(r)
resume = lines(os.path.join(out, "resume.jsonl"))
bench = []
with open(os.path.join(out, "bench-rows.txt")) as f:
    for line in f:
        parts = line.rstrip("\n").split("\t")
        if not parts[2].startswith("|"):
            bench.append({"model": parts[0], "resolution": parts[1], "note": parts[2]})
            continue
        cells = [c.strip() for c in parts[2].strip().strip("|").split("|")]
        peak = cells[5].split(" ")[0]
        bench.append({"model": parts[0], "resolution": parts[1], "batch": int(cells[0]),
                      "gradient_checkpointing": cells[1] == "on", "precision": cells[2],
                      "s_per_step": float(cells[3]), "images_per_s": float(cells[4]),
                      "peak_allocated_mib": float(peak)})
env = os.environ
report = {
    "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
    "commit": env["COMMIT"], "gpu": env["GPU_NAME"], "driver": env["GPU_DRIVER"],
    "cuda": env["CUDA_VERSION"], "cudnn": env["CUDNN_VERSION"], "torch": env["TORCH_VERSION"],
    "build_seconds": int(env["BUILD_S"]), "ok": env["STATUS"] == "0",
    "fixtures": fixtures, "resume": resume, "bench": bench,
}
with open(os.path.join(out, "gpu-report.json"), "w") as f:
    json.dump(report, f, indent=1)
md = ["GPU check, %s, commit %s: %s, driver %s, CUDA %s, cuDNN %s, torch %s." % (
    report["date"], report["commit"], report["gpu"], report["driver"], report["cuda"],
    report["cudnn"], report["torch"]), "",
    "| model | resolution | batch | grad ckpt | precision | s/step | images/s | peak allocated (MiB) |",
    "|---|---|---:|---|---|---:|---:|---:|"]
for b in bench:
    if "note" in b:
        md.append("| %s | %s | | | | %s | | |" % (b["model"], b["resolution"], b["note"]))
    else:
        md.append("| %s | %s | %d | %s | %s | %.3f | %.2f | %.0f |" % (
            b["model"], b["resolution"], b["batch"], "on" if b["gradient_checkpointing"] else "off",
            b["precision"], b["s_per_step"], b["images_per_s"], b["peak_allocated_mib"]))
md += ["", "| check | worst rel-L2 (bound) | worst max abs (bound) | result |", "|---|---|---|---|"]
for r in fixtures:
    if "skipped" in r:
        md.append("| %s (%s) | | | skipped: %s |" % (r["label"], r["run"], r["skipped"]))
    elif "rel_l2" in r:
        md.append("| %s (%s) | %.2g (%g) | %.2g (%s) | %s |" % (
            r["label"], r["run"], r["rel_l2"] if r["rel_l2"] is not None else float("inf"),
            r["bound_rel_l2"], r["max_abs"] if r["max_abs"] is not None else float("inf"),
            "%g" % r["bound_max_abs"] if r["bound_max_abs"] else "-", "ok" if r["ok"] else "FAIL"))
    else:
        md.append("| %s (%s) | | | %s |" % (r["label"], r["run"], "ok" if r.get("ok") else "FAIL"))
for r in resume:
    md.append("| %s | | | %s |" % (r["label"], "ok" if r["ok"] else "FAIL"))
with open(os.path.join(out, "gpu-report.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))
EOF
echo "== report: $out/gpu-report.json, $out/gpu-report.md ($([ $status = 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED'))"
exit $status
