//! Long messages pass through in pieces: the framer never needs a buffer longer than its
//! whole-message limit, and the link carries the same bytes as when messages are pushed whole.

mod common;

use common::*;
use wire::link::{parse_spec, LinkDecoder, LinkEncoder, SenderConfig};
use wire::{Direction, FrameErrorKind, Framer, Piece};

const B2F: Direction = Direction::BackendToFrontend;

/// A session whose result has one DataRow of `big` bytes among ordinary rows, as a 300 MB
/// single-row SELECT would, scaled down.
fn session_with_big_row(big: usize) -> Vec<u8> {
    let mut s = backend_start();
    s.extend(backend_rows(50));
    let value: String = (0..big)
        .map(|i| char::from(b'a' + ((i * 7 + i / 13) % 26) as u8))
        .collect();
    s.extend(data_row(&[&value]));
    s.extend(backend_rows(20));
    s
}

/// Frames `stream` arriving `read` bytes at a time into a buffer of at most `cap` bytes,
/// pushing each piece into `enc`; returns the pieces' bytes and the largest buffer used.
fn pump(stream: &[u8], read: usize, cap: usize, enc: &mut LinkEncoder) -> (Vec<u8>, usize) {
    let mut framer = Framer::new(B2F).with_whole_max(cap);
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    let mut largest = 0;
    let mut input = stream;
    loop {
        while let Some(piece) = framer.poll_piece(&buf).expect("valid stream") {
            seen.extend_from_slice(piece.bytes);
            enc.push_piece(&piece).expect("push");
            let n = piece.bytes.len();
            buf.drain(..n);
        }
        if input.is_empty() {
            break;
        }
        // A reader fills its buffer up to the framer's limit, never past it.
        let room = (cap + 1).saturating_sub(buf.len()).min(read).max(1);
        let n = room.min(input.len());
        buf.extend_from_slice(&input[..n]);
        input = &input[n..];
        largest = largest.max(buf.len());
        enc.flush().expect("flush");
    }
    framer.finish(&buf).expect("nothing cut off");
    enc.flush().expect("flush");
    (seen, largest)
}

fn decode_all(spec: &str, link: &[u8]) -> Vec<u8> {
    let mut dec = LinkDecoder::new(B2F, parse_spec(spec).expect("spec")).expect("decoder");
    let mut out = Vec::new();
    let mut rest = link;
    while let Some(d) = dec.decode(rest, &mut out).expect("valid link") {
        rest = &rest[d.consumed..];
    }
    assert!(rest.is_empty());
    out
}

#[test]
fn a_long_row_streams_through_a_bounded_buffer() {
    let big = 3 * 1024 * 1024 + 17;
    let stream = session_with_big_row(big);
    let cap = 64 * 1024;
    for spec in ["none", "lz4", "zstd:1"] {
        for read in [1000, 8192, 65536] {
            let mut enc = LinkEncoder::new(B2F, SenderConfig::new(parse_spec(spec).expect("spec")))
                .expect("encoder");
            let (seen, largest) = pump(&stream, read, cap, &mut enc);
            assert_eq!(seen, stream, "{spec}/{read}: pieces rebuild the stream");
            assert!(
                largest <= cap + 1,
                "{spec}/{read}: buffer grew to {largest}"
            );
            let link = enc.output().to_vec();
            assert_eq!(decode_all(spec, &link), stream, "{spec}/{read}");
            let c = enc.counters();
            assert_eq!(c.raw_bytes, stream.len() as u64);
            if spec != "none" {
                // The long row is compressible text: it went into chunks, not verbatim.
                assert!(
                    (link.len() as f64) < stream.len() as f64 * 0.5,
                    "{spec}/{read}: {} link bytes for {} raw",
                    link.len(),
                    stream.len()
                );
            }
        }
    }
}

#[test]
fn pieces_and_whole_messages_make_the_same_link_bytes() {
    let stream = session_with_big_row(700 * 1024);
    for spec in ["none", "lz4", "zstd:1"] {
        let config = SenderConfig::new(parse_spec(spec).expect("spec"));
        let mut whole = LinkEncoder::new(B2F, config.clone()).expect("encoder");
        for (tag, bytes) in frame_all(B2F, &stream) {
            whole.push_bytes(tag, &bytes).expect("push");
        }
        whole.flush().expect("flush");
        let mut pieces = LinkEncoder::new(B2F, config).expect("encoder");
        let mut framer = Framer::new(B2F).with_whole_max(16 * 1024);
        let mut rest = &stream[..];
        let mut count = 0;
        while let Some(p) = framer.poll_piece(rest).expect("valid") {
            pieces.push_piece(&p).expect("push");
            rest = &rest[p.bytes.len()..];
            count += 1;
        }
        pieces.flush().expect("flush");
        assert!(rest.is_empty());
        assert_eq!(whole.output(), pieces.output(), "{spec}");
        assert_eq!(whole.counters(), pieces.counters(), "{spec}");
        assert!(count > 70, "{count} pieces");
    }
}

#[test]
fn first_piece_carries_the_checked_length_and_a_cut_stream_is_an_error() {
    let body = vec![b'x'; 100_000];
    let msg = typed(b'd', &body);
    let mut f = Framer::new(B2F).with_whole_max(1);
    assert_eq!(f.whole_max(), 10_004, "first packets always come whole");
    let first: Piece<'_> = f.poll_piece(&msg[..20_000]).expect("ok").expect("piece");
    assert!(first.first && !first.last);
    assert_eq!(first.total, msg.len());
    assert_eq!(first.tag(), Some(b'd'));
    assert_eq!(first.bytes.len(), 20_000);
    assert!(f.in_message());
    // poll() never reads the middle of a message as a header.
    assert_eq!(f.poll(&msg[20_000..]).expect("ok"), None);
    let err = f.finish(&msg[20_000..30_000]).expect_err("cut off");
    assert!(
        matches!(err.kind, FrameErrorKind::Truncated { .. }),
        "{err}"
    );
    let next = f.poll_piece(&msg[20_000..]).expect("ok").expect("piece");
    assert!(!next.first && next.last);
    assert_eq!(f.offset(), msg.len() as u64);
    assert!(!f.in_message());
    f.finish(&[]).expect("clean end");

    // A length over PostgreSQL's cap is refused from the header, before any piece.
    let mut f = Framer::new(B2F);
    let mut huge = vec![b'T'];
    huge.extend_from_slice(&(2_000_000_000u32).to_be_bytes());
    assert!(f.poll_piece(&huge).is_err());
}

#[test]
fn a_long_query_crosses_the_link_in_both_framings() {
    // A multi-megabyte INSERT with its value as a literal: one Query message, compressible.
    let value: String = (0..3 * 1024 * 1024 + 5)
        .map(|i| char::from(b'a' + ((i * 31 + i / 7) % 26) as u8))
        .collect();
    let mut stream = startup(0, &[("user", "alice"), ("database", "shop")]);
    let session_start = stream.len();
    stream.extend(typed(
        b'Q',
        &cstr(&format!("INSERT INTO big VALUES (1, '{value}')")),
    ));
    stream.extend(typed(b'Q', &cstr("SELECT 1")));
    let f2b = Direction::FrontendToBackend;
    for spec in ["none", "lz4", "zstd:1"] {
        for whole_max in [16 * 1024, 64 * 1024 * 1024] {
            let mut enc = LinkEncoder::new(f2b, SenderConfig::new(parse_spec(spec).expect("spec")))
                .expect("encoder");
            let mut framer = Framer::new(f2b).with_whole_max(whole_max);
            let mut rest = &stream[..];
            while let Some(p) = framer.poll_piece(rest).expect("valid") {
                enc.push_piece(&p).expect("push");
                rest = &rest[p.bytes.len()..];
                if !enc.is_ready() && stream.len() - rest.len() == session_start {
                    // The startup packet has gone: the other direction saw ReadyForQuery.
                    enc.session_ready();
                }
            }
            enc.flush().expect("flush");
            assert!(rest.is_empty());
            let link = enc.output().to_vec();
            let mut dec = LinkDecoder::new(f2b, parse_spec(spec).expect("spec")).expect("decoder");
            dec.session_ready();
            let mut out = Vec::new();
            let mut at = 0;
            // Feed the link as a socket would: up to 64 KiB at a time.
            let mut buf = Vec::new();
            while at < link.len() || !buf.is_empty() {
                let n = (link.len() - at).min(65536);
                buf.extend_from_slice(&link[at..at + n]);
                at += n;
                let mut used = 0;
                while let Some(d) = dec.decode(&buf[used..], &mut out).expect("valid link") {
                    used += d.consumed;
                }
                buf.drain(..used);
                if n == 0 {
                    break;
                }
            }
            assert!(
                buf.is_empty(),
                "{spec}/{whole_max}: {} link bytes left",
                buf.len()
            );
            assert_eq!(out.len(), stream.len(), "{spec}/{whole_max}");
            assert!(out == stream, "{spec}/{whole_max}: bytes differ");
            if spec != "none" {
                assert!(
                    enc.counters().chunks > 0,
                    "{spec}/{whole_max}: nothing compressed"
                );
            }
        }
    }
}
