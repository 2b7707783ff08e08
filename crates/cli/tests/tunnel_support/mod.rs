//! Harness of the `tunnel_*` integration tests: keys, a server half in front of a pgtest cluster and a
//! client half on a free TCP port, real PostgreSQL clients pointed either straight at the cluster or at
//! the client half, and the halves' stats files.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pgtest::run::run_as_current_user;
use pgtest::Cluster;
use sha2::{Digest, Sha256};

/// The methods every test runs through.
pub const METHODS: [&str; 2] = ["zstd:1", "lz4"];

/// How long a client program may run before the harness kills it.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pgcompress"))
}

/// A CA with a server and a client certificate, written by `pgcompress tunnel keys`.
pub struct Keys {
    dir: tempfile::TempDir,
}

impl Keys {
    /// Runs `pgcompress tunnel keys` into a fresh directory.
    pub fn new() -> Keys {
        let dir = tempfile::tempdir().expect("tempdir for keys");
        let out = Command::new(bin())
            .args(["tunnel", "keys"])
            .arg(dir.path())
            .output()
            .expect("run pgcompress tunnel keys");
        assert!(
            out.status.success(),
            "pgcompress tunnel keys failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Keys { dir }
    }

    /// A file of the key directory (`ca.pem`, `server.pem`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// How the server half reaches PostgreSQL.
#[derive(Clone, Copy)]
pub enum Upstream {
    /// The cluster's Unix socket (pg_hba.conf `local` lines apply).
    Socket,
    /// The cluster's TCP port on 127.0.0.1 (`host` lines apply; the cluster needs `listen_tcp`).
    Tcp,
}

/// One `pgcompress tunnel` process and what it printed on stderr.
struct Half {
    child: Child,
    stderr: Arc<Mutex<String>>,
    stats: PathBuf,
}

impl Half {
    /// Starts `pgcompress tunnel <args>` and waits for its `listening on` line.
    fn spawn(which: &str, args: &[String], stats: PathBuf) -> Half {
        Half::spawn_in(Command::new(bin()), which, args, stats)
    }

    /// As [`Half::spawn`], with `base` as the command that runs the binary (for example
    /// `ip netns exec NS pgcompress`, which execs the binary in place: the pid is the half's).
    fn spawn_in(mut base: Command, which: &str, args: &[String], stats: PathBuf) -> Half {
        let mut child = base
            .arg("tunnel")
            .arg(which)
            .args(args)
            .arg("--stats")
            .arg(&stats)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pgcompress tunnel");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&stderr);
        let prefix = format!("pgcompress tunnel {which}: listening on ");
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                // The text line, or the same event with `--log-format json`.
                let json_listening = line.starts_with('{')
                    && serde_json::from_str::<serde_json::Value>(&line)
                        .is_ok_and(|v| v["event"] == "listening");
                if line.starts_with(&prefix) || json_listening {
                    let _ = ready_tx.send(());
                }
                let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                all.push_str(&line);
                all.push('\n');
            }
        });
        let mut half = Half {
            child,
            stderr,
            stats,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if ready_rx.recv_timeout(Duration::from_millis(50)).is_ok() {
                return half;
            }
            if let Ok(Some(status)) = half.child.try_wait() {
                panic!(
                    "pgcompress tunnel {which} exited ({status}) before listening: {}",
                    half.stderr()
                );
            }
            assert!(
                Instant::now() < deadline,
                "pgcompress tunnel {which} not listening after 30 s: {}",
                half.stderr()
            );
        }
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// SIGTERM, then wait for the drain; SIGKILL after `timeout`. Returns whether it exited 0.
    fn terminate(&mut self, timeout: Duration) -> bool {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.success();
        }
        signal(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return false;
                }
            }
        }
    }
}

/// Sends signal `sig` (a number, e.g. `libc::SIGTERM`) to process `pid`, through the `kill` program:
/// the workspace has no `unsafe`, and libc's `kill` is an unsafe function.
pub fn signal(pid: u32, sig: libc::c_int) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    // The process may have exited already; that is not an error here.
    let _ = status;
}

/// Bytes and counts of one direction in a stats file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Direction {
    /// PostgreSQL bytes.
    pub raw_bytes: u64,
    /// Bytes on the link socket, TLS records included.
    pub link_bytes: u64,
    /// Compressed chunks.
    pub chunks: u64,
    /// Of those, the column-coded ones.
    pub column_chunks: u64,
    /// Link frames.
    pub frames: u64,
    /// Method switches (`--method auto`).
    pub method_switches: u64,
}

/// A half's stats file.
#[derive(Debug, Clone)]
pub struct Stats {
    /// `"client"` or `"server"`.
    pub half: String,
    /// The method in use.
    pub method: String,
    /// Connections open when the file was written.
    pub connections_open: u64,
    /// Connections accepted in all.
    pub connections_total: u64,
    /// Peers refused (bad or missing certificate, not a link).
    pub refused_peers: u64,
    /// Connections closed by a decompression error.
    pub decompression_errors: u64,
    /// Connections refused past `--max-connections`.
    pub refused_connections: u64,
    /// Connections whose link peer went away mid-session without close_notify.
    pub links_cut: u64,
    /// Application → PostgreSQL.
    pub frontend_to_backend: Direction,
    /// PostgreSQL → application.
    pub backend_to_frontend: Direction,
}

impl Stats {
    /// Reads and parses a stats file.
    pub fn read(path: &Path) -> Stats {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading stats file {}: {e}", path.display()));
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("stats file {} is not JSON ({e}): {text}", path.display()));
        let n = |v: &serde_json::Value, key: &str| {
            v[key]
                .as_u64()
                .unwrap_or_else(|| panic!("stats file {}: no number {key}: {text}", path.display()))
        };
        let dir = |key: &str| {
            let d = &v[key];
            Direction {
                raw_bytes: n(d, "raw_bytes"),
                link_bytes: n(d, "link_bytes"),
                chunks: n(d, "chunks"),
                column_chunks: n(d, "column_chunks"),
                frames: n(d, "frames"),
                method_switches: n(d, "method_switches"),
            }
        };
        Stats {
            half: v["half"].as_str().unwrap_or_default().to_owned(),
            method: v["method"].as_str().unwrap_or_default().to_owned(),
            connections_open: n(&v, "connections_open"),
            connections_total: n(&v, "connections_total"),
            refused_peers: n(&v, "refused_peers"),
            decompression_errors: n(&v, "decompression_errors"),
            refused_connections: n(&v, "refused_connections"),
            links_cut: n(&v, "links_cut"),
            frontend_to_backend: dir("frontend_to_backend"),
            backend_to_frontend: dir("backend_to_frontend"),
        }
    }
}

/// Final stats of both halves, read after they exited.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The client half's.
    pub client: Stats,
    /// The server half's.
    pub server: Stats,
    /// What the client half printed (one line per connection, the exit summary).
    pub client_log: String,
    /// What the server half printed.
    pub server_log: String,
}

/// A server half in front of a cluster and a client half on 127.0.0.1:`port`, both stopped on drop.
pub struct Tunnel {
    server: Half,
    client: Half,
    /// Where applications connect (127.0.0.1).
    pub port: u16,
    /// The server half's link port.
    pub link_port: u16,
    /// The method both directions use.
    pub method: String,
    _dir: tempfile::TempDir,
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    pgtest::free_port().expect("a free port on 127.0.0.1")
}

impl Tunnel {
    /// Starts both halves with `method` in front of `cluster`.
    pub fn start(keys: &Keys, cluster: &Cluster, upstream: Upstream, method: &str) -> Tunnel {
        Tunnel::start_with(keys, cluster, upstream, method, &[], &[])
    }

    /// As [`Tunnel::start`], with `server_extra` and `client_extra` added to each half's options.
    pub fn start_with(
        keys: &Keys,
        cluster: &Cluster,
        upstream: Upstream,
        method: &str,
        server_extra: &[String],
        client_extra: &[String],
    ) -> Tunnel {
        let dir = tempfile::tempdir().expect("tempdir for stats");
        let link_port = free_port();
        let upstream_args: Vec<String> = match upstream {
            Upstream::Socket => vec![
                "--upstream".into(),
                cluster.socket_dir().display().to_string(),
                "--upstream-port".into(),
                cluster.port().to_string(),
            ],
            Upstream::Tcp => vec![
                "--upstream".into(),
                format!(
                    "127.0.0.1:{}",
                    cluster
                        .tcp_port()
                        .expect("Upstream::Tcp needs a cluster with listen_tcp")
                ),
            ],
        };
        let key = |n: &str| keys.file(n).display().to_string();
        let mut args = vec!["--listen".into(), format!("127.0.0.1:{link_port}")];
        args.extend(upstream_args);
        args.extend([
            "--ca".into(),
            key("ca.pem"),
            "--cert".into(),
            key("server.pem"),
        ]);
        args.extend(["--key".into(), key("server-key.pem")]);
        args.extend_from_slice(server_extra);
        let server = Half::spawn("server", &args, dir.path().join("server.json"));
        let port = free_port();
        let mut args = vec![
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--server".into(),
            format!("127.0.0.1:{link_port}"),
            "--method".into(),
            method.into(),
            "--ca".into(),
            key("ca.pem"),
            "--cert".into(),
            key("client.pem"),
            "--key".into(),
            key("client-key.pem"),
        ];
        args.extend_from_slice(client_extra);
        let client = Half::spawn("client", &args, dir.path().join("client.json"));
        Tunnel {
            server,
            client,
            port,
            link_port,
            method: method.into(),
            _dir: dir,
        }
    }

    /// Starts the server half in `link`'s server namespace, on the veth address, in front of `cluster`'s
    /// Unix socket, and the client half in the client namespace on 127.0.0.1:`port` there, connected
    /// to the server half over the veth: between the namespaces the veth carries the link and nothing
    /// else. Applications must run in the client namespace ([`Tunnel::netns_client`]).
    pub fn start_netns(
        keys: &Keys,
        cluster: &Cluster,
        link: &pgtest::netns::NetLink,
        method: &str,
        server_extra: &[String],
        client_extra: &[String],
    ) -> Tunnel {
        use pgtest::netns::Side;
        let dir = tempfile::tempdir().expect("tempdir for stats");
        // Fresh namespaces: every port is free in them.
        let link_port = 7432;
        let server_addr = format!("{}:{link_port}", link.addr(Side::Server));
        let key = |n: &str| keys.file(n).display().to_string();
        let mut args: Vec<String> = vec![
            "--listen".into(),
            server_addr.clone(),
            "--upstream".into(),
            cluster.socket_dir().display().to_string(),
            "--upstream-port".into(),
            cluster.port().to_string(),
            "--ca".into(),
            key("ca.pem"),
            "--cert".into(),
            key("server.pem"),
            "--key".into(),
            key("server-key.pem"),
        ];
        args.extend_from_slice(server_extra);
        let server = Half::spawn_in(
            link.command(Side::Server, bin()),
            "server",
            &args,
            dir.path().join("server.json"),
        );
        let port = 6432;
        let mut args: Vec<String> = vec![
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--server".into(),
            server_addr,
            // The certificate of `tunnel keys` names localhost, not the veth address.
            "--server-name".into(),
            "localhost".into(),
            "--method".into(),
            method.into(),
            "--ca".into(),
            key("ca.pem"),
            "--cert".into(),
            key("client.pem"),
            "--key".into(),
            key("client-key.pem"),
        ];
        args.extend_from_slice(client_extra);
        let client = Half::spawn_in(
            link.command(Side::Client, bin()),
            "client",
            &args,
            dir.path().join("client.json"),
        );
        Tunnel {
            server,
            client,
            port,
            link_port,
            method: method.into(),
            _dir: dir,
        }
    }

    /// The PostgreSQL client `program` of `cluster`'s installation, run in `link`'s client namespace
    /// and pointed at the client half (by `PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`).
    pub fn netns_client(
        &self,
        link: &pgtest::netns::NetLink,
        cluster: &Cluster,
        program: &str,
    ) -> Command {
        let mut cmd = link.command(pgtest::netns::Side::Client, cluster.install().bin(program));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                cmd.env_remove(key);
            }
        }
        cmd.env("PGHOST", "127.0.0.1")
            .env("PGPORT", self.port.to_string())
            .env("PGUSER", pgtest::SUPERUSER)
            .env("PGDATABASE", pgtest::SUPERUSER);
        cmd
    }

    /// The process ids of the client and the server half.
    pub fn pids(&self) -> (u32, u32) {
        (self.client.child.id(), self.server.child.id())
    }

    /// A libpq connection string through the tunnel.
    pub fn conninfo(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={} dbname={dbname}",
            self.port,
            pgtest::SUPERUSER
        )
    }

    /// The client half's stats file as last written (at least once a second while it runs).
    pub fn client_stats_now(&self) -> Stats {
        Stats::read(&self.client.stats)
    }

    /// Waits (at most 10 s) until both halves wrote their stats file once.
    pub fn wait_stats_files(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(self.client.stats.exists() && self.server.stats.exists()) {
            assert!(Instant::now() < deadline, "no stats files: {}", self.logs());
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server half's stats file as last written.
    pub fn server_stats_now(&self) -> Stats {
        Stats::read(&self.server.stats)
    }

    /// Stops both halves (SIGTERM: they drain and write their final stats) and returns their stats.
    pub fn finish(mut self) -> Finished {
        let client_ok = self.client.terminate(Duration::from_secs(40));
        let server_ok = self.server.terminate(Duration::from_secs(40));
        let client_log = self.client.stderr();
        let server_log = self.server.stderr();
        assert!(
            client_ok,
            "client half did not exit 0 on SIGTERM: {client_log}"
        );
        assert!(
            server_ok,
            "server half did not exit 0 on SIGTERM: {server_log}"
        );
        // Every way a connection ends, ends its link with close_notify: a link cut
        // mid-session is a defect unless a test cut it on purpose (it reads the logs itself).
        for (half, log) in [("client", &client_log), ("server", &server_log)] {
            assert!(
                !log.contains("close_notify") && !log.contains("mid-session"),
                "the {half} half saw a link end without close_notify:\n{log}"
            );
        }
        Finished {
            client: Stats::read(&self.client.stats),
            server: Stats::read(&self.server.stats),
            client_log,
            server_log,
        }
    }

    /// What both halves printed so far, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "client half:\n{}\nserver half:\n{}",
            self.client.stderr(),
            self.server.stderr()
        )
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.client.terminate(Duration::from_secs(5));
        self.server.terminate(Duration::from_secs(5));
    }
}

/// Where a client program connects.
#[derive(Clone, Copy)]
pub enum Via<'a> {
    /// Straight to the cluster's Unix socket.
    Direct,
    /// To the client half of this tunnel.
    Tunnel(&'a Tunnel),
}

impl Via<'_> {
    /// A label for messages: `direct` or the tunnel's method.
    pub fn label(&self) -> String {
        match self {
            Via::Direct => "direct".into(),
            Via::Tunnel(t) => format!("tunnel {}", t.method),
        }
    }
}

/// A command for the PostgreSQL client `program`, connected to `cluster` directly or through a tunnel
/// by `PGHOST`/`PGPORT` (user and database `postgres`). Clients run as the current user (libpq programs
/// do not mind root), so they read and write the test's files without a user switch.
pub fn client(cluster: &Cluster, program: &str, via: Via) -> Command {
    let mut cmd = cluster.command(program);
    if let Via::Tunnel(t) = via {
        cmd.env("PGHOST", "127.0.0.1")
            .env("PGPORT", t.port.to_string());
    }
    cmd
}

/// Runs a client command to completion; panics with its stderr when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    run_as_current_user(cmd, None, CLIENT_TIMEOUT).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `psql -X -q -At -v ON_ERROR_STOP=1 -c sql` and returns its trimmed stdout.
pub fn psql(cluster: &Cluster, via: Via, sql: &str) -> String {
    let mut cmd = client(cluster, "psql", via);
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]);
    let out = run_ok(&mut cmd);
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).expect("hash file");
    hex::encode(h.finalize())
}

/// An order-independent checksum of every user table of `dbname`, computed by the server: one line per
/// table, `name rows md5` with the rows' text sorted. Equal output means equal contents.
pub fn table_checksums(cluster: &Cluster, via: Via, dbname: &str) -> String {
    let list = {
        let mut cmd = client(cluster, "psql", via);
        cmd.args(["-X", "-q", "-At", "-d", dbname, "-c"])
            .arg("SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables ORDER BY 1");
        String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned()
    };
    let mut cmd = client(cluster, "psql", via);
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", dbname]);
    let mut tables = 0;
    for table in list.lines().filter(|l| !l.is_empty()) {
        // One -c per table: psql prints the result of each, but only the last of one multi-statement -c.
        cmd.arg("-c").arg(format!(
            "SELECT '{table}', count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {table} t"
        ));
        tables += 1;
    }
    assert!(tables > 0, "no user tables in {dbname}");
    String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned()
}
