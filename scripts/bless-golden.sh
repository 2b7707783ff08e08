#!/usr/bin/env bash
# Regenerates crates/archive/testdata/golden-segment.pgcz, the golden container that
# crates/archive/tests/golden.rs compares push's output with. Run it only after a deliberate
# change to the container format or to a coder whose bytes it stores, and say why in the
# commit; the test prints the input's SHA-256, which must match INPUT_SHA256 in the test.
set -euo pipefail
cd "$(dirname "$0")/.."
PGCOMPRESS_BLESS=1 cargo test -p archive --test golden -- --nocapture
