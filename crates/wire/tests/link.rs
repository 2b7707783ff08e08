//! The link protocol: encoder and decoder round trips for every method, switches mid-stream,
//! nothing compressed before the first ReadyForQuery, bombs and random bytes refused.

mod common;

use codec::Spec;
use common::*;
use wire::link::frame::{self, parse_header, HEADER_LEN};
use wire::link::{
    parse_spec, Event, Hello, LinkDecoder, LinkEncoder, Reply, SenderConfig, CHUNK_RAW_MAX,
};
use wire::{Direction, LinkError};

const F2B: Direction = Direction::FrontendToBackend;
const B2F: Direction = Direction::BackendToFrontend;
const METHODS: [&str; 5] = ["none", "lz4", "zstd:1", "zstd:level=3,long=20", "lz4:9"];

fn spec(s: &str) -> Spec {
    parse_spec(s).expect("valid spec")
}

/// Encodes `stream` message by message, flushing every `flush_every` messages (the reader's
/// buffer ran dry) and switching to `switch.1` before message `switch.0`.
fn encode(
    enc: &mut LinkEncoder,
    stream: &[u8],
    flush_every: usize,
    switch: Option<(usize, &str)>,
) -> Vec<u8> {
    let mut link = Vec::new();
    for (i, (tag, bytes)) in frame_all(enc.direction(), stream).into_iter().enumerate() {
        if let Some((at, s)) = switch {
            if at == i {
                enc.switch_method(spec(s)).expect("switch");
            }
        }
        enc.push_bytes(tag, &bytes).expect("push");
        if i % flush_every == flush_every - 1 {
            enc.flush().expect("flush");
            // Drain part of the output now and then, as a socket would.
            let n = enc.output().len() / 2;
            link.extend_from_slice(&enc.output()[..n]);
            enc.consume(n);
        }
    }
    enc.flush().expect("flush");
    link.extend_from_slice(enc.output());
    let n = link.len();
    enc.consume(n);
    assert_eq!(enc.pending(), 0);
    link
}

/// Decodes `link` with frames fed whole or one byte at a time.
fn decode(dec: &mut LinkDecoder, link: &[u8], bytewise: bool) -> (Vec<u8>, Vec<Event>) {
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut buf = Vec::new();
    let step = if bytewise { 1 } else { link.len().max(1) };
    for piece in link.chunks(step) {
        buf.extend_from_slice(piece);
        while let Some(d) = dec.decode(&buf, &mut out).expect("valid link") {
            buf.drain(..d.consumed);
            events.extend(d.event);
        }
    }
    dec.finish(&buf).expect("whole frames");
    (out, events)
}

/// Splits a link stream into (type, payload) frames.
fn frames(link: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut v = Vec::new();
    let mut rest = link;
    while !rest.is_empty() {
        let h = parse_header(B2F, 0, rest).expect("valid").expect("whole");
        v.push((h.frame_type, rest[HEADER_LEN..h.frame_len()].to_vec()));
        rest = &rest[h.frame_len()..];
    }
    v
}

fn backend_session(rows: usize) -> Vec<u8> {
    let mut s = backend_start();
    s.extend(backend_rows(rows));
    s.extend(typed(b'H', &[0, 0, 1, 0, 0]));
    for i in 0..rows {
        let line = format!(
            "{i}\t{}\t2026-11-23 10:{:02}:{:02}+00\tline {} of the copy of table orders\n",
            i * 3,
            i % 60,
            (i * 7) % 60,
            i % 50
        );
        s.extend(typed(b'd', line.as_bytes()));
    }
    s.extend(typed(b'c', b""));
    s.extend(typed(b'C', &cstr("COPY 1")));
    s.extend(typed(b'Z', b"I"));
    s
}

fn frontend_session(n: usize) -> Vec<u8> {
    let mut s = startup(0, &[("user", "alice"), ("database", "shop")]);
    s.extend(typed(
        b'p',
        &cstr("secret password that is long enough to be compressible if it were allowed"),
    ));
    for i in 0..n {
        s.extend(typed(
            b'Q',
            &cstr(&format!(
                "SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid = {i}"
            )),
        ));
        s.extend(typed(
            b'd',
            format!("{i}\t{}\tsome text of row {i}\n", i * 11).as_bytes(),
        ));
        s.extend(typed(b'S', b""));
    }
    s.extend(typed(b'X', b""));
    s
}

#[test]
fn round_trip_every_method_whole_and_bytewise() {
    let b2f = backend_session(400);
    let f2b = frontend_session(150);
    for m in METHODS {
        for flush_every in [1, 7, 100_000] {
            let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
            let link = encode(&mut enc, &b2f, flush_every, None);
            for bytewise in [false, true] {
                let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
                let (out, events) = decode(&mut dec, &link, bytewise);
                assert!(out == b2f, "{m} flush every {flush_every}: bytes differ");
                assert_eq!(events, vec![Event::SessionReady]);
                assert_eq!(dec.counters().raw_bytes, b2f.len() as u64);
                assert_eq!(dec.counters().link_bytes, link.len() as u64);
            }
            let c = enc.counters();
            assert_eq!(
                (c.raw_bytes, c.link_bytes),
                (b2f.len() as u64, link.len() as u64)
            );
            assert_eq!(c.chunks == 0, m == "none", "{m}");

            let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec(m))).expect("encoder");
            let mut dec = LinkDecoder::new(F2B, spec(m)).expect("decoder");
            enc.session_ready();
            dec.session_ready();
            let link = encode(&mut enc, &f2b, flush_every, None);
            let (out, _) = decode(&mut dec, &link, flush_every == 7);
            assert!(out == f2b, "{m} frontend: bytes differ");
        }
    }
}

#[test]
fn method_switches_mid_stream() {
    let b2f = backend_session(300);
    let switches = [
        ("zstd:1", "lz4"),
        ("lz4", "zstd:3"),
        ("none", "zstd:1"),
        ("zstd:1", "none"),
    ];
    for (from, to) in switches {
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(from))).expect("encoder");
        let link = encode(&mut enc, &b2f, 5, Some((150, to)));
        assert_eq!(enc.spec(), &spec(to));
        for bytewise in [false, true] {
            let mut dec = LinkDecoder::new(B2F, spec(from)).expect("decoder");
            let (out, events) = decode(&mut dec, &link, bytewise);
            assert!(out == b2f, "{from} -> {to}: bytes differ");
            assert_eq!(
                events,
                vec![Event::SessionReady, Event::MethodSwitched(spec(to))]
            );
            assert_eq!(dec.spec(), &spec(to));
        }
    }
}

#[test]
fn repetitive_data_rows_compress() {
    let b2f = backend_session(5000);
    for m in ["lz4", "zstd:1"] {
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let link = encode(&mut enc, &b2f, 50, None);
        let factor = if m == "lz4" { 2 } else { 3 };
        assert!(
            link.len() * factor < b2f.len(),
            "{m}: {} link bytes for {} raw",
            link.len(),
            b2f.len()
        );
        // Flushing after every message still beats raw: the context persists across chunks.
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let flushed = encode(&mut enc, &b2f, 1, None);
        assert!(
            flushed.len() < b2f.len(),
            "{m}: {} vs {}",
            flushed.len(),
            b2f.len()
        );
        assert!(link.len() < flushed.len());
    }
}

#[test]
fn nothing_before_ready_for_query_is_compressed() {
    // Compressible-looking messages before the first ReadyForQuery (not something PostgreSQL
    // sends, but the encoder must not care): a long ParameterStatus and DataRows.
    let mut pre = typed(
        b'R',
        &[0, 0, 0, 10]
            .iter()
            .copied()
            .chain(cstr("SCRAM-SHA-256"))
            .chain([0])
            .collect::<Vec<u8>>(),
    );
    pre.extend(typed(
        b'S',
        &[cstr("search_path"), cstr(&"public,".repeat(40))].concat(),
    ));
    pre.extend(data_row(&[&"x".repeat(500)]));
    pre.extend(backend_start());
    let mut stream = pre.clone();
    stream.extend(backend_rows(200));
    let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec("zstd:1"))).expect("encoder");
    let link = encode(&mut enc, &stream, 3, None);
    let fr = frames(&link);
    let ready = fr
        .iter()
        .position(|f| f.0 == frame::READY)
        .expect("a Ready frame");
    assert!(fr[..ready].iter().all(|f| f.0 == frame::VERBATIM));
    let verbatim: Vec<u8> = fr[..ready].iter().flat_map(|f| f.1.clone()).collect();
    assert!(
        verbatim == pre,
        "the bytes up to ReadyForQuery cross verbatim"
    );
    assert!(fr[ready..].iter().any(|f| f.0 == frame::CHUNK));

    // frontend->backend: the startup packet, the password and a long Query before the event
    // stay verbatim; the same Query after it is compressed.
    let q = typed(b'Q', &cstr(&"SELECT 1 UNION ALL ".repeat(20)));
    let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec("lz4"))).expect("encoder");
    enc.push_bytes(None, &startup(0, &[("user", "u")]))
        .expect("push");
    enc.push_bytes(Some(b'p'), &typed(b'p', &[b'k'; 200]))
        .expect("push");
    enc.push_bytes(Some(b'Q'), &q).expect("push");
    enc.flush().expect("flush");
    assert!(frames(enc.output()).iter().all(|f| f.0 == frame::VERBATIM));
    let n = enc.pending();
    enc.consume(n);
    enc.session_ready();
    enc.push_bytes(Some(b'Q'), &q).expect("push");
    enc.flush().expect("flush");
    assert_eq!(
        frames(enc.output()).iter().map(|f| f.0).collect::<Vec<_>>(),
        vec![frame::CHUNK]
    );
}

#[test]
fn chunks_before_the_session_is_ready_are_refused() {
    let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec("zstd:1"))).expect("encoder");
    enc.session_ready();
    enc.push_bytes(Some(b'd'), &typed(b'd', &[b'a'; 300]))
        .expect("push");
    enc.flush().expect("flush");
    let link = enc.output().to_vec();
    let mut dec = LinkDecoder::new(F2B, spec("zstd:1")).expect("decoder");
    let e = dec.decode(&link, &mut Vec::new()).expect_err("not ready");
    assert!(matches!(e, LinkError::Unexpected { .. }), "{e}");
    // A forged Ready frame on the frontend->backend stream is refused too.
    let mut dec = LinkDecoder::new(F2B, spec("zstd:1")).expect("decoder");
    let e = dec
        .decode(&[frame::READY, 0, 0, 0, 0], &mut Vec::new())
        .expect_err("Ready is b2f");
    assert!(matches!(e, LinkError::Unexpected { .. }), "{e}");
    let mut dec = LinkDecoder::new(F2B, spec("zstd:1")).expect("decoder");
    dec.session_ready();
    let mut out = Vec::new();
    dec.decode(&link, &mut out)
        .expect("ready now")
        .expect("whole");
    assert_eq!(out, typed(b'd', &[b'a'; 300]));
}

fn chunk_frame(raw: u32, data: &[u8]) -> Vec<u8> {
    let mut f = vec![frame::CHUNK];
    f.extend_from_slice(&(4 + data.len() as u32).to_be_bytes());
    f.extend_from_slice(&raw.to_be_bytes());
    f.extend_from_slice(data);
    f
}

#[test]
fn bombs_and_lies_are_errors() {
    let zeros = vec![0u8; 4 * CHUNK_RAW_MAX];
    let zbomb = zstd::bulk::compress(&zeros, 19).expect("zstd");
    let lbomb = {
        let mut enc = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
        std::io::Write::write_all(&mut enc, &zeros).expect("lz4");
        let (v, r) = enc.finish();
        r.expect("lz4");
        v
    };
    for (m, bomb) in [("zstd:1", &zbomb), ("lz4", &lbomb)] {
        for raw in [100u32, CHUNK_RAW_MAX as u32] {
            let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
            dec.decode(&[frame::READY, 0, 0, 0, 0], &mut Vec::new())
                .expect("ready");
            let mut out = Vec::new();
            let e = dec
                .decode(&chunk_frame(raw, bomb), &mut out)
                .expect_err("bomb");
            assert!(
                matches!(e, LinkError::Decompress { offset: 5, .. }),
                "{m}: {e}"
            );
            assert!(e.to_string().contains("inflates past"), "{e}");
            assert!(out.is_empty());
            // The stream is dead after an error.
            assert!(dec
                .decode(&[frame::VERBATIM, 0, 0, 0, 0], &mut out)
                .is_err());
        }
        // A chunk claiming more than the cap is refused before decompressing.
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        dec.decode(&[frame::READY, 0, 0, 0, 0], &mut Vec::new())
            .expect("ready");
        let e = dec
            .decode(
                &chunk_frame(CHUNK_RAW_MAX as u32 + 1, b"x"),
                &mut Vec::new(),
            )
            .expect_err("claim");
        assert!(e.to_string().contains("outside"), "{e}");
        // A chunk that yields less than it declares.
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let link = encode(&mut enc, &backend_session(20), 1000, None);
        let fr = frames(&link);
        let (_, payload) = fr.iter().find(|f| f.0 == frame::CHUNK).expect("a chunk");
        let raw = u32::from_be_bytes(payload[..4].try_into().expect("4"));
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        dec.decode(&[frame::READY, 0, 0, 0, 0], &mut Vec::new())
            .expect("ready");
        let e = dec
            .decode(&chunk_frame(raw + 1, &payload[4..]), &mut Vec::new())
            .expect_err("short");
        assert!(matches!(e, LinkError::Decompress { .. }), "{m}: {e}");
    }
    // Frame caps hold on the header alone.
    let dec = LinkDecoder::new(B2F, spec("zstd:1")).expect("decoder");
    let mut huge = vec![frame::VERBATIM];
    huge.extend_from_slice(&(CHUNK_RAW_MAX as u32 + 1).to_be_bytes());
    assert!(matches!(
        dec.peek_len(&huge),
        Err(LinkError::FrameTooLong { .. })
    ));
    assert!(matches!(
        dec.peek_len(b"?"),
        Err(LinkError::UnknownFrame {
            frame_type: b'?',
            ..
        })
    ));
}

#[test]
fn random_link_bytes_are_errors() {
    let mut rng = Rng(0x243f_6a88_85a3_08d3);
    let mut errors = 0;
    for _ in 0..3000 {
        let n = 1 + (rng.next() % 200) as usize;
        let mut input = rng.bytes(n);
        let mut dec = LinkDecoder::new(B2F, spec("zstd:1")).expect("decoder");
        // Half the inputs get past the Ready frame, so chunk payloads are exercised.
        if input[0] & 1 == 0 {
            dec.decode(&[frame::READY, 0, 0, 0, 0], &mut Vec::new())
                .expect("ready");
            input[0] = frame::CHUNK;
            let len = (n as u32).saturating_sub(5).to_be_bytes();
            if let Some(h) = input.get_mut(1..5) {
                h.copy_from_slice(&len);
            }
        }
        let mut out = Vec::new();
        loop {
            match dec.decode(&input, &mut out) {
                Ok(Some(d)) => {
                    assert!(out.len() <= CHUNK_RAW_MAX);
                    input.drain(..d.consumed);
                }
                Ok(None) => break,
                Err(_) => {
                    errors += 1;
                    break;
                }
            }
        }
    }
    assert!(
        errors > 2500,
        "only {errors} of 3000 random inputs were refused"
    );
}

#[test]
fn handshake_round_trip_and_refusals() {
    let hello = Hello::new(spec("zstd:1"), spec("lz4"));
    let mut buf = Vec::new();
    hello.encode(&mut buf).expect("encode");
    for cut in 0..buf.len() {
        assert_eq!(Hello::decode(&buf[..cut]).expect("prefix"), None);
    }
    let (got, used) = Hello::decode(&buf).expect("ok").expect("whole");
    assert_eq!((got.clone(), used), (hello.clone(), buf.len()));

    let reply = got.answer(|_| true);
    let mut rbuf = Vec::new();
    reply.encode(&mut rbuf).expect("encode");
    let (back, _) = Reply::decode(&rbuf).expect("ok").expect("whole");
    assert_eq!(back, reply);
    let Reply::Accept(a) = back else {
        panic!("accepted")
    };
    assert_eq!(
        (a.frontend_spec, a.backend_spec),
        (spec("zstd:1"), spec("lz4"))
    );

    let no_zstd = got.answer(|s| s.method != codec::Method::Zstd);
    let mut rbuf = Vec::new();
    no_zstd.encode(&mut rbuf).expect("encode");
    assert!(
        matches!(Reply::decode(&rbuf).expect("ok"), Some((Reply::Refuse(r), _)) if r.contains("zstd"))
    );

    // Both versions are offered and the newest is chosen; a client half of version 1 only
    // gets version 1; one of versions this crate does not speak is refused.
    assert_eq!((hello.min_version, hello.max_version), (1, 2));
    assert_eq!(a.version, 2);
    let old = Hello {
        min_version: 1,
        max_version: 1,
        ..hello.clone()
    };
    assert!(matches!(old.answer(|_| true), Reply::Accept(a) if a.version == 1));
    let newer = Hello {
        min_version: 3,
        max_version: 4,
        ..hello
    };
    assert!(matches!(newer.answer(|_| true), Reply::Refuse(r) if r.contains("version")));

    let mut bad = buf.clone();
    bad[HEADER_LEN] ^= 0xff;
    assert!(matches!(Hello::decode(&bad), Err(LinkError::Handshake(_))));
    assert!(
        Hello::decode(b"\x16\x03\x01\x00\x05hello").is_err(),
        "a TLS record is not a Hello"
    );
    for bad_spec in ["gzip", "zstd:workers=2", "zstd:long=27", "pglz"] {
        assert!(parse_spec(bad_spec).is_err(), "{bad_spec}");
    }
}

#[test]
fn an_auto_hello_asks_the_server_half_to_adapt_and_both_start_verbatim() {
    let hello = Hello::auto();
    let mut buf = Vec::new();
    hello.encode(&mut buf).expect("encode");
    // The backend->frontend slot carries the word `auto`, which no fixed-method parser takes
    // (a server half without auto refuses the Hello rather than guess).
    assert!(buf.ends_with(b"\x04auto"), "{buf:?}");
    assert!(parse_spec("auto").is_err());
    let (got, used) = Hello::decode(&buf).expect("ok").expect("whole");
    assert_eq!(used, buf.len());
    assert!(got.backend_auto);
    assert_eq!(
        (got.frontend_spec, got.backend_spec),
        (spec("none"), spec("none"))
    );
    let Reply::Accept(a) = got.answer(|s| wire::link::check_spec(s).is_ok()) else {
        panic!("accepted")
    };
    assert_eq!(
        (a.frontend_spec, a.backend_spec),
        (spec("none"), spec("none"))
    );
    // A fixed Hello is unchanged: no auto, the same bytes as before auto existed.
    let fixed = Hello::new(spec("zstd:1"), spec("zstd:1"));
    let mut fbuf = Vec::new();
    fixed.encode(&mut fbuf).expect("encode");
    assert!(fbuf.ends_with(b"\x06zstd:1\x06zstd:1"), "{fbuf:?}");
    let (fgot, _) = Hello::decode(&fbuf).expect("ok").expect("whole");
    assert!(!fgot.backend_auto);
}

#[test]
fn a_switch_inside_a_long_message_keeps_its_bytes() {
    // A 1 MB DataRow of incompressible bytes after the session start; the sender falls back
    // to none halfway through it, takes lz4 at three quarters, and zstd:1 for the next one.
    let mut s = backend_start();
    let mut x: u32 = 0x1234_5678;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    };
    let mut row = |len: usize| {
        let body = noise(len);
        let mut m = vec![b'D'];
        m.extend_from_slice(&((4 + 2 + 4 + len) as u32).to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m.extend_from_slice(&(len as u32).to_be_bytes());
        m.extend_from_slice(&body);
        m
    };
    let (first, second) = (row(1 << 20), row(300_000));
    let mut enc = LinkEncoder::new(
        Direction::BackendToFrontend,
        SenderConfig::new(spec("zstd:1")),
    )
    .expect("encoder");
    let mut dec = LinkDecoder::new(Direction::BackendToFrontend, spec("zstd:1")).expect("decoder");
    let mut link = encode(&mut enc, &s, 1, None);
    assert!(enc.is_ready());
    // Pieces of the first row as 32 KiB reads bring them, with a switch to none between two.
    let mut framer = wire::Framer::new(Direction::BackendToFrontend).with_whole_max(64 * 1024);
    let (mut buf, mut fed, mut done) = (Vec::new(), 0, 0);
    let mut switched = false;
    while done < first.len() {
        let end = (fed + 32 * 1024).min(first.len());
        buf.extend_from_slice(&first[fed..end]);
        fed = end;
        let mut at = 0;
        while let Some(piece) = framer.poll_piece(&buf[at..]).expect("piece") {
            enc.push_piece(&piece).expect("piece");
            at += piece.bytes.len();
        }
        buf.drain(..at);
        done += at;
        if !switched && done > first.len() / 2 {
            assert!(!enc.at_message_boundary());
            enc.switch_method(spec("none")).expect("switch");
            switched = true;
        } else if switched && enc.spec().method == codec::Method::None && done > first.len() * 3 / 4
        {
            // And to a compressing method inside the same message: its context starts there.
            enc.switch_method(spec("lz4")).expect("switch");
        }
        link.extend_from_slice(enc.output());
        let n = enc.output().len();
        enc.consume(n);
    }
    assert!(switched && enc.at_message_boundary());
    enc.switch_method(spec("zstd:1")).expect("switch back");
    link.extend(encode(&mut enc, &second, 1, None));
    s.extend_from_slice(&first);
    s.extend_from_slice(&second);
    let mut back = Vec::new();
    let (mut pos, mut switches) = (0, Vec::new());
    while let Some(d) = dec.decode(&link[pos..], &mut back).expect("decode") {
        pos += d.consumed;
        if let Some(Event::MethodSwitched(m)) = d.event {
            switches.push(m.to_string());
        }
    }
    assert_eq!(pos, link.len());
    assert_eq!(switches, ["none", "lz4", "zstd:1"]);
    assert!(back == s, "{} bytes back for {}", back.len(), s.len());
    assert!(enc.counters().chunks > 2, "{:?}", enc.counters());
}

#[test]
fn large_messages_split_into_bounded_frames() {
    // A 1 MB DataRow after the session start: every frame stays under the caps and the
    // decoder never emits more than a chunk per call.
    let mut s = backend_start();
    s.extend(data_row(&[&"abcdefghij".repeat(100_000)]));
    s.extend(data_row(&[&String::from_utf8(
        Rng(7)
            .bytes(300_000)
            .iter()
            .map(|b| b'a' + b % 26)
            .collect(),
    )
    .expect("ascii")]));
    for m in ["none", "lz4", "zstd:1"] {
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let link = encode(&mut enc, &s, 1000, None);
        for (t, p) in frames(&link) {
            assert!(p.len() <= frame::max_payload(t).expect("known") as usize);
        }
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        let (out, _) = decode(&mut dec, &link, false);
        assert!(out == s, "{m}");
    }
}

#[test]
fn encoder_and_decoder_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<LinkEncoder>();
    send::<LinkDecoder>();
}

#[test]
fn a_short_batch_travels_verbatim_until_a_zstd_context_is_warm() {
    for (m, after_warm) in [("zstd:1", frame::CHUNK), ("lz4", frame::VERBATIM)] {
        let mut enc = LinkEncoder::new(F2B, SenderConfig::new(spec(m))).expect("encoder");
        enc.session_ready();
        enc.push_bytes(Some(b'd'), &typed(b'd', &[b'x'; 20]))
            .expect("push");
        enc.flush().expect("flush");
        assert_eq!(
            frames(enc.output())[0].0,
            frame::VERBATIM,
            "{m}: a short batch is not compressed while there is no context"
        );
        let n = enc.pending();
        enc.consume(n);
        enc.push_bytes(Some(b'd'), &typed(b'd', &[b'y'; 100]))
            .expect("push");
        enc.flush().expect("flush");
        enc.push_bytes(Some(b'd'), &typed(b'd', &[b'z'; 20]))
            .expect("push");
        enc.flush().expect("flush");
        enc.push_bytes(Some(b'c'), &typed(b'c', b"")).expect("push");
        enc.push_bytes(Some(b'd'), &typed(b'd', &[b'w'; 20]))
            .expect("push");
        enc.flush().expect("flush");
        let kinds: Vec<u8> = frames(enc.output()).iter().map(|f| f.0).collect();
        assert_eq!(kinds, vec![frame::CHUNK, after_warm, after_warm], "{m}");
        let link = enc.output().to_vec();
        let mut dec = LinkDecoder::new(F2B, spec(m)).expect("decoder");
        dec.session_ready();
        let (out, _) = decode(&mut dec, &link, true);
        let want = [
            typed(b'd', &[b'y'; 100]),
            typed(b'd', &[b'z'; 20]),
            typed(b'c', b""),
            typed(b'd', &[b'w'; 20]),
        ]
        .concat();
        assert!(out == want, "{m}: round trip");
    }
}

/// Pushes every message of `stream` and returns the link bytes produced.
fn push_all(enc: &mut LinkEncoder, stream: &[u8]) -> Vec<u8> {
    for (tag, bytes) in frame_all(enc.direction(), stream) {
        enc.push_bytes(tag, &bytes).expect("push");
    }
    enc.flush().expect("flush");
    let link = enc.output().to_vec();
    enc.consume(link.len());
    link
}

#[test]
fn contexts_are_created_at_the_first_compressed_message() {
    for m in ["lz4", "zstd:1"] {
        let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec(m))).expect("encoder");
        let mut dec = LinkDecoder::new(B2F, spec(m)).expect("decoder");
        assert!(!enc.has_context() && !dec.has_context());
        // Authentication, then a session of short answers, each read alone (under the
        // threshold): nothing is compressed, so neither side allocates a context.
        let mut quiet = backend_start();
        let mut link = push_all(&mut enc, &quiet);
        for _ in 0..20 {
            let answer = [typed(b'C', &cstr("SELECT 1")), typed(b'Z', b"I")].concat();
            link.extend(push_all(&mut enc, &answer));
            quiet.extend(answer);
        }
        let (out, _) = decode(&mut dec, &link, false);
        assert!(out == quiet);
        assert!(
            !enc.has_context(),
            "{m}: encoder context before a compressed message"
        );
        assert!(!dec.has_context(), "{m}: decoder context before a chunk");
        // The first compressible message creates both.
        let rows = backend_rows(50);
        let link = push_all(&mut enc, &rows);
        assert!(frames(&link).iter().any(|(t, _)| *t == frame::CHUNK));
        let (out, _) = decode(&mut dec, &link, false);
        assert!(out == rows);
        assert!(enc.has_context() && dec.has_context(), "{m}");
        // A switch drops them until the next compressed message of the new method.
        enc.switch_method(spec("zstd:3")).expect("switch");
        let link = push_all(&mut enc, &typed(b'Z', b"I"));
        decode(&mut dec, &link, false);
        assert!(
            !enc.has_context() && !dec.has_context(),
            "{m} after a switch"
        );
        let link = push_all(&mut enc, &rows);
        let (out, _) = decode(&mut dec, &link, false);
        assert!(out == rows);
        assert!(enc.has_context() && dec.has_context(), "{m} after a switch");
    }
    // Method none never has one.
    let mut enc = LinkEncoder::new(B2F, SenderConfig::new(spec("none"))).expect("encoder");
    let mut stream = backend_start();
    stream.extend(backend_rows(50));
    push_all(&mut enc, &stream);
    assert!(!enc.has_context());
}

/// A `COPY ... FROM STDIN` of CSV rows shaped like TPC-H lineitem, after the startup: one
/// CopyData per `rows_per_message` rows (psql sends about 8 KiB per message, a server's COPY
/// TO one row per message).
fn copy_rows(rows: usize, rows_per_message: usize) -> Vec<u8> {
    let modes = ["AIR", "MAIL", "RAIL", "SHIP", "TRUCK", "REG AIR", "FOB"];
    let mut x: u64 = 11;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut s = startup(0, &[("user", "alice"), ("database", "shop")]);
    s.extend(typed(b'Q', &cstr("COPY lineitem FROM STDIN (FORMAT csv)")));
    let mut message = Vec::new();
    for i in 0..rows {
        message.extend_from_slice(
            format!(
                "{},{},{},{},{},{}.{:02},0.0{},0.0{},N,O,199{}-{:02}-{:02},{},ironic deposits {}\n",
                i / 4 + 1,
                next(200_000) + 1,
                next(10_000) + 1,
                i % 4 + 1,
                next(50) + 1,
                next(100_000),
                next(100),
                next(10),
                next(9),
                2 + next(7),
                next(12) + 1,
                next(28) + 1,
                modes[next(7) as usize],
                ["sleep", "haggle", "nag", "wake"][next(4) as usize],
            )
            .as_bytes(),
        );
        if (i + 1) % rows_per_message == 0 {
            s.extend(typed(b'd', &message));
            message.clear();
        }
    }
    if !message.is_empty() {
        s.extend(typed(b'd', &message));
    }
    s.extend(typed(b'c', b""));
    s
}

fn encoder_with(m: &str, columns: bool) -> LinkEncoder {
    let mut enc = LinkEncoder::new(
        F2B,
        SenderConfig {
            columns,
            ..SenderConfig::new(spec(m))
        },
    )
    .expect("encoder");
    enc.session_ready();
    enc
}

fn decoder_with(m: &str, columns: bool) -> LinkDecoder {
    let mut dec = LinkDecoder::new(F2B, spec(m))
        .expect("decoder")
        .with_columns(columns);
    dec.session_ready();
    dec
}

#[test]
fn copy_rows_travel_column_coded_from_zstd_6_smaller_and_come_back() {
    for rows_per_message in [1, 60] {
        let stream = copy_rows(6000, rows_per_message);
        for m in ["zstd:6", "zstd:level=12,long=20"] {
            // Flushes after every few messages make chunks of too few rows to code: the source
            // of a bulk load has more ready than that.
            for flush_every in [40, 100_000] {
                let mut enc = encoder_with(m, true);
                let link = encode(&mut enc, &stream, flush_every, None);
                let kinds: Vec<u8> = frames(&link).iter().map(|f| f.0).collect();
                let coded = kinds.iter().filter(|&&k| k == frame::COLUMNS).count() as u64;
                assert!(coded > 0, "{m}: no column-coded chunk");
                // Both ends count exactly the column-coded chunks (the tunnel's metrics).
                assert_eq!(enc.counters().column_chunks, coded, "{m}: encoder's count");
                for bytewise in [false, true] {
                    let mut dec = decoder_with(m, true);
                    let (out, _) = decode(&mut dec, &link, bytewise);
                    assert!(
                        out == stream,
                        "{m}, {rows_per_message} rows a message: bytes differ"
                    );
                    assert_eq!(dec.counters().column_chunks, coded, "{m}: decoder's count");
                }
                let plain = encode(&mut encoder_with(m, false), &stream, flush_every, None);
                assert!(
                    link.len() * 100 < plain.len() * 98,
                    "{m}, {rows_per_message} rows a message, flush every {flush_every}: \
                     {} link bytes column-coded, {} without",
                    link.len(),
                    plain.len()
                );
            }
        }
    }
}

#[test]
fn no_chunk_is_column_coded_below_zstd_6_on_a_version_1_link_or_for_other_traffic() {
    let stream = copy_rows(3000, 60);
    for (m, columns) in [("zstd:3", true), ("lz4", true), ("zstd:6", false)] {
        let link = encode(&mut encoder_with(m, columns), &stream, 100_000, None);
        assert!(
            frames(&link).iter().all(|f| f.0 != frame::COLUMNS),
            "{m} (columns allowed: {columns}) sent a column-coded chunk"
        );
        let mut dec = decoder_with(m, false);
        let (out, _) = decode(&mut dec, &link, false);
        assert!(out == stream, "{m}: bytes differ");
        assert_eq!(dec.counters().column_chunks, 0, "{m}");
    }
    // Statements, not rows of fields: declined by the coding, sent as plain chunks.
    let f2b = frontend_session(400);
    let mut enc = LinkEncoder::new(
        F2B,
        SenderConfig {
            columns: true,
            ..SenderConfig::new(spec("zstd:6"))
        },
    )
    .expect("encoder");
    let link = encode(&mut enc, &f2b, 100_000, None);
    let mut dec = LinkDecoder::new(F2B, spec("zstd:6")).expect("decoder");
    let (out, _) = decode(&mut dec, &link, false);
    assert!(out == f2b);
}

#[test]
fn a_switch_to_and_from_the_column_coded_levels_mid_copy_comes_back() {
    let stream = copy_rows(5000, 60);
    for (from, to) in [("zstd:1", "zstd:9"), ("zstd:9", "lz4"), ("zstd:6", "none")] {
        let link = encode(&mut encoder_with(from, true), &stream, 4, Some((40, to)));
        let (out, _) = decode(&mut decoder_with(from, true), &link, false);
        assert!(out == stream, "{from} -> {to}: bytes differ");
    }
}

#[test]
fn a_column_coded_chunk_is_refused_on_a_version_1_link_and_damage_is_an_error() {
    let stream = copy_rows(3000, 60);
    let link = encode(&mut encoder_with("zstd:6", true), &stream, 100_000, None);
    let mut dec = decoder_with("zstd:6", false);
    let mut out = Vec::new();
    let mut rest = &link[..];
    let err = loop {
        match dec.decode(rest, &mut out) {
            Ok(Some(d)) => rest = &rest[d.consumed..],
            Ok(None) => panic!("the link ended without a column-coded chunk"),
            Err(e) => break e,
        }
    };
    assert!(err.to_string().contains("column-coded"), "{err}");

    // Each length damaged in turn: an error, never a panic or bytes that differ. (The
    // compressed bytes themselves are TLS's to protect, as for every chunk.)
    let at = {
        let mut at = 0;
        loop {
            let h = parse_header(F2B, 0, &link[at..])
                .expect("valid")
                .expect("whole");
            if h.frame_type == frame::COLUMNS {
                break at;
            }
            at += h.frame_len();
        }
    };
    for (offset, value) in [
        (HEADER_LEN, 0xff),
        (HEADER_LEN + 3, 0x01),
        (HEADER_LEN + 4, 0x7f),
        (HEADER_LEN + 7, 0x01),
    ] {
        let mut bad = link.clone();
        bad[at + offset] ^= value;
        let mut dec = decoder_with("zstd:6", true);
        let mut out = Vec::new();
        let mut rest = &bad[..];
        let mut failed = false;
        while !rest.is_empty() {
            match dec.decode(rest, &mut out) {
                Ok(Some(d)) => rest = &rest[d.consumed..],
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "damage at {offset}: no error");
    }
}

#[test]
fn a_link_bound_sender_column_codes_at_every_zstd_level_and_toggles_cleanly() {
    let stream = copy_rows(5000, 60);
    let mut enc = encoder_with("zstd:1", true);
    let mut link = Vec::new();
    for (i, (tag, bytes)) in frame_all(F2B, &stream).into_iter().enumerate() {
        // `auto` reports the link full or not each interval; here every 7 messages, so that
        // chunks in progress are closed by the change.
        if i % 7 == 0 {
            enc.set_link_bound(i % 14 == 0).expect("toggle");
        }
        enc.push_bytes(tag, &bytes).expect("push");
        if i % 5 == 4 {
            enc.flush().expect("flush");
        }
    }
    enc.flush().expect("flush");
    link.extend_from_slice(enc.output());
    let kinds: Vec<u8> = frames(&link).iter().map(|f| f.0).collect();
    assert!(
        kinds.contains(&frame::COLUMNS),
        "no column-coded chunk at zstd:1"
    );
    assert!(
        kinds.contains(&frame::CHUNK),
        "no plain chunk while not link-bound"
    );
    for bytewise in [false, true] {
        let (out, _) = decode(&mut decoder_with("zstd:1", true), &link, bytewise);
        assert!(out == stream, "bytes differ");
    }
    // Not link-bound and below zstd:6: plain chunks only.
    let mut enc = encoder_with("zstd:1", true);
    enc.set_link_bound(true).expect("on");
    enc.set_link_bound(false).expect("off");
    let link = encode(&mut enc, &stream, 100_000, None);
    assert!(frames(&link).iter().all(|f| f.0 != frame::COLUMNS));
}
