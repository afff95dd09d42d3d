# Sourced by cluster-up.sh and cluster-down.sh: picks `docker compose` or `docker-compose`
# and the ports of the six nodes.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compose_file="$here/../cluster-compose/docker-compose.yml"
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose -f "$compose_file" -p cluster-rwlock)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose -f "$compose_file" -p cluster-rwlock)
else
  echo "neither 'docker compose' nor 'docker-compose' is installed" >&2
  exit 1
fi
base="${CLUSTER_BASE_PORT:-7000}"
ports=()
for i in 0 1 2 3 4 5; do
  export "CLUSTER_PORT_$i=$((base + i))"
  ports+=("$((base + i))")
done
