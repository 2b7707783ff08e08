//! Every way a tunnelled connection ends, ended properly: the half that ends a link sends TLS
//! close_notify before it closes the socket, so the other half never logs "peer closed
//! connection without sending TLS close_notify" nor counts a cut link. One test per path:
//! the application's Terminate, PostgreSQL ending the session (pg_terminate_backend and
//! idle_session_timeout), a drain cut short on SIGTERM on either half, and an error.
//!
//! The application here is a raw v3 client on a socket, so that it can do what real ones do
//! at the worst moment: send Terminate and keep its socket open, or stay idle.

mod tunnel_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use pgtest::Cluster;
use tunnel_support::{psql, signal, Finished, Keys, Tunnel, Upstream, Via};

/// An application connection through the client half, past ReadyForQuery.
struct App {
    sock: TcpStream,
}

impl App {
    /// Connects to the client half and starts a session as `postgres`, with `params` added
    /// to the StartupMessage.
    fn connect(tunnel: &Tunnel, params: &[(&str, &str)]) -> App {
        let mut sock = TcpStream::connect(("127.0.0.1", tunnel.port)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut body = 196_608u32.to_be_bytes().to_vec();
        for (k, v) in [("user", "postgres"), ("database", "postgres")]
            .iter()
            .chain(params)
        {
            for s in [k, v] {
                body.extend_from_slice(s.as_bytes());
                body.push(0);
            }
        }
        body.push(0);
        let mut msg = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        msg.extend_from_slice(&body);
        sock.write_all(&msg).expect("startup");
        let mut app = App { sock };
        loop {
            match app.message() {
                Some((b'Z', _)) => return app,
                Some((b'E', body)) => panic!("startup refused: {}", String::from_utf8_lossy(&body)),
                Some((b'R', body)) => assert_eq!(&body[..4], &[0, 0, 0, 0], "auth asked"),
                Some(_) => {}
                None => panic!("closed before ReadyForQuery"),
            }
        }
    }

    /// The next backend message, `None` at the end of the stream.
    fn message(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut head = [0u8; 5];
        match self.sock.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading from the client half: {e}"),
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        self.sock.read_exact(&mut body).expect("message body");
        Some((head[0], body))
    }

    /// Reads until the client half closes the socket; returns the message types seen.
    fn until_closed(&mut self) -> Vec<u8> {
        let mut seen = Vec::new();
        while let Some((t, _)) = self.message() {
            seen.push(t);
        }
        seen
    }

    /// A simple Query, read through its ReadyForQuery.
    fn query(&mut self, sql: &str) {
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
        msg.extend_from_slice(sql.as_bytes());
        msg.push(0);
        self.send(&msg);
        loop {
            match self.message() {
                Some((b'Z', _)) => return,
                Some((b'E', body)) => panic!("{sql}: {}", String::from_utf8_lossy(&body)),
                Some(_) => {}
                None => panic!("{sql}: closed"),
            }
        }
    }

    /// The payload of the next NotificationResponse, waiting at most `deadline` while idle.
    fn notification(&mut self, deadline: Duration) -> Option<String> {
        let until = Instant::now() + deadline;
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            self.sock.set_read_timeout(Some(left)).expect("timeout");
            let got = match self.sock.peek(&mut [0u8; 1]) {
                Ok(0) => return None,
                Ok(_) => self.message(),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(e) => panic!("waiting for a notification: {e}"),
            };
            if let Some((b'A', body)) = got {
                // pid, channel, payload: the payload is the second string.
                let text = &body[4..];
                let mut parts = text.split(|b| *b == 0);
                parts.next();
                return parts
                    .next()
                    .map(|p| String::from_utf8_lossy(p).into_owned());
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).expect("send");
    }
}

/// Neither half logged a link closed without close_notify nor counted a cut link, and
/// `connections` connections were served.
fn assert_closed_properly(fin: &Finished, connections: u64) {
    for (half, log, stats) in [
        ("client", &fin.client_log, &fin.client),
        ("server", &fin.server_log, &fin.server),
    ] {
        assert!(
            !log.contains("close_notify") && !log.contains("mid-session"),
            "the {half} half saw a link end without close_notify:\n{log}"
        );
        assert_eq!(stats.links_cut, 0, "{half} half: {log}");
        assert_eq!(stats.decompression_errors, 0, "{half} half: {log}");
        assert_eq!(stats.connections_total, connections, "{half} half: {log}");
    }
}

fn cluster() -> Cluster {
    Cluster::start().expect("cluster")
}

#[test]
fn terminate_with_the_application_socket_left_open() {
    let cluster = cluster();
    let keys = Keys::new();
    for method in ["zstd:1", "none"] {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let mut app = App::connect(&tunnel, &[]);
        // Terminate, and the socket stays open: PostgreSQL ends the session first.
        app.send(&[b'X', 0, 0, 0, 4]);
        assert!(app.until_closed().is_empty());
        let fin = tunnel.finish();
        assert_closed_properly(&fin, 1);
    }
}

#[test]
fn postgresql_terminates_an_idle_session() {
    let cluster = cluster();
    let keys = Keys::new();
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "zstd:1");
    let mut app = App::connect(&tunnel, &[("application_name", "close_victim")]);
    let killed = psql(
        &cluster,
        Via::Direct,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'close_victim'",
    );
    assert_eq!(killed.trim(), "1");
    // The FATAL ErrorResponse, then the end of the stream.
    assert_eq!(app.until_closed(), vec![b'E']);
    let fin = tunnel.finish();
    assert_closed_properly(&fin, 1);
}

#[test]
fn idle_session_timeout_drops_the_connection() {
    let cluster = cluster();
    let keys = Keys::new();
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "lz4");
    let mut app = App::connect(&tunnel, &[("options", "-c idle_session_timeout=300")]);
    let started = Instant::now();
    assert_eq!(app.until_closed(), vec![b'E']);
    assert!(started.elapsed() >= Duration::from_millis(250));
    let fin = tunnel.finish();
    assert_closed_properly(&fin, 1);
}

#[test]
fn a_drain_cut_short_on_sigterm_ends_links_properly() {
    let cluster = cluster();
    let keys = Keys::new();
    let drain = ["--drain-timeout".to_owned(), "1".to_owned()];
    // The client half drains first (Tunnel::finish signals it first), then the server half.
    let tunnel = Tunnel::start_with(&keys, &cluster, Upstream::Socket, "zstd:1", &[], &drain);
    let mut app = App::connect(&tunnel, &[]);
    let fin = tunnel.finish();
    assert!(app.until_closed().is_empty());
    assert_closed_properly(&fin, 1);

    // The server half drains first, while the application stays idle.
    let tunnel = Tunnel::start_with(&keys, &cluster, Upstream::Socket, "zstd:1", &drain, &[]);
    let mut app = App::connect(&tunnel, &[]);
    let (_, server_pid) = tunnel.pids();
    signal(server_pid, libc::SIGTERM);
    app.until_closed();
    let fin = tunnel.finish();
    assert_closed_properly(&fin, 1);
}

#[test]
fn an_application_protocol_error_ends_the_link_properly() {
    let cluster = cluster();
    let keys = Keys::new();
    let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, "zstd:1");
    let mut app = App::connect(&tunnel, &[]);
    // A Query whose length is below its own header: the client half's framer refuses it.
    app.send(&[b'Q', 0, 0, 0, 2]);
    app.until_closed();
    let fin = tunnel.finish();
    assert!(
        fin.client_log.contains("error"),
        "the client half did not say why: {}",
        fin.client_log
    );
    assert!(
        !fin.server_log.contains("close_notify") && !fin.server_log.contains("mid-session"),
        "{}",
        fin.server_log
    );
    assert_eq!(fin.server.links_cut, 0, "{}", fin.server_log);
}

/// As psycopg's test_notify does: one connection LISTENs and waits with a deadline while
/// another connects and NOTIFYs, with pgbench loading the same pair meanwhile. Every
/// notification must reach the idle listener at once, whatever the method.
#[test]
fn notifications_reach_an_idle_listener_under_load() {
    let cluster = cluster();
    cluster.pgbench_init(1).expect("pgbench -i");
    let keys = Keys::new();
    for method in ["zstd:1", "lz4", "none", "auto"] {
        let tunnel = Tunnel::start(&keys, &cluster, Upstream::Socket, method);
        let mut listener = App::connect(&tunnel, &[]);
        listener.query("LISTEN tick");
        let load = {
            let mut cmd = tunnel_support::client(&cluster, "pgbench", Via::Tunnel(&tunnel));
            cmd.args(["-n", "-c", "4", "-j", "2", "-T", "6", "postgres"]);
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            cmd.spawn().expect("pgbench")
        };
        let mut worst = Duration::ZERO;
        for i in 0..20 {
            let sent = Instant::now();
            psql(
                &cluster,
                Via::Tunnel(&tunnel),
                &format!("NOTIFY tick, '{i}'"),
            );
            let payload = listener
                .notification(Duration::from_secs(5))
                .unwrap_or_else(|| {
                    panic!(
                        "{method}: notification {i} did not arrive within 5 s\n{}",
                        tunnel.logs()
                    )
                });
            assert_eq!(payload, i.to_string());
            worst = worst.max(sent.elapsed());
        }
        let mut load = load;
        let _ = load.wait();
        eprintln!("{method}: 20 notifications, the slowest NOTIFY-to-arrival {worst:?}");
        drop(listener);
        tunnel.finish();
    }
}
