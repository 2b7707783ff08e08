#!/usr/bin/env bash
# Installs Debian's `chromium` package, which the `wal advise --html` report test
# (crates/cli/tests/advise_html.rs) uses to render the report headless.
# Idempotent: when `chromium` is on PATH it only says so and returns.
#
#   bash scripts/chromium.sh
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium: ok ($(command -v chromium))" >&2
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "chromium: need root to install it (run: sudo bash scripts/chromium.sh)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "chromium: apt-get update" >&2
apt-get update -qq
echo "chromium: apt-get install -y chromium" >&2
apt-get install -y -qq chromium >/dev/null
echo "chromium: installed ($(command -v chromium))" >&2
