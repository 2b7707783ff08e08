#!/usr/bin/env bash
# The long version of the archive crash tests: SIGKILL of `archive push --async`'s
# foreground and of the process serving its spool at random moments, TRIALS times
# (default 100; CI runs 4), with every segment reported archived restored byte-identical.
#
#   scripts/archive-crash.sh [TRIALS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
PGCOMPRESS_ASYNC_TRIALS="${1:-100}" cargo test -p cli --test archive_async \
    sigkill_of_the_foreground_or_the_server -- --nocapture
