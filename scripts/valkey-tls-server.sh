#!/usr/bin/env bash
# A valkey-server with TLS for the test bed: the script lives in the testkit crate (see
# testkit/scripts/valkey-tls-server.sh for what it does and its settings).
exec "$(dirname "$0")/../testkit/scripts/valkey-tls-server.sh" "$@"
