//! Runs both tunnel halves in-process against a pgtest cluster, for the `net` tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgtest::Cluster;
use wire::link::{parse_spec, TagSet};
use wire::net::{
    run_client, run_server, ClientConfig, ConnectionReport, Endpoint, FrameTap, Half, KeysConfig,
    Report, Reporter, ServerConfig, Shutdown, StatsSnapshot, TapEvent,
};

/// Writes a fresh CA and certificates into `dir`.
pub fn keys(dir: &Path) -> PathBuf {
    wire::net::write_keys(&KeysConfig {
        dir: dir.to_path_buf(),
        days: 2,
        server_names: Vec::new(),
        force: false,
    })
    .expect("tunnel keys");
    dir.to_path_buf()
}

/// The cluster's Unix socket as a server half's upstream.
pub fn socket_upstream(cluster: &Cluster) -> Endpoint {
    Endpoint::parse(
        cluster.socket_dir().to_str().expect("utf-8 path"),
        cluster.port(),
    )
    .expect("endpoint")
}

/// Both halves running on their own runtime.
pub struct Tunnel {
    pub runtime: tokio::runtime::Runtime,
    pub keys: PathBuf,
    pub server_addr: String,
    pub client_addr: String,
    pub server_shutdown: Shutdown,
    pub client_shutdown: Shutdown,
    server_task: Option<tokio::task::JoinHandle<Result<StatsSnapshot, wire::net::NetError>>>,
    client_task: Option<tokio::task::JoinHandle<Result<StatsSnapshot, wire::net::NetError>>>,
    pub server_reports: Arc<Mutex<Vec<Report>>>,
    pub client_reports: Arc<Mutex<Vec<Report>>>,
    pub frames: Arc<Mutex<Vec<TapEvent>>>,
    _dir: tempfile::TempDir,
}

/// A reporter that prints and keeps `half`'s reports, and a channel of the addresses it
/// reports listening on.
pub fn collector(half: Half) -> (Reporter, Arc<Mutex<Vec<Report>>>, mpsc::Receiver<String>) {
    let all = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let sink = all.clone();
    let reporter: Reporter = Arc::new(move |r: Report| {
        if let Report::Listening { address, .. } = &r {
            let _ = tx.lock().expect("lock").send(address.clone());
        }
        eprintln!("[{half}] {r:?}");
        sink.lock().expect("lock").push(r);
    });
    (reporter, all, rx)
}

impl Tunnel {
    /// Starts a server half in front of `upstream` and a client half (TCP, loopback) using
    /// `method`.
    pub fn start(upstream: Endpoint, method: &str) -> Tunnel {
        Tunnel::start_with(upstream, method, false, Endpoint::Tcp("127.0.0.1:0".into()))
    }

    /// As [`Tunnel::start`]; with `app_tls` the client half serves TLS to applications with
    /// the server half's certificate.
    /// `listen` is where the client half accepts applications.
    pub fn start_with(upstream: Endpoint, method: &str, app_tls: bool, listen: Endpoint) -> Tunnel {
        let max = wire::net::DEFAULT_MAX_CONNECTIONS;
        Tunnel::start_limited(upstream, method, app_tls, listen, (max, max))
    }

    /// As [`Tunnel::start_with`], with `max` = (client half, server half) `--max-connections`.
    pub fn start_limited(
        upstream: Endpoint,
        method: &str,
        app_tls: bool,
        listen: Endpoint,
        max: (usize, usize),
    ) -> Tunnel {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = keys(&dir.path().join("keys"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let frames = Arc::new(Mutex::new(Vec::new()));
        let sink = frames.clone();
        let tap: FrameTap = Arc::new(move |e| sink.lock().expect("lock").push(e));
        let (s_rep, server_reports, s_rx) = collector(Half::Server);
        let server_shutdown = Shutdown::new();
        let server_task = runtime.spawn(run_server(
            ServerConfig {
                listen: Endpoint::Tcp("127.0.0.1:0".into()),
                upstream,
                ca: keys.join("ca.pem"),
                cert: keys.join("server.pem"),
                key: keys.join("server-key.pem"),
                stats_file: Some(dir.path().join("server-stats.json")),
                drain_timeout: Duration::from_secs(30),
                tap: Some(tap),
                max_connections: max.1,
                metrics: Some("127.0.0.1:0".into()),
                compress_types: TagSet::default(),
                threshold: wire::link::DEFAULT_THRESHOLD,
            },
            server_shutdown.clone(),
            s_rep,
        ));
        let server_addr = s_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server half listening");
        let (c_rep, client_reports, c_rx) = collector(Half::Client);
        let client_shutdown = Shutdown::new();
        let client_task = runtime.spawn(run_client(
            ClientConfig {
                listen,
                server: server_addr.clone(),
                server_name: "localhost".into(),
                method: if method == "auto" {
                    parse_spec("none").expect("method")
                } else {
                    parse_spec(method).expect("method")
                },
                auto: method == "auto",
                ca: keys.join("ca.pem"),
                cert: keys.join("client.pem"),
                key: keys.join("client-key.pem"),
                local_tls: app_tls.then(|| (keys.join("server.pem"), keys.join("server-key.pem"))),
                compress_types: TagSet::default(),
                threshold: wire::link::DEFAULT_THRESHOLD,
                stats_file: Some(dir.path().join("client-stats.json")),
                drain_timeout: Duration::from_secs(30),
                max_connections: max.0,
                metrics: Some("127.0.0.1:0".into()),
            },
            client_shutdown.clone(),
            c_rep,
        ));
        let client_addr = c_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("client half listening");
        Tunnel {
            runtime,
            keys,
            server_addr,
            client_addr,
            server_shutdown,
            client_shutdown,
            server_task: Some(server_task),
            client_task: Some(client_task),
            server_reports,
            client_reports,
            frames,
            _dir: dir,
        }
    }

    /// The client half's stats file.
    pub fn client_stats_path(&self) -> PathBuf {
        self._dir.path().join("client-stats.json")
    }

    /// The server half's stats file.
    pub fn server_stats_path(&self) -> PathBuf {
        self._dir.path().join("server-stats.json")
    }

    /// Waits until the client half's stats file shows `n` open connections.
    pub fn wait_open(&self, n: u64) {
        let path = self.client_stats_path();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(s) = StatsSnapshot::read(&path) {
                if s.connections_open >= n {
                    return;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the client half never had {n} open connections"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client half's port.
    pub fn client_port(&self) -> String {
        self.client_addr
            .rsplit_once(':')
            .expect("addr")
            .1
            .to_owned()
    }

    /// Stops the server half only, waiting for it to exit.
    pub fn stop_server(&mut self) -> StatsSnapshot {
        self.server_shutdown.trigger();
        let s = self.server_task.take().expect("server task");
        self.runtime
            .block_on(s)
            .expect("join")
            .expect("server half")
    }

    /// Stops both halves (client first) and returns their final (client, server) totals.
    pub fn stop(mut self) -> (StatsSnapshot, StatsSnapshot) {
        self.client_shutdown.trigger();
        self.server_shutdown.trigger();
        let c = self.client_task.take().expect("client task");
        let s = self.server_task.take();
        self.runtime.block_on(async {
            let c = c.await.expect("join").expect("client half");
            let s = match s {
                Some(s) => s.await.expect("join").expect("server half"),
                None => c.clone(),
            };
            (c, s)
        })
    }

    /// Where `half` serves its Prometheus endpoint.
    pub fn metrics_addr(&self, half: Half) -> String {
        let reports = match half {
            Half::Client => &self.client_reports,
            Half::Server => &self.server_reports,
        };
        reports
            .lock()
            .expect("lock")
            .iter()
            .find_map(|r| match r {
                Report::MetricsListening { address, .. } => Some(address.clone()),
                _ => None,
            })
            .expect("metrics endpoint")
    }

    /// Connections the server half reported as ended.
    pub fn server_connections(&self) -> Vec<ConnectionReport> {
        connections(&self.server_reports)
    }
}

/// The connection reports among `reports`.
pub fn connections(reports: &Mutex<Vec<Report>>) -> Vec<ConnectionReport> {
    reports
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|r| match r {
            Report::Connection(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// Waits until `reports` hold one that `pred` accepts (at most 30 s).
pub fn wait_report(reports: &Mutex<Vec<Report>>, what: &str, pred: impl Fn(&Report) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !reports.lock().expect("lock").iter().any(&pred) {
        assert!(
            std::time::Instant::now() < deadline,
            "never reported: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// psql running `sql` against `cluster` at the tunnel's client half (TCP) or directly.
pub fn psql(cluster: &Cluster, via: Option<&str>, sql: &str, password: Option<&str>) -> String {
    let mut cmd: Command = cluster.command("psql");
    cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-f", "-"]);
    cmd.args(["-U", "postgres", "-d", "postgres"]);
    if let Some(port) = via {
        cmd.args(["-h", "127.0.0.1", "-p", port]);
    }
    if let Some(p) = password {
        cmd.env("PGPASSWORD", p);
    }
    let out = pgtest::run::run_with(&mut cmd, Some(sql.as_bytes()), Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("psql via {via:?}: {e}"));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `psql -X -At -c 'SELECT 1' CONNINFO`, which must be refused: its error, as the caller sees it.
pub fn refused_psql(cluster: &Cluster, conninfo: &str) -> String {
    let mut cmd = cluster.command("psql");
    cmd.args(["-X", "-At", "-c", "SELECT 1", conninfo]);
    match pgtest::run::run_with(&mut cmd, None, Duration::from_secs(60)) {
        Ok(out) => panic!(
            "psql connected with {conninfo:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(e) => e.to_string(),
    }
}

/// A rustls client configuration for the link with `roots` trusted and, if given, a client
/// certificate and key.
pub fn raw_client_config(ca: &Path, client: Option<(&Path, &Path)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in wire::net::tls::load_certs(ca).expect("ca") {
        roots.add(c).expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                wire::net::tls::load_certs(cert).expect("cert"),
                wire::net::tls::load_key(key).expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Lines of the server log that record a connection reaching PostgreSQL.
pub fn connections_in_log(cluster: &Cluster) -> usize {
    std::fs::read_to_string(cluster.log_path())
        .expect("server log")
        .lines()
        .filter(|l| l.contains("connection received"))
        .count()
}

/// One HTTP/1.1 request `method path` to `addr`; returns the status line and the body.
pub fn http(addr: &str, method: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

/// The value of the sample `name{labels}` in a Prometheus text `body`.
pub fn sample(body: &str, name_and_labels: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{body}"))
        .trim()
        .parse()
        .expect("an integer sample")
}
