//! `pgcompress tunnel` operations through the binary against a real PostgreSQL 15:
//! `--max-connections` refuses the connection past it with SQLSTATE 53300 and counts
//! it, and `--metrics` serves the same counters as the stats file to Prometheus.

mod tunnel_support;

use std::io::{Read, Write};
use std::time::Duration;

use pgtest::Cluster;
use tunnel_support::{client, free_port, psql, Keys, Stats, Tunnel, Upstream, Via};

/// `GET path` on `addr`; the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// The value of `name{labels}` in a Prometheus text body.
fn sample(body: &str, name_and_labels: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{body}"))
        .trim()
        .parse()
        .expect("an integer sample")
}

/// Waits until a stats file shows no open connection and `total` in all, then one more
/// rewrite, so it holds the final counters.
fn settled(read: impl Fn() -> Stats, total: u64) -> Stats {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = read();
        if s.connections_open == 0 && s.connections_total == total {
            std::thread::sleep(Duration::from_millis(1100));
            return read();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "stats never settled: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn max_connections_and_metrics_through_the_binary() {
    let cluster = Cluster::start().expect("cluster");
    let keys = Keys::new();
    let (client_metrics, server_metrics) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let tunnel = Tunnel::start_with(
        &keys,
        &cluster,
        Upstream::Socket,
        "zstd:1",
        &["--metrics".into(), server_metrics.clone()],
        &[
            "--max-connections".into(),
            "2".into(),
            "--metrics".into(),
            client_metrics.clone(),
        ],
    );
    tunnel.wait_stats_files();
    let (status, _) = get(&client_metrics, "/");
    assert!(status.contains(" 404 "), "{status}");
    let outs = std::thread::scope(|s| {
        let sessions: Vec<_> = (0..2)
            .map(|i| {
                let t = &tunnel;
                let c = &cluster;
                s.spawn(move || {
                    psql(
                        c,
                        Via::Tunnel(t),
                        &format!(
                            "COPY (SELECT g, 'session {i} row ' || g FROM generate_series(1, 20000) g) \
                             TO STDOUT; SELECT pg_sleep(3), 'session {i}'"
                        ),
                    )
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while tunnel.client_stats_now().connections_open < 2 {
            assert!(std::time::Instant::now() < deadline, "{}", tunnel.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
        // The third session is refused at once, as PostgreSQL past max_connections would.
        let mut cmd = client(&cluster, "psql", Via::Tunnel(&tunnel));
        cmd.args(["-X", "-At", "-c", "SELECT 1"]);
        let out = pgtest::run::run_with(&mut cmd, None, Duration::from_secs(30));
        let err = out.expect_err("the third session").to_string();
        assert!(
            err.contains("FATAL:  pgcompress tunnel client: too many connections (2)"),
            "{err}"
        );
        let (status, body) = get(&client_metrics, "/metrics");
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(
            sample(&body, "pgcompress_tunnel_connections_open{half=\"client\"}"),
            2
        );
        assert_eq!(
            sample(
                &body,
                "pgcompress_tunnel_refused_connections_total{half=\"client\"}"
            ),
            1
        );
        sessions
            .into_iter()
            .map(|h| h.join().expect("psql thread"))
            .collect::<Vec<_>>()
    });
    for (i, out) in outs.iter().enumerate() {
        assert!(out.ends_with(&format!("|session {i}")), "{out}");
    }
    // Once both sessions ended, the endpoints and the stats files agree exactly.
    let files = [
        (
            "client",
            &client_metrics,
            settled(|| tunnel.client_stats_now(), 2),
        ),
        (
            "server",
            &server_metrics,
            settled(|| tunnel.server_stats_now(), 2),
        ),
    ];
    for (half, addr, file) in &files {
        let (_, body) = get(addr, "/metrics");
        for (dir, d) in [
            ("frontend_to_backend", file.frontend_to_backend),
            ("backend_to_frontend", file.backend_to_frontend),
        ] {
            let labels = format!("{{half=\"{half}\",direction=\"{dir}\"}}");
            let raw = sample(&body, &format!("pgcompress_tunnel_raw_bytes_total{labels}"));
            let link = sample(
                &body,
                &format!("pgcompress_tunnel_link_bytes_total{labels}"),
            );
            assert!(raw > 0 && link > 0, "{half} {dir}");
            assert_eq!((raw, link), (d.raw_bytes, d.link_bytes), "{half} {dir}");
        }
        assert_eq!(
            sample(
                &body,
                &format!("pgcompress_tunnel_refused_connections_total{{half=\"{half}\"}}")
            ),
            file.refused_connections
        );
    }
    let done = tunnel.finish();
    assert_eq!(done.client.refused_connections, 1);
    assert_eq!(done.server.refused_connections, 0);
    assert!(
        done.client_log.contains("too many connections (2)"),
        "{}",
        done.client_log
    );
    assert!(
        done.client_log
            .contains(&format!("metrics on http://{client_metrics}/metrics")),
        "{}",
        done.client_log
    );
}
