#!/usr/bin/env bash
# Installs what pgcompress's tests, benchmarks and demo need on a fresh Debian machine.
# Idempotent: on a machine that has everything it only checks and returns.
#
#   bash scripts/setup.sh
set -euo pipefail

missing=()
have_pg() {
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}
have_pg || missing+=(postgresql-15 postgresql-contrib-15)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v gzip >/dev/null 2>&1 || missing+=(gzip)
command -v pgbackrest >/dev/null 2>&1 || missing+=(pgbackrest)  # the peer of `pgcompress bench archive`
command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
command -v cc >/dev/null 2>&1 || missing+=(build-essential)

if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "setup: need root to install ${missing[*]} (run: sudo bash scripts/setup.sh)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PostgreSQL refuses to run as root: the test harness runs it as `postgres`.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "setup: creating the postgres system user" >&2
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
fi

for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c"
    fi
done
bash "$(dirname "$0")/chromium.sh"  # headless browser for the wal advise --html report test
echo "setup: ok ($(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1))" >&2
