#!/usr/bin/env bash
# Builds the Redis image the test bed runs, FROM scratch, out of the host's Debian
# packages (no registry is needed), with libfaketime for clusters with skewable clocks
# (at /usr/local/lib/faketime/libfaketime.so.1; the label cluster-rwlock.faketime says
# it is there). Idempotent: does nothing when the image exists with libfaketime (one
# built before it was added is rebuilt).
#
#   REDIS_IMAGE=name:tag   use that image instead (nothing is built; it must exist or be
#                          pullable, e.g. the official redis:7.2 where a registry is reachable)
#   FORCE=1                rebuild even when the image exists
set -euo pipefail

default_image="cluster-rwlock/redis:7.0"
image="${REDIS_IMAGE:-$default_image}"

if [ "$image" != "$default_image" ]; then
  if docker image inspect "$image" >/dev/null 2>&1; then
    echo "redis-image: using $image (exists)"; exit 0
  fi
  echo "redis-image: pulling $image"
  docker pull "$image"
  exit 0
fi

# One set-up at a time per machine: test threads and processes that find the image
# missing all run this script; the first builds, the others wait here, then look again.
exec 9>"${TMPDIR:-/tmp}/cluster-rwlock-setup.lock"
flock 9

faketime_label() {
  docker image inspect --format '{{ index .Config.Labels "cluster-rwlock.faketime" }}' "$image" 2>/dev/null || true
}
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
  case "$(faketime_label)" in
    ""|"<no value>") echo "redis-image: $image has no libfaketime; rebuilding it" ;;
    *) echo "redis-image: $image exists"; exit 0 ;;
  esac
fi

faketime_lib() {
  for f in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    if [ -f "$f" ]; then echo "$f"; return 0; fi
  done
}
# (openssl: the TLS tests make their certificates with it)
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1 || [ -z "$(faketime_lib)" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-image: installing redis-server, redis-tools, libfaketime and openssl with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends redis-server redis-tools libfaketime openssl >/dev/null
  else
    echo "redis-image: redis-server/redis-cli/libfaketime/openssl not found; install Debian's redis-server, redis-tools, libfaketime and openssl (as root) and run again" >&2
    exit 1
  fi
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/data" "$ctx/root/tmp"

copy_with_libs() {
  local file=$1 to=$2
  mkdir -p "$ctx/root$to"
  cp -L "$file" "$ctx/root$to/"
  # every shared library it loads, under the path the loader looks it up by
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    mkdir -p "$ctx/root$(dirname "$lib")"
    cp -L "$lib" "$ctx/root$lib"
  done
}
for b in redis-server redis-cli; do copy_with_libs "$(command -v $b)" /usr/local/bin; done
# preloaded (LD_PRELOAD) by the nodes of a cluster with skewable clocks only
copy_with_libs "$(faketime_lib)" /usr/local/lib/faketime
faketime_version=$(dpkg-query -W -f '${Version}' libfaketime 2>/dev/null || echo yes)

cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/redis-server"]
DOCKERFILE

version=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
echo "redis-image: building $image from the host's redis-server $version"
docker build -q --label "cluster-rwlock.image=redis" --label "redis.version=$version" \
  --label "cluster-rwlock.faketime=$faketime_version" -t "$image" "$ctx" >/dev/null
echo "redis-image: built $image"
