//! `--log-format json`, structured logs: every line both halves write to stderr during a run
//! with a session, a refused peer, a connection past `--max-connections`, a drain and a configuration
//! error is one JSON object with `ts`, `level`, `half`, `event` and `message`.

mod tunnel_support;

use std::io::Write;
use std::time::{Duration, Instant};

use pgtest::Cluster;
use serde_json::Value;
use tunnel_support::{bin, client, free_port, psql, Keys, Tunnel, Upstream, Via};

fn json_lines(log: &str, half: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{half} half line is not JSON ({e}): {line}\n{log}"));
            assert!(v.is_object(), "{line}");
            let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
            assert!(
                ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
                "{line}"
            );
            assert!(
                ["info", "warn", "error"].contains(&v["level"].as_str().unwrap_or("")),
                "{line}"
            );
            assert_eq!(v["half"], half, "{line}");
            assert!(v["event"].is_string() && v["message"].is_string(), "{line}");
            v
        })
        .collect()
}

fn events(lines: &[Value]) -> Vec<&str> {
    lines.iter().filter_map(|v| v["event"].as_str()).collect()
}

#[test]
fn every_line_of_a_run_is_a_json_object() {
    let cluster = Cluster::start().expect("cluster");
    let keys = Keys::new();
    let json = ["--log-format".to_owned(), "json".to_owned()];
    let mut server_extra = json.to_vec();
    server_extra.extend(["--metrics".into(), format!("127.0.0.1:{}", free_port())]);
    let mut client_extra = json.to_vec();
    client_extra.extend(["--max-connections".into(), "1".into()]);
    let tunnel = Tunnel::start_with(
        &keys,
        &cluster,
        Upstream::Socket,
        "zstd:1",
        &server_extra,
        &client_extra,
    );
    tunnel.wait_stats_files();

    // A peer that is not a client half.
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", tunnel.link_port)).expect("connect");
    plain.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("write");
    drop(plain);

    // One session held open, a second one past --max-connections 1.
    std::thread::scope(|s| {
        let held = s.spawn(|| psql(&cluster, Via::Tunnel(&tunnel), "SELECT pg_sleep(2), 'held'"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while tunnel.client_stats_now().connections_open < 1 {
            assert!(Instant::now() < deadline, "{}", tunnel.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut cmd = client(&cluster, "psql", Via::Tunnel(&tunnel));
        cmd.args(["-X", "-At", "-c", "SELECT 1"]);
        let refused = pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30));
        assert!(refused.is_err(), "the second session was not refused");
        assert_eq!(held.join().expect("psql thread"), "|held");
    });

    let done = tunnel.finish();
    let client_lines = json_lines(&done.client_log, "client");
    let server_lines = json_lines(&done.server_log, "server");
    let (c, s) = (events(&client_lines), events(&server_lines));
    for event in [
        "listening",
        "too_many_connections",
        "connection",
        "draining",
    ] {
        assert!(c.contains(&event), "client half has no {event} line: {c:?}");
    }
    for event in [
        "listening",
        "metrics_listening",
        "refused",
        "connection",
        "draining",
    ] {
        assert!(s.contains(&event), "server half has no {event} line: {s:?}");
    }
    let conn = client_lines
        .iter()
        .find(|v| v["event"] == "connection")
        .expect("a connection line");
    assert!(
        conn["backend_to_frontend"]["raw_bytes"].as_u64() > Some(0),
        "{conn}"
    );
    let refused = server_lines
        .iter()
        .find(|v| v["event"] == "refused")
        .expect("a refused line");
    assert_eq!(refused["level"], "warn");
    assert!(
        refused["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{refused}"
    );
    let too_many = client_lines
        .iter()
        .find(|v| v["event"] == "too_many_connections")
        .expect("a too_many_connections line");
    assert_eq!(too_many["limit"], 1);
}

#[test]
fn a_configuration_error_is_a_json_line_too() {
    let keys = Keys::new();
    let key = |n: &str| keys.file(n).display().to_string();
    let out = std::process::Command::new(bin())
        .args([
            "tunnel",
            "client",
            "--listen",
            "127.0.0.1:0",
            "--server",
            "127.0.0.1:1",
        ])
        .args(["--method", "bogus", "--log-format", "json"])
        .args([
            "--ca",
            &key("ca.pem"),
            "--cert",
            &key("client.pem"),
            "--key",
            &key("client-key.pem"),
        ])
        .output()
        .expect("run the client half");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&stderr, "client");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "error");
    assert_eq!(lines[0]["event"], "error");
    assert!(
        lines[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("bogus")),
        "{stderr}"
    );

    // The text format keeps its line.
    let out = std::process::Command::new(bin())
        .args([
            "tunnel",
            "client",
            "--listen",
            "127.0.0.1:0",
            "--server",
            "127.0.0.1:1",
        ])
        .args(["--method", "bogus"])
        .args([
            "--ca",
            &key("ca.pem"),
            "--cert",
            &key("client.pem"),
            "--key",
            &key("client-key.pem"),
        ])
        .output()
        .expect("run the client half");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("pgcompress tunnel: error: "), "{stderr}");
}
