#!/usr/bin/env bash
# Stops and removes the compose cluster started by cluster-up.sh.
set -euo pipefail
source "$(dirname "$0")/compose.sh"
"${compose[@]}" down --remove-orphans --timeout 1
