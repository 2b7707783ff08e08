#!/usr/bin/env bash
# The whole test suite, exactly what CI runs: format, lints, a short run of every
# fuzz target, then every test, including those against a real PostgreSQL server.
#
#   bash scripts/test.sh              # FUZZ_SECONDS=20 per target by default
#   FUZZ_SECONDS=0 bash scripts/test.sh   # skip fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

# The majors besides 15 whose smoke runs after the suite (empty: none).
export PGCOMPRESS_PG_MAJORS="${PGCOMPRESS_PG_MAJORS-16 17 18}"
bash scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== module cycles"
python3 scripts/module-cycles.py
echo "== pgcompress ships only the product"
# The lab (namespaces, peers, the installer of scripts/bench-tools.sh) is pgcompress-bench's alone.
lab=$(cargo tree -p cli -e normal --prefix none --locked | grep -E '^(bench|pgtest) ' || true)
if [ -n "$lab" ]; then
    echo "test: pgcompress depends on the lab: $lab" >&2
    exit 1
fi
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
    echo "== fuzz, ${FUZZ_SECONDS:-20} s per target"
    bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
echo "== cargo test"
cargo test --workspace --locked
# A short smoke of the other majors: one test per channel (wal, advise, archive, tunnel,
# logical, demo), the same tests the default run gives PostgreSQL 15; scripts/matrix.sh runs
# them all.
for m in $PGCOMPRESS_PG_MAJORS; do
    echo "== smoke, PostgreSQL $m"
    PGCOMPRESS_PG_MAJOR=$m cargo test -q -p cli --locked \
        --test pg_waldump --test advise --test archive_e2e --test tunnel_clients --test logical_recv --test demo -- \
        stats_equal_pg_waldump_1mb_segments pglz_prediction_equals_what_postgres_stored \
        recovery_from_a_directory_archive_reaches_the_same_data pgbench_simple_extended_prepared \
        same_changes_as_test_decoding_at_default_work_mem demo_json_compares_the_four_settings
done
