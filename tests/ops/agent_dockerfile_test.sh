#!/usr/bin/env bash
# infra/agent.Dockerfile and infra/agent-cuda.Dockerfile: `docker build --check` where a Docker
# daemon answers; always a structural lint (every instruction known, pinned base images, a build
# and a runtime stage, the agent as an exec-form entry point, the state dir in the environment, a
# non-root user, SIGTERM as the stop signal - the CUDA image's run settings identical to the CPU
# image's) and, per build stage, a CMake configure of exactly the sources the stage copies that
# must define the targets the stage builds (the CUDA trainer stage against this machine's
# libtorch, without CUDA).  usage: agent_dockerfile_test.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-dockerfile-test-XXXXXX")
trap 'rm -rf "$work"' EXIT

have_docker=0
if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1 &&
  docker build --help 2>/dev/null | grep -q -- '--check'; then
  have_docker=1
else
  echo "skip: docker build --check (no Docker daemon or no --check here); linting instead"
fi

# Logical lines of a Dockerfile: comments and blank lines dropped, backslash continuations joined.
logical_lines() {
  sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$1" |
    awk '{ if (sub(/\\$/, "")) { buf = buf $0 " " } else { print buf $0; buf = "" } }'
}

# The settings a container runs with: identical in both images.
run_settings() { logical_lines "$1" | grep -E '^(USER|ENV GLEANER_STATE_DIR=|STOPSIGNAL|ENTRYPOINT) '; }

lint() { # lint DOCKERFILE MIN_STAGES
  local df=$1 lines bad last_entry
  if [ $have_docker = 1 ]; then
    (cd "$repo" && docker build --check -f "$df" .) || fail "docker build --check $df"
    echo "ok: docker build --check $(basename "$df")"
  fi
  lines=$(logical_lines "$df")
  known='^(FROM|RUN|CMD|LABEL|EXPOSE|ENV|ADD|COPY|ENTRYPOINT|VOLUME|USER|WORKDIR|ARG|ONBUILD|STOPSIGNAL|HEALTHCHECK|SHELL) '
  bad=$(echo "$lines" | grep -Ev "$known" || true)
  [ -z "$bad" ] || fail "$df: not a Dockerfile instruction: $bad"
  echo "$lines" | grep -Eq '^ARG DEBIAN_IMAGE=debian:12$' || fail "$df: Debian base is not debian:12"
  [ "$(echo "$lines" | grep -c '^FROM ')" -ge "$2" ] || fail "$df: expected $2 or more stages"
  last_entry=$(echo "$lines" | grep '^ENTRYPOINT ' | tail -n 1)
  [ "$last_entry" = 'ENTRYPOINT ["/usr/local/bin/gleaner-agent"]' ] ||
    fail "$df: entry point is not the agent in exec form: $last_entry"
  echo "$lines" | grep -q '^ENV GLEANER_STATE_DIR=' || fail "$df: no GLEANER_STATE_DIR"
  echo "$lines" | grep -q '^USER gleaner$' || fail "$df: the agent must not run as root"
  echo "$lines" | grep -q '^STOPSIGNAL SIGTERM$' || fail "$df: the stop signal is not SIGTERM"
  echo "ok: $(basename "$df"): instructions"
}

# Every stage that COPYs sources: configure exactly those (trainer-only when its cmake line says
# so) and require the targets its `cmake --build` names.
configure_stages() { # configure_stages DOCKERFILE
  local df=$1 stage=0
  logical_lines "$df" | awk '/^FROM /{n++} {print n "\t" $0}' >"$work/stages"
  for stage in $(cut -f1 "$work/stages" | sort -nu); do
    local body srcs targets flags=(-DGLEANER_TESTS=OFF -DGLEANER_WITH_TORCH=OFF) src
    body=$(awk -F'\t' -v s="$stage" '$1 == s { print $2 }' "$work/stages")
    srcs=$(echo "$body" | awk '$1 == "COPY" && $2 !~ /^--/ { print $2 }')
    [ -n "$srcs" ] || continue
    targets=$(echo "$body" | sed -n 's/.*cmake --build [^ ]* --target \([^&]*\).*/\1/p')
    [ -n "$targets" ] || fail "$df stage $stage: copies sources but builds no target"
    if echo "$body" | grep -q 'GLEANER_TRAINER_ONLY=ON'; then
      flags=(-DGLEANER_TESTS=OFF -DGLEANER_TRAINER_ONLY=ON)
    fi
    rm -rf "$work/src" "$work/b"
    mkdir "$work/src"
    for src in $srcs; do
      [ -e "$repo/$src" ] || fail "$df: COPY $src: no such path in the repository"
      ln -s "$repo/$src" "$work/src/$src"
    done
    cmake -S "$work/src" -B "$work/b" -G Ninja "${flags[@]}" >"$work/cmake.log" 2>&1 ||
      fail "$df stage $stage: cmake configure of the copied sources: $(tail -5 "$work/cmake.log")"
    local help t
    help=$(cmake --build "$work/b" --target help)
    for t in $targets; do
      echo "$help" | grep -q "^$t:" || fail "$df stage $stage: no target $t"
    done
    echo "ok: $(basename "$df") stage $stage: the copied sources configure (${flags[*]}) and define" $targets
  done
}

cpu=$repo/infra/agent.Dockerfile
cuda=$repo/infra/agent-cuda.Dockerfile
lint "$cpu" 2
lint "$cuda" 3
logical_lines "$cuda" | grep -Eq '^ARG PYTORCH_IMAGE=pytorch/pytorch:[0-9][^ ]*-cuda[0-9.]+-' ||
  fail "$cuda: PYTORCH_IMAGE is not a pinned official PyTorch CUDA image"
logical_lines "$cuda" | grep -q '^FROM \${PYTORCH_IMAGE}-devel AS ' || fail "$cuda: no -devel build stage"
[ "$(logical_lines "$cuda" | grep '^FROM ' | tail -n 1)" = 'FROM ${PYTORCH_IMAGE}-runtime' ] ||
  fail "$cuda: the last stage is not the PyTorch -runtime image"
logical_lines "$cuda" | grep -q 'GLEANER_WITH_CUDA=ON' || fail "$cuda: the trainer is not built with CUDA"
diff <(run_settings "$cpu") <(run_settings "$cuda") >/dev/null ||
  fail "the two images run differently: $(diff <(run_settings "$cpu") <(run_settings "$cuda") | tr '\n' ' ')"
echo "ok: the CUDA image runs the agent exactly as the CPU image (user, state dir, SIGTERM, entry point)"
configure_stages "$cpu"
configure_stages "$cuda"
