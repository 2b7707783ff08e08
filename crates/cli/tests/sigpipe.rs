//! No death by SIGPIPE: a peer that resets a connection is an error the command reports, never
//! a signal that ends it; only a `wal` report written to a closed pipe stops quietly, as cat
//! and grep do.

mod archive_support;

use archive_support::bin;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Closes `s` with a reset (SO_LINGER 0) instead of an orderly end.
#[allow(unsafe_code)]
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this test owns, with a linger struct of the right size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER");
    drop(s);
}

/// A PostgreSQL server in name only: it agrees to TLS, takes the client's first handshake
/// flight, answers it with bytes that are no TLS record and resets the connection at once.
/// The client then writes its alert into a connection already reset; its first write takes
/// the reset, a second one would raise SIGPIPE where it is not ignored.
fn tls_peer_that_resets() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut ssl_request = [0u8; 8];
            if s.read_exact(&mut ssl_request).is_err() || s.write_all(b"S").is_err() {
                continue;
            }
            let mut hello = [0u8; 4096];
            if s.read(&mut hello).is_err() {
                continue;
            }
            let _ = s.write_all(&[0xff; 64]);
            reset(s);
        }
    });
    port
}

#[test]
fn logical_recv_is_not_killed_by_a_tls_peer_that_resets() {
    let port = tls_peer_that_resets();
    let scratch = tempfile::tempdir().expect("tempdir");
    // Whether the reset lands before the client's alert is a race: try it often enough that
    // a client without SIGPIPE ignored dies of it at least once.
    for attempt in 0..30 {
        let out = Command::new(bin())
            .args(["logical", "recv", "--slot", "s", "--publication", "p", "-d"])
            .arg(format!(
                "host=127.0.0.1 port={port} sslmode=require user=u dbname=d connect_timeout=10"
            ))
            .arg("-o")
            .arg(scratch.path().join("out.jsonl"))
            .env("PGPASSWORD", "x")
            .stdin(Stdio::null())
            .output()
            .expect("run logical recv");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            None,
            "attempt {attempt}: logical recv died of a signal ({:?}): {err}",
            out.status
        );
        assert_eq!(out.status.code(), Some(2), "attempt {attempt}: {err}");
        assert!(err.contains("TLS"), "attempt {attempt}: {err}");
    }
}

#[test]
fn a_wal_report_into_a_closed_pipe_stops_quietly() {
    let cluster = pgtest::Cluster::builder().start().expect("start cluster");
    cluster.switch_wal().expect("switch");
    let scratch = tempfile::tempdir().expect("tempdir");
    let wal = scratch.path().join("wal");
    std::fs::create_dir_all(&wal).expect("mkdir");
    cluster.copy_wal_to(&wal).expect("copy wal");
    // `true` has exited before the report is written: the write meets a closed pipe.
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" wal stats "$1" | true; echo "${PIPESTATUS[0]}""#)
        .arg(bin())
        .arg(&wal)
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&out.stderr);
    let status = String::from_utf8_lossy(&out.stdout);
    // 141: ended by SIGPIPE, as `cat` into a closed pipe is.
    assert_eq!(status.trim(), "141", "{err}");
    assert!(err.is_empty(), "{err}");
}
