#!/usr/bin/env bash
# The long run of the logical model test: random sessions, four at once, each run's output of
# `logical recv` (lz4, zstd:1 and none spills) compared with test_decoding change for change,
# with a fresh seed per run, for MINUTES minutes (default 20). A run is SESSIONS sessions
# (default 200) of TRANSACTIONS random transactions each (default 4).
#   bash scripts/logical-model.sh [MINUTES] [SESSIONS] [TRANSACTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-20}"
export PGCOMPRESS_MODEL_SESSIONS="${2:-200}"
export PGCOMPRESS_MODEL_TRANSACTIONS="${3:-4}"
cargo test -q -p cli --test logical_model --no-run
end=$(( $(date +%s) + minutes * 60 ))
runs=0
while [ "$(date +%s)" -lt "$end" ]; do
    runs=$((runs + 1))
    if ! out=$(cargo test -q -p cli --test logical_model -- --exact concurrent_random_sessions_equal_test_decoding --nocapture 2>&1); then
        echo "$out" | grep -E "seed|panicked|differs" || echo "$out" | tail -30
        echo "logical model: run $runs FAILED"
        exit 1
    fi
    echo "$out" | grep -E "^seed " | sed "s/^/run $runs: /"
done
echo "logical model: $runs runs of $PGCOMPRESS_MODEL_SESSIONS sessions, every one equal to test_decoding"
