#!/usr/bin/env bash
# Starts the compose cluster (six nodes on 127.0.0.1, ports CLUSTER_BASE_PORT..+5,
# default 7000-7005) and returns once every node reports cluster_state:ok and every
# master has a replica. Builds the image first when it is missing.
set -euo pipefail
source "$(dirname "$0")/compose.sh"
timeout_s="${CLUSTER_UP_TIMEOUT:-60}"

"$here/../testkit/scripts/redis-image.sh" >/dev/null
start=$(date +%s)
"${compose[@]}" up -d --quiet-pull 2>/dev/null || "${compose[@]}" up -d

cli() { # cli PORT ARGS...: redis-cli inside the first node's container
  "${compose[@]}" exec -T node0 /usr/local/bin/redis-cli -h 127.0.0.1 -p "$@"
}

ready() {
  local p masters=0 replicas=0
  for p in "${ports[@]}"; do
    cli "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
  # every master with slots has a replica that follows it
  local nodes; nodes=$(cli "${ports[0]}" cluster nodes 2>/dev/null) || return 1
  masters=$(printf '%s\n' "$nodes" | awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8' | wc -l)
  replicas=$(printf '%s\n' "$nodes" | awk '$3 ~ /slave/ && $3 !~ /fail/ && $4 != "-"' | wc -l)
  [ "$masters" -eq 3 ] && [ "$replicas" -eq 3 ]
}

until ready; do
  if [ $(( $(date +%s) - start )) -ge "$timeout_s" ]; then
    echo "cluster-up: not ready after ${timeout_s}s; last log lines:" >&2
    "${compose[@]}" logs --tail 5 >&2 || true
    exit 1
  fi
  sleep 0.5
done
echo "cluster-up: ready in $(( $(date +%s) - start ))s at redis://127.0.0.1:${ports[0]} (ports ${ports[0]}-${ports[5]})"
