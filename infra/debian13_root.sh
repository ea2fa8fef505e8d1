# Sourced, not run: a minimal Debian 13 (trixie) root made with debootstrap, reused across runs,
# for building the trainer against Debian 13's libtorch 2.x (infra/torch2.sh,
# tests/gpu/compile_cuda.sh). Needs root privileges (debootstrap, chroot, bind mounts) and the
# network (the Debian mirror of the host's apt sources).
#
#   root_prepare DIR PACKAGE...   make DIR (or reuse it) with PACKAGE... installed; idempotent
#   root_mount DIR SRC DST [ro]   bind-mount SRC at DIR/DST (ro: read-only) until root_unmount_all
#   root_run DIR COMMAND...       run COMMAND in DIR as root, with a clean environment
#   root_unmount_all DIR          unmount everything under DIR (also what an interrupted run left)
#   root_mirror                   prints the Debian mirror of /etc/apt/sources.list*
# ROOT_DEBCONF: debconf selections (lines for debconf-set-selections) set before the install.
#
# Stages are recorded by marker files inside DIR: debootstrap writes DIR.tmp and renames it, so an
# interrupted debootstrap is redone from scratch; an interrupted package install is redone by apt.
# Errors: each function prints one line to stderr and returns non-zero; callers decide whether
# that is a failure (CI) or a skip. The caller installs `trap 'root_unmount_all DIR' EXIT`.

# The first Debian archive URI (not the security archive) in the host's apt sources.
root_mirror() {
  local f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(sed -n -e 's/^[[:space:]]*URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
      -e 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' "$f" |
      grep -E '/debian/?$' | head -n 1)
    if [ -n "$uri" ]; then
      echo "${uri%/}"
      return 0
    fi
  done
  echo "no Debian archive (a URI ending in /debian) in /etc/apt/sources.list*" >&2
  return 1
}

# Mount points under DIR, deepest first.
_root_mounts() {
  local dir
  dir=$(readlink -f "$1")
  awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

root_unmount_all() {
  local m
  [ -d "$1" ] || return 0
  for m in $(_root_mounts "$1"); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if [ -n "$(_root_mounts "$1")" ]; then
    echo "could not unmount everything under $1" >&2
    return 1
  fi
}

root_mount() { # DIR SRC DST [ro]
  local dir=$1 src=$2 dst=$1$3
  mkdir -p "$dst"
  mount --bind "$src" "$dst" || return 1
  if [ "${4:-}" = ro ]; then mount -o remount,bind,ro "$dst" || return 1; fi
}

root_run() { # DIR COMMAND...
  local dir=$1
  shift
  chroot "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive CI="${CI:-}" "$@"
}

root_prepare() { # DIR PACKAGE...
  local dir=$1 mirror want
  shift
  if ! command -v debootstrap >/dev/null; then
    echo "root: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
      >/dev/null || { echo "could not install debootstrap" >&2; return 1; }
  fi
  mirror=$(root_mirror) || return 1
  root_unmount_all "$dir" || return 1
  root_unmount_all "$dir.tmp" || return 1
  if [ ! -f "$dir/.gleaner-base" ]; then
    # --one-file-system: never follow a bind mount an interrupted run left behind.
    rm -rf --one-file-system "$dir" "$dir.tmp"
    mkdir -p "$(dirname "$dir")"
    echo "root: debootstrap trixie from $mirror into $dir"
    debootstrap --variant=minbase --include=ca-certificates trixie "$dir.tmp" "$mirror" \
      >"$(dirname "$dir")/debootstrap-$(basename "$dir").log" 2>&1 || {
      echo "debootstrap failed (network? see $(dirname "$dir")/debootstrap-$(basename "$dir").log)" >&2
      return 1
    }
    echo "$mirror" >"$dir.tmp/.gleaner-base"
    mv "$dir.tmp" "$dir"
  fi
  # main, contrib and non-free: the CUDA libtorch and toolkit live in contrib/non-free.
  cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: trixie trixie-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -f "$dir/etc/apt/sources.list"
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  if [ "$(cat "$dir/.gleaner-packages" 2>/dev/null)" != "$want" ]; then
    echo "root: apt-get install $want"
    mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
    if [ -n "${ROOT_DEBCONF:-}" ]; then
      printf '%s\n' "$ROOT_DEBCONF" | root_run "$dir" debconf-set-selections
    fi
    # An install an earlier run left half-configured is finished first.
    root_run "$dir" dpkg --configure -a >/dev/null 2>&1 || true
    if ! root_run "$dir" apt-get update -qq >/dev/null ||
       ! root_run "$dir" apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
      umount "$dir/proc" 2>/dev/null || true
      echo "apt-get install in $dir failed (network?)" >&2
      return 1
    fi
    root_run "$dir" apt-get clean
    umount "$dir/proc" 2>/dev/null || true
    echo "$want" >"$dir/.gleaner-packages"
  fi
}
