//! Real bytes: psql and pgbench (simple and extended protocol) against a PostgreSQL 15 cluster
//! through a recording relay on a Unix socket. Every captured stream frames the same whole and
//! byte by byte, and crosses the link unchanged for every method with its startup and
//! authentication verbatim.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use common::frame_all;
use pgtest::Cluster;
use wire::link::frame::{self, parse_header, HEADER_LEN};
use wire::link::{parse_spec, Event, LinkDecoder, LinkEncoder, SenderConfig};
use wire::{Direction, Framer};

type Captured = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;

/// Copies `from` to `to`, recording the bytes; shuts `to` down for writing at the end.
fn pump(mut from: UnixStream, mut to: UnixStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
    seen
}

/// A relay listening at `dir/.s.PGSQL.<port>` that forwards to `upstream` and records
/// each connection's two directions.
fn relay(dir: &Path, port: u16, upstream: std::path::PathBuf) -> Captured {
    std::fs::create_dir_all(dir).expect("relay dir");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let sock = dir.join(format!(".s.PGSQL.{port}"));
    let listener = UnixListener::bind(&sock).expect("bind relay");
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let captured: Captured = Arc::default();
    let store = captured.clone();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { break };
            let server = UnixStream::connect(&upstream).expect("upstream");
            let store = store.clone();
            thread::spawn(move || {
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let up = thread::spawn(move || pump(client, server));
                let down = pump(s2, c2);
                let up = up.join().expect("pump");
                store.lock().expect("lock").push((up, down));
            });
        }
    });
    captured
}

fn bytewise(direction: Direction, bytes: &[u8]) -> Vec<(Option<u8>, Vec<u8>)> {
    let mut f = Framer::new(direction);
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    for &b in bytes {
        buf.push(b);
        while let Some(m) = f.poll(&buf).expect("valid") {
            let n = m.bytes.len();
            out.push((m.tag(), m.bytes.to_vec()));
            buf.drain(..n);
        }
    }
    f.finish(&buf).expect("whole");
    out
}

/// Sends `up` and `down` through a link pair as the two halves would, flushing after every
/// 8 KiB read as a socket reader would, and checks what comes out.
fn through_link(method: &str, up: &[u8], down: &[u8]) -> (u64, u64) {
    let spec = parse_spec(method).expect("spec");
    let mut b_enc =
        LinkEncoder::new(Direction::BackendToFrontend, SenderConfig::new(spec)).expect("enc");
    let mut b_dec = LinkDecoder::new(Direction::BackendToFrontend, spec).expect("dec");
    let mut f_enc =
        LinkEncoder::new(Direction::FrontendToBackend, SenderConfig::new(spec)).expect("enc");
    let mut f_dec = LinkDecoder::new(Direction::FrontendToBackend, spec).expect("dec");
    // Backend->frontend first (the server's answers up to ReadyForQuery), then the rest.
    let mut down_link = Vec::new();
    let mut off = 0;
    for (tag, bytes) in frame_all(Direction::BackendToFrontend, down) {
        b_enc.push_bytes(tag, &bytes).expect("push");
        off += bytes.len();
        // A reader of 8 KiB buffers runs dry about once per 8 KiB.
        if off % 8192 < bytes.len() {
            b_enc.flush().expect("flush");
        }
    }
    b_enc.flush().expect("flush");
    down_link.extend_from_slice(b_enc.output());
    let mut out = Vec::new();
    let mut rest = &down_link[..];
    let mut ready = false;
    while let Some(d) = b_dec.decode(rest, &mut out).expect("decode") {
        if d.event == Some(Event::SessionReady) {
            ready = true;
        }
        rest = &rest[d.consumed..];
    }
    assert!(out == down, "{method}: backend->frontend bytes differ");
    assert!(ready, "a session that reached ReadyForQuery sends Ready");
    // Everything before the Ready frame is verbatim and ends with the first ReadyForQuery.
    let mut rest = &down_link[..];
    let mut pre = Vec::new();
    loop {
        let h = parse_header(Direction::BackendToFrontend, 0, rest)
            .expect("ok")
            .expect("whole");
        if h.frame_type == frame::READY {
            break;
        }
        assert_eq!(h.frame_type, frame::VERBATIM);
        pre.extend_from_slice(&rest[HEADER_LEN..h.frame_len()]);
        rest = &rest[h.frame_len()..];
    }
    assert_eq!(
        frame_all(Direction::BackendToFrontend, &pre)
            .last()
            .map(|m| m.0),
        Some(Some(b'Z'))
    );

    f_enc.session_ready();
    f_dec.session_ready();
    for (tag, bytes) in frame_all(Direction::FrontendToBackend, up) {
        f_enc.push_bytes(tag, &bytes).expect("push");
        if tag == Some(b'S') || tag == Some(b'Q') {
            f_enc.flush().expect("flush");
        }
    }
    f_enc.flush().expect("flush");
    let up_link = f_enc.output().to_vec();
    let mut out = Vec::new();
    let mut rest = &up_link[..];
    while let Some(d) = f_dec.decode(rest, &mut out).expect("decode") {
        rest = &rest[d.consumed..];
    }
    assert!(out == up, "{method}: frontend->backend bytes differ");
    (b_enc.counters().raw_bytes, b_enc.counters().link_bytes)
}

#[test]
fn psql_and_pgbench_sessions_frame_and_cross_the_link() {
    let cluster = Cluster::start().expect("cluster");
    let relay_dir = cluster.root_dir().join("relay");
    let captured = relay(
        &relay_dir,
        cluster.port(),
        cluster
            .socket_dir()
            .join(format!(".s.PGSQL.{}", cluster.port())),
    );
    cluster.pgbench_init(1).expect("pgbench -i");
    let relay_conn = |cmd: &mut std::process::Command| {
        cmd.env("PGHOST", &relay_dir);
    };
    let mut psql = cluster.command("psql");
    relay_conn(&mut psql);
    psql.args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid <= 20000",
        "-c",
        "COPY (SELECT * FROM pgbench_accounts WHERE aid <= 20000) TO STDOUT",
        "-c",
        "SELECT repeat('x', 100000), pg_sleep(0.01)",
    ]);
    let out = pgtest::run(&mut psql).expect("psql through the relay");
    assert!(out.status.success());
    for mode in ["simple", "extended", "prepared"] {
        let mut bench = cluster.command("pgbench");
        relay_conn(&mut bench);
        bench.args(["-n", "-t", "20", "-c", "1", "-M", mode]);
        let out = pgtest::run(&mut bench).expect("pgbench through the relay");
        assert!(out.status.success());
    }
    // Connections end asynchronously in the relay threads.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while captured.lock().expect("lock").len() < 4 && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(50));
    }
    let sessions = captured.lock().expect("lock").clone();
    assert!(sessions.len() >= 4, "{} sessions captured", sessions.len());
    let mut total = (0, 0);
    for (up, down) in &sessions {
        let f = frame_all(Direction::FrontendToBackend, up);
        let b = frame_all(Direction::BackendToFrontend, down);
        assert_eq!(f[0].0, None, "a startup packet first");
        assert!(b.iter().any(|m| m.0 == Some(b'Z')));
        assert_eq!(f, bytewise(Direction::FrontendToBackend, up));
        assert_eq!(b, bytewise(Direction::BackendToFrontend, down));
        for method in ["none", "lz4", "zstd:1"] {
            let (raw, link) = through_link(method, up, down);
            if method == "zstd:1" {
                total = (total.0 + raw, total.1 + link);
            }
        }
    }
    eprintln!(
        "zstd:1 backend->frontend: {} raw bytes, {} link bytes",
        total.0, total.1
    );
    assert!(
        total.1 * 3 < total.0,
        "pgbench_accounts rows compress: {total:?}"
    );
    // The extended protocol was seen.
    assert!(sessions
        .iter()
        .any(|(up, _)| frame_all(Direction::FrontendToBackend, up)
            .iter()
            .any(|m| m.0 == Some(b'P'))));
}
