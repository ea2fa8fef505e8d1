#!/usr/bin/env bash
# The main job, on one machine: a coordinator on SQLite, two local agents, a handful of
# synthetic training jobs submitted over HTTP, one agent interrupted (SIGTERM) and restarted,
# the other killed (kill -9) and restarted, every job completed and its result verified against
# an uninterrupted run, then real lora-sd jobs (libtorch, CPU; SD-style and SDXL-shaped) trained
# across an interruption and checked byte for byte, a job made only of photos and captions on a
# tiny diffusers model, and the per-step cost report printed at the end.
#   bash infra/demo.sh              install, build (the four programs it runs, no tests), run
#   bash infra/demo.sh --no-build   run with the binaries already in build/bin
# Environment: GLEANER_DEMO_JOBS (6), GLEANER_DEMO_STEPS (150), GLEANER_DEMO_KEEP=1 keeps the
# working directory. At the end (or on a failure) it prints how long each stage took.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Stage timings: lap NAME closes the stage that ran since the previous lap.
lap_t=$(date +%s)
laps=()
lap() {
  local now
  now=$(date +%s)
  laps+=("$(printf '  %-44s %5d s' "$1" "$((now - lap_t))")")
  lap_t=$now
}
if [ "${1:-}" != "--no-build" ]; then
  bash "$root/infra/deps.sh"
  lap "install (infra/deps.sh)"
  # The programs the demo runs, nothing else: no test binaries. build/ keeps the same
  # configuration as infra/build.sh, so a later full build (infra/test.sh) reuses it.
  GLEANER_BUILD_TARGETS="gleaner-coordinator gleaner-agent gleaner-train gleaner" \
    bash "$root/infra/build.sh"
  lap "build (4 programs, no tests)"
fi
bin="$root/build/bin"
jobs_n=${GLEANER_DEMO_JOBS:-6}
steps=${GLEANER_DEMO_STEPS:-150}
step_ms=20
every=25
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-demo-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${GLEANER_DEMO_KEEP:-0}" = 1 ]; then echo "demo: kept $work"; else rm -rf "$work"; fi
  if [ ${#laps[@]} -gt 0 ]; then
    printf '\033[1mdemo:\033[0m time by stage\n'
    printf '%s\n' "${laps[@]}"
  fi
}
trap cleanup EXIT
say() { printf '\033[1mdemo:\033[0m %s\n' "$*"; }

# 1. Coordinator on an embedded SQLite file, on a free port.
export GLEANER_OPERATOR_TOKEN="op_demo_$(openssl rand -hex 16)"
"$bin/gleaner-coordinator" serve --db "$work/gleaner.db" --data-dir "$work/data" \
  --listen 127.0.0.1:0 --port-file "$work/port" --heartbeat-interval 0.5 --stall-after 2.5 \
  --maintenance-period 0.5 --retry-after 1 --node-rate-limit 20:200 2>"$work/coordinator.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { say "coordinator did not start"; cat "$work/coordinator.log"; exit 1; }
url="http://127.0.0.1:$(cat "$work/port")"
say "coordinator on $url (SQLite: $work/gleaner.db)"

api() {  # api TOKEN METHOD PATH [JSON]
  local token=$1 method=$2 path=$3 body=${4:-}
  if [ -n "$body" ]; then
    curl -sS -f -X "$method" -H "Authorization: Bearer $token" \
      -H 'Content-Type: application/json' -d "$body" "$url$path"
  else
    curl -sS -f -X "$method" -H "Authorization: Bearer $token" "$url$path"
  fi
}
op=$GLEANER_OPERATOR_TOKEN
dev=$(api "$op" POST /v1/keys '{"role":"developer","name":"demo-developer"}' | jq -r .token)
enroll=$(api "$op" POST /v1/keys '{"role":"enroll","name":"demo-enroll"}' | jq -r .token)
api "$op" PUT /v1/prices '{"gpu":"cpu","usd_per_hour":0.12}' >/dev/null
say "keys created; price of a 'cpu' node: \$0.12/hour"

# 2. Jobs, submitted over HTTP like a developer would.
ids=()
for i in $(seq 1 "$jobs_n"); do
  body=$(jq -nc --argjson seed "$((4200 + i))" --argjson steps "$steps" \
    --argjson ms "$step_ms" --argjson every "$every" \
    '{kind:"synthetic",params:{steps:$steps,step_ms:$ms,checkpoint_every:$every,seed:$seed}}')
  ids+=("$(api "$dev" POST /v1/jobs "$body" | jq -r .id)")
done
say "submitted $jobs_n synthetic jobs ($steps steps of ${step_ms} ms, checkpoint every $every)"
lap "coordinator start, keys, submission"

# 3. Two agents, each with its own state dir and machine id.
start_agent() {  # name; sets agent_pid
  GLEANER_MACHINE_ID="demo-$1" "$bin/gleaner-agent" --coordinator "$url" \
    --enroll-token "$enroll" --state-dir "$work/agent-$1" --max-poll-interval 0.5 \
    >>"$work/agent-$1.log" 2>&1 &
  agent_pid=$!
  pids+=("$agent_pid")
}
start_agent a; agent_a=$agent_pid
start_agent b; agent_b=$agent_pid
say "agents a (pid $agent_a) and b (pid $agent_b) started; logs in $work/agent-*.log"

node_of() { jq -r '.node_id // empty' "$work/agent-$1/identity.json" 2>/dev/null || true; }
jobs_json() { api "$dev" GET "/v1/jobs?limit=100"; }
show() {  # one line: counts, and every running job with its step and agent
  local j na nb
  j=$(jobs_json); na=$(node_of a); nb=$(node_of b)
  jq -r --arg na "$na" --arg nb "$nb" '
    [.jobs[] | select(.state == "completed")] | length | "completed \(.)" ' <<<"$j" | tr '\n' ' '
  jq -r --arg na "$na" --arg nb "$nb" '
    [.jobs[] | select(.state == "running") | "\(.id[0:10]) \(.step)/\(.steps) on " +
      (if .node_id == $na then "a" elif .node_id == $nb then "b" else "?" end)] |
    "| running: " + (if length == 0 then "-" else join(", ") end)' <<<"$j" | tr '\n' ' '
  jq -r '[.jobs[] | select(.state == "pending")] | length | "| pending \(.)"' <<<"$j"
}
all_done() {
  [ "$(jobs_json | jq '[.jobs[] | select(.state != "completed" and .state != "failed")] | length')" = 0 ]
}
# Running job of agent NAME with step within [lo, hi], or nothing.
mid_job_of() {
  jobs_json | jq -r --arg n "$(node_of "$1")" --argjson lo "$2" --argjson hi "$3" \
    '[.jobs[] | select(.state == "running" and .node_id == $n and .step >= $lo and .step <= $hi)
      | .id][0] // empty'
}

# 4. Let them work; interrupt agent a in the middle of a job (a platform interruption: SIGTERM),
#    restart it a little later.
target=""
for _ in $(seq 1 120); do
  sleep 0.5
  show
  target=$(mid_job_of a $((steps / 4)) $((steps * 3 / 4)))
  [ -n "$target" ] && break
done
[ -n "$target" ] || { say "agent a never got a job"; exit 1; }
say "SIGTERM to agent a while it trains $target: it checkpoints, uploads, commits, releases"
kill -TERM "$agent_a"
if wait "$agent_a"; then say "agent a exited cleanly (status 0)"; else say "agent a exited with $?"; fi
grep -h "released at step" "$work/agent-a.log" | sed 's/^/    /' || true
for _ in 1 2 3 4; do sleep 0.5; show; done
start_agent a; agent_a=$agent_pid
say "agent a restarted (pid $agent_a)"

# 5. Then a harder stop: agent b is killed outright (kill -9, a power cut) mid-job. Its trainer
#    dies with it; the coordinator's stall rule hands the job to another node, which resumes from
#    the last committed checkpoint; the restarted agent finishes any recorded uploads (if its
#    lease is still held) and asks for work as usual.
target=""
for _ in $(seq 1 120); do
  sleep 0.5
  show
  target=$(mid_job_of b $((steps / 4)) $((steps * 3 / 4)))
  [ -n "$target" ] && break
done
if [ -n "$target" ]; then
  say "kill -9 agent b while it trains $target"
  kill -KILL "$agent_b"
  wait "$agent_b" 2>/dev/null || true
  sleep 1
  start_agent b; agent_b=$agent_pid
  say "agent b restarted (pid $agent_b)"
  for _ in 1 2; do sleep 0.5; show; done
  grep -hE "found from a previous run|pending checkpoint|released after restart" \
    "$work/agent-b.log" | sed 's/^/    /' || true
fi
for _ in $(seq 1 360); do
  all_done && break
  sleep 1
  show
done
all_done || { say "jobs did not finish in time"; exit 1; }

# 6. Verify every result against an uninterrupted local run of the same job.
ok=0
for id in "${ids[@]}"; do
  job=$(api "$dev" GET "/v1/jobs/$id")
  state=$(jq -r .state <<<"$job")
  out_url=$(api "$dev" GET "/v1/jobs/$id/result" | jq -r '.outputs[] | select(.name=="chain.txt") | .url')
  got=$(curl -sS -f "$out_url")
  ref="$work/ref-$id"
  mkdir -p "$ref"
  jq -c '{job_id:.id,kind:.kind,params:.params}' <<<"$job" >"$ref/SPEC.json"
  "$bin/gleaner-train" run --spec "$ref/SPEC.json" --work-dir "$ref" >/dev/null 2>&1
  want=$(cat "$ref/output/chain.txt")
  leases=$(api "$dev" GET "/v1/jobs/$id/events" | jq -r '[.segments[] | "\(.step_start)->\(.step_end) \(.end_reason)"] | join(", ")')
  if [ "$state" = completed ] && [ "$got" = "$want" ]; then
    ok=$((ok + 1)); verdict=OK
  else
    verdict=MISMATCH
  fi
  printf '  %s %-9s chain %s…  %-8s leases: %s\n' "$id" "$state" "${got:0:16}" "$verdict" "$leases"
done
say "$ok of ${#ids[@]} jobs completed with the exact chain of an uninterrupted run"
lap "synthetic jobs, SIGTERM and kill -9, checks"

# 7. Real training: lora-sd jobs (tiny UNets + LoRA in libtorch, on CPU): an SDXL-shaped one
#    (text_time conditioning: pooled text embeddings and time_ids in its dataset) and two
#    SD-style ones, one job kind for both. Models and datasets are made locally, uploaded with
#    the gleaner CLI, trained across a SIGTERM of the agent holding the SDXL job, downloaded, and
#    compared byte for byte with an uninterrupted local run.
lora_ok=0; lora_n=0
lw="$work/lora"; mkdir -p "$lw/sd" "$lw/sdxl"
if "$bin/gleaner-train" make-model --out "$lw/sd/weights.safetensors" --seed 1 >"$lw/make.log" 2>&1 &&
   "$bin/gleaner-train" make-dataset --out "$lw/sd/data.safetensors" --n 8 --size 8 >>"$lw/make.log" 2>&1 &&
   "$bin/gleaner-train" make-model --sdxl --out "$lw/sdxl/weights.safetensors" --seed 1 >>"$lw/make.log" 2>&1 &&
   "$bin/gleaner-train" make-dataset --sdxl --out "$lw/sdxl/data.safetensors" --n 8 --size 8 >>"$lw/make.log" 2>&1; then
  export GLEANER_URL=$url GLEANER_TOKEN=$dev
  declare -A family steps_of
  submit_lora() {  # family (sd|sdxl), seed, steps; appends the job id to lora_ids
    local f=$1 seed=$2 n=$3 dir="$lw/$1" m_uri d_uri id
    m_uri=$("$bin/gleaner" upload "$dir/weights.safetensors" 2>/dev/null)
    d_uri=$("$bin/gleaner" upload "$dir/data.safetensors" 2>/dev/null)
    jq -n --arg mu "$m_uri" --arg ms "$(sha256sum "$dir/weights.safetensors" | cut -d' ' -f1)" \
      --arg du "$d_uri" --arg ds "$(sha256sum "$dir/data.safetensors" | cut -d' ' -f1)" \
      --argjson seed "$seed" --argjson steps "$n" --slurpfile cfg "$dir/config.json" \
      '{kind:"lora-sd",
        params:{steps:$steps,batch_size:2,checkpoint_every:20,learning_rate:0.003,rank:4,seed:$seed},
        model:{uri:$mu,sha256:$ms,config:$cfg[0]}, dataset:{uri:$du,sha256:$ds}}' >"$lw/job-$f-$seed.json"
    id=$("$bin/gleaner" submit "$lw/job-$f-$seed.json")
    lora_ids+=("$id"); family[$id]=$f; steps_of[$id]=$n
  }
  wait_final() {  # job id: until it is completed, failed or canceled (at most 5 minutes)
    local st
    for _ in $(seq 1 600); do
      st=$(api "$dev" GET "/v1/jobs/$1" | jq -r .state)
      case "$st" in completed|failed|canceled) return ;; esac
      sleep 0.5
    done
  }
  lora_ids=()
  submit_lora sdxl 7 80
  submit_lora sd 5 120
  submit_lora sd 6 120
  lora_n=${#lora_ids[@]}
  say "lora-sd: uploaded tiny SD and SDXL-shaped UNets with latent datasets; submitted SDXL-shaped ${lora_ids[0]} (80 steps) and SD ${lora_ids[*]:1} (120 steps), batch 2, rank 4, checkpoint every 20"
  # Interrupt whichever agent holds the SDXL-shaped job once it is past step 20.
  holder=""
  for _ in $(seq 1 600); do
    sleep 0.2
    j=$(api "$dev" GET "/v1/jobs/${lora_ids[0]}")
    if [ "$(jq -r .state <<<"$j")" = running ] && [ "$(jq -r .step <<<"$j")" -ge 20 ]; then
      n=$(jq -r .node_id <<<"$j")
      if [ "$n" = "$(node_of a)" ]; then holder=a; elif [ "$n" = "$(node_of b)" ]; then holder=b; fi
      say "lora-sd: ${lora_ids[0]} at step $(jq -r .step <<<"$j") on agent $holder"
      break
    fi
  done
  if [ -n "$holder" ]; then
    if [ "$holder" = a ]; then victim=$agent_a; else victim=$agent_b; fi
    say "lora-sd: SIGTERM to agent $holder: the trainer checkpoints at the next step, the agent uploads, commits and releases"
    kill -TERM "$victim"; wait "$victim" 2>/dev/null || true
    start_agent "$holder"
    if [ "$holder" = a ]; then agent_a=$agent_pid; else agent_b=$agent_pid; fi
  fi
  for id in "${lora_ids[@]}"; do
    wait_final "$id"
    "$bin/gleaner" download "$id" -o "$lw/out-$id" >/dev/null 2>&1 || true
    job=$(api "$dev" GET "/v1/jobs/$id")
    ref="$lw/ref-$id"; mkdir -p "$ref"; dir="$lw/${family[$id]}"
    jq -c --arg m "$dir/weights.safetensors" --arg d "$dir/data.safetensors" --slurpfile cfg "$dir/config.json" \
      '{job_id:.id,kind:.kind,steps:.steps,params:.params,inputs:{model:$m,dataset:$d},model:{config:$cfg[0]}}' \
      <<<"$job" >"$ref/SPEC.json"
    "$bin/gleaner-train" run --spec "$ref/SPEC.json" --work-dir "$ref" >/dev/null 2>&1 || true
    leases=$(api "$dev" GET "/v1/jobs/$id/events" | jq -r '[.segments[] | "\(.step_start)->\(.step_end) \(.end_reason)"] | join(", ")')
    verdict=MISMATCH
    if [ "$(jq -r .state <<<"$job")" = completed ] &&
       cmp -s "$lw/out-$id/lora.safetensors" "$ref/output/lora.safetensors" &&
       cmp -s "$lw/out-$id/lora_peft.safetensors" "$ref/output/lora_peft.safetensors"; then
      verdict=OK; lora_ok=$((lora_ok + 1))
    fi
    alphas=$(head -c 200000 "$lw/out-$id/lora.safetensors" 2>/dev/null | grep -a -o '\.alpha"' | wc -l)
    names=diffusers
    # grep without -q reads to the end: with pipefail, an early exit would fail head (SIGPIPE).
    if head -c 200000 "$lw/out-$id/lora.safetensors" 2>/dev/null | grep -a 'lora_unet_input_blocks_' >/dev/null; then
      names="sd-scripts SDXL (input_blocks/middle_block/output_blocks)"
    fi
    printf '  %s %-5s %-9s %-8s kohya .alpha tensors: %s, module names: %s  leases: %s\n' "$id" \
      "${family[$id]}" "$(jq -r .state <<<"$job")" "$verdict" "$alphas" "$names" "$leases"
  done
  say "lora-sd: $lora_ok of $lora_n LoRA results byte-identical to an uninterrupted run (files in $lw/out-*)"
  lap "lora-sd jobs (SD, SDXL-shaped), checks"

  # 7b. A job made only of photos and captions, as a person submits one: a tiny diffusers model
  #     folder (generated: model_index.json, unet/, vae/, text_encoder/, tokenizer/, scheduler/)
  #     registered once with `gleaner models upload`, three small PNGs (one with a .txt caption)
  #     submitted with `gleaner jobs submit --images ... --train-text-encoder`; the node encodes
  #     them (VAE, CLIP) and trains UNet and text-encoder LoRA; the result is checked byte for
  #     byte against an uninterrupted local run on the same archive.
  pw="$lw/photos-job"; mkdir -p "$pw/photos"
  base64 -d >"$pw/photos/dog1.png" <<<'iVBORw0KGgoAAAANSUhEUgAAAAwAAAAKCAIAAAAPTiitAAAA5ElEQVR42g3KUQ2GERiA0T/OF8HFc20SmAQmgUlgEpgE7yQwCUwCE+d3rs/v0yiN0ThN0CRN0TRN10zN1lzN77Moi7E4S7AkS7E0S7dMy7Zc+5JHeYzHeYIneYqnebpnerbn+pciKmIiLhIiKVIiLdIjM7IjN76UURmTcZmQSZmSaZmemZmdufmliqqYiquESqqUSqv0yqzsyq0vCUowghOCkIQiNKELU9jClZcGamAGbhAGaVAGbdAHc7AHd7y0UAuzcIuwSIuyaIu+mIu9uOulgzqYgzuEQzqUQzv0wzzswz38AfLtmrEQv3CiAAAAAElFTkSuQmCC'
  base64 -d >"$pw/photos/dog2.png" <<<'iVBORw0KGgoAAAANSUhEUgAAAAoAAAAOCAIAAACZwRr8AAABCklEQVR42g3JMaFGEQCA0RdABBFEEMHwBzCIYPxGAQwCGAQwCGAQwCCAQQAR7vCc9fz9Ii7iIyGSIiXSIiOyIify98u4jM+ETMqUTMuMzMqc/LriKr4SKqlSKq0yKqty6uuO6/hO6KRO6bTO6KzO6a8nbuInYZImZdImY7ImZ77euI3fhE3alE3bjM3anP364i7+Ei7pUi7tMi7rcu7rD/fhP8JH+igf7WN8rI/zvRY4gRcEQRIUQRMMwRIc8VriJF4SJElSJE0yJEty5GuFU3hFUCRFUTTFUCzFUa81TuM1QZM0RdM0Q7M0R782OIM3BEMyFEMzDMMyHPPa4izeEizJUizNMizLciz/dSveMT+o60gAAAAASUVORK5CYII='
  base64 -d >"$pw/photos/dog3.png" <<<'iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAh0lEQVR42g3JMRUEIQxAwX1IiAQkICGqTkIkIAEBv0BC6lSpU1Gj4Jh2vl9gwQxWsAMPMjjB9yusmMUqduFFFqdeXOwyL+uyL37Jy7kvGtaYjdXYDW9k47QXgglTWMIWXEjhyIuOdWZndXbHO9k5/cXABnOwBnvggxyc8UIxZSpL2YorqRzlD7CYc4FEJeUTAAAAAElFTkSuQmCC'
  printf 'a photo of sks dog on grass\n' >"$pw/photos/dog1.txt"
  # photo_job NAME "MAKE-MODEL FLAGS" "SUBMIT FLAGS" PARAMS: one such job on a tiny model of its
  # own (pw/NAME), checked byte for byte against an uninterrupted local run.
  photo_job() {
    local name=$1 make=$2 flags=$3 params=$4 id job sha archive verdict te
    lora_n=$((lora_n + 1))
    # shellcheck disable=SC2086  # the flag lists split on purpose
    if "$bin/gleaner-train" make-model --diffusers "$pw/$name" $make --seed 1 >>"$lw/make.log" 2>&1 &&
       "$bin/gleaner" models upload "$pw/$name" -o "$pw/$name.model.json" >/dev/null 2>&1 &&
       id=$("$bin/gleaner" jobs submit --images "$pw/photos" --instance-prompt "a photo of sks dog" \
              --model "$pw/$name.model.json" $flags --params "$params" 2>/dev/null); then
      say "photos: registered the tiny $name model, submitted $id from $pw/photos ($flags)"
      wait_final "$id"
      "$bin/gleaner" download "$id" -o "$pw/out-$name" >/dev/null 2>&1 || true
      job=$(api "$dev" GET "/v1/jobs/$id")
      sha=$(jq -r .dataset.sha256 <<<"$job")
      archive=$(ls "$work"/agent-*/cache/"$sha" 2>/dev/null | head -n 1)
      jq -c --arg m "$pw/$name" --arg d "$archive" \
        '{job_id:.id,kind:.kind,steps:.steps,params:.params,inputs:{model:$m,dataset:$d},model:{format:"diffusers"}}' \
        <<<"$job" >"$pw/$name.SPEC.json"
      "$bin/gleaner-train" run --spec "$pw/$name.SPEC.json" --work-dir "$pw/ref-$name" >/dev/null 2>&1 || true
      verdict=MISMATCH
      if [ "$(jq -r .state <<<"$job")" = completed ] &&
         cmp -s "$pw/out-$name/lora.safetensors" "$pw/ref-$name/output/lora.safetensors" &&
         cmp -s "$pw/out-$name/lora_peft.safetensors" "$pw/ref-$name/output/lora_peft.safetensors"; then
        verdict=OK; lora_ok=$((lora_ok + 1))
      fi
      te=$(head -c 200000 "$pw/out-$name/lora.safetensors" 2>/dev/null |
           grep -a -o 'lora_\(te\|unet_double_blocks\)[a-z0-9_]*\.lora_down' | sort -u | wc -l)
      printf '  %s photos %-5s %-9s %-8s kohya modules (text encoder or FLUX blocks): %s\n' "$id" \
        "$name" "$(jq -r .state <<<"$job")" "$verdict" "$te"
    else
      say "photos: could not make, register or submit the $name photo job (see $lw/make.log)"
    fi
  }
  photo_job sd "" "--train-text-encoder --steps 30" '{"checkpoint_every":10,"learning_rate":0.003,"seed":3}'
  # 7c. The same photos on a tiny FLUX.1 model (transformer/, T5 text_encoder_2/, a 16-channel-style
  #     VAE with shift factor, the flow-match scheduler): flow-matching LoRA at 64 px, 16 T5 tokens.
  photo_job flux "--flux" "--steps 20" \
    '{"checkpoint_every":10,"learning_rate":0.003,"seed":3,"resolution":64,"max_sequence_length":16}'
  lap "photo jobs (SD and FLUX.1 diffusers folders), checks"
else
  say "lora-sd: skipped (gleaner-train was built without libtorch: -DGLEANER_WITH_TORCH=ON)"
fi

# 8. What every training step cost.
say "cost report by job (GET /v1/reports/cost?group_by=job&format=csv)"
api "$op" GET "/v1/reports/cost?group_by=job&format=csv" | column -s, -t 2>/dev/null ||
  api "$op" GET "/v1/reports/cost?group_by=job&format=csv"
say "by node"
api "$op" GET "/v1/reports/cost?group_by=node&format=csv" | column -s, -t 2>/dev/null ||
  api "$op" GET "/v1/reports/cost?group_by=node&format=csv"
lap "cost report"
[ "$ok" = "${#ids[@]}" ] && [ "$lora_ok" = "$lora_n" ]
