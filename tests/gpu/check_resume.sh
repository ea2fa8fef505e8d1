#!/usr/bin/env bash
# Resume is exact: `gleaner-train run` of a tiny lora-sd job for 20 steps, and the same job resumed
# from its step-10 checkpoint in a fresh process, must write byte-identical LoRA files. Runs with
# GLEANER_DETERMINISTIC=1 (deterministic kernels only), on the device the trainer picks (CUDA when
# present, else CPU), every stateful feature on as in tests/unit/train's resume test.
#
#   check_resume.sh --bin BIN_DIR [--precision no|bf16|fp16] [--report FILE]
#
# Prints one line; --report appends {"label","ok"} as a JSON line. Exit 0 identical, 1 not (or a
# run failed), 64 usage.
set -euo pipefail
bin="" precision=no report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin | --precision | --report)
      [ $# -ge 2 ] || { echo "check_resume.sh: $1 needs a value" >&2; exit 64; }
      case "$1" in
        --bin) bin=$2 ;;
        --precision) precision=$2 ;;
        --report) report=$2 ;;
      esac
      shift 2
      ;;
    *) echo "check_resume.sh: unknown argument '$1'" >&2; exit 64 ;;
  esac
done
train=$bin/gleaner-train
[ -x "$train" ] || { echo "usage: check_resume.sh --bin BIN_DIR [--precision no|bf16|fp16] [--report FILE]" >&2; exit 64; }
case "$precision" in no | bf16 | fp16) ;; *) echo "check_resume.sh: --precision no|bf16|fp16" >&2; exit 64 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-resume-check-XXXXXX")
trap 'rm -rf "$work"' EXIT
export GLEANER_DETERMINISTIC=1
label="resume exact (mixed_precision $precision)"
result() { # result OK MESSAGE
  echo "$([ "$1" = true ] && echo ok || echo FAIL) $label: $2"
  [ -z "$report" ] || printf '{"label":"%s","ok":%s}\n' "$label" "$1" >>"$report"
  [ "$1" = true ]
}

mkdir "$work/model"
"$train" make-model --out "$work/model/weights.safetensors" --seed 1 >/dev/null
"$train" make-dataset --out "$work/data.safetensors" --n 8 --size 8 --tokens 4 --dim 32 \
  --seed 7 --prior >/dev/null
cat >"$work/spec.json" <<EOF
{"job_id": "resume-check", "kind": "lora-sd",
 "inputs": {"model": "$work/model/weights.safetensors", "dataset": "$work/data.safetensors",
            "config": "$work/model/config.json"},
 "params": {"steps": 20, "batch_size": 2, "rank": 4, "alpha": 8, "learning_rate": 1e-3,
            "checkpoint_every": 10, "gradient_accumulation": 2, "lr_scheduler": "cosine",
            "warmup_steps": 3, "max_grad_norm": 0.5, "prior_loss_weight": 0.5, "snr_gamma": 5.0,
            "noise_offset": 0.05, "prediction_type": "v_prediction",
            "gradient_checkpointing": true, "mixed_precision": "$precision", "seed": 42}}
EOF
run() { # run WORK_DIR [--resume DIR]
  local dir=$1
  shift
  if ! "$train" run --spec "$work/spec.json" --work-dir "$dir" "$@" >"$dir.out" 2>"$dir.err"; then
    result false "gleaner-train run exited non-zero: $(tail -n 1 "$dir.err")"
    exit 1
  fi
}
run "$work/a"
ckpt=$work/a/checkpoints/0000000010
[ -d "$ckpt" ] || { result false "no step-10 checkpoint in $work/a/checkpoints"; exit 1; }
run "$work/b" --resume "$ckpt"
for f in lora.safetensors lora_peft.safetensors; do
  if ! cmp -s "$work/a/output/$f" "$work/b/output/$f"; then
    result false "output/$f differs between 20 steps and 10 + resume + 10"
    exit 1
  fi
done
result true "20 steps and 10 + resume + 10 wrote byte-identical LoRA files"
