#!/usr/bin/env bash
# The UNet reference fixtures (every FIXTURES/*unet-ref-*/, e.g. unet-ref-a, sdxl-unet-ref-a)
# through `gleaner-train forward` on a device and dtype, against the diffusers outputs:
#
#   check_unet_fixtures.sh --bin BIN_DIR --fixtures DIR --device cpu|cuda --dtype fp32|bf16
#                          [--report FILE]
#
# Per fixture: the forward output, the LoRA output from the PEFT and the kohya file (those that
# exist) and the LoRA gradients of sum(output * R). Bounds:
#   fp32  outputs rel-L2 <= 1e-5 and max abs <= 1e-4; gradients per tensor rel-L2 <= 1e-4
#         (sdxl-unet-ref-*: rel-L2 <= 1e-3 and max abs <= 1e-3, as its README suggests) - the
#         CPU bounds of tests/unit/train, on every device;
#   bf16  base weights bf16, LoRA fp32, autocast (gleaner-train forward --dtype bf16): outputs
#         rel-L2 <= 3e-2 and max abs <= 0.08; gradients per tensor rel-L2 <= 0.1 (SDXL: 0.25)
#         (docs/training.md, "GPU").
# A fixture whose UNet config this trainer rejects as unsupported is reported as skipped. Lines
# from compare_tensors go to stdout and, with --report, JSON lines to FILE. Exit 0 all within
# bounds, 1 a check failed, 77 no fixture found (outside CI; in CI that fails), 64 usage.
set -euo pipefail
bin="" fixtures="" device="" dtype="" report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin | --fixtures | --device | --dtype | --report)
      [ $# -ge 2 ] || { echo "check_unet_fixtures.sh: $1 needs a value" >&2; exit 64; }
      case "$1" in
        --bin) bin=$2 ;;
        --fixtures) fixtures=$2 ;;
        --device) device=$2 ;;
        --dtype) dtype=$2 ;;
        --report) report=$2 ;;
      esac
      shift 2
      ;;
    *) echo "check_unet_fixtures.sh: unknown argument '$1'" >&2; exit 64 ;;
  esac
done
if [ -z "$bin" ] || [ -z "$fixtures" ] || [ -z "$device" ] || [ -z "$dtype" ]; then
  echo "usage: check_unet_fixtures.sh --bin BIN_DIR --fixtures DIR --device cpu|cuda --dtype fp32|bf16 [--report FILE]" >&2
  exit 64
fi
case "$dtype" in fp32 | bf16) ;; *) echo "check_unet_fixtures.sh: --dtype fp32|bf16" >&2; exit 64 ;; esac
train=$bin/gleaner-train
compare=$(dirname "$bin")/tests/compare_tensors # BUILD/bin -> BUILD/tests
for t in "$train" "$compare"; do
  [ -x "$t" ] || { echo "check_unet_fixtures.sh: no executable $t (build it first)" >&2; exit 64; }
done

dirs=()
for d in "$fixtures"/*unet-ref-*/; do
  [ -f "$d/config.json" ] && [ -f "$d/weights.safetensors" ] && dirs+=("${d%/}")
done
if [ ${#dirs[@]} = 0 ]; then
  case "${CI:-}" in
    "" | 0 | false) echo "SKIP: no UNet fixtures (*unet-ref-*) under $fixtures"; exit 77 ;;
    *) echo "FAIL: missing in CI (every input must be present): UNet fixtures under $fixtures" >&2; exit 1 ;;
  esac
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-unet-fixtures-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
json_text() { echo "$1" | tr -d '"\\' | tr '\n' ' '; }
note() { # note LABEL REASON: a skipped check, on stdout and in the report
  echo "skip $1: $2"
  [ -z "$report" ] || printf '{"label":"%s","skipped":"%s"}\n' "$1" "$(json_text "$2")" >>"$report"
}
fail() { # fail LABEL: gleaner-train forward failed (its last stderr line is the reason)
  local why
  why="gleaner-train forward: $(tail -n 1 "$work/err")"
  echo "FAIL $1: $why"
  [ -z "$report" ] || printf '{"label":"%s","ok":false,"error":"%s"}\n' "$1" "$(json_text "$why")" >>"$report"
  failed=1
}
compare_to() { # compare_to LABEL GOT REF BOUNDS...
  local label=$1 got=$2 ref=$3
  shift 3
  local args=("$got" "$ref" "$@" --label "$label")
  [ -z "$report" ] || args+=(--report "$report")
  "$compare" "${args[@]}" || failed=1
}

for dir in "${dirs[@]}"; do
  name=$(basename "$dir")
  out_rel=1e-5 out_abs=1e-4 grad_rel=1e-4 grad_abs=()
  case "$name" in sdxl-unet-ref-*) grad_rel=1e-3 grad_abs=(--max-abs 1e-3) ;; esac
  if [ "$dtype" = bf16 ]; then out_rel=3e-2 out_abs=0.08 grad_rel=0.1 grad_abs=(); fi
  # SDXL's deeper blocks (transformer layers 1/2/10 in the real model, 2 in the fixture) carry
  # bf16 rounding further into the gradients of the LoRA nearest the input.
  case "$dtype/$name" in bf16/sdxl-unet-ref-*) grad_rel=0.25 ;; esac
  base=(forward --config "$dir/config.json" --weights "$dir/weights.safetensors"
    --inputs "$dir/inputs.safetensors" --device "$device" --dtype "$dtype")
  tag="$name $device $dtype"
  if ! "$train" "${base[@]}" --out "$work/out.safetensors" 2>"$work/err"; then
    if grep -q "is not supported" "$work/err"; then
      note "$tag" "this trainer does not build this UNet config: $(tail -n 1 "$work/err")"
      continue
    fi
    fail "$tag forward"
    continue
  fi
  compare_to "$tag forward" "$work/out.safetensors" "$dir/output.safetensors" \
    --rel-l2 "$out_rel" --max-abs "$out_abs"
  [ -f "$dir/lora/output.safetensors" ] || continue
  for lora in lora.safetensors lora_kohya.safetensors; do
    [ -f "$dir/lora/$lora" ] || continue
    if "$train" "${base[@]}" --lora "$dir/lora/$lora" --out "$work/lora.safetensors" 2>"$work/err"; then
      compare_to "$tag $lora forward" "$work/lora.safetensors" "$dir/lora/output.safetensors" \
        --rel-l2 "$out_rel" --max-abs "$out_abs"
    else
      fail "$tag $lora forward"
    fi
  done
  if [ -f "$dir/lora/grad.safetensors" ]; then
    if "$train" "${base[@]}" --lora "$dir/lora/lora.safetensors" \
      --grad-weights "$dir/inputs.safetensors" --out "$work/grad.safetensors" 2>"$work/err"; then
      compare_to "$tag LoRA gradients" "$work/grad.safetensors" "$dir/lora/grad.safetensors" \
        --rel-l2 "$grad_rel" "${grad_abs[@]}"
    else
      fail "$tag LoRA gradients"
    fi
  fi
done
exit $failed
