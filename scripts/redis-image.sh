#!/usr/bin/env bash
# The test bed's redis image: the script lives in the testkit crate, which runs it when the
# image is missing (see testkit/scripts/redis-image.sh for what it does and its settings).
exec "$(dirname "$0")/../testkit/scripts/redis-image.sh" "$@"
