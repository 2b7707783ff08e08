//! `pgcompress tunnel` as a user runs it: keys, both halves as processes, psql through
//! them, SIGTERM (or SIGHUP) drains a running query and each half exits 0 with its summary; bad
//! configuration exits 2.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pgtest::Cluster;

fn pgcompress() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pgcompress"))
}

/// A running half: the child, the address it listens on and its stderr lines.
struct Half {
    child: Child,
    address: String,
    lines: mpsc::Receiver<String>,
}

fn spawn_half(args: &[&str]) -> Half {
    let mut child = pgcompress()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pgcompress tunnel");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[tunnel] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the half printed its listening line");
    let address = line
        .split_once(": listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .1
        .to_owned();
    Half {
        child,
        address,
        lines: rx,
    }
}

/// Sends `signal` (`TERM`, `HUP`, ...) and waits for the exit; returns the status code and
/// stdout.
fn terminate(half: &mut Half, signal: &str) -> (i32, String) {
    let pid = half.child.id().to_string();
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(s) = half.child.try_wait().expect("wait") {
            break s.code().unwrap_or(-1);
        }
        assert!(
            Instant::now() < deadline,
            "the half did not exit after SIG{signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    if let Some(mut o) = half.child.stdout.take() {
        use std::io::Read;
        o.read_to_string(&mut out).expect("stdout");
    }
    (code, out)
}

fn keys(dir: &Path) {
    let out = pgcompress()
        .args(["tunnel", "keys"])
        .arg(dir)
        .output()
        .expect("keys");
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn sigterm_or_sighup_drains_a_running_query_and_exits_0() {
    let cluster = Cluster::start().expect("cluster");
    let tmp = tempfile::tempdir().expect("tempdir");
    let k = tmp.path().join("keys");
    keys(&k);
    // A second run refuses to overwrite the keys.
    let again = pgcompress()
        .args(["tunnel", "keys"])
        .arg(&k)
        .output()
        .expect("keys");
    assert_eq!(again.status.code(), Some(2));
    let p = |f: &str| k.join(f).to_str().expect("utf-8").to_owned();
    let socket_dir = cluster.socket_dir();
    let port = cluster.port().to_string();
    let mut server = spawn_half(&[
        "tunnel",
        "server",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        socket_dir.to_str().expect("utf-8"),
        "--upstream-port",
        &port,
        "--ca",
        &p("ca.pem"),
        "--cert",
        &p("server.pem"),
        "--key",
        &p("server-key.pem"),
    ]);
    let stats = tmp.path().join("client-stats.json");
    let mut client = spawn_half(&[
        "tunnel",
        "client",
        "--listen",
        "127.0.0.1:0",
        "--server",
        // No --server-name: the certificate is checked for 127.0.0.1, the host of --server.
        &server.address,
        "--method",
        "zstd:1",
        "--ca",
        &p("ca.pem"),
        "--cert",
        &p("client.pem"),
        "--key",
        &p("client-key.pem"),
        "--stats",
        stats.to_str().expect("utf-8"),
        "--json",
    ]);
    let client_port = client.address.rsplit_once(':').expect("addr").1.to_owned();
    let out = std::thread::scope(|s| {
        let q = s.spawn(|| {
            let mut cmd = cluster.command("psql");
            cmd.args(["-X", "-At", "-h", "127.0.0.1", "-p", &client_port]);
            cmd.args(["-c", "SELECT pg_sleep(3), 'drained'"]);
            pgtest::run::run_with(&mut cmd, None, Duration::from_secs(60)).expect("psql")
        });
        // The query is running once the client half counts its connection.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&stats)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_none_or(|v| v["connections_open"] != 1)
        {
            assert!(Instant::now() < deadline, "the connection never opened");
            std::thread::sleep(Duration::from_millis(50));
        }
        let (code, summary) = terminate(&mut client, "TERM");
        assert_eq!(code, 0, "client half exit status");
        let v: serde_json::Value = serde_json::from_str(summary.trim()).expect("JSON summary");
        assert_eq!(v["half"], "client");
        assert_eq!(v["connections_total"], 1);
        assert_eq!(v["connections_open"], 0);
        assert!(v["backend_to_frontend"]["raw_bytes"].as_u64() > Some(0));
        // A terminal that goes away (SIGHUP) stops a half as a service manager does.
        let (code, summary) = terminate(&mut server, "HUP");
        assert_eq!(code, 0, "server half exit status after SIGHUP");
        assert!(summary.contains("tunnel server"), "{summary}");
        q.join().expect("psql thread")
    });
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "|drained");
    // The client's connection line (JSON) came before its exit.
    let lines: Vec<String> = client.lines.try_iter().collect();
    assert!(
        lines.iter().any(|l| l.contains("\"event\":\"connection\"")),
        "{lines:?}"
    );
    drop(server.lines);
    let shown = pgcompress()
        .args(["tunnel", "stats", "--json"])
        .arg(&stats)
        .output()
        .expect("stats");
    assert!(shown.status.success());
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("stats JSON");
    assert_eq!(v["connections_total"], 1);
    assert_eq!(v["method"], "zstd:1");
}

#[test]
fn bad_configuration_exits_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let k = tmp.path().join("keys");
    keys(&k);
    let p = |f: &str| k.join(f).to_str().expect("utf-8").to_owned();
    let client = |method: &str, key: &str| {
        pgcompress()
            .args(["tunnel", "client", "--listen", "127.0.0.1:0"])
            .args(["--server", "127.0.0.1:9", "--method", method])
            .args([
                "--ca",
                &p("ca.pem"),
                "--cert",
                &p("client.pem"),
                "--key",
                key,
            ])
            .output()
            .expect("client")
    };
    let bad_method = client("brotli", &p("client-key.pem"));
    assert_eq!(bad_method.status.code(), Some(2), "{bad_method:?}");
    let bad_key = client("zstd:1", &p("client.pem"));
    assert_eq!(bad_key.status.code(), Some(2), "{bad_key:?}");
    let missing = pgcompress()
        .args(["tunnel", "stats"])
        .arg(tmp.path().join("nothing.json"))
        .output()
        .expect("stats");
    assert_eq!(missing.status.code(), Some(2));
}
