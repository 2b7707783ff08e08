#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 20) and fails if any crashes.
#
#   scripts/fuzz.sh [SECONDS]
#
# Works from a clean clone (CI, root included): installs cargo-fuzz if missing, builds
# into fuzz/target (not the workspace's target), and writes the seed corpora into
# fuzz/corpus/<target> from the PostgreSQL 18 fixture in crates/wal/testdata and a few
# hand-written inputs. Crashes are kept in fuzz/artifacts/<target>. On stable Rust,
# RUSTC_BOOTSTRAP=1 lets cargo-fuzz use the sanitizer flags it needs.
set -euo pipefail

secs="${1:-20}"
root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/fuzz"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="$fuzz/target"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# --- seed corpora -------------------------------------------------------------------
seed() { # seed TARGET NAME: writes stdin to corpus/TARGET/NAME
    mkdir -p "$fuzz/corpus/$1"
    cat >"$fuzz/corpus/$1/$2"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
zstd -dc "$root/crates/wal/testdata/pg18-small-1mb.tar.zst" | tar -xf - -C "$tmp"
wal="$tmp/pg18-small-1mb"

# wal_decoder: flags byte, 2-byte chunk seed, then the stream. flags = 2*(start >> 20):
# segment 0x07 starts at 0/700000 (flags 14); bit 0 set prefixes a built-in long header.
for segno in 07 10 1A 24 29; do
    flags=$(( 2 * 16#$segno ))
    { printf "\\x$(printf %02x "$flags")\\x01\\x00"; head -c 32768 "$wal/0000000100000000000000$segno"; } |
        seed wal_decoder "seg$segno-32k"
done
{ printf '\x0e\x07\x00'; head -c 8192 "$wal/000000010000000000000007"; } | seed wal_decoder seg07-page
{ printf '\x01\x33\x00'; dd if="$wal/000000010000000000000007" bs=8 skip=5 count=2048 status=none; } |
    seed wal_decoder prefixed-16k

# pglz_decompress: 2-byte raw size, flags byte, then a pglz stream.
# wal_streams: mode byte 0 (split then join) and a prefix of real segments
for segno in 07 1A; do
    { printf '\x00'; head -c 24576 "$wal/0000000100000000000000$segno"; } | seed wal_streams "seg$segno-24k"
done
{ printf '\x02'; for i in $(seq 400); do printf 'The field of history %d and the people of the world. ' "$i"; done; } |
    seed wal_streams words-prose

# words_decode: 2-byte cap (in 16-byte units), then a word-coded buffer: decoded length u64,
# escape 0xfe, capital marker 0xff, one one-byte code (0x01), no prefixes, dictionary "the \0".
words_head='\xfe\xff\x01\x01\x00\x05\x00\x00\x00the \x00'
{ printf '\x10\x00\x0d\x00\x00\x00\x00\x00\x00\x00'; printf "$words_head"; printf '\x01\xff\x01cat\xfe\x01\xfe\xfe'; } |
    seed words_decode the-The-escapes
{ printf '\x00\x01\xa0\x0f\x00\x00\x00\x00\x00\x00'; printf "$words_head"; for i in $(seq 500); do printf '\x01\xff\x01'; done; } |
    seed words_decode long-body

printf '\x08\x00\x00\x00abcdefgh' | seed pglz_decompress literals
# "abcabcabc": 3 literals, then a tag (length 6, offset 3).
printf '\x09\x00\x00\x08abc\x03\x03' | seed pglz_decompress match
printf '\x00\x01\x01%s' "$(printf 'x%.0s' $(seq 200))" | seed pglz_decompress roundtrip

# block_decompress: method index (Method::ALL: none pglz lz4 zstd snappy gzip xz),
# 3-byte expected length, then the compressed bytes.
text="$(head -c 4000 "$root/crates/wal/testdata/pg18-small-1mb.pg_waldump-stats.txt")"
len3='\xa0\x0f\x00' # 4000
{ printf "\\x03$len3"; printf %s "$text" | zstd -q -c; } | seed block_decompress zstd
{ printf "\\x05$len3"; printf %s "$text" | gzip -c; } | seed block_decompress gzip
if command -v xz >/dev/null; then
    { printf "\\x06$len3"; printf %s "$text" | xz -c; } | seed block_decompress xz
fi
{ printf "\\x00$len3"; printf %s "$text"; } | seed block_decompress none
printf '\x01\x09\x00\x00\x08abc\x03\x03' | seed block_decompress pglz

# stream_decompress: method index (as above), then a stream of that method.
{ printf '\x03'; printf %s "$text" | zstd -q -c; } | seed stream_decompress zstd
{ printf '\x05'; printf %s "$text" | gzip -c; } | seed stream_decompress gzip
if command -v xz >/dev/null; then
    { printf '\x06'; printf %s "$text" | xz -c; } | seed stream_decompress xz
fi
{ printf '\x00'; printf %s "$text"; } | seed stream_decompress none

# spec_parse
i=0
for s in none pglz lz4 lz4:9 zstd zstd:5 zstd:level=19,long zstd:long=20,workers=4 \
    gzip:9 xz:level=6 snappy pglz,lz4,zstd:level=19,long,zstd:5 'zstd:-5' 'zstd:+3'; do
    printf %s "$s" | seed spec_parse "s$i"
    i=$((i + 1))
done

# archive_container: the magic alone, and the magic with a short header
printf 'PGCZARC\n' | seed archive_container magic
printf 'PGCZARC\n\x01\x00\x00\x00\x40\x00\x00\x00' | seed archive_container short

# --- run ------------------------------------------------------------------------------
cd "$fuzz"
failed=()
for target in $(cargo fuzz list); do
    echo "=== $target: ${secs}s"
    if ! cargo fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
        failed+=("$target")
    fi
done
if ((${#failed[@]})); then
    echo "fuzz targets that crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "all fuzz targets ran ${secs}s without a crash"
