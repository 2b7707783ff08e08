//! No death by SIGPIPE: a peer that resets a connection is an error the command reports, never
//! a signal that ends it; only a `wal` report written to a closed pipe stops quietly, as cat
//! and grep do.

mod archive_support;

use archive_support::bin;
use archive_support::s3::{credentials, Moto, S3Repo};
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

/// The exit status of `pgcompress ARGS | true`, where `true` has exited before pgcompress
/// starts, and what pgcompress wrote to stderr.
fn into_closed_pipe(args: &[&std::ffi::OsStr]) -> (String, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"(sleep 0.3; exec "$@") | true; echo "${PIPESTATUS[0]}""#)
        .arg("bash")
        .arg(bin())
        .args(args)
        .output()
        .expect("bash");
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_report_into_a_closed_pipe_stops_quietly() {
    let cluster = pgtest::Cluster::builder().start().expect("start cluster");
    cluster.switch_wal().expect("switch");
    let scratch = tempfile::tempdir().expect("tempdir");
    let wal = scratch.path().join("wal");
    std::fs::create_dir_all(&wal).expect("mkdir");
    let mut segments = cluster.copy_wal_to(&wal).expect("copy wal");
    segments.sort();
    // A wal report is ended by SIGPIPE, as `cat` into a closed pipe is: 141 from the shell.
    let (status, err) = into_closed_pipe(&["wal".as_ref(), "stats".as_ref(), wal.as_os_str()]);
    assert_eq!(status, "141", "{err}");
    assert!(err.is_empty(), "{err}");
    // A command that ignores SIGPIPE stops as quietly, with the same status.
    let repo = scratch.path().join("repo");
    archive_support::init_from_segment(repo.as_path(), &segments[0]);
    archive_support::push(repo.as_path(), &segments[0]);
    let (status, err) = into_closed_pipe(&[
        "archive".as_ref(),
        "list".as_ref(),
        "--repo".as_ref(),
        repo.as_os_str(),
    ]);
    assert_eq!(status, "141", "{err}");
    assert!(err.is_empty(), "{err}");
}

/// Reads a request head (through the blank line) from `s`.
fn head(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}

/// A proxy in front of the S3 server at `upstream` that passes every request through but
/// those for the object whose key contains `name`: a GET gets the head of the answer and a
/// little of its body, a PUT has a little of its body read, and then the connection is reset.
fn resetting_proxy(upstream: u16, name: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            std::thread::spawn(move || proxy(client, upstream, name));
        }
    });
    port
}

fn proxy(mut client: TcpStream, upstream: u16, name: &str) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let Some(first) = head(&mut client) else {
        return;
    };
    let line = String::from_utf8_lossy(&first)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    if line.contains(name) && (line.starts_with("GET ") || line.starts_with("PUT ")) {
        let mut chunk = [0u8; 64 * 1024];
        if line.starts_with("GET ") {
            let _ = server.write_all(&first);
            let mut sent = 0;
            while sent < 4096 {
                match server.read(&mut chunk[..1024]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = client.write_all(&chunk[..n]);
                        sent += n;
                    }
                }
            }
        } else {
            let mut taken = 0;
            while taken < 256 * 1024 {
                match client.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => taken += n,
                }
            }
            // Let the client fill the connection again before the reset.
            std::thread::sleep(Duration::from_millis(100));
        }
        reset(client);
        return;
    }
    let _ = server.write_all(&first);
    let (Ok(mut back), Ok(mut there)) = (server.try_clone(), client.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut back, &mut there);
        let _ = there.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut server);
    let _ = server.shutdown(std::net::Shutdown::Write);
}

/// A segment full of pgbench WAL (4 MB segments), written by a real server.
fn full_segment(dir: &std::path::Path) -> std::path::PathBuf {
    let cluster = pgtest::Cluster::builder()
        .wal_segsize_mb(4)
        .start()
        .expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    cluster
        .pgbench(&["-n", "-t", "2000", "-c", "2"])
        .expect("pgbench");
    cluster.switch_wal().expect("switch");
    let mut wal = cluster.copy_wal_to(dir).expect("copy");
    wal.sort();
    // The second segment: written through, by pgbench -i's COPY.
    wal.swap_remove(1)
}

#[test]
fn archive_over_s3_is_not_killed_by_a_peer_that_resets() {
    let Some(moto) = Moto::start_or_skip("archive_over_s3_is_not_killed_by_a_peer_that_resets")
    else {
        return;
    };
    moto.create_bucket("sigpipe");
    let repo = S3Repo::new(&moto, "sigpipe", "wal");
    let scratch = tempfile::tempdir().expect("tempdir");
    let segment = full_segment(&scratch.path().join("wal"));
    archive_support::init_from_segment(&repo, &segment);
    let name: &'static str = segment
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned()
        .leak();
    let upstream: u16 = moto
        .endpoint()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let port = resetting_proxy(upstream, name);
    let through_proxy = |args: &[&str]| {
        let mut cmd = Command::new(bin());
        credentials(&mut cmd);
        cmd.arg("archive")
            .args(args)
            .args(["--repo", &repo.url(), "--region", "us-east-1"])
            .args(["--endpoint", &format!("http://127.0.0.1:{port}")])
            .stdin(Stdio::null());
        cmd.output().expect("run pgcompress")
    };
    // A PUT reset while the segment's 4 MB are being written: exit 1, PostgreSQL retries.
    // Whether the client writes again after it has read the reset is a race: try often enough
    // that one without SIGPIPE ignored dies of it.
    let seg = segment.to_str().expect("utf-8 path");
    for attempt in 0..6 {
        let out = through_proxy(&["push", "--method", "none", seg]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            None,
            "attempt {attempt}: push died of a signal: {err}"
        );
        assert_eq!(out.status.code(), Some(1), "attempt {attempt}: {err}");
    }
    // Stored past the proxy, then a GET reset in the middle of its body: exit 200 with one
    // line, so that PostgreSQL stops instead of taking the file as missing.
    archive_support::push(&repo, &segment);
    let dest = scratch.path().join("restored");
    let dest_s = dest.to_str().expect("utf-8 path");
    let out = through_proxy(&["get", name, dest_s]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "get died of a signal: {err}");
    assert_eq!(out.status.code(), Some(200), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!dest.exists(), "a partial file was left at {dest_s}");
}
