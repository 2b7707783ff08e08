//! The PostgreSQL message framer on arbitrary bytes: never panics, every message it returns
//! lies inside the input and within PostgreSQL's caps, and feeding the same bytes in pieces
//! gives the same messages; `poll_piece` with a small whole-message limit returns the same
//! bytes in pieces, each within the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{backend, frontend, startup, Direction, Framer, Kind};

fn cap(direction: Direction, kind: &Kind<'_>) -> usize {
    match (direction, kind) {
        (_, Kind::Typed(t)) if direction == Direction::FrontendToBackend => {
            frontend::max_len(*t) as usize + 1
        }
        (_, Kind::Typed(t)) => backend::max_len(*t) as usize + 1,
        _ => 4 + startup::MAX_STARTUP_PACKET_LENGTH as usize,
    }
}

/// Frames `data` polling after every `step` bytes; returns the messages and how it ended.
fn run(direction: Direction, data: &[u8], step: usize) -> (Vec<Vec<u8>>, bool) {
    let mut f = Framer::new(direction);
    let mut buf: Vec<u8> = Vec::new();
    let mut msgs = Vec::new();
    for piece in data.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match f.poll(&buf) {
                Ok(Some(m)) => {
                    assert!(m.bytes.len() <= buf.len());
                    assert!(m.bytes.len() <= cap(direction, &m.kind));
                    if matches!(m.kind, Kind::SslRequest | Kind::GssEncRequest) {
                        f.resume_after_answer();
                    }
                    let n = m.bytes.len();
                    msgs.push(buf[..n].to_vec());
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(_) => return (msgs, false),
            }
        }
    }
    (msgs, f.finish(&buf).is_ok())
}

/// Frames `data` with `poll_piece` and a whole-message limit of `whole_max`, feeding `step`
/// bytes at a time; returns the bytes of all pieces and how it ended.
fn run_pieces(direction: Direction, data: &[u8], step: usize, whole_max: usize) -> (Vec<u8>, bool) {
    let mut f = Framer::new(direction).with_whole_max(whole_max);
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for piece in data.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match f.poll_piece(&buf) {
                Ok(Some(p)) => {
                    assert!(p.bytes.len() <= buf.len());
                    if matches!(p.kind, Kind::SslRequest | Kind::GssEncRequest) {
                        f.resume_after_answer();
                    }
                    let n = p.bytes.len();
                    assert!(n > 0 || p.total == 0);
                    out.extend_from_slice(&buf[..n]);
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(_) => return (out, false),
            }
        }
    }
    (out, f.finish(&buf).is_ok())
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: direction (bit 0) and feeding step; the rest: the stream.
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let direction = if ctl & 1 == 0 {
        Direction::FrontendToBackend
    } else {
        Direction::BackendToFrontend
    };
    let whole = run(direction, stream, stream.len());
    let pieces = run(direction, stream, usize::from(ctl >> 1) + 1);
    // Pieces may fail earlier (a header is checked before its body arrives) but never
    // disagree on a message both returned.
    let n = whole.0.len().min(pieces.0.len());
    assert_eq!(whole.0[..n], pieces.0[..n]);
    if whole.1 {
        assert_eq!(whole, pieces);
        let streamed = run_pieces(direction, stream, usize::from(ctl >> 1) + 1, 1);
        assert!(streamed.1);
        assert_eq!(streamed.0, whole.0.concat());
    }
});
