#!/usr/bin/env bash
# The test bed's valkey image: the script lives in the testkit crate, which runs it when the
# image is missing (see testkit/scripts/valkey-image.sh for what it does and its settings).
exec "$(dirname "$0")/../testkit/scripts/valkey-image.sh" "$@"
