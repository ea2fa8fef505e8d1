#!/usr/bin/env bash
# Installs gleaner-agent as a systemd service on a Linux PC (docs/agent.md, "Install").
#
#   sudo infra/install-agent.sh --coordinator URL --enroll-token TOKEN [options]
#   sudo infra/install-agent.sh --libtorch /opt/libtorch --coordinator URL ...   (CUDA build)
#   sudo infra/install-agent.sh --uninstall [--purge]
#
# What it does (every step idempotent; re-running updates binaries, config and unit in place):
#   - a system user and group `gleaner` (no login shell, no home), added to the `video` and
#     `render` groups where they exist (GPU device nodes);
#   - the state directory /var/lib/gleaner-agent (0700, owned by gleaner);
#   - /usr/local/bin/gleaner-agent and gleaner-train (from --bin-dir; or, with --libtorch DIR,
#     first built from this checkout against that libtorch, e.g. a CUDA one, into build-libtorch/);
#   - /etc/gleaner/agent.conf (0640 root:gleaner: it holds the enrolment token), and
#     /etc/gleaner/ca.pem and /etc/gleaner/release-keys when given (0644, root-owned: the agent
#     cannot change what it trusts);
#   - /etc/systemd/system/gleaner-agent.service, enabled; started (or restarted, to pick up new
#     binaries) when systemd is running.
# --uninstall stops and disables the service and removes the unit and the binaries; the user,
# /etc/gleaner and the state directory go only with --purge.
#
# --root DIR installs into DIR as if it were / (tests, image builds): nothing is started, and the
# user is created only when DIR/etc/passwd exists and we are root.
set -euo pipefail

prog=install-agent.sh
die() { # bad usage: nothing was changed
  echo "$prog: $*" >&2
  exit 64
}
fatal() { # a step failed on this machine
  echo "$prog: $*" >&2
  exit 1
}
usage() {
  cat <<'EOF'
usage: install-agent.sh [--coordinator URL] [--enroll-token TOKEN] [--config FILE]
         [--ca-file PEM] [--release-keys FILE] [--shutdown-deadline S]
         [--memory-max SIZE] [--tasks-max N]
         [--bin-dir DIR | --libtorch DIR] [--root DIR] [--no-start]
       install-agent.sh --uninstall [--purge] [--root DIR]
  --coordinator URL      coordinator base URL (http:// or https://); writes /etc/gleaner/agent.conf
  --enroll-token TOKEN   enrolment token (or env GLEANER_ENROLL_TOKEN); used once, to register
  --config FILE          install this agent config file as is (instead of the two flags above)
  --ca-file PEM          trust only these CAs for HTTPS (installed as /etc/gleaner/ca.pem)
  --release-keys FILE    pinned release public keys (installed as /etc/gleaner/release-keys)
  --shutdown-deadline S  seconds the agent has to hand its job back on stop (default 20)
  --memory-max SIZE      RAM ceiling of the agent and its trainer: a percentage of this PC's RAM
                         (default 75%) or bytes with K/M/G/T (16G); MemoryHigh= is 90% of it
  --tasks-max N          processes and threads the service may have (default 4096)
  --bin-dir DIR          where gleaner-agent and gleaner-train are (default: build/bin of this
                         checkout, else the script's own directory)
  --libtorch DIR         build both from this checkout against the libtorch in DIR (with CUDA when
                         it has CUDA) into build-libtorch/, and install those: a LibTorch download
                         (C++11 ABI) or a PyTorch install's torch/ directory, outside /home and
                         /root (the service cannot read there)
  --root DIR             install into DIR instead of / (nothing is started)
  --no-start             enable the service but do not (re)start it
  --uninstall            stop and remove the service and the binaries
  --purge                with --uninstall: also remove the user, /etc/gleaner and all agent state
Re-running with no config flags keeps the installed config and updates everything else.
EOF
}

user=gleaner
unit_name=gleaner-agent.service
bin_dest=/usr/local/bin
conf_dir=/etc/gleaner
state_dir=/var/lib/gleaner-agent
unit_path=/etc/systemd/system/$unit_name

coordinator="" token=${GLEANER_ENROLL_TOKEN:-} config="" ca_file="" release_keys=""
deadline="" bin_dir="" libtorch="" root="" no_start=0 uninstall=0 purge=0 memory_max="" tasks_max=""
while [ $# -gt 0 ]; do
  flag=$1
  case "$flag" in
    -h | --help)
      usage
      exit 0
      ;;
    --no-start) no_start=1 ;;
    --uninstall) uninstall=1 ;;
    --purge) purge=1 ;;
    --coordinator | --enroll-token | --config | --ca-file | --release-keys | \
      --shutdown-deadline | --bin-dir | --libtorch | --root | --memory-max | --tasks-max)
      if [ $# -lt 2 ] || [ -z "$2" ]; then die "$flag needs a value"; fi
      case "$flag" in
        --coordinator) coordinator=$2 ;;
        --enroll-token) token=$2 ;;
        --config) config=$2 ;;
        --ca-file) ca_file=$2 ;;
        --release-keys) release_keys=$2 ;;
        --shutdown-deadline) deadline=$2 ;;
        --bin-dir) bin_dir=$2 ;;
        --libtorch) libtorch=$2 ;;
        --root) root=$2 ;;
        --memory-max) memory_max=$2 ;;
        --tasks-max) tasks_max=$2 ;;
      esac
      shift
      ;;
    *) die "unknown argument '$flag' (see --help)" ;;
  esac
  shift
done

# Paths on the target: $R prefixes every path we touch; the unit and config name real paths.
if [ -n "$root" ]; then
  [ -d "$root" ] || die "--root $root is not a directory"
  root=$(cd "$root" && pwd)
  [ "$root" = / ] && root=""
fi
R=$root
is_root=0
[ "$(id -u)" = 0 ] && is_root=1
[ -n "$R" ] || [ $is_root = 1 ] || die "run as root (or use --root DIR for a scratch install)"
systemd_running=0
[ -z "$R" ] && [ -d /run/systemd/system ] && systemd_running=1
say() { echo "$prog: $*"; }

# User database access, on / or inside DIR (useradd --root needs DIR/etc/passwd and root).
can_manage_users=0
if [ $is_root = 1 ] && { [ -z "$R" ] || [ -f "$R/etc/passwd" ]; }; then can_manage_users=1; fi
users_root=()
[ -n "$R" ] && users_root=(--root "$R")
has_entry() { # has_entry passwd|group NAME
  if [ -z "$R" ]; then getent "$1" "$2" >/dev/null; else grep -q "^$2:" "$R/etc/$1" 2>/dev/null; fi
}

if [ $uninstall = 1 ]; then
  [ -z "$coordinator$config$ca_file$release_keys$deadline$bin_dir$libtorch$memory_max$tasks_max" ] ||
    die "--uninstall takes only --purge and --root"
  if [ $systemd_running = 1 ]; then
    systemctl disable --now "$unit_name" >/dev/null 2>&1 || true
  elif [ -e "$R$unit_path" ] && command -v systemctl >/dev/null; then
    systemctl --root="${R:-/}" disable "$unit_name" >/dev/null 2>&1 || true
  fi
  rm -f "$R/etc/systemd/system/multi-user.target.wants/$unit_name"
  rmdir "$R/etc/systemd/system/multi-user.target.wants" 2>/dev/null || true
  rm -f "$R$unit_path" "$R$bin_dest/gleaner-agent" "$R$bin_dest/gleaner-train"
  if [ $systemd_running = 1 ]; then systemctl daemon-reload; fi
  if [ $purge = 1 ]; then
    rm -rf "$R$conf_dir" "$R$state_dir"
    if [ $can_manage_users = 1 ]; then
      if has_entry passwd "$user"; then userdel "${users_root[@]}" "$user"; fi
      # userdel keeps the group when USERGROUPS_ENAB is off (or unknown inside --root).
      if has_entry group "$user"; then groupdel "${users_root[@]}" "$user"; fi
    fi
    say "removed the service, binaries, user '$user', $conf_dir and $state_dir"
  else
    say "removed the service and binaries; kept user '$user', $conf_dir and $state_dir (--purge removes them)"
  fi
  exit 0
fi
[ $purge = 0 ] || die "--purge needs --uninstall"

# ---- check everything before changing anything ----
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$libtorch" ]; then
  [ -z "$bin_dir" ] || die "--libtorch builds the binaries; it cannot be combined with --bin-dir"
  [ -f "$libtorch/share/cmake/Torch/TorchConfig.cmake" ] ||
    die "--libtorch $libtorch: no share/cmake/Torch/TorchConfig.cmake in it (not a libtorch)"
  libtorch=$(cd "$libtorch" && pwd -P)
  case "$libtorch/" in /home/* | /root/* | /run/user/*)
    die "--libtorch $libtorch: the service cannot read /home, /root or /run/user (ProtectHome=yes); install libtorch elsewhere, e.g. /opt/libtorch" ;;
  esac
  [ -f "$src/CMakeLists.txt" ] && [ -d "$src/agent/train" ] ||
    die "--libtorch needs the source checkout this script belongs to"
  for tool in cmake ninja; do command -v $tool >/dev/null || die "--libtorch needs $tool to build"; done
fi
if [ -n "$libtorch" ]; then
  bin_dir=$src/build-libtorch/bin # built below, once every other check has passed
elif [ -z "$bin_dir" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  if [ -x "$here/../build/bin/gleaner-agent" ]; then bin_dir=$here/../build/bin; else bin_dir=$here; fi
fi
for b in gleaner-agent gleaner-train; do
  [ -n "$libtorch" ] || [ -x "$bin_dir/$b" ] ||
    die "no executable $b in $bin_dir (build first, or pass --bin-dir or --libtorch)"
done
if [ -n "$config" ]; then
  [ -z "$coordinator$token" ] || die "--config cannot be combined with --coordinator/--enroll-token"
  [ -f "$config" ] || die "--config $config: no such file"
elif [ -n "$coordinator" ]; then
  case "$coordinator" in http://?* | https://?*) ;; *) die "--coordinator must be an http:// or https:// URL" ;; esac
  # One config line each: no whitespace or control characters that could add lines.
  [[ "$coordinator" =~ ^[[:graph:]]+$ ]] || die "--coordinator must not contain spaces"
  [ -z "$token" ] || [[ "$token" =~ ^[[:graph:]]+$ ]] || die "--enroll-token must not contain spaces"
elif [ -n "$token" ]; then
  die "--enroll-token needs --coordinator URL"
elif [ ! -f "$R$conf_dir/agent.conf" ]; then
  die "--coordinator URL is required on the first install (or --config FILE)"
fi
size_kib() { # size_kib 16G -> KiB
  local n=${1%?} unit=${1: -1}
  case $unit in
    K) echo "$n" ;;
    M) echo $((n * 1024)) ;;
    G) echo $((n * 1048576)) ;;
    T) echo $((n * 1073741824)) ;;
  esac
}
# --memory-max: N% (1..100) of this PC's RAM or bytes with a K/M/G/T suffix (at least 1G: the
# agent and a small trainer need that much); --tasks-max: 64..1000000.
if [ -n "$memory_max" ]; then
  if [[ "$memory_max" =~ ^([0-9]{1,3})%$ ]]; then
    [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le 100 ] ||
      die "--memory-max must be a percentage in [1%, 100%] or a size such as 16G"
  elif [[ "$memory_max" =~ ^[0-9]{1,9}[KMGT]$ ]]; then
    [ "$(size_kib "$memory_max")" -ge 1048576 ] || die "--memory-max must be at least 1G"
  else
    die "--memory-max must be a percentage in [1%, 100%] or a size such as 16G"
  fi
fi
if [ -n "$tasks_max" ]; then
  if ! [[ "$tasks_max" =~ ^[0-9]{2,7}$ ]] || [ "$tasks_max" -lt 64 ] || [ "$tasks_max" -gt 1000000 ]; then
    die "--tasks-max must be a whole number in [64, 1000000]"
  fi
fi
if [ -n "$deadline" ]; then
  if ! [[ "$deadline" =~ ^[0-9]{1,4}$ ]] || [ "$deadline" -lt 1 ] || [ "$deadline" -gt 3600 ]; then
    die "--shutdown-deadline must be a whole number of seconds in [1, 3600]"
  fi
fi
if [ -n "$ca_file" ]; then
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca_file" 2>/dev/null ||
    die "--ca-file $ca_file: no PEM certificate in it"
fi
if [ -n "$release_keys" ]; then
  [ -f "$release_keys" ] || die "--release-keys $release_keys: no such file"
fi

# ---- build against --libtorch ----
if [ -n "$libtorch" ]; then
  cuda=OFF
  ls "$libtorch"/lib/libtorch_cuda.* >/dev/null 2>&1 && cuda=ON
  say "building gleaner-agent and gleaner-train against $libtorch (CUDA $cuda) into $src/build-libtorch"
  log=$src/build-libtorch.log
  { cmake -S "$src" -B "$src/build-libtorch" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGLEANER_TESTS=OFF -DTorch_DIR="$libtorch/share/cmake/Torch" -DGLEANER_WITH_CUDA=$cuda &&
    cmake --build "$src/build-libtorch" --target gleaner-agent gleaner-train; } >"$log" 2>&1 ||
    fatal "the build against $libtorch failed; see $log"
  for b in gleaner-agent gleaner-train; do
    [ -x "$bin_dir/$b" ] || fatal "the build against $libtorch made no $b; see $log"
  done
fi

# ---- user, directories, files ----
if [ $can_manage_users = 1 ]; then
  if ! has_entry passwd "$user"; then
    useradd "${users_root[@]}" --system --user-group --no-create-home --home-dir "$state_dir" \
      --shell /usr/sbin/nologin --comment "Gleaner agent" "$user"
    say "created system user '$user'"
  fi
  for g in video render; do
    if has_entry group "$g"; then usermod "${users_root[@]}" -a -G "$g" "$user"; fi
  done
  # Numeric ids: inside --root the names exist only in DIR/etc/passwd.
  if [ -z "$R" ]; then
    owner="$(id -u "$user"):$(id -g "$user")"
  else
    owner=$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4 }' "$R/etc/passwd")
  fi
else
  say "not creating user '$user' (not root, or no $R/etc/passwd); files stay owned by $(id -un)"
  owner=""
fi

install -d -m 0755 "$R$bin_dest" "$R$conf_dir" "$R/etc/systemd/system"
install -d -m 0700 "$R$state_dir"
if [ -n "$owner" ]; then chown "$owner" "$R$state_dir"; fi
# A temp name + rename: a running agent keeps its old inode, never a half-written binary.
for b in gleaner-agent gleaner-train; do
  install -m 0755 "$bin_dir/$b" "$R$bin_dest/.$b.new"
  mv -f "$R$bin_dest/.$b.new" "$R$bin_dest/$b"
done

put_file() { # put_file MODE GROUP DEST  (content on stdin; replaced atomically)
  local tmp="$3.new"
  cat >"$tmp"
  chmod "$1" "$tmp"
  if [ -n "$2" ]; then chown "0:$2" "$tmp"; fi
  mv -f "$tmp" "$3"
}
conf_group=""
if [ -n "$owner" ]; then conf_group=${owner#*:}; fi
if [ -n "$ca_file" ]; then
  put_file 0644 "" "$R$conf_dir/ca.pem" <"$ca_file"
elif [ -n "$coordinator" ]; then
  rm -f "$R$conf_dir/ca.pem" # the config is rewritten from this run's flags alone
fi
[ -z "$release_keys" ] || put_file 0644 "" "$R$conf_dir/release-keys" <"$release_keys"
if [ -n "$config" ]; then
  put_file 0640 "$conf_group" "$R$conf_dir/agent.conf" <"$config"
elif [ -n "$coordinator" ]; then
  {
    echo "# gleaner-agent settings (docs/agent.md); written by install-agent.sh."
    echo "coordinator = $coordinator"
    [ -z "$token" ] || echo "enroll-token = $token"
    [ ! -f "$R$conf_dir/ca.pem" ] || echo "ca-file = $conf_dir/ca.pem"
    # Only an agent that knows the setting gets it (an unknown key stops the agent).
    if [ -f "$R$conf_dir/release-keys" ] &&
      "$bin_dir/gleaner-agent" --help 2>/dev/null | grep -q -- --release-keys; then
      echo "release-keys = $conf_dir/release-keys"
    fi
    [ -z "$deadline" ] || echo "shutdown-deadline = $deadline"
  } | put_file 0640 "$conf_group" "$R$conf_dir/agent.conf"
fi

# systemd must outwait the agent's own drain deadline (checkpoint, upload, release).
if [ -z "$deadline" ]; then
  deadline=$(sed -n 's/^[[:space:]]*shutdown-deadline[[:space:]]*=[[:space:]]*\([0-9.]*\).*/\1/p' \
    "$R$conf_dir/agent.conf" | tail -n 1)
  deadline=${deadline%%.*}
  [ -n "$deadline" ] || deadline=20
fi
stop_timeout=$((deadline + 15))

# Memory and task ceilings: this run's flags, else what the installed unit says, else defaults.
# MemoryHigh= (90% of the ceiling) makes the kernel reclaim and throttle first; MemoryMax= is the
# hard limit (the OOM killer picks the trainer, the largest process, not the rest of the PC).
# The agent reads the room left under the limit and hands it to the trainer as its budget.
unit_value() {
  [ -f "$R$unit_path" ] || return 0
  sed -n "s/^$1=//p" "$R$unit_path" | tail -n 1
}
[ -n "$memory_max" ] || memory_max=$(unit_value MemoryMax)
[ -n "$memory_max" ] || memory_max=75%
[ -n "$tasks_max" ] || tasks_max=$(unit_value TasksMax)
[ -n "$tasks_max" ] || tasks_max=4096
if [[ "$memory_max" =~ ^([0-9]+)%$ ]]; then
  memory_high="$((BASH_REMATCH[1] * 9 / 10))%"
  [ "${memory_high%\%}" -ge 1 ] || memory_high=1%
elif [[ "$memory_max" =~ ^[0-9]+[KMGT]$ ]]; then
  memory_high="$(($(size_kib "$memory_max") * 9 / 10))K"
else
  memory_high=infinity
fi

put_file 0644 "" "$R$unit_path" <<EOF
# gleaner-agent: trains jobs for a Gleaner coordinator on this PC's GPU (docs/agent.md).
# Written by install-agent.sh; re-run it rather than editing this file.
[Unit]
Description=Gleaner agent (volunteer GPU fine-tuning)
Wants=network-online.target
After=network-online.target
# Never give up restarting: the agent runs for months and the network comes and goes.
StartLimitIntervalSec=0

[Service]
Type=simple
User=$user
Group=$user
ExecStart=$bin_dest/gleaner-agent --config $conf_dir/agent.conf --state-dir $state_dir --trainer $bin_dest/gleaner-train
Restart=always
RestartSec=5
# SIGTERM goes to the agent alone; it checkpoints the trainer, uploads, releases the job and
# exits within its shutdown deadline ($deadline s). Only then is everything left killed.
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec=$stop_timeout
# Resource ceilings for the agent and its trainer together (docs/agent.md, "Limits"):
# --memory-max and --tasks-max of install-agent.sh.
MemoryHigh=$memory_high
MemoryMax=$memory_max
TasksMax=$tasks_max
Nice=10
IOSchedulingClass=best-effort
IOSchedulingPriority=7
UMask=0077
# Sandbox: the only writable place is the state directory. PrivateDevices= and ProtectClock= are
# left out on purpose: both install a device allow-list that would hide the GPU. /proc stays
# whole (no ProtectProc=): the owner controls look for named programs there. Also left out:
# MemoryDenyWriteExecute= (CUDA and libtorch JIT-compile kernels) and PrivateUsers= (the GPU
# device nodes belong to the video/render groups).
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ReadWritePaths=$state_dir
CapabilityBoundingSet=
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectHostname=yes
PrivateMounts=yes
RestrictNamespaces=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
LockPersonality=yes
RemoveIPC=yes

[Install]
WantedBy=multi-user.target
EOF

# Shared libraries the binaries need that this system lacks (e.g. libtorch for the trainer).
if [ -z "$R" ] && command -v ldd >/dev/null; then
  for b in gleaner-agent gleaner-train; do
    missing=$(ldd "$bin_dest/$b" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -z "$missing" ] || say "warning: $b needs libraries this system lacks: $missing"
  done
fi

# ---- enable and start ----
if [ $systemd_running = 1 ]; then
  systemctl daemon-reload || fatal "systemctl daemon-reload failed"
  systemctl enable "$unit_name" >/dev/null 2>&1 || fatal "systemctl enable $unit_name failed"
  if [ $no_start = 1 ]; then
    say "installed and enabled; not started (--no-start)"
  else
    systemctl restart "$unit_name" ||
      fatal "$unit_name did not start; see: journalctl -u $unit_name"
    say "installed and started; see: systemctl status $unit_name; journalctl -u $unit_name"
  fi
else
  if command -v systemctl >/dev/null; then
    systemctl --root="${R:-/}" enable "$unit_name" >/dev/null 2>&1 ||
      fatal "systemctl --root=${R:-/} enable $unit_name failed"
  else
    mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
    ln -sfn "$unit_path" "$R/etc/systemd/system/multi-user.target.wants/$unit_name"
  fi
  if [ -n "$R" ]; then
    say "installed into $R and enabled; not started (--root)"
  else
    say "installed and enabled; systemd is not running here (not PID 1), so not started"
  fi
fi
