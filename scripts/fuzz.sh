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

# words_decode: 2-byte cap (in 16-byte units; its low six bits also pick the window of the
# windowed reading), then a word-coded buffer: decoded length u64,
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

# archive_container: the magic alone, the magic with a short header (format 1, no flags),
# and the golden container (a whole WAL records container with streams and a zero tail)
printf 'PGCZARC\n' | seed archive_container magic
printf 'PGCZARC\n\x01\x00\x00\x00\x40\x00\x00\x00' | seed archive_container short
seed archive_container golden-segment <"$root/crates/archive/testdata/golden-segment.pgcz"

# archive_history: a file name, a newline, then a backup or timeline history file as
# PostgreSQL writes them.
printf '000000010000000000000006.00000028.backup\nSTART WAL LOCATION: 0/6000028 (file 000000010000000000000006)\nSTOP WAL LOCATION: 0/6000100 (file 000000010000000000000006)\nCHECKPOINT LOCATION: 0/6000060\nBACKUP METHOD: streamed\nBACKUP FROM: primary\nSTART TIME: 2026-11-25 00:10:00 UTC\nLABEL: pg_basebackup base backup\nSTART TIMELINE: 1\nSTOP TIME: 2026-11-25 00:10:01 UTC\nSTOP TIMELINE: 1\n' |
    seed archive_history backup
printf '00000003.history\n1\t0/3000158\tno recovery target specified\n\n2\t0/5000000\tbefore 2000-01-01 00:00:00+00\n' |
    seed archive_history timeline

# archive_identity: an identity file as `archive init` writes it, and a segment's first page.
printf 'pgcompress-repository 1\n# comment\nsystem_identifier 7312345678901234567\nwal_segment_size 16777216\npg_major 15\n' |
    seed archive_identity file
head -c 40 "$wal/000000010000000000000007" | seed archive_identity first-page

# columns_decode: 2-byte cap (in 16-byte units), then bytes that are decoded as a column-coded
# buffer and column-coded themselves: CSV rows (cut inside a row at both ends, as a link chunk
# is) and tab-separated rows with a CopyData header inside them.
{ printf '\xff\x7f7,155190,7706,1,17,21168.23,0.04'; for i in $(seq 40); do printf '\n%d,%d,%d,1,17,2%d.23,0.04,0.02,N,O,1996-03-13,1996-02-12,DELIVER IN PERSON,TRUCK,egular courts above the' "$i" $((i * 37)) $((i * 11)) "$i"; done; } |
    seed columns_decode csv-rows
{ printf '\x00\x10'; for i in $(seq 30); do
    printf '%d\t\\N\tname %d\n' "$i" "$i"
    if [ "$i" = 15 ]; then printf 'd\x00\x00\x20\x04'; fi
done; } |
    seed columns_decode tsv-copydata

# wire_framer: control byte (bit 0: backend->frontend; the rest: feeding step), then a
# PostgreSQL byte stream.
be32() { printf "\\x$(printf %02x $((($1 >> 24) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $(($1 & 255)))"; }
startup='\x00\x00\x00\x17\x00\x03\x00\x00user\x00postgres\x00\x00'
query='Q\x00\x00\x00\x0dSELECT 1\x00'
printf "\\x00$startup${query}X\\x00\\x00\\x00\\x04" | seed wire_framer startup-query
printf "\\x08\\x00\\x00\\x00\\x08\\x04\\xd2\\x16\\x2f$startup$query" | seed wire_framer ssl-startup
printf '\x02\x00\x00\x00\x10\x04\xd2\x16\x2e\x00\x00\x04\xd2\xde\xad\xbe\xef' | seed wire_framer cancel
printf '\x01R\x00\x00\x00\x08\x00\x00\x00\x00Z\x00\x00\x00\x05ID\x00\x00\x00\x0f\x00\x01\x00\x00\x00\x05helloC\x00\x00\x00\x0dSELECT 1\x00' |
    seed wire_framer backend-rows

# link_frames: control byte (bits 0-1: none lz4 zstd:1 zstd:6, the last with column-coded
# chunks allowed; bit 2: session ready; the rest:
# message size for the round trip), then link frames.
printf '\x00V\x00\x00\x00\x05hello' | seed link_frames verbatim
printf '\x00R\x00\x00\x00\x00V\x00\x00\x00\x05hello' | seed link_frames ready-verbatim
# zstd:6, ready, 1000-byte messages: CSV rows the encoder half sends column-coded.
{ printf '\xdf'; for i in $(seq 300); do printf '%d,%d,%d,N,O,1996-03-%02d,DELIVER IN PERSON,TRUCK\n' "$i" $((i * 37)) $((i % 7)) $((i % 28 + 1)); done; } |
    seed link_frames columns-rows
words="$(for i in $(seq 60); do printf 'row %d of the table orders\t2026-11-23\n' "$i"; done)"
for m in 1:lz4 2:zstd; do
    z="$tmp/chunk.$m"
    if [ "${m#*:}" = lz4 ]; then printf %s "$words" | lz4 -q -c >"$z" 2>/dev/null || continue
    else printf %s "$words" | zstd -q -c >"$z"; fi
    { printf "\\x0$((${m%%:*} + 4))Z"; be32 $(($(wc -c <"$z") + 4)); be32 ${#words}; cat "$z"; } |
        seed link_frames "chunk-${m#*:}"
done

# metrics_request: the size of each read minus one, then what a scraper sends.
printf '\x07GET /metrics HTTP/1.1\r\nHost: db1:9188\r\nAccept: */*\r\n\r\n' | seed metrics_request get
printf '\x00GET /metrics?x=1 HTTP/1.0\r\n\r\n' | seed metrics_request query
printf '\xffPOST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc' | seed metrics_request post

# pgoutput_decode: an options byte (bits 0-1 proto_version-1, bits 2-3 streaming, bit 4
# inside a stream), then messages each with a 2-byte big-endian length. The messages are real:
# pg_logical_slot_peek_binary_changes output of crates/logical/tests/pg15.rs on PostgreSQL 15.
hexbytes() { printf "$(printf %s "$1" | sed 's/../\\x&/g')"; }
pgoutput_session() { # NAME FLAGS HEX...
    local name=$1 flags=$2
    shift 2
    {
        hexbytes "$flags"
        for m in "$@"; do
            hexbytes "$(printf %04x $((${#m} / 2)))"
            hexbytes "$m"
        done
    } | seed pgoutput_decode "$name"
}
pgoutput_session txn-v2 05 \
    420000000001541550000303f6b5d3a06e000002dd \
    52000040077075626c696300770064000d0169640000000017ffffffff006e00000006a4ffffffff00620000000010ffffffff007600000004130000000e00747300000004a0ffffffff006a0000000edaffffffff0062696e0000000011ffffffff006600000002bdffffffff0061727200000003efffffffff004d697865640000000019ffffffff00730000000015ffffffff006269670000000014ffffffff0062697473000000061800000003 \
    49000040074e000d7400000001317400000004312e353074000000017474000000036162637400000016323032302d30312d30322030333a30343a30352b3030740000000f7b2261223a205b312c202278225d7d74000000085c783030666632377400000003322e35740000000a7b312c322c4e554c4c7d7400000008697427732022712274000000022d33740000000a393030303030303030307400000003313031 \
    49000040074e000d7400000001326e7400000001666e6e6e6e6e6e6e6e6e6e \
    430000000000015415500000000001541580000303f6b5d3a06e \
    4d0000000000015461d86e6f6e747800000000076f757473696465
pgoutput_session stream-v2 05 \
    53000002ed01 \
    52000002ed000040007075626c696300740064000201690000000017ffffffff00740000000019ffffffff \
    49000002ed000040004e0002740000000131740000001148656c6c6f206e756d626572206ec2b031 \
    49000002ed000040004e0002740000000132740000001148656c6c6f206e756d626572206ec2b032 \
    45 \
    41000002ed000002ee \
    41000002f3000002f3 \
    63000002ed0000000000016946380000000001694678000303f6b5d5afe6
pgoutput_session update-truncate 05 \
    420000000001541550000303f6b5d3a06e000002dd \
    550000400e4f00027400000001317400000001614e0002740000000131740000000162 \
    5400000002020000401a0000401e
printf '\x1f' | seed pgoutput_decode v4-parallel-in-stream

# spill_read: byte 0 = 0, then a whole spill file (the format-1 golden files of
# crates/logical/testdata); byte 0 = 1 + 2*method, then records after a header built in.
method_id=0
for name in none pglz lz4 zstd; do
    f="$root/crates/logical/testdata/spill-v1-$name.spill"
    { printf '\x00'; cat "$f"; } | seed spill_read "file-$name"
    # dd, not `tail | head`: under pipefail, tail's SIGPIPE when head stops would end the script.
    { printf "\\x$(printf %02x $((1 + 2 * method_id)))"; dd if="$f" iflag=skip_bytes,count_bytes skip=24 count=16384 status=none; } |
        seed spill_read "records-$name"
    method_id=$((method_id + 1))
done

# tls_end_point: server certificates (DER) signed with ECDSA SHA-256 and SHA-384, RSA
# SHA-256 and Ed25519, when the openssl command is there.
if command -v openssl >/dev/null; then
    for spec in "ec -pkeyopt ec_paramgen_curve:P-256 -sha256" "ec -pkeyopt ec_paramgen_curve:P-384 -sha384" \
        "rsa:2048 -sha256" "ed25519"; do
        name="$(echo "$spec" | tr -c 'a-zA-Z0-9\n' '-' | cut -c1-40)"
        # shellcheck disable=SC2086
        openssl req -x509 -newkey $spec -nodes -keyout /dev/null -subj /CN=localhost -days 1 \
            -outform DER -out "$tmp/cert.der" 2>/dev/null &&
            seed tls_end_point "$name" <"$tmp/cert.der"
    done
fi

# --- run ------------------------------------------------------------------------------
cd "$fuzz"
failed=()
for target in $(cargo fuzz list); do
    echo "=== $target: ${secs}s"
    # Targets of the replication client build with it; the others without (fuzz/Cargo.toml).
    features=()
    if [[ $target == tls_end_point ]]; then
        features=(--features net)
    fi
    if ! cargo fuzz run "${features[@]}" "$target" "corpus/$target" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
        failed+=("$target")
    fi
done
if ((${#failed[@]})); then
    echo "fuzz targets that crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "all fuzz targets ran ${secs}s without a crash"
