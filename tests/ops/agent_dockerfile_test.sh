#!/usr/bin/env bash
# infra/agent.Dockerfile: `docker build --check` where a Docker daemon answers; always a
# structural lint (every instruction known, Debian 12 base, the agent as an exec-form entry
# point, the state dir in the environment) and a CMake configure of exactly the sources the
# Dockerfile copies, with the two targets it builds.  usage: agent_dockerfile_test.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
df="$repo/infra/agent.Dockerfile"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1 &&
  docker build --help 2>/dev/null | grep -q -- '--check'; then
  (cd "$repo" && docker build --check -f "$df" .) || fail "docker build --check"
  echo "ok: docker build --check"
else
  echo "skip: docker build --check (no Docker daemon or no --check here); linting instead"
fi

# Logical lines: comments and blank lines dropped, backslash continuations joined.
lines=$(sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$df" |
  awk '{ if (sub(/\\$/, "")) { buf = buf $0 " " } else { print buf $0; buf = "" } }')
known='^(FROM|RUN|CMD|LABEL|EXPOSE|ENV|ADD|COPY|ENTRYPOINT|VOLUME|USER|WORKDIR|ARG|ONBUILD|STOPSIGNAL|HEALTHCHECK|SHELL) '
bad=$(echo "$lines" | grep -Ev "$known" || true)
[ -z "$bad" ] || fail "not a Dockerfile instruction: $bad"
echo "$lines" | grep -Eq '^ARG DEBIAN_IMAGE=debian:12$' || fail "base image is not debian:12"
[ "$(echo "$lines" | grep -c '^FROM ')" -ge 2 ] || fail "expected a build and a runtime stage"
last_entry=$(echo "$lines" | grep '^ENTRYPOINT ' | tail -n 1)
[ "$last_entry" = 'ENTRYPOINT ["/usr/local/bin/gleaner-agent"]' ] ||
  fail "entry point is not the agent in exec form: $last_entry"
echo "$lines" | grep -q '^ENV GLEANER_STATE_DIR=' || fail "no GLEANER_STATE_DIR"
echo "$lines" | grep -q '^USER gleaner$' || fail "the agent must not run as root"
echo "ok: Dockerfile instructions"

# The sources it copies are enough to configure, and they define both targets.
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-dockerfile-test-XXXXXX")
trap 'rm -rf "$work"' EXIT
srcs=$(echo "$lines" | awk '$1 == "COPY" && $2 !~ /^--/ { print $2 }')
[ -n "$srcs" ] || fail "no COPY of the sources"
mkdir "$work/src"
for s in $srcs; do
  [ -e "$repo/$s" ] || fail "COPY $s: no such path in the repository"
  ln -s "$repo/$s" "$work/src/$s"
done
cmake -S "$work/src" -B "$work/b" -G Ninja -DGLEANER_TESTS=OFF -DGLEANER_WITH_TORCH=OFF \
  >"$work/cmake.log" 2>&1 || fail "cmake configure of the copied sources: $(tail -5 "$work/cmake.log")"
targets=$(cmake --build "$work/b" --target help)
for t in gleaner-agent gleaner-train; do
  echo "$targets" | grep -q "^$t:" || fail "no target $t"
done
echo "ok: the copied sources configure and define gleaner-agent and gleaner-train"
