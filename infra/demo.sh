#!/usr/bin/env bash
# The main job: installs what is needed, builds, and runs a local coordinator on an embedded
# SQLite file. Later stages add agents, real jobs and a cost report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/infra/deps.sh"
bash "$root/infra/build.sh"
exec "$root/build/bin/gleaner-demo" "$@"
