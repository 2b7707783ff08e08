#!/usr/bin/env bash
# The README's first command: the demo on this machine, from a release build. Installs what the demo
# needs first when something is missing (scripts/setup.sh demo: PostgreSQL 15, zstd, gzip, xz, a C
# compiler; a no-op where everything is there), then runs `pgcompress demo` with the arguments given.
#
#   bash scripts/demo.sh
#   bash scripts/demo.sh --scale 10 --json
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
exec cargo run --release -p cli -- demo "$@"
