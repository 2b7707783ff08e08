//! A running throwaway PostgreSQL server, and what tests do with it.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::builder::{check_guc_name, conf_quote, sql_quote, ClusterBuilder};
use crate::error::{Error, Result};
use crate::install::PgInstall;
use crate::run::{chown_to_server_user, run, run_with, server_user, ServerUser, DEFAULT_TIMEOUT};

/// The superuser `initdb` creates and every client connects as.
pub const SUPERUSER: &str = "postgres";

/// `sockaddr_un.sun_path` holds 108 bytes on Linux, one of them the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// How long `pg_ctl stop` may take before Drop escalates.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A PostgreSQL server in its own temporary directory, listening only on a Unix socket.
///
/// Dropping it stops the server (fast, then immediate, then SIGKILL) and deletes the directory, also when the
/// test panics. Layout of the directory: `data/` (the cluster), `sock/` (the socket), `archive/` (archived WAL,
/// when enabled) and `server.log`.
#[derive(Debug)]
pub struct Cluster {
    install: PgInstall,
    root: PathBuf,
    tempdir: Option<TempDir>,
    port: u16,
    archive_dir: Option<PathBuf>,
    tcp: bool,
    running: AtomicBool,
    start_timeout: Duration,
    netns: Option<InNetns>,
}

/// How [`Cluster::command`] enters a network namespace ([`ClusterBuilder::netns`]).
#[derive(Debug)]
struct InNetns {
    /// The namespace name.
    name: String,
    /// The user to become inside it (`setpriv`, since `ip netns exec` needs root); `None` when not root.
    user: Option<ServerUser>,
}

impl Cluster {
    /// Starts configuring a new cluster.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts a cluster with default settings; shorthand for `Cluster::builder().start()`.
    pub fn start() -> Result<Cluster> {
        Cluster::builder().start()
    }

    pub(crate) fn create(b: ClusterBuilder) -> Result<Cluster> {
        let install = match (b.install, b.major) {
            (Some(i), _) => i,
            (None, Some(major)) => PgInstall::of_major(major)?,
            (None, None) => PgInstall::find()?,
        };
        let tempdir = tempfile::Builder::new()
            .prefix("pgtest-")
            .tempdir()
            .map_err(Error::io("creating temporary directory for the cluster"))?;
        let root = tempdir.path().to_path_buf();
        // From here on, Drop cleans up whatever state we reach, so every `?` below is safe.
        let mut cluster = Cluster {
            install,
            root: root.clone(),
            tempdir: Some(tempdir),
            port: if b.tcp { free_tcp_port()? } else { next_port() },
            archive_dir: b.archive.then(|| root.join("archive")),
            tcp: b.tcp,
            running: AtomicBool::new(false),
            start_timeout: b.start_timeout,
            netns: match &b.netns {
                Some(name) => Some(InNetns {
                    name: name.clone(),
                    user: server_user()?.cloned(),
                }),
                None => None,
            },
        };
        if b.keep {
            cluster.keep();
        }
        chown_to_server_user(&root)?;
        for dir in std::iter::once(cluster.socket_dir()).chain(cluster.archive_dir.clone()) {
            fs::create_dir(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
            chown_to_server_user(&dir)?;
        }
        let socket = cluster
            .socket_dir()
            .join(format!(".s.PGSQL.{}", cluster.port));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(Error::SocketPathTooLong {
                path: socket,
                len,
                max: MAX_SOCKET_PATH,
            });
        }
        match &b.base_backup {
            Some(from) => cluster.base_backup(from)?,
            None => cluster.initdb(b.wal_segsize_mb, b.data_checksums)?,
        }
        cluster.write_conf(&b.gucs)?;
        let mut hba = b.hba.clone();
        if cluster.netns.is_some() {
            // The namespace holds nothing but this server, loopback and the veth to the client namespace.
            hba.push("host all all samenet trust".into());
        }
        cluster.write_hba(&hba)?;
        cluster.pg_ctl_start("start", &[])?;
        Ok(cluster)
    }

    fn initdb(&self, wal_segsize_mb: Option<u32>, checksums: bool) -> Result<()> {
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(self.data_dir());
        cmd.args([
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]);
        if let Some(mb) = wal_segsize_mb {
            cmd.arg(format!("--wal-segsize={mb}"));
        }
        if checksums {
            cmd.arg("--data-checksums");
        } else if self.install.major() >= 18 {
            // 18's initdb turns checksums on by default; the builder's default is off on every major.
            cmd.arg("--no-data-checksums");
        }
        run(&mut cmd)?;
        Ok(())
    }

    fn write_conf(&self, gucs: &[(String, String)]) -> Result<()> {
        let mut conf = String::from("\n# pgtest harness settings; later lines win\n");
        let socket_dir = self.socket_dir();
        let mut settings: Vec<(&str, String)> = vec![
            (
                "listen_addresses",
                if self.tcp {
                    "127.0.0.1".into()
                } else {
                    String::new()
                },
            ),
            (
                "unix_socket_directories",
                socket_dir.to_string_lossy().into_owned(),
            ),
            ("port", self.port.to_string()),
            // Tests do not survive an OS crash anyway; fsync only slows them down.
            ("fsync", "off".into()),
        ];
        if let Some(dir) = &self.archive_dir {
            let dest = format!("{}/%f", dir.display());
            settings.push(("archive_mode", "on".into()));
            settings.push((
                "archive_command",
                format!("test ! -f '{dest}' && cp %p '{dest}'"),
            ));
        }
        settings.extend(gucs.iter().map(|(n, v)| (n.as_str(), v.clone())));
        for (name, value) in settings {
            let _ = writeln!(conf, "{name} = {}", conf_quote(&value));
        }
        let path = self.data_dir().join("postgresql.conf");
        let mut text =
            fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))?;
        text.push_str(&conf);
        fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))
    }

    /// Runs `pg_ctl start` or `restart`, then checks that a query goes through.
    fn pg_ctl_start(&self, action: &str, extra: &[&str]) -> Result<()> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path());
        cmd.arg("-w")
            .arg("-t")
            .arg(self.start_timeout.as_secs().max(1).to_string());
        cmd.args(extra).arg(action);
        // The server may be up even when pg_ctl fails or times out, so Drop must try to stop it either way.
        self.running.store(true, Ordering::SeqCst);
        let started = run_with(&mut cmd, None, self.start_timeout + Duration::from_secs(30))
            .and_then(|_| self.query_one("SELECT 1").map(drop));
        started.map_err(|e| Error::StartFailed {
            data_dir: self.data_dir(),
            reason: e.to_string(),
            log_tail: self.log_tail(30),
        })
    }

    /// A command for the PostgreSQL program `name`, set up to talk to this cluster.
    ///
    /// The working directory is the cluster's directory, inherited `PG*` variables are removed, and
    /// `PGHOST`, `PGPORT`, `PGUSER` and `PGDATABASE` point at this cluster, so `pg_basebackup`, `pg_dump` and
    /// friends need no connection arguments. Run it with [`crate::run()`] to get the root → postgres switch.
    /// In a network namespace ([`ClusterBuilder::netns`]) the command is `ip netns exec NS setpriv ... PROGRAM`,
    /// which switches users itself, and [`crate::run()`] leaves it as it is.
    pub fn command(&self, name: &str) -> Command {
        let mut cmd = match &self.netns {
            None => Command::new(self.install.bin(name)),
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &ns.name]);
                if let Some(user) = &ns.user {
                    cmd.arg("setpriv")
                        .arg(format!("--reuid={}", user.uid))
                        .arg(format!("--regid={}", user.gid))
                        .args(["--clear-groups", "--"]);
                    crate::run::mark_switched(&mut cmd, user);
                }
                cmd.arg(self.install.bin(name));
                cmd
            }
        };
        cmd.current_dir(&self.root);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                cmd.env_remove(key);
            }
        }
        cmd.env("PGHOST", self.socket_dir())
            .env("PGPORT", self.port.to_string())
            .env("PGUSER", SUPERUSER)
            .env("PGDATABASE", SUPERUSER);
        cmd
    }

    /// Runs an SQL script with `psql` (statements run one by one, autocommit, stopping at the first error) and
    /// returns the rows it printed, unaligned and tuples-only (`-At`, columns separated by `|`), without the
    /// final newline.
    pub fn psql(&self, sql: &str) -> Result<String> {
        let mut text = self.psql_with(sql, &[])?;
        if text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }

    fn psql_with(&self, sql: &str, extra: &[&str]) -> Result<String> {
        let mut cmd = self.command("psql");
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-f", "-"]);
        cmd.args(extra).args(self.conn_args());
        let out = run_with(&mut cmd, Some(sql.as_bytes()), DEFAULT_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs a query that returns exactly one row of one column and returns that value (which may be empty or
    /// contain `|` and newlines).
    pub fn query_one(&self, sql: &str) -> Result<String> {
        // Separators that cannot be confused with text: unit separator between fields, NUL after each row.
        let out = self.psql_with(sql, &["-F", "\u{1f}", "-0"])?;
        match out.strip_suffix('\0') {
            Some(value) if !value.contains(['\0', '\u{1f}']) => Ok(value.to_owned()),
            _ => Err(Error::UnexpectedOutput {
                sql: sql.into(),
                output: out.replace(['\0', '\u{1f}'], "|"),
                expected: "one row with one column",
            }),
        }
    }

    /// Runs `pgbench` against this cluster with `args` and returns its standard output.
    pub fn pgbench(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.command("pgbench");
        cmd.args(self.conn_args()).args(args);
        let out = run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Creates the pgbench tables at `scale` (100,000 accounts per unit), quietly.
    pub fn pgbench_init(&self, scale: u32) -> Result<()> {
        self.pgbench(&["-i", "-q", "-s", &scale.to_string()])
            .map(drop)
    }

    /// The cluster's data directory (`PGDATA`).
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The directory holding the server's Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("sock")
    }

    /// The port number; with Unix sockets only it just names the socket file `.s.PGSQL.<port>`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory the cluster lives in (data, socket, archive and log).
    pub fn root_dir(&self) -> &Path {
        &self.root
    }

    /// The server log file.
    pub fn log_path(&self) -> PathBuf {
        self.root.join("server.log")
    }

    /// The last `lines` lines of the server log, or a note saying why there are none.
    pub fn log_tail(&self, lines: usize) -> String {
        match fs::read_to_string(self.log_path()) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(no server log at {}: {e})", self.log_path().display()),
        }
    }

    /// The installation this cluster runs.
    pub fn install(&self) -> &PgInstall {
        &self.install
    }

    /// The directory WAL is archived into, when [`ClusterBuilder::archive_dir`] was enabled.
    pub fn archive_dir(&self) -> Option<&Path> {
        self.archive_dir.as_deref()
    }

    /// The TCP port on 127.0.0.1, when [`ClusterBuilder::listen_tcp`] was enabled (it is also [`Cluster::port`]).
    pub fn tcp_port(&self) -> Option<u16> {
        self.tcp.then_some(self.port)
    }

    /// Connection arguments for libpq programs: `-h <socket dir> -p <port> -U postgres`.
    pub fn conn_args(&self) -> Vec<String> {
        vec![
            "-h".into(),
            self.socket_dir().to_string_lossy().into_owned(),
            "-p".into(),
            self.port.to_string(),
            "-U".into(),
            SUPERUSER.into(),
        ]
    }

    /// A libpq connection string for this cluster's `postgres` database.
    pub fn conninfo(&self) -> String {
        format!(
            "host={} port={} user={SUPERUSER} dbname={SUPERUSER}",
            self.socket_dir().display(),
            self.port
        )
    }

    /// Sets a server parameter with `ALTER SYSTEM` and reloads the configuration, waiting until new sessions
    /// see it. Parameters that need a restart take effect only after [`Cluster::restart`].
    pub fn set_guc_and_reload(&self, name: &str, value: &str) -> Result<()> {
        check_guc_name(name)?;
        let before = self.query_one("SELECT pg_conf_load_time()")?;
        self.psql(&format!("ALTER SYSTEM SET {name} = {}", sql_quote(value)))?;
        self.query_one("SELECT pg_reload_conf()")?;
        // The postmaster handles SIGHUP asynchronously; new backends inherit its load time once it has.
        let query = format!(
            "SELECT pg_conf_load_time() > {}::timestamptz",
            sql_quote(&before)
        );
        self.wait_until("the configuration reload", Duration::from_secs(30), || {
            Ok(self.query_one(&query)? == "t")
        })
    }

    /// Polls `check` every 50 ms until it returns true, failing with [`Error::WaitTimeout`] after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if check()? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::WaitTimeout {
                    what: what.into(),
                    after: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Restarts the server (fast shutdown), for example after changing a parameter that needs it.
    pub fn restart(&self) -> Result<()> {
        if self.running.load(Ordering::SeqCst) {
            self.pg_ctl_start("restart", &["-m", "fast"])
        } else {
            self.pg_ctl_start("start", &[])
        }
    }

    /// Stops the server with a fast shutdown; does nothing if it is already stopped.
    pub fn stop(&self) -> Result<()> {
        self.stop_mode("fast")
    }

    fn stop_mode(&self, mode: &str) -> Result<()> {
        if !self.running.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["-m", mode, "-w", "-t"]);
        cmd.arg(STOP_TIMEOUT.as_secs().to_string()).arg("stop");
        match run_with(&mut cmd, None, STOP_TIMEOUT + Duration::from_secs(10)) {
            Ok(_) => {
                self.running.store(false, Ordering::SeqCst);
                Ok(())
            }
            // pg_ctl fails when there is no postmaster.pid, i.e. nothing is running.
            Err(_) if !self.data_dir().join("postmaster.pid").exists() => {
                self.running.store(false, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Keeps the temporary directory when the cluster is dropped (the server is still stopped) and returns it.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(dir) = self.tempdir.take() {
            let _ = dir.keep();
        }
        self.root.clone()
    }

    /// Last resort when pg_ctl cannot stop the server: SIGKILL the postmaster named in `postmaster.pid`.
    fn kill_postmaster(&self) {
        let Ok(text) = fs::read_to_string(self.data_dir().join("postmaster.pid")) else {
            return;
        };
        if let Some(pid) = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
        {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.stop().is_err() && self.stop_mode("immediate").is_err() {
            self.kill_postmaster();
        }
        if self.tempdir.is_none() {
            eprintln!("pgtest: kept cluster directory {}", self.root.display());
        }
        // TempDir's own Drop removes the directory.
    }
}

/// Picks a port number unlikely to be used by another test process at the same moment. Only the socket file
/// name and the System V shared memory key derive from it, and PostgreSQL skips keys that are taken.
impl ClusterBuilder {
    /// Runs `initdb` into a fresh temporary directory and starts the server.
    // Here rather than in builder.rs so that the builder, plain settings, does not depend on
    // the cluster it configures.
    pub fn start(self) -> Result<Cluster> {
        for (name, _) in &self.gucs {
            check_guc_name(name)?;
        }
        Cluster::create(self)
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick for port 0). Another process
/// could take it before the server binds it; the server would then fail to start with a clear log line.
fn free_tcp_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(Error::io("finding a free TCP port on 127.0.0.1"))?;
    let addr = listener
        .local_addr()
        .map_err(Error::io("finding a free TCP port on 127.0.0.1"))?;
    Ok(addr.port())
}

fn next_port() -> u16 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mixed = std::process::id().wrapping_mul(97).wrapping_add(n);
    20_000 + (mixed % 40_000) as u16
}
