#!/usr/bin/env bash
# The memory bounds at full size, too long for every CI run (minutes, ~4 GB of disk each):
# a streamed transaction of over 1 GB of changes held with --work-mem 64MB, peak resident
# memory under 256 MB, measured in `bench spill`'s consumer and in the `logical recv` process.
# CI runs the same checks at 80 MB (bench_spill::a_large_transaction_stays_within_bounded_memory).
#   bash scripts/memory-bounds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test -q -p bench --test bench_spill --no-run
cargo test -q -p cli --test logical_recv --no-run
cargo test -q -p bench --test bench_spill -- --ignored --nocapture 2>&1 | grep -E "held|test result|panicked"
cargo test -q -p cli --test logical_recv -- --ignored --nocapture 2>&1 | grep -E "peak|held|RSS|test result|panicked"
