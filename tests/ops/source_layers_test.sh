#!/usr/bin/env bash
# The include rules of docs/architecture.md, checked on the sources:
#  - agent/train/: a folder includes only itself and the folders before it in LAYERS (no arrow
#    runs up, so no folder-level loop);
#  - agent/supervisor/ and agent/protocol/ include nothing of agent/train/ (the agent never
#    links trainer code);
#  - coordinator/ and shared/ include nothing of agent/.
# Prints every offending include as FILE: INCLUDE and exits 1 when there is one.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
LAYERS=(common images nn models/text models/vae denoiser models/unet models/flux models/loader sampling training
  jobs/synthetic jobs/lora jobs commands)
bad=0
rank_of() { # a folder under agent/train -> its rank in LAYERS, or -1
  local d=$1 i
  for i in "${!LAYERS[@]}"; do
    [ "$d" = "${LAYERS[$i]}" ] && { echo "$i"; return; }
  done
  echo -1
}
while IFS= read -r file; do
  rel=${file#agent/train/}
  dir=$(dirname "$rel")
  [ "$dir" = . ] && continue  # main.cc: the top
  own=$(rank_of "$dir")
  if [ "$own" = -1 ]; then echo "$file: folder $dir is not in LAYERS"; bad=1; continue; fi
  while IFS= read -r inc; do
    target=${inc#agent/train/}
    tdir=$(dirname "$target")
    [ "$tdir" = . ] && { echo "$file: includes $inc (agent/train's top)"; bad=1; continue; }
    r=$(rank_of "$tdir")
    if [ "$r" = -1 ] || [ "$r" -gt "$own" ]; then echo "$file: includes $inc (upward)"; bad=1; fi
  done < <(sed -n 's/^#include "\(agent\/train\/[^"]*\)".*/\1/p' "$file")
done < <(find agent/train -name '*.h' -o -name '*.cc' | sort)
while IFS= read -r hit; do echo "$hit (the agent includes trainer code)"; bad=1; done < <(
  grep -rn '^#include "agent/train/' agent/supervisor agent/protocol || true)
while IFS= read -r hit; do echo "$hit (the coordinator or shared/ includes agent code)"; bad=1; done < <(
  grep -rn '^#include "agent/' coordinator shared || true)
[ "$bad" = 0 ] && echo "source layers: ok"
exit "$bad"
