#!/usr/bin/env bash
# The main job: installs what is needed, builds, and runs a local coordinator on an embedded
# SQLite file, then shows how to reach it. (Later stages add agents, real jobs and a cost report.)
#   bash infra/demo.sh          # runs until Ctrl-C
#   bash infra/demo.sh --once   # smoke run: start, exercise the API, stop, exit 0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
once=0
[ "${1:-}" = "--once" ] && once=1

bash "$root/infra/deps.sh"
bash "$root/infra/build.sh"

data="$root/build/demo-data"
mkdir -p "$data"
token=${GLEANER_OPERATOR_TOKEN:-$(openssl rand -hex 24)}
port_file="$data/port"
rm -f "$port_file"

GLEANER_OPERATOR_TOKEN="$token" "$root/build/bin/gleaner-coordinator" serve \
  --db "$data/gleaner.db" --data-dir "$data" --listen "127.0.0.1:${GLEANER_DEMO_PORT:-0}" \
  --port-file "$port_file" 2>>"$data/coordinator.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 1 100); do
  [ -s "$port_file" ] && break
  kill -0 $pid 2>/dev/null || { echo "demo: the coordinator failed to start:"; tail -n 5 "$data/coordinator.log"; exit 1; }
  sleep 0.1
done
[ -s "$port_file" ] || { echo "demo: the coordinator did not start in 10 s"; exit 1; }
url="http://127.0.0.1:$(cat "$port_file")"

json_field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

echo "== gleaner coordinator is up at $url (database $data/gleaner.db, logs $data/coordinator.log)"
curl -fsS "$url/healthz"; echo
dev=$(curl -fsS -H "Authorization: Bearer $token" -d '{"role":"developer","name":"demo"}' \
  "$url/v1/keys" | json_field token)
echo "== created a developer key; submitting a synthetic job:"
curl -fsS -H "Authorization: Bearer $dev" -H 'Content-Type: application/json' \
  -d '{"kind":"synthetic","params":{"steps":100,"checkpoint_every":10}}' "$url/v1/jobs"; echo

cat <<EOT

Operator token: $token
Developer token: $dev
Try:
  curl -H 'Authorization: Bearer $dev' $url/v1/jobs
  curl -H 'Authorization: Bearer $token' $url/v1/nodes
  curl -H 'Authorization: Bearer $token' '$url/v1/reports/cost?group_by=job&format=csv'
EOT

if [ $once = 1 ]; then
  exit 0
fi
echo "(Ctrl-C stops the coordinator)"
wait $pid
