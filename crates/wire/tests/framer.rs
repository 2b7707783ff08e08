//! The framer against messages built from protocol.sgml's formats: whole input and one byte
//! at a time agree; lengths below 4, above PostgreSQL's caps and truncated input are errors.

mod common;

use common::*;
use wire::backend::LIBPQ_SHORT_MESSAGE_LIMIT;
use wire::frontend::{PQ_LARGE_MESSAGE_LIMIT, PQ_SMALL_MESSAGE_LIMIT};
use wire::startup::*;
use wire::{Direction, FrameErrorKind, Framer, Kind};

const F2B: Direction = Direction::FrontendToBackend;
const B2F: Direction = Direction::BackendToFrontend;

/// Frames `bytes` fed one byte at a time, polling after every byte.
fn frame_bytewise(direction: Direction, bytes: &[u8]) -> Vec<(Option<u8>, Vec<u8>)> {
    let mut f = Framer::new(direction);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for &b in bytes {
        buf.push(b);
        while let Some(m) = f.poll(&buf).expect("valid stream") {
            let n = m.bytes.len();
            out.push((m.tag(), m.bytes.to_vec()));
            buf.drain(..n);
        }
    }
    f.finish(&buf).expect("nothing left over");
    out
}

fn frontend_stream() -> Vec<u8> {
    let mut s = startup(
        0,
        &[
            ("user", "alice"),
            ("database", "shop"),
            ("application_name", "psql"),
        ],
    );
    s.extend(typed(b'p', &cstr("SCRAM-SHA-256 client-first")));
    s.extend(typed(
        b'Q',
        &cstr("SELECT * FROM pgbench_accounts WHERE aid < 100"),
    ));
    s.extend(typed(
        b'P',
        &[cstr("s1"), cstr("SELECT $1::int"), vec![0, 1, 0, 0, 0, 23]].concat(),
    ));
    s.extend(typed(
        b'B',
        &[
            cstr(""),
            cstr("s1"),
            vec![0, 0, 0, 1, 0, 0, 0, 2],
            b"42".to_vec(),
            vec![0, 0],
        ]
        .concat(),
    ));
    s.extend(typed(b'D', &[b"P".to_vec(), cstr("")].concat()));
    s.extend(typed(b'E', &[cstr(""), vec![0, 0, 0, 0]].concat()));
    s.extend(typed(b'H', b""));
    s.extend(typed(b'S', b""));
    s.extend(typed(b'C', &[b"S".to_vec(), cstr("s1")].concat()));
    s.extend(typed(
        b'F',
        &[1u32.to_be_bytes().to_vec(), vec![0, 0, 0, 0, 0, 0]].concat(),
    ));
    s.extend(typed(b'd', b"1\tone\n2\ttwo\n"));
    s.extend(typed(b'c', b""));
    s.extend(typed(b'f', &cstr("client gave up")));
    s.extend(typed(b'X', b""));
    s
}

fn backend_stream() -> Vec<u8> {
    let mut s = backend_start();
    s.extend(typed(
        b'v',
        &[0u32.to_be_bytes(), 1u32.to_be_bytes()].concat(),
    ));
    for (tag, body) in [
        (b'1', vec![]),
        (b'2', vec![]),
        (b'3', vec![]),
        (
            b'A',
            [7u32.to_be_bytes().to_vec(), cstr("chan"), cstr("payload")].concat(),
        ),
        (
            b'E',
            [
                b"SERROR".to_vec(),
                vec![0],
                b"M".to_vec(),
                cstr("boom"),
                vec![0],
            ]
            .concat(),
        ),
        (b'N', [b"SNOTICE".to_vec(), vec![0, 0]].concat()),
        (b'G', vec![0, 0, 1, 0, 0]),
        (b'H', vec![0, 0, 1, 0, 0]),
        (b'W', vec![0, 0, 0]),
        (b'd', b"w0123456789".to_vec()),
        (b'c', vec![]),
        (b'I', vec![]),
        (b'n', vec![]),
        (b's', vec![]),
        (b't', vec![0, 1, 0, 0, 0, 23]),
        (b'V', vec![0, 0, 0, 1, b'x']),
    ] {
        s.extend(typed(tag, &body));
    }
    s.extend(backend_rows(5));
    s
}

#[test]
fn whole_and_bytewise_agree_frontend() {
    let s = frontend_stream();
    let whole = frame_all(F2B, &s);
    assert_eq!(whole.len(), 15);
    assert_eq!(whole[0].0, None);
    assert_eq!(whole.iter().map(|m| m.1.len()).sum::<usize>(), s.len());
    assert_eq!(whole, frame_bytewise(F2B, &s));
}

#[test]
fn whole_and_bytewise_agree_backend() {
    let s = backend_stream();
    let whole = frame_all(B2F, &s);
    let tags: Vec<u8> = whole.iter().map(|m| m.0.expect("typed")).collect();
    assert_eq!(&tags[..6], b"RSSSKZ");
    assert!(tags.contains(&b'W') && tags.contains(&b'v'));
    assert_eq!(whole, frame_bytewise(B2F, &s));
}

#[test]
fn startup_versions_pass_through() {
    for minor in [0u16, 2, 9999] {
        let s = startup(
            minor,
            &[("user", "u"), ("_pq_.test_protocol_negotiation", "")],
        );
        let mut f = Framer::new(F2B);
        let m = f.poll(&s).expect("ok").expect("whole");
        assert_eq!(m.kind, Kind::Startup { minor });
        assert_eq!(m.bytes, &s[..]);
        assert!(f.started());
    }
}

#[test]
fn ssl_request_then_startup_and_injection_refused() {
    let ssl = first(NEGOTIATE_SSL_CODE, b"");
    let st = startup(2, &[("user", "u")]);
    let mut f = Framer::new(F2B);
    assert_eq!(
        f.poll(&ssl).expect("ok").expect("whole").kind,
        Kind::SslRequest
    );
    assert!(f.awaiting_answer());
    // CVE-2021-23214: bytes pipelined behind the request before the answer.
    let e = f.poll(&st).expect_err("bytes before answer");
    assert_eq!(e.kind, FrameErrorKind::BytesBeforeAnswer { len: st.len() });
    assert_eq!(e.offset, 8);
    assert_eq!(f.poll(&[]).expect("nothing waiting"), None);
    f.resume_after_answer();
    let m = f.poll(&st).expect("ok").expect("whole");
    assert_eq!(m.kind, Kind::Startup { minor: 2 });

    let gss = first(NEGOTIATE_GSS_CODE, b"");
    let mut f = Framer::new(F2B);
    assert_eq!(
        f.poll(&gss).expect("ok").expect("whole").kind,
        Kind::GssEncRequest
    );
    f.resume_after_answer();
    assert_eq!(
        f.poll(&ssl).expect("ok").expect("whole").kind,
        Kind::SslRequest
    );

    let long_ssl = first(NEGOTIATE_SSL_CODE, b"xx");
    let e = Framer::new(F2B)
        .poll(&long_ssl)
        .expect_err("SSLRequest is 8 bytes");
    assert!(matches!(
        e.kind,
        FrameErrorKind::RequestLength { len: 10, .. }
    ));
}

#[test]
fn cancel_keys_of_4_to_256_bytes() {
    for key_len in [4usize, 32, 256] {
        let key: Vec<u8> = (0..key_len).map(|i| i as u8).collect();
        let c = first(
            CANCEL_REQUEST_CODE,
            &[4321i32.to_be_bytes().to_vec(), key.clone()].concat(),
        );
        let mut f = Framer::new(F2B);
        let m = f.poll(&c).expect("ok").expect("whole");
        assert_eq!(
            m.kind,
            Kind::CancelRequest {
                pid: 4321,
                key: &key
            }
        );
        assert_eq!(m.bytes, &c[..]);
        let e = f.poll(b"\0").expect_err("nothing after a cancel");
        assert_eq!(e.kind, FrameErrorKind::AfterCancel { len: 1 });
    }
    for key_len in [0usize, 3, 257] {
        let c = first(
            CANCEL_REQUEST_CODE,
            &[vec![0; 4], vec![7; key_len]].concat(),
        );
        let e = Framer::new(F2B).poll(&c).expect_err("bad key length");
        assert!(
            matches!(e.kind, FrameErrorKind::RequestLength { .. }),
            "{e}"
        );
    }
}

#[test]
fn first_packet_lengths_and_codes() {
    let mut f = Framer::new(F2B);
    let e = f.poll(&7u32.to_be_bytes()).expect_err("below 8");
    assert_eq!(e.kind, FrameErrorKind::LengthTooShort { len: 7, min: 8 });
    let e = f.poll(&10_005u32.to_be_bytes()).expect_err("above the cap");
    assert_eq!(
        e.kind,
        FrameErrorKind::LengthTooLong {
            len: 10_005,
            max: 10_004
        }
    );
    assert_eq!(f.peek_len(&10_004u32.to_be_bytes()).expect("ok"), None);
    let mut max = first(PROTOCOL_3_0, &vec![b'a'; 10_000 - 4]);
    assert_eq!(f.peek_len(&max).expect("ok"), Some(10_004));
    max.truncate(10_003);
    assert_eq!(f.poll(&max).expect("ok"), None);
    let e = f.finish(&max).expect_err("truncated");
    assert_eq!(
        e.kind,
        FrameErrorKind::Truncated {
            have: 10_003,
            need: 10_004
        }
    );
    let e = f.poll(&first(2 << 16, b"\0")).expect_err("protocol 2");
    assert_eq!(e.kind, FrameErrorKind::UnknownCode { code: 2 << 16 });
    let e = f.poll(&[0x16, 3, 1, 2, 0]).expect_err("TLS record");
    assert_eq!(e.kind, FrameErrorKind::DirectTls);
}

#[test]
fn typed_lengths_against_postgres_limits() {
    let mut f = Framer::new(B2F);
    let mut s = backend_start();
    let at = s.len() as u64;
    // Consume the start so the offset is reported from the stream's origin.
    for (_, m) in frame_all(B2F, &s) {
        assert!(f.poll(&m).expect("ok").is_some());
    }
    s.clear();
    let e = f.poll(&[b'C', 0, 0, 0, 3]).expect_err("below 4");
    assert_eq!((e.tag, e.offset), (Some(b'C'), at));
    assert_eq!(e.kind, FrameErrorKind::LengthTooShort { len: 3, min: 4 });
    let text = e.to_string();
    assert!(
        text.contains("backend->frontend")
            && text.contains("'C'")
            && text.contains(&at.to_string()),
        "{text}"
    );

    let over = |tag: u8, len: u32| {
        let mut h = vec![tag];
        h.extend_from_slice(&len.to_be_bytes());
        h
    };
    let e = f
        .poll(&over(b'C', LIBPQ_SHORT_MESSAGE_LIMIT + 1))
        .expect_err("libpq cap");
    assert_eq!(
        e.kind,
        FrameErrorKind::LengthTooLong {
            len: LIBPQ_SHORT_MESSAGE_LIMIT + 1,
            max: LIBPQ_SHORT_MESSAGE_LIMIT
        }
    );
    // A 1 GB DataRow header is accepted and only announces its length.
    assert_eq!(
        f.peek_len(&over(b'D', PQ_LARGE_MESSAGE_LIMIT)).expect("ok"),
        Some(PQ_LARGE_MESSAGE_LIMIT as usize + 1)
    );
    assert_eq!(
        f.poll(&over(b'D', PQ_LARGE_MESSAGE_LIMIT)).expect("ok"),
        None
    );
    let e = f
        .poll(&over(b'D', PQ_LARGE_MESSAGE_LIMIT + 1))
        .expect_err("1 GB cap");
    assert!(matches!(e.kind, FrameErrorKind::LengthTooLong { .. }));

    let mut f = Framer::new(F2B);
    f.poll(&startup(0, &[("user", "u")]))
        .expect("ok")
        .expect("whole");
    for (tag, max) in [
        (b'Q', PQ_LARGE_MESSAGE_LIMIT),
        (b'd', PQ_LARGE_MESSAGE_LIMIT),
        (b'B', PQ_LARGE_MESSAGE_LIMIT),
        (b'S', PQ_SMALL_MESSAGE_LIMIT),
        (b'E', PQ_SMALL_MESSAGE_LIMIT),
        (b'p', 65_535),
    ] {
        assert!(f.peek_len(&over(tag, max)).expect("at the cap").is_some());
        let e = f.poll(&over(tag, max + 1)).expect_err("past the cap");
        assert_eq!(
            (e.tag, e.kind.clone()),
            (
                Some(tag),
                FrameErrorKind::LengthTooLong { len: max + 1, max }
            )
        );
    }
    let e = f.finish(&[b'Q', 0, 0]).expect_err("cut header");
    assert_eq!(e.kind, FrameErrorKind::Truncated { have: 3, need: 5 });
    let e = f
        .finish(&typed(b'Q', b"SELECT 1\0")[..8])
        .expect_err("cut body");
    assert_eq!(e.kind, FrameErrorKind::Truncated { have: 8, need: 14 });
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..2000 {
        let n = (rng.next() % 64) as usize;
        let mut input = rng.bytes(n);
        if round % 2 == 0 {
            input.splice(0..0, startup(0, &[("user", "u")]));
        }
        for direction in [F2B, B2F] {
            let mut f = Framer::new(direction);
            let mut rest = &input[..];
            while let Ok(Some(m)) = f.poll(rest) {
                assert!(!m.bytes.is_empty() && m.bytes.len() <= rest.len());
                rest = &rest[m.bytes.len()..];
            }
        }
    }
}
