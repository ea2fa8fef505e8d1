#!/usr/bin/env bash
# infra/install-agent.sh into a scratch root (--root): install, re-install (the tree must be
# identical), the unit through `systemd-analyze verify`, the generated config accepted by the real
# gleaner-agent, bad flags (one line, exit 64, nothing touched), uninstall and purge (nothing
# left behind).  usage: install_agent_test.sh BIN_DIR
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../infra/install-agent.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/gleaner-install-test-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
ok() { echo "ok: $*"; }
# A check whose tool is missing: the other checks run on, then the test ends skipped (exit 77);
# in CI (CI set and not 0/false), where every tool must be present, it fails (tests/skip.h).
skipped=""
skip() {
  case "${CI:-}" in "" | 0 | false) ;; *) fail "missing in CI: $*" ;; esac
  echo "SKIP: $*"
  skipped="$skipped $*;"
}
R=$work/root

# A minimal system: the usual directories and, as root, a user database (so the user is made).
mkdir -p "$R/etc/systemd/system" "$R/usr/local/bin" "$R/var/lib"
as_root=0
if [ "$(id -u)" = 0 ]; then
  as_root=1
  printf 'root:x:0:0:root:/root:/bin/bash\n' >"$R/etc/passwd"
  printf 'root:x:0:\nvideo:x:44:\n' >"$R/etc/group"
  printf 'root:*:19000:0:99999:7:::\n' >"$R/etc/shadow"
  printf 'root:*::\nvideo:*::\n' >"$R/etc/gshadow"
  chmod 0640 "$R/etc/shadow" "$R/etc/gshadow"
fi
# Path, mode, owner, link target and content of everything (the shadow tools' backups excluded).
snapshot() {
  (cd "$R" && find . -path ./usr/lib -prune -o \
    ! -name '*-' ! -name .pwd.lock -printf '%p %M %u:%g %l\n' | sort &&
    find . -path ./usr/lib -prune -o -type f ! -name '*-' ! -name .pwd.lock -print0 |
    sort -z | xargs -0 sha256sum)
}
before=$(snapshot)

printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' >"$work/ca.pem"
printf '# pinned release keys\n%064d\n' 0 >"$work/keys"
flags=(--root "$R" --bin-dir "$bin" --coordinator http://127.0.0.1:9 --enroll-token enr_test
  --ca-file "$work/ca.pem" --release-keys "$work/keys" --shutdown-deadline 25 --memory-max 16G
  --tasks-max 2048)

# ---- install ----
out=$(bash "$script" "${flags[@]}") || fail "install exited $?"
echo "$out"
first=$(snapshot)
unit="$R/etc/systemd/system/gleaner-agent.service"
conf="$R/etc/gleaner/agent.conf"
for d in 'Restart=always' 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=yes' \
  'PrivateTmp=yes' 'ReadWritePaths=/var/lib/gleaner-agent' 'KillSignal=SIGTERM' \
  'TimeoutStopSec=40' 'User=gleaner' 'WantedBy=multi-user.target' \
  'MemoryMax=16G' 'MemoryHigh=15099494K' 'TasksMax=2048' \
  'ExecStart=/usr/local/bin/gleaner-agent --config /etc/gleaner/agent.conf --state-dir /var/lib/gleaner-agent --trainer /usr/local/bin/gleaner-train'; do
  grep -qxF "$d" "$unit" || fail "unit lacks '$d'"
done
for d in PrivateDevices ProtectClock DeviceAllow DevicePolicy; do
  if grep -q "^$d=" "$unit"; then fail "unit sets $d= (it would hide the GPU)"; fi
done
ok "unit has the service settings (TimeoutStopSec 40 > shutdown deadline 25)"
cmp -s "$bin/gleaner-agent" "$R/usr/local/bin/gleaner-agent" || fail "gleaner-agent not installed"
cmp -s "$bin/gleaner-train" "$R/usr/local/bin/gleaner-train" || fail "gleaner-train not installed"
cmp -s "$work/keys" "$R/etc/gleaner/release-keys" || fail "release keys not installed"
[ "$(readlink "$R/etc/systemd/system/multi-user.target.wants/gleaner-agent.service")" = \
  /etc/systemd/system/gleaner-agent.service ] || fail "service not enabled"
[ "$(stat -c %a "$conf")" = 640 ] || fail "agent.conf mode $(stat -c %a "$conf"), want 640"
[ "$(stat -c %a "$R/var/lib/gleaner-agent")" = 700 ] || fail "state dir mode is not 700"
grep -qxF 'enroll-token = enr_test' "$conf" || fail "agent.conf lacks the token"
grep -qxF 'ca-file = /etc/gleaner/ca.pem' "$conf" || fail "agent.conf lacks the CA file"
if "$bin/gleaner-agent" --help | grep -q -- --release-keys; then
  grep -qxF 'release-keys = /etc/gleaner/release-keys' "$conf" || fail "agent.conf lacks the keys"
elif grep -q '^release-keys' "$conf"; then
  fail "agent.conf names release-keys, which this agent does not know"
fi
if [ $as_root = 1 ]; then
  grep -q '^gleaner:x:[0-9]*:[0-9]*:.*:/var/lib/gleaner-agent:/usr/sbin/nologin$' "$R/etc/passwd" ||
    fail "no system user gleaner: $(cat "$R/etc/passwd")"
  grep -q '^video:x:44:gleaner$' "$R/etc/group" || fail "gleaner not in the video group"
  ids=$(awk -F: '$1 == "gleaner" { print $3 ":" $4 }' "$R/etc/passwd")
  [ "$(stat -c %u:%g "$R/var/lib/gleaner-agent")" = "$ids" ] || fail "state dir owner"
  [ "$(stat -c %u:%g "$conf")" = "0:${ids#*:}" ] || fail "agent.conf owner"
  ok "system user, groups and ownership"
fi
ok "install: binaries, config, release keys, state dir, enabled"

# The generated config is one the real agent accepts (it keeps running, retrying the
# unreachable coordinator, instead of exiting 64 on a bad config).
# Paths the config names under / are given inside the scratch root instead.
inside=(--state-dir "$work/agent-state" --ca-file "$R/etc/gleaner/ca.pem")
if grep -q '^release-keys' "$conf"; then inside+=(--release-keys "$R/etc/gleaner/release-keys"); fi
set +e
GLEANER_MACHINE_ID=install-test timeout 1 "$R/usr/local/bin/gleaner-agent" --config "$conf" \
  "${inside[@]}" 2>"$work/agent.log"
rc=$?
set -e
[ $rc = 124 ] || fail "gleaner-agent exited $rc on the installed config: $(cat "$work/agent.log")"
ok "gleaner-agent accepts the installed agent.conf"

# ---- idempotent ----
bash "$script" "${flags[@]}" >/dev/null || fail "second install exited $?"
diff <(echo "$first") <(snapshot) || fail "a second install changed the tree"
ok "second install: identical tree"
# New binaries are picked up; an install with no config flags keeps the config.
mkdir "$work/bin2"
cp "$bin/gleaner-agent" "$bin/gleaner-train" "$work/bin2/"
echo >>"$work/bin2/gleaner-train"
bash "$script" --root "$R" --bin-dir "$work/bin2" >/dev/null || fail "update install exited $?"
cmp -s "$work/bin2/gleaner-train" "$R/usr/local/bin/gleaner-train" || fail "binary not updated"
grep -qxF 'enroll-token = enr_test' "$conf" || fail "an update without config flags lost the config"
grep -qxF 'TimeoutStopSec=40' "$unit" || fail "an update lost the configured shutdown deadline"
grep -qxF 'MemoryMax=16G' "$unit" || fail "an update lost the configured memory ceiling"
grep -qxF 'TasksMax=2048' "$unit" || fail "an update lost the configured task ceiling"
ok "update: new binaries, config kept"
# Without the flags: MemoryMax 75% of the PC's RAM (MemoryHigh 67%), TasksMax 4096.
D=$work/defaults
mkdir "$D"
bash "$script" --root "$D" --bin-dir "$bin" --coordinator http://127.0.0.1:9 >/dev/null ||
  fail "install with default limits exited $?"
for d in 'MemoryMax=75%' 'MemoryHigh=67%' 'TasksMax=4096'; do
  grep -qxF "$d" "$D/etc/systemd/system/gleaner-agent.service" || fail "default unit lacks '$d'"
done
ok "unit limits: MemoryMax/MemoryHigh/TasksMax from the flags, kept on update, defaults 75%/67%/4096"

# ---- systemd-analyze verify ----
# --root resolves ExecStart= inside the scratch root; the stock units (sysinit.target, ...) come
# from this system through a link. Its exit status ignores unknown keys and bad values, so any
# message naming our unit fails the test; a deliberately broken copy proves that check bites.
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (infra/deps.sh installs systemd)"
system_units=$(readlink -f /lib/systemd/system)
mkdir -p "$R/usr/lib/systemd"
ln -s "$system_units" "$R/usr/lib/systemd/system"
verify() { # verify UNIT → prints the problems, returns non-zero if any
  local log rc=0
  log=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --root="$R" --man=no "$1" 2>&1) || rc=$?
  local ours
  ours=$(echo "$log" | grep -F "${1%.service}" || true)
  [ $rc = 0 ] && [ -z "$ours" ] && return 0
  echo "systemd-analyze verify $1: exit $rc"
  echo "$ours"
  return 1
}
verify gleaner-agent.service || fail "the unit does not verify"
sed -e 's/^ProtectSystem=strict/ProtectSystem=bogus/' "$unit" >"$R/etc/systemd/system/gleaner-broken.service"
if verify gleaner-broken.service >/dev/null; then fail "verify check missed ProtectSystem=bogus"; fi
rm "$R/etc/systemd/system/gleaner-broken.service"
ok "systemd-analyze verify: clean (and a broken copy is caught)"
# The sandbox stays as tight as it is now (systemd's exposure score, 0 = locked down, 10 = none).
if score=$(systemd-analyze security --offline=yes --root="$R" gleaner-agent.service 2>/dev/null |
  sed -n 's/.*Overall exposure level for gleaner-agent.service: \([0-9.]*\).*/\1/p') &&
  [ -n "$score" ]; then
  awk -v s="$score" 'BEGIN { exit !(s <= 4.0) }' || fail "exposure score $score > 4.0"
  ok "systemd-analyze security: exposure $score"
else
  skip "systemd-analyze security --offline (needs systemd 252 or newer)"
fi
rm "$R/usr/lib/systemd/system"
rmdir "$R/usr/lib/systemd" "$R/usr/lib"

# ---- bad flags: one readable line, exit 64, nothing touched ----
E=$work/empty
mkdir "$E"
bad() { # bad EXPECTED_SUBSTRING ARGS...
  local want=$1
  shift
  local rc=0
  bash "$script" "$@" >"$work/out" 2>"$work/err" || rc=$?
  [ $rc = 64 ] || fail "'$*' exited $rc, want 64"
  [ ! -s "$work/out" ] || fail "'$*' wrote to stdout: $(cat "$work/out")"
  [ "$(wc -l <"$work/err")" = 1 ] || fail "'$*' wrote $(wc -l <"$work/err") lines: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "'$*' said '$(cat "$work/err")', want '$want'"
  [ -z "$(ls -A "$E")" ] || fail "'$*' touched the root"
}
bad "unknown argument '--frobnicate'" --root "$E" --frobnicate
bad "--coordinator needs a value" --root "$E" --coordinator
bad "http:// or https://" --root "$E" --bin-dir "$bin" --coordinator ftp://x
bad "required on the first install" --root "$E" --bin-dir "$bin"
bad "no executable gleaner-agent" --root "$E" --bin-dir "$E" --coordinator http://x
bad "--shutdown-deadline must be" --root "$E" --bin-dir "$bin" --coordinator http://x --shutdown-deadline 0
bad "no PEM certificate" --root "$E" --bin-dir "$bin" --coordinator http://x --ca-file "$work/keys"
bad "cannot be combined" --root "$E" --bin-dir "$bin" --config "$work/keys" --coordinator http://x
bad "must not contain spaces" --root "$E" --bin-dir "$bin" --coordinator http://x --enroll-token "a b"
bad "--memory-max must be a percentage" --root "$E" --bin-dir "$bin" --coordinator http://x --memory-max 16GB
bad "--memory-max must be a percentage" --root "$E" --bin-dir "$bin" --coordinator http://x --memory-max 101%
bad "--memory-max must be at least 1G" --root "$E" --bin-dir "$bin" --coordinator http://x --memory-max 512M
bad "--tasks-max must be" --root "$E" --bin-dir "$bin" --coordinator http://x --tasks-max 8
bad "--purge needs --uninstall" --root "$E" --purge
bad "--uninstall takes only" --root "$E" --uninstall --coordinator http://x
bad "--root /nonexistent" --root /nonexistent/x --uninstall
mkdir "$work/not-libtorch"
bad "no share/cmake/Torch/TorchConfig.cmake" --root "$E" --libtorch "$work/not-libtorch" --coordinator http://x
mkdir -p "$work/libtorch/share/cmake/Torch"
touch "$work/libtorch/share/cmake/Torch/TorchConfig.cmake"
bad "cannot be combined with --bin-dir" --root "$E" --bin-dir "$bin" --libtorch "$work/libtorch" --coordinator http://x
bad "--uninstall takes only" --root "$E" --uninstall --libtorch "$work/libtorch"
ok "bad flags: one line each, exit 64, root untouched"

# ---- uninstall ----
bash "$script" --root "$R" --uninstall >/dev/null || fail "uninstall exited $?"
for f in etc/systemd/system/gleaner-agent.service usr/local/bin/gleaner-agent \
  usr/local/bin/gleaner-train etc/systemd/system/multi-user.target.wants; do
  [ ! -e "$R/$f" ] || fail "uninstall left $f"
done
if [ ! -f "$conf" ] || [ ! -d "$R/var/lib/gleaner-agent" ]; then
  fail "uninstall without --purge removed config or state"
fi
if [ $as_root = 1 ]; then grep -q '^gleaner:' "$R/etc/passwd" || fail "uninstall removed the user"; fi
ok "uninstall: service and binaries gone; config, state and user kept"
bash "$script" --root "$R" --uninstall --purge >/dev/null || fail "purge exited $?"
diff <(echo "$before") <(snapshot) || fail "uninstall --purge left something behind"
bash "$script" --root "$R" --uninstall --purge >/dev/null || fail "a second purge exited $?"
ok "uninstall --purge: the tree is exactly as before the install"
if [ -n "$skipped" ]; then
  echo "skipped:$skipped"
  exit 77
fi
