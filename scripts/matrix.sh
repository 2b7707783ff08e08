#!/usr/bin/env bash
# The compatibility matrix: every channel's tests against live PostgreSQL 15, 16, 17 and 18.
# Installs the majors first (scripts/pg-majors.sh, a no-op when present), then runs the same
# integration tests once per major with PGCOMPRESS_PG_MAJOR set, and prints pass/fail per
# channel and major. Logs go to $MATRIX_LOGS (default target/matrix).
#
#   bash scripts/matrix.sh                    # every major, every channel
#   MAJORS="16 18" CHANNELS="wal logical" bash scripts/matrix.sh
set -uo pipefail
cd "$(dirname "$0")/.."

MAJORS=${MAJORS:-15 16 17 18}
CHANNELS=${CHANNELS:-wal advise archive tunnel logical demo}
LOGS=${MATRIX_LOGS:-target/matrix}
mkdir -p "$LOGS"

# channel -> the cli integration tests that prove it
declare -A TESTS=(
    [wal]="pg_waldump verify"
    [advise]="advise"
    [archive]="archive_e2e"
    [tunnel]="tunnel_clients tunnel_replication"
    [logical]="logical_recv"
    [demo]="demo"
)

bash scripts/pg-majors.sh || exit 1
# One build for every major: the tests choose the server at run time.
targets=()
for ch in $CHANNELS; do for t in ${TESTS[$ch]}; do targets+=(--test "$t"); done; done
cargo test -p cli "${targets[@]}" --no-run -q 2>&1 | tail -n 5

declare -A RESULT VERSION
for m in $MAJORS; do
    VERSION[$m]=$(PGCOMPRESS_PG_MAJOR=$m cargo run -q -p pgtest --example pg-version 2>/dev/null || echo "?")
    for ch in $CHANNELS; do
        res=pass
        for t in ${TESTS[$ch]}; do
            log=$LOGS/$m-$ch-$t.log
            if ! PGCOMPRESS_PG_MAJOR=$m cargo test -q -p cli --test "$t" >"$log" 2>&1; then
                res=FAIL
                echo "matrix: PostgreSQL $m, $ch: $t failed (see $log)" >&2
            fi
        done
        RESULT[$m,$ch]=$res
        echo "matrix: PostgreSQL $m ${VERSION[$m]}, $ch: $res" >&2
    done
done

printf '\n| major | version |'
for ch in $CHANNELS; do printf ' %s |' "$ch"; done
printf '\n|---|---|'
for ch in $CHANNELS; do printf -- '---|'; done
printf '\n'
fail=0
for m in $MAJORS; do
    printf '| %s | %s |' "$m" "${VERSION[$m]}"
    for ch in $CHANNELS; do
        printf ' %s |' "${RESULT[$m,$ch]}"
        [ "${RESULT[$m,$ch]}" = pass ] || fail=1
    done
    printf '\n'
done
exit $fail
