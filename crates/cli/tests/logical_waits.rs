//! Every wait of `logical recv` has an end: a peer that accepts and never answers, or answers
//! half a message, ends the command with one line naming the timeout (`connect_timeout`,
//! `PGCONNECT_TIMEOUT`); SIGTERM and SIGINT end it at any stage, before the stream too, with
//! the exit status the stream's stop has (0) and nothing written; a CREATE_REPLICATION_SLOT
//! waiting for a transaction open on the server is cancelled by SIGTERM and leaves no slot.

mod logical_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use logical_support::pgcompress;

/// Longer than any of these runs may take: only a guard against a hang, not a timing claim.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// A peer on 127.0.0.1 that accepts every connection and then does `then` with it (in a
/// thread of its own per connection); the connections are held open until the test ends.
fn peer(then: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            std::thread::spawn(move || then(s));
        }
    });
    port
}

/// Accepts and never answers: reads whatever comes and keeps the connection open.
fn silent(mut s: TcpStream) {
    let mut buf = [0u8; 1024];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    std::thread::sleep(HANG_GUARD * 2);
}

/// Reads the StartupMessage, answers the first 3 bytes of an AuthenticationOk and stalls.
fn half_auth_ok(mut s: TcpStream) {
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_ok() {
        let mut rest = vec![0u8; u32::from_be_bytes(len) as usize - 4];
        let _ = s.read_exact(&mut rest);
        let _ = s.write_all(&[b'R', 0, 0]);
    }
    silent(s);
}

/// `logical recv` on `conninfo`, output to `out` (or standard output).
fn recv(conninfo: &str, out: Option<&std::path::Path>) -> Command {
    let mut cmd = pgcompress();
    cmd.args(["logical", "recv", "-d", conninfo, "--slot", "s"])
        .args(["--publication", "p", "-o"]);
    match out {
        Some(p) => cmd.arg(p),
        None => cmd.arg("-"),
    };
    cmd.env_remove("PGCONNECT_TIMEOUT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` at most [`HANG_GUARD`]; a hang kills it and fails the test.
fn finish(mut child: Child, what: &str) -> (Output, Duration) {
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return (child.wait_with_output().expect("output"), t0.elapsed());
        }
        if t0.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{what}: still running after {HANG_GUARD:?}, killed; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails with one line that names the timeout.
fn timed_out(o: &Output, what: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {e}");
    assert!(
        e.contains("timeout") || e.contains("timed out"),
        "{what}: {e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{what}: {e}");
}

#[test]
fn a_peer_that_accepts_and_never_answers_ends_with_connect_timeout() {
    let port = peer(silent);
    // Without TLS the wait is for the answer to the StartupMessage; with sslmode=prefer for
    // the answer to the TLS request.
    for tls in ["sslmode=disable", "sslmode=prefer", "sslmode=require"] {
        let conninfo =
            format!("host=127.0.0.1 port={port} user=u dbname=d connect_timeout=2 {tls}");
        let child = recv(&conninfo, None).spawn().expect("spawn");
        let (o, _) = finish(child, &conninfo);
        timed_out(&o, &conninfo);
    }
    // PGCONNECT_TIMEOUT when the string has none.
    let conninfo = format!("host=127.0.0.1 port={port} user=u dbname=d sslmode=disable");
    let child = recv(&conninfo, None)
        .env("PGCONNECT_TIMEOUT", "2")
        .spawn()
        .expect("spawn");
    let (o, _) = finish(child, "PGCONNECT_TIMEOUT=2");
    timed_out(&o, "PGCONNECT_TIMEOUT=2");
}

#[test]
fn a_peer_that_answers_half_a_message_is_an_error_not_a_hang() {
    let port = peer(half_auth_ok);
    let conninfo =
        format!("host=127.0.0.1 port={port} user=u dbname=d connect_timeout=2 sslmode=disable");
    let child = recv(&conninfo, None).spawn().expect("spawn");
    let (o, _) = finish(child, "half an AuthenticationOk");
    timed_out(&o, "half an AuthenticationOk");
}

/// Sends `signal` (TERM, INT) to `child`.
fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

#[test]
fn sigterm_and_sigint_end_a_wait_on_a_silent_peer() {
    let port = peer(silent);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    for signal in ["TERM", "INT"] {
        for tls in ["sslmode=disable", "sslmode=prefer"] {
            let conninfo = format!("host=127.0.0.1 port={port} user=u dbname=d {tls}");
            let child = recv(&conninfo, Some(&out)).spawn().expect("spawn");
            std::thread::sleep(Duration::from_millis(700));
            kill(&child, signal);
            let (o, took) = finish(child, &format!("SIG{signal}, {tls}"));
            assert_eq!(
                o.status.code(),
                Some(0),
                "SIG{signal} {tls}: {}",
                stderr(&o)
            );
            assert!(took < Duration::from_secs(10), "SIG{signal}: {took:?}");
            assert!(!out.exists(), "nothing written");
            assert!(!dir.path().join("out.jsonl.state").exists());
        }
    }
}

/// A CREATE_REPLICATION_SLOT waits for the transactions open on the server to end; SIGTERM
/// cancels it: the command exits 0 promptly, no slot is left and no output file made.
#[test]
fn sigterm_cancels_a_create_slot_that_waits_for_an_open_transaction() {
    let cluster = logical_support::cluster(None);
    cluster
        .psql("CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t;")
        .expect("schema");
    // A session holding a transaction with an xid.
    let mut open = cluster.command("psql");
    open.args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
        .args(cluster.conn_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    let mut open = open.spawn().expect("psql");
    let mut stdin = open.stdin.take().expect("stdin");
    stdin
        .write_all(b"BEGIN;\nINSERT INTO t VALUES (1);\n")
        .expect("begin");
    stdin.flush().expect("flush");
    cluster
        .wait_until("the open transaction", Duration::from_secs(30), || {
            Ok(cluster
                .query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL")?
                == "1")
        })
        .expect("open transaction");

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let mut cmd = recv(&cluster.conninfo(), Some(&out));
    cmd.arg("--create-slot");
    let child = cmd.spawn().expect("spawn");
    // The walsender waits in CREATE_REPLICATION_SLOT.
    cluster
        .wait_until("the slot creation to wait", Duration::from_secs(30), || {
            Ok(cluster.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'",
            )? == "1")
        })
        .expect("walsender");
    std::thread::sleep(Duration::from_secs(1));
    kill(&child, "TERM");
    let (o, took) = finish(child, "SIGTERM during CREATE_REPLICATION_SLOT");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(!out.exists(), "nothing written");
    assert!(!dir.path().join("out.jsonl.state").exists());
    cluster
        .wait_until("the walsender to go", Duration::from_secs(30), || {
            Ok(cluster.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'",
            )? == "0")
        })
        .expect("walsender gone");
    assert_eq!(
        cluster
            .query_one("SELECT count(*) FROM pg_replication_slots")
            .expect("slots"),
        "0",
        "the cancelled slot is not left behind"
    );
    stdin.write_all(b"COMMIT;\n").expect("commit");
    drop(stdin);
    let _ = open.wait();
}
