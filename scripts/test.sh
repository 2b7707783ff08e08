#!/usr/bin/env bash
# The whole test suite, exactly what CI runs: format, lints, a short run of every
# fuzz target, then every test, including those against a real PostgreSQL server.
#
#   bash scripts/test.sh              # FUZZ_SECONDS=20 per target by default
#   FUZZ_SECONDS=0 bash scripts/test.sh   # skip fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== module cycles"
python3 scripts/module-cycles.py
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
    echo "== fuzz, ${FUZZ_SECONDS:-20} s per target"
    bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
echo "== cargo test"
cargo test --workspace --locked
