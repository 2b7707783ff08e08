//! Short messages compress like long ones: narrow rows and OLTP's small answers share the
//! persistent context of their direction instead of crossing verbatim one by one.

mod common;

use codec::Spec;
use common::*;
use wire::link::frame::{self, parse_header, HEADER_LEN};
use wire::link::{parse_spec, LinkDecoder, LinkEncoder, SenderConfig};
use wire::Direction;

const F2B: Direction = Direction::FrontendToBackend;
const B2F: Direction = Direction::BackendToFrontend;

fn spec(s: &str) -> Spec {
    parse_spec(s).expect("valid spec")
}

/// Encodes `batches` (each what one read yields), flushing after each as the pump does when
/// its source has nothing more ready; returns the link bytes.
fn encode_batches(enc: &mut LinkEncoder, batches: &[Vec<u8>]) -> Vec<u8> {
    let mut link = Vec::new();
    for b in batches {
        for (tag, bytes) in typed_messages(b) {
            enc.push_bytes(tag, bytes).expect("push");
        }
        enc.flush().expect("flush");
        link.extend_from_slice(enc.output());
        let n = enc.pending();
        enc.consume(n);
    }
    link
}

/// Splits typed messages (after the startup) without a framer's state.
fn typed_messages(mut b: &[u8]) -> Vec<(Option<u8>, &[u8])> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize + 1;
        v.push((Some(b[0]), &b[..len]));
        b = &b[len..];
    }
    v
}

fn decode_all(dec: &mut LinkDecoder, link: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(d) = dec.decode(&link[at..], &mut out).expect("valid link") {
        at += d.consumed;
    }
    dec.finish(&link[at..]).expect("whole frames");
    out
}

fn chunks(link: &[u8]) -> usize {
    let mut rest = link;
    let mut n = 0;
    while !rest.is_empty() {
        let h = parse_header(B2F, 0, rest).expect("valid").expect("whole");
        n += usize::from(h.frame_type == frame::CHUNK);
        rest = &rest[h.frame_len()..];
    }
    n
}

/// A narrow row as `SELECT *` returns it: an int, a short text, an int, a timestamptz, about
/// 40 bytes on the wire.
fn narrow_row(i: usize) -> Vec<u8> {
    data_row(&[
        &format!("{i}"),
        &format!("n{}", i % 97),
        &format!("{}", (i * 31) % 1000),
        &format!(
            "2026-11-{:02} 10:{:02}:{:02}+00",
            1 + i % 28,
            i % 60,
            (i * 7) % 60
        ),
    ])
}

#[test]
fn narrow_rows_compress_in_every_method_and_come_back() {
    let mut batches = vec![backend_start()];
    // 64 KiB reads of ~40-byte rows: about 1,600 rows a batch.
    for b in 0..12 {
        let rows: Vec<u8> = (b * 1600..(b + 1) * 1600).flat_map(narrow_row).collect();
        batches.push(rows);
    }
    let raw: Vec<u8> = batches.concat();
    for (m, factor) in [("zstd:1", 4), ("lz4", 2), ("zstd:3", 4)] {
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let link = encode_batches(&mut enc, &batches);
        assert!(
            link.len() * factor < raw.len(),
            "{m}: {} link bytes for {} raw bytes of narrow rows ({} chunks)",
            link.len(),
            raw.len(),
            chunks(&link)
        );
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        assert!(decode_all(&mut dec, &link) == raw, "{m}: round trip");
    }
}

/// pgbench's tpcb-like transaction as the backend answers it, one answer per read.
fn tpcb_answers(txns: usize) -> Vec<Vec<u8>> {
    let mut v = vec![backend_start()];
    for i in 0..txns {
        v.push([typed(b'C', &cstr("BEGIN")), typed(b'Z', b"T")].concat());
        for _ in 0..1 {
            v.push([typed(b'C', &cstr("UPDATE 1")), typed(b'Z', b"T")].concat());
        }
        let mut select = typed(
            b'T',
            &[
                1u16.to_be_bytes().to_vec(),
                cstr("abalance"),
                vec![
                    0, 0, 0x40, 0, 0, 3, 0, 0, 0, 0x17, 0, 4, 0xff, 0xff, 0xff, 0xff, 0, 0,
                ],
            ]
            .concat(),
        );
        select.extend(data_row(&[&format!("{}", (i * 7919) % 5000)]));
        select.extend(typed(b'C', &cstr("SELECT 1")));
        select.extend(typed(b'Z', b"T"));
        v.push(select);
        v.push([typed(b'C', &cstr("UPDATE 1")), typed(b'Z', b"T")].concat());
        v.push([typed(b'C', &cstr("UPDATE 1")), typed(b'Z', b"T")].concat());
        v.push([typed(b'C', &cstr("INSERT 0 1")), typed(b'Z', b"T")].concat());
        v.push([typed(b'C', &cstr("COMMIT")), typed(b'Z', b"I")].concat());
    }
    v
}

/// pgbench's tpcb-like statements as the frontend sends them, one per read.
fn tpcb_statements(txns: usize) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..txns {
        let (aid, bid, tid, delta) = (i * 7919 % 100_000 + 1, i % 3 + 1, i % 30 + 1, i % 9999);
        for q in [
            "BEGIN;".to_owned(),
            format!("UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid};"),
            format!("SELECT abalance FROM pgbench_accounts WHERE aid = {aid};"),
            format!("UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid};"),
            format!("UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid};"),
            format!(
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ({tid}, {bid}, {aid}, {delta}, CURRENT_TIMESTAMP);"
            ),
            "END;".to_owned(),
        ] {
            v.push(typed(b'Q', &cstr(&q)));
        }
    }
    v
}

#[test]
fn oltp_never_costs_more_link_bytes_than_protocol_bytes() {
    for m in ["zstd:1", "lz4"] {
        let answers = tpcb_answers(500);
        let raw: usize = answers.iter().map(Vec::len).sum();
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let link = encode_batches(&mut enc, &answers);
        assert!(
            link.len() <= raw,
            "{m}: backend->frontend {} link bytes for {raw} protocol bytes",
            link.len()
        );
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        assert!(decode_all(&mut dec, &link) == answers.concat());

        let statements = tpcb_statements(500);
        let raw: usize = statements.iter().map(Vec::len).sum();
        let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec(m))).expect("encoder");
        enc.session_ready();
        let link = encode_batches(&mut enc, &statements);
        assert!(
            link.len() <= raw,
            "{m}: frontend->backend {} link bytes for {raw} protocol bytes",
            link.len()
        );
        let mut dec = LinkDecoder::new(F2B, spec(m)).expect("decoder");
        dec.session_ready();
        assert!(decode_all(&mut dec, &link) == statements.concat());
    }
}

#[test]
fn a_batch_is_compressed_by_the_bytes_ready_together_not_by_one_message() {
    let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec("zstd:1"))).expect("encoder");
    enc.session_ready();
    // Ten 25-byte messages read in one go make a 250-byte batch: one chunk, although each is
    // under the 60-byte threshold.
    let batch: Vec<u8> = (0..10).flat_map(|_| typed(b'd', &[b'x'; 20])).collect();
    // One short message alone, while the context is cold, stays verbatim: a chunk's headers
    // and the zstd frame's would outweigh it.
    let link = encode_batches(&mut enc, &[typed(b'd', &[b'y'; 20])]);
    assert_eq!(chunks(&link), 0);
    assert_eq!(link.len(), HEADER_LEN + 25);
    let link = encode_batches(&mut enc, &[batch]);
    assert_eq!(chunks(&link), 1, "one chunk for the batch");
}

/// Link bytes of each flush of `batches`, one flush per batch.
fn link_bytes_per_flush(enc: &mut LinkEncoder, batches: &[Vec<u8>]) -> Vec<usize> {
    batches
        .iter()
        .map(|b| encode_batches(enc, std::slice::from_ref(b)).len())
        .collect()
}

#[test]
fn a_short_oltp_answer_costs_fewer_link_bytes_than_protocol_bytes_once_the_context_is_warm() {
    // Each answer is sent alone (the client waits for it), so the net layer pays one TLS
    // record per answer whatever the encoder does; what the encoder controls is the frame.
    // Once the context holds earlier transactions' answers, the short ones ("UPDATE 1" and
    // ReadyForQuery, 20 bytes) repeat them and must cost less than a verbatim frame, and the
    // transactions fewer link bytes than protocol bytes.
    let answers = tpcb_answers(50);
    let first_txn = 1 + 7;
    let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec("zstd:1"))).expect("encoder");
    let sizes = link_bytes_per_flush(&mut enc, &answers);
    let (mut raw, mut link) = (0, 0);
    // From the third transaction on, every answer has been seen before.
    for (a, &n) in answers.iter().zip(&sizes).skip(first_txn + 7) {
        assert!(
            n < HEADER_LEN + a.len(),
            "zstd:1: a {}-byte answer took {n} link bytes after the context was warm, \
             not fewer than verbatim",
            a.len()
        );
        raw += a.len();
        link += n;
    }
    assert!(
        link < raw,
        "zstd:1: {link} link bytes for {raw} protocol bytes"
    );
    let mut dec = LinkDecoder::new(B2F, spec("zstd:1")).expect("decoder");
    let all = encode_batches(
        &mut LinkEncoder::new(B2F, SenderConfig::new(spec("zstd:1"))).expect("encoder"),
        &answers,
    );
    assert!(decode_all(&mut dec, &all) == answers.concat(), "round trip");
}

#[test]
fn a_short_statement_never_costs_more_than_verbatim_once_the_context_is_warm() {
    // "BEGIN;" and "END;" (12 and 10 bytes) repeat what the context holds, but a zstd block
    // of a repeat still costs about 10 bytes plus the chunk's 9 of headers: above their
    // verbatim frames. Longer statements are compressed.
    let statements = tpcb_statements(50);
    let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec("zstd:1"))).expect("encoder");
    enc.session_ready();
    let sizes = link_bytes_per_flush(&mut enc, &statements);
    for (s, &n) in statements.iter().zip(&sizes).skip(14) {
        assert!(
            n <= HEADER_LEN + s.len(),
            "zstd:1: a {}-byte statement took {n} link bytes, more than verbatim",
            s.len()
        );
    }
}
