#!/usr/bin/env bash
# Installs what pgcompress's tests, benchmarks and demo need on a fresh Debian machine.
# Idempotent: on a machine that has everything it only checks and returns.
#
#   bash scripts/setup.sh         # everything the test suite needs
#   bash scripts/setup.sh demo    # only what `pgcompress demo` needs (scripts/demo.sh runs this)
#   bash scripts/setup.sh demo --check   # install nothing: say what is missing, exit 1 if anything is
set -euo pipefail

scope=${1:-all}
check=${2:-}
case $scope in
    all | demo) ;;
    *)
        echo "setup: unknown scope $scope (give nothing for the test suite, or demo)" >&2
        exit 2
        ;;
esac

# PostgreSQL is judged by its files, not by what dpkg remembers: an initdb that runs, beside the
# share files it reads (postgres.bki), in Debian's layout or found on PATH.
have_pg() {
    local initdb major
    for initdb in /usr/lib/postgresql/*/bin/initdb; do
        major=$(basename "$(dirname "$(dirname "$initdb")")")
        "$initdb" --version >/dev/null 2>&1 && [ -f "/usr/share/postgresql/$major/postgres.bki" ] && return 0
    done
    initdb=$(command -v initdb) || return 1
    "$initdb" --version >/dev/null 2>&1 &&
        ls "$(dirname "$(readlink -f "$initdb")")"/../share{,/postgresql}/postgres.bki >/dev/null 2>&1
}
# True when dpkg lists package $1 as installed.
installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}
# True when every file package $1 put under /usr is still there. A package dpkg lists as installed
# whose files were deleted (or whose directory is hidden) must be installed again: `apt-get install`
# alone would call it up to date and leave the files missing.
files_present() {
    local f
    while IFS= read -r f; do
        case $f in /usr/*) [ -e "$f" ] || [ -L "$f" ] || return 1 ;; esac
    done < <(dpkg-query -L "$1" 2>/dev/null)
}

missing=()
reinstall=()
have_pg || missing+=(postgresql-15 postgresql-contrib-15)
PG_PACKAGES=(postgresql-common postgresql-client-common postgresql-client-15 postgresql-15)
[ "$scope" = all ] && PG_PACKAGES+=(postgresql-15-wal2json)
if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${PG_PACKAGES[@]}"; do
        if installed "$p" && ! files_present "$p"; then reinstall+=("$p"); fi
    done
fi
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v gzip >/dev/null 2>&1 || missing+=(gzip)
command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
if [ "$scope" = all ]; then
    command -v pgbackrest >/dev/null 2>&1 || missing+=(pgbackrest)  # the peer of `pgcompress-bench archive`
    # wal2json: an output plugin the logical-decoding tests can compare pgoutput with.
    ls /usr/lib/postgresql/15/lib/wal2json.so >/dev/null 2>&1 || missing+=(postgresql-15-wal2json)
    # openssl: certificates with signatures rcgen cannot make (RSA, SHA-1) for the TLS tests.
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    # Python with venv for moto_server, the S3-compatible server of the archive tests.
    PYTHON=/usr/bin/python3
    "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3 python3-venv)
fi

if [ "$check" = --check ]; then
    if ((${#missing[@]} + ${#reinstall[@]})); then
        echo "setup: missing: ${missing[*]}${reinstall:+; installed but files missing: ${reinstall[*]}}" >&2
        exit 1
    fi
    echo "setup: nothing missing for $scope" >&2
    exit 0
fi
if ((${#missing[@]} + ${#reinstall[@]})); then
    echo "setup: installing ${missing[*]}${reinstall:+ (again, files missing: ${reinstall[*]})}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "setup: need root to install ${missing[*]} ${reinstall[*]} (run: sudo bash scripts/setup.sh $scope)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    export PGCOMPRESS_APT_UPDATED=1  # for bench-tools.sh below
    if ((${#reinstall[@]})); then
        # postgresql-common first: the other packages' maintainer scripts run its scripts. A package
        # whose installed version the archive no longer has is upgraded instead (apt's choice).
        for first in postgresql-common postgresql-client-common; do
            if [[ " ${reinstall[*]} " == *" $first "* ]]; then
                apt-get install -y -qq --no-install-recommends --reinstall "$first" >/dev/null
            fi
        done
        apt-get install -y -qq --no-install-recommends --reinstall "${reinstall[@]}" >/dev/null
    fi
    if ((${#missing[@]})); then
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
have_pg || {
    echo "setup: no usable PostgreSQL (initdb and its share files) after installing; see the messages above" >&2
    exit 1
}

# PostgreSQL refuses to run as root: the test harness runs it as `postgres`.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "setup: creating the postgres system user" >&2
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
fi
if [ "$scope" = demo ]; then
    echo "setup: ok for the demo ($(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1))" >&2
    exit 0
fi

# moto_server (Python's moto[server]) plays S3 in crates/cli/tests/archive_s3.rs and
# archive_e2e.rs. Debian's pip refuses system-wide installs, so it gets its own venv; the
# version is pinned so every machine tests against the same server.
MOTO_VERSION=5.2.5
VENV=${PGCOMPRESS_VENV:-/opt/pgcompress-venv}
have_moto() {
    [ -x "$VENV/bin/moto_server" ] &&
        [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null)" = "$MOTO_VERSION" ]
}
if ! have_moto; then
    echo "setup: installing moto[server]==$MOTO_VERSION into $VENV" >&2
    if ! mkdir -p "$VENV" 2>/dev/null || [ ! -w "$VENV" ]; then
        echo "setup: cannot write $VENV (run: sudo bash scripts/setup.sh, or set PGCOMPRESS_VENV)" >&2
        exit 1
    fi
    "$PYTHON" -m venv --clear "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "moto[server]==$MOTO_VERSION"
    have_moto || { echo "setup: moto_server did not install into $VENV" >&2; exit 1; }
fi

# pg8000's own test suite runs direct and through the tunnel (crates/cli/tests/tunnel_pg8000.rs).
# PyPI ships the tests only in the source distribution, so pg8000 is installed from it into the
# venv and the unpacked copy (tests included) stays at $VENV/src/pg8000-$PG8000_VERSION. Its test
# requirements (pyproject.toml, tox deps, minus the linters and packaging tools) are pinned too.
PG8000_VERSION=1.31.5
PG8000_SRC=$VENV/src/pg8000-$PG8000_VERSION
PG8000_TEST_DEPS=(pytest==8.3.5 pytest-mock==3.14.0 pytest-benchmark==5.1.0 pytz==2025.2)
have_pg8000() {
    [ -f "$PG8000_SRC/test/native/conftest.py" ] &&
        [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pg8000"))' 2>/dev/null)" = "$PG8000_VERSION" ] &&
        "$VENV/bin/python" -c 'import pytest, pytest_mock, pytest_benchmark, pytz' >/dev/null 2>&1
}
if ! have_pg8000; then
    echo "setup: installing pg8000==$PG8000_VERSION from its source distribution into $VENV" >&2
    dl=$(mktemp -d)
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-binary :all: --no-deps \
        -d "$dl" "pg8000==$PG8000_VERSION"
    "$VENV/bin/pip" install -q --disable-pip-version-check "$dl/pg8000-$PG8000_VERSION.tar.gz" \
        "${PG8000_TEST_DEPS[@]}"
    rm -rf "$PG8000_SRC"
    mkdir -p "$VENV/src"
    tar -xzf "$dl/pg8000-$PG8000_VERSION.tar.gz" -C "$VENV/src"
    rm -rf "$dl"
    have_pg8000 || { echo "setup: pg8000's tests did not install into $PG8000_SRC" >&2; exit 1; }
fi

# PostgreSQL 16, 17 and 18 beside Debian's 15, only when asked for (scripts/test.sh asks for the
# smoke of those majors; scripts/matrix.sh installs them itself): PGCOMPRESS_PG_MAJORS="16 17 18".
if [ -n "${PGCOMPRESS_PG_MAJORS:-}" ]; then
    # shellcheck disable=SC2086 # a list of majors
    bash "$(dirname "$0")/pg-majors.sh" $PGCOMPRESS_PG_MAJORS
fi

for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c"
    fi
done
bash "$(dirname "$0")/chromium.sh"  # headless browser for the wal advise --html report test
# socat, OpenSSH, ip/tc and tpchgen-cli: the peers and the data of `pgcompress-bench tunnel` (crates/bench/tests/bench_tunnel.rs)
bash "$(dirname "$0")/bench-tools.sh"
echo "setup: ok ($(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1); moto $MOTO_VERSION, pg8000 $PG8000_VERSION in $VENV)" >&2
