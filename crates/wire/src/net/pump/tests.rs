//! The pumps without sockets: in-memory pipes show the backpressure bound and that the bytes
//! arrive whole and in order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::task::JoinHandle;

use super::{decode, encode, DirectionCtx, HIGH_WATER};
use crate::framer::Framer;
use crate::link::{parse_spec, LinkDecoder, LinkEncoder, SenderConfig};
use crate::net::error::NetError;
use crate::net::sender::{Sender, Settled, Timings};
use crate::Direction;

fn ctx(direction: Direction) -> DirectionCtx {
    DirectionCtx {
        direction,
        ready: Arc::new(AtomicBool::new(false)),
        session_over: Arc::new(AtomicBool::new(false)),
        counters: [Arc::default(), Arc::default()],
        tap: None,
    }
}

/// Starts a backend->frontend encode pump with method `none` between two in-memory pipes;
/// returns the PostgreSQL side to write to, the link side to read from, and the pump.
fn spawn_encoder() -> (DuplexStream, DuplexStream, JoinHandle<Result<(), NetError>>) {
    let (pg, pg_peer) = tokio::io::duplex(64 * 1024);
    let (link, link_peer) = tokio::io::duplex(64 * 1024);
    let none = parse_spec("none").expect("spec");
    let sender = Sender::new(
        Framer::new(Direction::BackendToFrontend),
        LinkEncoder::new(Direction::BackendToFrontend, SenderConfig::new(none)).expect("encoder"),
    );
    let pump =
        tokio::spawn(
            async move { encode(pg, link, sender, &ctx(Direction::BackendToFrontend)).await },
        );
    (pg_peer, link_peer, pump)
}

/// DataRows of varied text, `n` bytes or a little more in all.
fn data_rows(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u32;
    while out.len() < n {
        let col = format!(
            "row {i} of the backpressure test {}",
            "x".repeat((i % 700) as usize)
        );
        let body_len = 2 + 4 + col.len();
        out.push(b'D');
        out.extend_from_slice(&((body_len + 4) as u32).to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&(col.len() as u32).to_be_bytes());
        out.extend_from_slice(col.as_bytes());
        i += 1;
    }
    out
}

/// DataRows of 200 letters from a 16-letter alphabet, scrambled (zstd gets about 2:1).
fn noisy_rows(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_u32;
    let mut out = Vec::new();
    while out.len() < n {
        let col: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b'a' + (x % 16) as u8
            })
            .collect();
        out.push(b'D');
        out.extend_from_slice(&((4 + 2 + 4 + col.len()) as u32).to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&(col.len() as u32).to_be_bytes());
        out.extend_from_slice(&col);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_link_stops_the_source_and_nothing_is_lost() {
    let input = data_rows(8 << 20);
    let (mut pg_peer, mut link_peer, pump) = spawn_encoder();
    let written = Arc::new(AtomicU64::new(0));
    let count = written.clone();
    let source = input.clone();
    let writer = tokio::spawn(async move {
        for piece in source.chunks(16 * 1024) {
            pg_peer.write_all(piece).await.expect("write");
            count.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        // Dropping the peer ends the stream.
    });
    // Nobody reads the link: the pump may buffer its bound plus the pipes, no more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stalled = written.load(Ordering::Relaxed);
    assert!(
        stalled < (HIGH_WATER + 512 * 1024) as u64,
        "{stalled} bytes accepted while the link was stalled"
    );
    let mut link_bytes = Vec::new();
    link_peer.read_to_end(&mut link_bytes).await.expect("read");
    writer.await.expect("writer");
    pump.await.expect("join").expect("encode");
    // The link bytes decode to the input exactly.
    let (mut a, b) = tokio::io::duplex(64 * 1024);
    let (out, mut out_peer) = tokio::io::duplex(64 * 1024);
    let none = parse_spec("none").expect("spec");
    let decoder = LinkDecoder::new(Direction::BackendToFrontend, none).expect("decoder");
    let dec = tokio::spawn(async move {
        decode(
            b,
            out,
            decoder,
            Vec::new(),
            &ctx(Direction::BackendToFrontend),
        )
        .await
    });
    let feed = tokio::spawn(async move {
        a.write_all(&link_bytes).await.expect("write");
    });
    let mut back = Vec::new();
    out_peer.read_to_end(&mut back).await.expect("read");
    feed.await.expect("feed");
    dec.await.expect("join").expect("decode");
    assert!(
        back == input,
        "{} bytes back for {}",
        back.len(),
        input.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_cut_by_the_end_of_the_stream_is_an_error() {
    let mut input = data_rows(1000);
    input.truncate(input.len() - 3);
    let (mut pg_peer, mut link_peer, pump) = spawn_encoder();
    pg_peer.write_all(&input).await.expect("write");
    drop(pg_peer);
    let mut sink = Vec::new();
    let _ = link_peer.read_to_end(&mut sink).await;
    let err = pump.await.expect("join").expect_err("truncated message");
    assert!(err.to_string().contains("ends inside the message"), "{err}");
}

#[test]
fn the_tap_finds_frames_split_anywhere() {
    use super::TapWalker;
    use crate::net::tap::{FrameTap, TapEvent};
    use std::sync::Mutex;
    let mut bytes = Vec::new();
    for (ty, len) in [(b'V', 10usize), (b'R', 0), (b'Z', 7), (b'V', 3)] {
        bytes.push(ty);
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.extend(std::iter::repeat_n(0u8, len));
    }
    for piece in 1..bytes.len() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let tap: FrameTap = Arc::new(move |e: TapEvent| sink.lock().expect("lock").push(e));
        let mut walker = TapWalker::default();
        for chunk in bytes.chunks(piece) {
            walker.walk(&tap, Direction::BackendToFrontend, chunk);
        }
        let got: Vec<(u8, usize, bool)> = seen
            .lock()
            .expect("lock")
            .iter()
            .map(|e| (e.frame_type, e.payload_len, e.before_ready))
            .collect();
        assert_eq!(
            got,
            [
                (b'V', 10, true),
                (b'R', 0, true),
                (b'Z', 7, false),
                (b'V', 3, false)
            ],
            "pieces of {piece}"
        );
    }
}

/// A long Query of half-compressible text, its application then waiting for the answer
/// without closing: every byte must reach the other side although the last read left more
/// than [`HIGH_WATER`] link bytes waiting (the chunk in progress once stayed behind, and
/// PostgreSQL waited in ClientRead for a message the client had finished sending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_message_arrives_whole_while_its_sender_waits() {
    // Letters from a 16-letter alphabet, scrambled: zstd gets about 2:1, so a burst of reads
    // makes HIGH_WATER link bytes before the message ends.
    let mut x = 0x9e37_79b9_u32;
    let text: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'a' + (x % 16) as u8
        })
        .collect();
    // Where the last read falls against HIGH_WATER depends on the length: try several.
    for (len, spec) in (0..12)
        .map(|k| (1 << 20) + k * 37_000)
        .flat_map(|len| [(len, "zstd:1"), (len, "lz4")])
    {
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&((4 + len + 1) as u32).to_be_bytes());
        msg.extend_from_slice(&text[..len]);
        msg.push(0);
        let (app, mut app_peer) = tokio::io::duplex(1 << 20);
        let (link, link_peer) = tokio::io::duplex(1 << 20);
        let (out, mut out_peer) = tokio::io::duplex(1 << 20);
        let spec = parse_spec(spec).expect("spec");
        let mut encoder = LinkEncoder::new(Direction::FrontendToBackend, SenderConfig::new(spec))
            .expect("encoder");
        encoder.session_ready();
        // A framer past its first packet, taking messages whole as it does up to its
        // whole-message limit: the message's link bytes all appear at its last read.
        let mut framer = Framer::new(Direction::FrontendToBackend).with_whole_max(64 << 20);
        let startup = [0, 0, 0, 8, 0, 3, 0, 0];
        assert!(framer.poll(&startup).expect("startup").is_some());
        let sender = Sender::new(framer, encoder);
        let ectx = ctx(Direction::FrontendToBackend);
        let pump = tokio::spawn(async move { encode(app, link, sender, &ectx).await });
        let mut decoder = LinkDecoder::new(Direction::FrontendToBackend, spec).expect("decoder");
        decoder.session_ready();
        let dctx = ctx(Direction::FrontendToBackend);
        let unpump =
            tokio::spawn(async move { decode(link_peer, out, decoder, Vec::new(), &dctx).await });
        let sent = msg.clone();
        // The application writes the message and keeps its socket open, as psql waiting for
        // the result does.
        let writer = tokio::spawn(async move {
            app_peer.write_all(&sent).await.expect("write");
            app_peer
        });
        let mut got = vec![0u8; msg.len()];
        tokio::time::timeout(Duration::from_secs(5), out_peer.read_exact(&mut got))
            .await
            .unwrap_or_else(|_| panic!("{len} bytes, {spec}: the message never arrived whole"))
            .expect("read");
        assert!(got == msg);
        drop(writer.await.expect("writer"));
        pump.await.expect("join").expect("encode");
        unpump.await.expect("join").expect("decode");
    }
}

/// A source that always has more ready (a bulk SELECT): bursts end on [`HIGH_WATER`], and
/// what is written then leaves the chunk open, so every chunk but the last carries
/// [`CHUNK_RAW_MAX`] PostgreSQL bytes (a flush at every write cut one short chunk per write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_with_more_ready_fills_whole_chunks() {
    use crate::link::CHUNK_RAW_MAX;
    // ReadyForQuery, then 6 MiB of rows that compress about 2:1, all written before the
    // pump starts.
    let mut input = b"Z\x00\x00\x00\x05I".to_vec();
    let rows = noisy_rows(6 << 20);
    input.extend_from_slice(&rows);
    let (mut pg_peer, pg) = tokio::io::duplex(16 << 20);
    pg_peer.write_all(&input).await.expect("write");
    drop(pg_peer);
    let (link, mut link_peer) = tokio::io::duplex(64 * 1024);
    let spec = parse_spec("zstd:1").expect("spec");
    let sender = Sender::new(
        Framer::new(Direction::BackendToFrontend),
        LinkEncoder::new(Direction::BackendToFrontend, SenderConfig::new(spec)).expect("encoder"),
    );
    let ectx = ctx(Direction::BackendToFrontend);
    let counters = ectx.counters[0].clone();
    let pump = tokio::spawn(async move { encode(pg, link, sender, &ectx).await });
    let mut link_bytes = Vec::new();
    link_peer.read_to_end(&mut link_bytes).await.expect("read");
    pump.await.expect("join").expect("encode");
    let stats = counters.snapshot();
    assert!(
        (link_bytes.len() as u64) * 2 < stats.raw_bytes,
        "{} link bytes for {}: the test needs bursts ending on HIGH_WATER",
        link_bytes.len(),
        stats.raw_bytes
    );
    assert!(link_bytes.len() > 2 * HIGH_WATER, "{}", link_bytes.len());
    assert_eq!(
        stats.chunks,
        rows.len().div_ceil(CHUNK_RAW_MAX) as u64,
        "{stats:?}"
    );
    // And the frames decode to the input.
    let mut decoder = LinkDecoder::new(Direction::BackendToFrontend, spec).expect("decoder");
    let (mut back, mut at) = (Vec::new(), 0);
    while let Some(d) = decoder
        .decode(&link_bytes[at..], &mut back)
        .expect("decode")
    {
        at += d.consumed;
    }
    assert_eq!(at, link_bytes.len());
    assert!(
        back == input,
        "{} bytes back for {}",
        back.len(),
        input.len()
    );
}

/// Once the source has nothing more ready, the chunk in progress goes out before the pump
/// waits on it, whatever the burst before: a row at a time, each arrives alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_row_arrives_before_the_pump_waits_for_the_next() {
    let (mut pg_peer, pg) = tokio::io::duplex(1 << 20);
    let (link, link_peer) = tokio::io::duplex(1 << 20);
    let (out, mut out_peer) = tokio::io::duplex(1 << 20);
    let spec = parse_spec("zstd:1").expect("spec");
    let sender = Sender::new(
        Framer::new(Direction::BackendToFrontend),
        LinkEncoder::new(Direction::BackendToFrontend, SenderConfig::new(spec)).expect("encoder"),
    );
    let ectx = ctx(Direction::BackendToFrontend);
    let pump = tokio::spawn(async move { encode(pg, link, sender, &ectx).await });
    let decoder = LinkDecoder::new(Direction::BackendToFrontend, spec).expect("decoder");
    let dctx = ctx(Direction::BackendToFrontend);
    let unpump =
        tokio::spawn(async move { decode(link_peer, out, decoder, Vec::new(), &dctx).await });
    // A big burst first, so the context is in the middle of a run.
    let mut first = b"Z\x00\x00\x00\x05I".to_vec();
    first.extend_from_slice(&data_rows(2 << 20));
    pg_peer.write_all(&first).await.expect("write");
    let mut got = vec![0u8; first.len()];
    tokio::time::timeout(Duration::from_secs(5), out_peer.read_exact(&mut got))
        .await
        .expect("the burst arrives while the source waits")
        .expect("read");
    assert!(got == first);
    for i in 0..20 {
        let row = data_rows(200 + i * 10);
        pg_peer.write_all(&row).await.expect("write");
        let mut got = vec![0u8; row.len()];
        tokio::time::timeout(Duration::from_secs(5), out_peer.read_exact(&mut got))
            .await
            .unwrap_or_else(|_| panic!("row {i} stayed in the open chunk"))
            .expect("read");
        assert!(got == row);
    }
    drop(pg_peer);
    pump.await.expect("join").expect("encode");
    unpump.await.expect("join").expect("decode");
}

/// `--method auto` in the pump: a slow link (a reader taking 64 KiB every 10 ms) under bulk
/// rows of 16 letters, which zstd's entropy stage halves and lz4 cannot shrink, makes the writes
/// wait: a fresh half's first bulk interval starts at zstd:1 and the direction stays on zstd;
/// the frames still decode to the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_climbs_while_the_link_makes_the_pump_wait() {
    let mut input = b"Z\x00\x00\x00\x05I".to_vec();
    input.extend_from_slice(&noisy_rows(16 << 20));
    let (mut pg_peer, pg) = tokio::io::duplex(32 << 20);
    pg_peer.write_all(&input).await.expect("write");
    drop(pg_peer);
    let (link, mut link_peer) = tokio::io::duplex(64 * 1024);
    let none = parse_spec("none").expect("spec");
    let sender = Sender::new(
        Framer::new(Direction::BackendToFrontend),
        LinkEncoder::new(Direction::BackendToFrontend, SenderConfig::new(none)).expect("encoder"),
    )
    .adapt(Arc::new(Settled::new()));
    let ectx = ctx(Direction::BackendToFrontend);
    let counters = ectx.counters[0].clone();
    let pump = tokio::spawn(async move { encode(pg, link, sender, &ectx).await });
    let mut link_bytes = Vec::new();
    let mut piece = vec![0u8; 64 * 1024];
    loop {
        let n = link_peer.read(&mut piece).await.expect("read");
        if n == 0 {
            break;
        }
        link_bytes.extend_from_slice(&piece[..n]);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pump.await.expect("join").expect("encode");
    let mut decoder = LinkDecoder::new(Direction::BackendToFrontend, none).expect("decoder");
    let (mut back, mut at, mut methods) = (Vec::new(), 0, Vec::new());
    while let Some(d) = decoder
        .decode(&link_bytes[at..], &mut back)
        .expect("decode")
    {
        at += d.consumed;
        if let Some(crate::link::Event::MethodSwitched(m)) = d.event {
            methods.push(m.to_string());
        }
    }
    assert!(
        back == input,
        "{} bytes back for {}",
        back.len(),
        input.len()
    );
    // A fresh half's first bulk interval starts at zstd:1; on a link that waits it stays on
    // zstd, never back to none or lz4 (which cannot shrink these rows).
    assert_eq!(methods[0], "zstd:1", "{:?}", counters.snapshot());
    assert!(
        methods.iter().all(|m| m.starts_with("zstd:")),
        "{methods:?}"
    );
    assert_eq!(counters.snapshot().method_switches, methods.len() as u64);
}

/// The side a decode pump writes to closed first (a backend that ended the session before
/// the client's Terminate arrived, an application that exited without reading the rest).
/// Once the session is over, the refused write ends the pump quietly, with no error line;
/// while the session is still on, the same refusal is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_after_the_session_ended_is_a_quiet_end() {
    for session_over in [true, false] {
        let spec = parse_spec("none").expect("spec");
        let mut encoder = LinkEncoder::new(Direction::FrontendToBackend, SenderConfig::new(spec))
            .expect("encoder");
        encoder.session_ready();
        // A Sync: a message after which the session goes on (a Terminate would end it).
        let sync = [b'S', 0, 0, 0, 4];
        encoder.push_bytes(Some(b'S'), &sync).expect("push");
        encoder.flush().expect("flush");
        let link_bytes = encoder.output().to_vec();
        let (mut link, link_peer) = tokio::io::duplex(64 * 1024);
        let (out, out_peer) = tokio::io::duplex(64 * 1024);
        // PostgreSQL's side is gone before the Terminate reaches it.
        drop(out_peer);
        let mut decoder = LinkDecoder::new(Direction::FrontendToBackend, spec).expect("decoder");
        decoder.session_ready();
        let dctx = ctx(Direction::FrontendToBackend);
        dctx.session_over.store(session_over, Ordering::Release);
        let pump =
            tokio::spawn(async move { decode(link_peer, out, decoder, Vec::new(), &dctx).await });
        link.write_all(&link_bytes).await.expect("write");
        let ended = tokio::time::timeout(Duration::from_secs(5), pump)
            .await
            .expect("the pump ended")
            .expect("join");
        if session_over {
            ended.expect("a quiet end once the session is over");
        } else {
            let err = ended.expect_err("a refused write mid-session is an error");
            assert!(err.to_string().contains("frontend->backend write"), "{err}");
        }
    }
}

/// `--method auto` over the connections of one half: the rung the first sender's policy settles
/// on is kept by the half ([`Settled`]) and is where the second sender's bulk traffic starts.
#[test]
fn a_second_sender_of_a_half_starts_bulk_where_the_first_settled() {
    let b2f = Direction::BackendToFrontend;
    let half = Arc::new(Settled::new());
    let sender = |half: &Arc<Settled>| {
        let none = parse_spec("none").expect("spec");
        let encoder = LinkEncoder::new(b2f, SenderConfig::new(none)).expect("encoder");
        Sender::new(Framer::new(b2f), encoder).adapt(half.clone())
    };
    let pass = |write: u32| Timings {
        elapsed: Duration::from_millis(200),
        encode: Duration::from_millis(16),
        write_wait: Duration::from_millis(2 * u64::from(write)),
        read_wait: Duration::ZERO,
    };
    let name = |s: Option<codec::Spec>| s.map(|s| s.to_string());
    let rows = data_rows(300 * 1024);
    // A connection of a pool, open before any bulk traffic: it goes bulk only later.
    let mut pooled = sender(&half);
    pooled.feed(b"Z\x00\x00\x00\x05I").expect("feed");
    assert_eq!(
        name(pooled.observe(&pass(0)).expect("observe")).as_deref(),
        Some("zstd:1")
    );
    // The first connection: its first look switches to the interactive rung; bulk rows on a
    // link that keeps the pump waiting 90% of each interval, the encoder taking 8%, climb a rung
    // per interval to zstd:6, where it settles.
    let mut first = sender(&half);
    first.feed(b"Z\x00\x00\x00\x05I").expect("feed");
    assert_eq!(
        name(first.observe(&pass(0)).expect("observe")).as_deref(),
        Some("zstd:1")
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        first.feed(&rows).expect("feed");
        seen.extend(name(first.observe(&pass(90)).expect("observe")));
    }
    assert_eq!(seen, ["zstd:3", "zstd:6"]);
    // The second connection of the half: its first bulk interval goes straight to zstd:6.
    let mut second = sender(&half);
    second.feed(b"Z\x00\x00\x00\x05I").expect("feed");
    assert_eq!(
        name(second.observe(&pass(0)).expect("observe")).as_deref(),
        Some("zstd:1")
    );
    second.feed(&rows).expect("feed");
    assert_eq!(
        name(second.observe(&pass(90)).expect("observe")).as_deref(),
        Some("zstd:6")
    );
    // The pooled connection, opened before the half settled, starts its bulk where the half
    // settled by then, not where it stood when the connection opened.
    pooled.feed(&rows).expect("feed");
    assert_eq!(
        name(pooled.observe(&pass(90)).expect("observe")).as_deref(),
        Some("zstd:6")
    );
    // A sender of another half starts its bulk traffic at zstd:1, its interactive rung: no
    // switch.
    let mut third = sender(&Arc::new(Settled::new()));
    third.feed(b"Z\x00\x00\x00\x05I").expect("feed");
    assert_eq!(
        name(third.observe(&pass(0)).expect("observe")).as_deref(),
        Some("zstd:1")
    );
    third.feed(&rows).expect("feed");
    assert_eq!(third.observe(&pass(90)).expect("observe"), None);
}
