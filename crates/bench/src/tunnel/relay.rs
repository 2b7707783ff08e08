//! The peers `bench tunnel` measures the tunnel against, each a pair of processes between the client
//! namespace and PostgreSQL: a plain TCP relay pair (`socat`, the floor of any two-hop proxy) and an
//! `ssh -C` port forward through an sshd of its own (what DBAs use today to compress PostgreSQL traffic).
//!
//! Each side is started through a caller-given wrapper that turns a program into a [`Command`] (e.g.
//! `ip netns exec NS <program>`), so nothing here knows how the namespaces are made; in tests the wrapper is
//! plain [`Command::new`]. Dropping a relay stops its whole process tree (forked socat children, sshd's
//! per-connection processes) leaves first, so every process is reaped by its own parent.
//!
//! CPU time: [`cpu_seconds`] reads one process's utime + stime + cutime + cstime; [`tree_cpu_seconds`]
//! adds every live descendant, so a process that has ended counts once, in its reaper's cutime/cstime,
//! and one still running counts once, on its own.

use crate::error::{Error, IoContext, Result};
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a relay process may take to say it listens.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a process may take to exit after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// Debian's OpenSSH server; sshd re-executes itself and insists on an absolute path.
const SSHD: &str = "/usr/sbin/sshd";
/// sshd's privilege separation directory (Debian's openssh-server creates it at boot, not at install).
const PRIVSEP_DIR: &str = "/run/sshd";

/// Where PostgreSQL listens, as seen from the server namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgTarget {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket directory and the port that names the socket file (`.s.PGSQL.<port>`).
    Unix {
        /// The socket directory.
        dir: PathBuf,
        /// The server's port.
        port: u16,
    },
}

impl PgTarget {
    /// The socket file of a Unix target.
    fn socket_path(dir: &Path, port: u16) -> PathBuf {
        dir.join(format!(".s.PGSQL.{port}"))
    }

    /// socat's address for connecting to PostgreSQL.
    fn socat_address(&self) -> OsString {
        match self {
            PgTarget::Tcp(SocketAddr::V4(a)) => {
                format!("TCP4:{}:{},nodelay", a.ip(), a.port()).into()
            }
            PgTarget::Tcp(SocketAddr::V6(a)) => {
                format!("TCP6:[{}]:{},nodelay", a.ip(), a.port()).into()
            }
            PgTarget::Unix { dir, port } => {
                let mut s = OsString::from("UNIX-CONNECT:");
                s.push(Self::socket_path(dir, *port));
                s
            }
        }
    }

    /// The remote end of an `ssh -L` forward.
    fn ssh_forward_target(&self) -> OsString {
        match self {
            PgTarget::Tcp(SocketAddr::V4(a)) => format!("{}:{}", a.ip(), a.port()).into(),
            PgTarget::Tcp(SocketAddr::V6(a)) => format!("[{}]:{}", a.ip(), a.port()).into(),
            PgTarget::Unix { dir, port } => Self::socket_path(dir, *port).into_os_string(),
        }
    }
}

/// A program started through a wrapper, with a label for CPU figures and error messages.
struct Proc {
    label: &'static str,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with standard error piped and waits until a line containing `ready` appears; returns
    /// the process and the lines it printed until then. Standard error is drained afterwards so the
    /// process never blocks on a full pipe.
    fn start(
        label: &'static str,
        program: &str,
        cmd: &mut Command,
        ready: &str,
    ) -> Result<(Proc, Vec<String>)> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                what: format!("starting the {label}"),
                program: program.into(),
                source,
            })?;
        let stderr = child
            .stderr
            .take()
            .ok_or(Error::Internal("stderr not piped"))?;
        let (tx, rx) = mpsc::channel();
        let ready = ready.to_owned();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            let mut said = Vec::new();
            for line in lines.by_ref().map_while(std::result::Result::ok) {
                let done = line.contains(&ready);
                said.push(line);
                if done {
                    let _ = tx.send(Ok(std::mem::take(&mut said)));
                    break;
                }
            }
            let _ = tx.send(Err(said));
            for _ in lines.map_while(std::result::Result::ok) {}
        });
        let mut p = Proc { label, child };
        let reason = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(said)) => return Ok((p, said)),
            Ok(Err(said)) => format!("exited before listening: {}", last_lines(&said)),
            Err(_) => format!("did not listen within {} s", START_TIMEOUT.as_secs()),
        };
        p.stop();
        Err(Error::Tunnel {
            what: format!("the {label}"),
            reason,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process and everything it started: descendants first (deepest first), so their parents
    /// reap them, then the process itself, which is reaped here. SIGTERM, then SIGKILL after a grace time.
    fn stop(&mut self) {
        let pid = self.pid();
        if matches!(self.child.try_wait(), Ok(None)) {
            let tree = descendants(pid);
            for &d in &tree {
                signal(d, nix::sys::signal::Signal::SIGTERM);
            }
            let deadline = Instant::now() + STOP_GRACE;
            while tree.iter().any(|&d| alive(d)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            for &d in &tree {
                if alive(d) {
                    signal(d, nix::sys::signal::Signal::SIGKILL);
                }
            }
            // Give the parent a moment to reap what was just killed.
            let deadline = Instant::now() + Duration::from_millis(500);
            while tree.iter().any(|&d| present(d)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            signal(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last few lines a process printed, for an error message.
fn last_lines(said: &[String]) -> String {
    let tail: Vec<&str> = said.iter().rev().take(3).rev().map(|s| s.trim()).collect();
    if tail.is_empty() {
        "no message".into()
    } else {
        tail.join(" / ")
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// The state letter of a process (`R`, `S`, `Z`, ...), `None` when it is gone.
fn state(pid: u32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// Running: present and not a zombie.
fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z')
}

/// Present in /proc, zombies included.
fn present(pid: u32) -> bool {
    state(pid).is_some()
}

/// Every live descendant of `root`, deepest first (children before their parents).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(s) = crate::sys::ProcStat::of(pid) {
                parent.push((pid, s.ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut k = 0;
    while k < found.len() {
        let p = found[k];
        found.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        k += 1;
    }
    found.remove(0);
    found.reverse();
    found
}

/// CPU seconds of process `pid`: its own user and system time and that of the children it has waited
/// for (utime + stime + cutime + cstime of /proc/PID/stat). Clock ticks per second from the system, or 100.
pub fn cpu_seconds(pid: u32) -> std::io::Result<f64> {
    let s = crate::sys::ProcStat::of(pid).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("/proc/{pid}/stat is missing or unreadable"),
        )
    })?;
    Ok((s.own + s.reaped) as f64 / crate::sys::ticks_per_second().unwrap_or(100.0))
}

/// CPU seconds of `pid` and of every live descendant ([`cpu_seconds`] of each): a forking relay's CPU,
/// whether its connections have ended (their time is in the parent's cutime/cstime) or not.
pub fn tree_cpu_seconds(pid: u32) -> std::io::Result<f64> {
    let mut total = cpu_seconds(pid)?;
    for d in descendants(pid) {
        // A descendant that ended a moment ago is now in its parent's figures.
        total += cpu_seconds(d).unwrap_or(0.0);
    }
    Ok(total)
}

/// A port that was free on 127.0.0.1 a moment ago (in a fresh namespace, every port is).
fn free_port() -> Result<u16> {
    pgtest::free_port().io(|| "finding a free port".into())
}

/// Fails with [`Error::MissingPrograms`] when `program` is not installed.
fn require(program: &str, package: &str) -> Result<()> {
    let found = if program.starts_with('/') {
        Path::new(program).is_file()
    } else {
        pgtest::which(program).is_some()
    };
    if found {
        Ok(())
    } else {
        Err(Error::MissingPrograms {
            command: "bench tunnel",
            programs: vec![program.into()],
            packages: vec![package.into()],
        })
    }
}

/// A plain TCP relay pair: socat in the server namespace (`TCP-LISTEN` on the server address, one forked
/// child per connection, to PostgreSQL) and socat in the client namespace (`TCP-LISTEN` on 127.0.0.1, to
/// the server one). Every TCP socket has `TCP_NODELAY`, as libpq's and PostgreSQL's own have, so small
/// request-response messages are not held back by Nagle's algorithm: the floor of any two-hop proxy, not
/// a misconfigured one. Dropping it stops both trees.
pub struct SocatPair {
    client: Option<Proc>,
    server: Option<Proc>,
    local_port: u16,
}

impl SocatPair {
    /// Starts the server socat through `server`, then the client socat through `client`, and returns once
    /// both listen.
    pub fn start(
        server: &dyn Fn(&OsStr) -> Command,
        client: &dyn Fn(&OsStr) -> Command,
        server_addr: Ipv4Addr,
        pg: PgTarget,
    ) -> Result<SocatPair> {
        require("socat", "socat")?;
        let port = free_port()?;
        let (s, _) = Proc::start(
            "socat server",
            "socat",
            server(OsStr::new("socat"))
                .args(["-d", "-d"])
                .arg(format!(
                    "TCP4-LISTEN:{port},bind={server_addr},reuseaddr,fork,nodelay"
                ))
                .arg(pg.socat_address()),
            "listening on",
        )?;
        let mut pair = SocatPair {
            client: None,
            server: Some(s),
            local_port: free_port()?,
        };
        let (c, _) = Proc::start(
            "socat client",
            "socat",
            client(OsStr::new("socat"))
                .args(["-d", "-d"])
                .arg(format!(
                    "TCP4-LISTEN:{},bind=127.0.0.1,reuseaddr,fork,nodelay",
                    pair.local_port
                ))
                .arg(format!("TCP4:{server_addr}:{port},nodelay")),
            "listening on",
        )?;
        pair.client = Some(c);
        Ok(pair)
    }

    /// The client socat's port on 127.0.0.1 (in the client namespace): connect here as to PostgreSQL.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The two socat parents, labelled `socat client` and `socat server`, for CPU figures
    /// ([`tree_cpu_seconds`] counts their forked children too).
    pub fn pids(&self) -> Vec<(String, u32)> {
        [&self.client, &self.server]
            .into_iter()
            .flatten()
            .map(|p| (p.label.to_string(), p.pid()))
            .collect()
    }
}

impl Drop for SocatPair {
    fn drop(&mut self) {
        for p in [self.client.as_mut(), self.server.as_mut()]
            .into_iter()
            .flatten()
        {
            p.stop();
        }
    }
}

/// An `ssh -C` port forward: an sshd of its own in the server namespace (Debian's OpenSSH, host key,
/// authorized key and config in a temporary directory, the port given, the server address only; nothing
/// of the system's sshd is read or touched) and `ssh -C -N -L` in the client namespace. The cipher is
/// OpenSSH's default; [`SshForward::negotiated`] says which one it was.
pub struct SshForward {
    ssh: Option<Proc>,
    sshd: Option<Proc>,
    local_port: u16,
    negotiated: String,
    /// Holds the keys and the config; removed after the processes are stopped.
    _dir: tempfile::TempDir,
}

/// Runs `ssh-keygen` for a new ed25519 key without a passphrase at `path`.
fn keygen(path: &Path) -> Result<()> {
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "pgcompress-bench",
            "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            what: format!("making the key {}", path.display()),
            program: "ssh-keygen".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Failed {
            what: format!("ssh-keygen -f {}", path.display()),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// Writes `text` to `path` with mode 0600.
fn write_private(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).io(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .io(|| format!("setting the mode of {}", path.display()))
}

/// What ssh's `-v` lines say was negotiated: the OpenSSH version, the cipher each way, the compression
/// and its level. Fails when compression was not negotiated: then it would not be the `-C` configuration.
fn negotiated(lines: &[String]) -> Result<String> {
    let version = lines
        .iter()
        .find(|l| l.starts_with("OpenSSH_"))
        .map(|l| l.split(',').next().unwrap_or(l).trim().to_string());
    let kex = |dir: &str| {
        lines.iter().find_map(|l| {
            let rest = &l[l.find(&format!("kex: {dir} cipher: "))? + dir.len() + 14..];
            let cipher = rest.split_whitespace().next()?.to_string();
            let comp = rest.split("compression: ").nth(1)?.trim().to_string();
            Some((cipher, comp))
        })
    };
    let level = lines.iter().find_map(|l| {
        l.split("Enabling compression at level ")
            .nth(1)
            .map(|s| s.trim_end_matches('.').trim().to_string())
    });
    let (Some((c2s, comp_c2s)), Some((s2c, comp_s2c))) =
        (kex("client->server"), kex("server->client"))
    else {
        return Err(Error::Tunnel {
            what: "ssh -C".into(),
            reason: "ssh -v did not say which cipher and compression were negotiated".into(),
        });
    };
    if comp_c2s == "none" || comp_s2c == "none" || level.is_none() {
        return Err(Error::Tunnel {
            what: "ssh -C".into(),
            reason: format!(
                "compression was not negotiated (client->server {comp_c2s}, server->client {comp_s2c})"
            ),
        });
    }
    let cipher = if c2s == s2c {
        c2s
    } else {
        format!("{c2s} client->server, {s2c} server->client")
    };
    let comp = if comp_c2s == comp_s2c {
        comp_c2s
    } else {
        format!("{comp_c2s} client->server, {comp_s2c} server->client")
    };
    Ok(format!(
        "{}: cipher {cipher} (OpenSSH's default), compression {comp} at level {}",
        version.as_deref().unwrap_or("OpenSSH"),
        level.as_deref().unwrap_or("?")
    ))
}

impl SshForward {
    /// Makes keys and a config in a temporary directory, starts sshd through `server` on a free port of
    /// `server_addr`, then `ssh -C -N -L 127.0.0.1:<local>:<pg>` through `client` as root with the new
    /// key, and returns once the forward listens.
    pub fn start(
        server: &dyn Fn(&OsStr) -> Command,
        client: &dyn Fn(&OsStr) -> Command,
        server_addr: Ipv4Addr,
        pg: PgTarget,
    ) -> Result<SshForward> {
        require(SSHD, "openssh-server")?;
        require("ssh", "openssh-client")?;
        require("ssh-keygen", "openssh-client")?;
        let dir = tempfile::Builder::new()
            .prefix("pgcompress-sshd-")
            .tempdir()
            .io(|| "creating a directory for sshd's keys and config".into())?;
        let d = dir.path();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
            .io(|| format!("setting the mode of {}", d.display()))?;
        let (host_key, client_key) = (d.join("host_ed25519"), d.join("client_ed25519"));
        keygen(&host_key)?;
        keygen(&client_key)?;
        let public = d.join("client_ed25519.pub");
        let key =
            std::fs::read_to_string(&public).io(|| format!("reading {}", public.display()))?;
        let authorized = d.join("authorized_keys");
        write_private(&authorized, &key)?;
        std::fs::create_dir_all(PRIVSEP_DIR).io(|| format!("creating {PRIVSEP_DIR}"))?;
        std::fs::set_permissions(PRIVSEP_DIR, std::fs::Permissions::from_mode(0o755))
            .io(|| format!("setting the mode of {PRIVSEP_DIR}"))?;
        let port = free_port()?;
        // StrictModes would refuse an authorized_keys file under /tmp (world-writable); this one is in a
        // root-owned 0700 directory, written 0600.
        let config = format!(
            "Port {port}\nListenAddress {server_addr}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile none\n\
             UsePAM no\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\n\
             AllowTcpForwarding yes\nAllowStreamLocalForwarding yes\nX11Forwarding no\nPrintMotd no\n\
             Compression yes\nLogLevel INFO\n",
            host_key.display(),
            authorized.display()
        );
        let config_path = d.join("sshd_config");
        write_private(&config_path, &config)?;
        let (sshd, _) = Proc::start(
            "sshd",
            SSHD,
            server(OsStr::new(SSHD))
                .args(["-D", "-e", "-f"])
                .arg(&config_path),
            "Server listening on",
        )?;
        let mut fwd = SshForward {
            ssh: None,
            sshd: Some(sshd),
            local_port: free_port()?,
            negotiated: String::new(),
            _dir: dir,
        };
        let mut spec = OsString::from(format!("127.0.0.1:{}:", fwd.local_port));
        spec.push(pg.ssh_forward_target());
        // -v: ssh says when the forward listens and what it negotiated; -F /dev/null: no user config.
        let (ssh, lines) = Proc::start(
            "ssh -C client",
            "ssh",
            client(OsStr::new("ssh"))
                .args(["-F", "/dev/null", "-C", "-N", "-v", "-L"])
                .arg(spec)
                .arg("-p")
                .arg(port.to_string())
                .arg("-i")
                .arg(&client_key)
                .args([
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    "-o",
                    "ExitOnForwardFailure=yes",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "IdentitiesOnly=yes",
                ])
                .arg(format!("root@{}", IpAddr::V4(server_addr))),
            "Local forwarding listening on",
        )?;
        fwd.ssh = Some(ssh);
        fwd.negotiated = negotiated(&lines)?;
        Ok(fwd)
    }

    /// The forward's port on 127.0.0.1 (in the client namespace): connect here as to PostgreSQL.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The ssh client and the sshd listener, labelled `ssh` and `sshd`, for CPU figures
    /// ([`tree_cpu_seconds`] counts sshd's per-connection processes too).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let label = |p: &Proc| if p.label == "sshd" { "sshd" } else { "ssh" };
        [&self.ssh, &self.sshd]
            .into_iter()
            .flatten()
            .map(|p| (label(p).to_string(), p.pid()))
            .collect()
    }

    /// What ssh negotiated, for the report's notes: "OpenSSH_9.2p1 Debian-2+deb12u10: cipher
    /// chacha20-poly1305@openssh.com (OpenSSH's default), compression zlib@openssh.com at level 6".
    pub fn negotiated(&self) -> &str {
        &self.negotiated
    }
}

impl Drop for SshForward {
    fn drop(&mut self) {
        // The client first: its connection ends, and sshd's per-connection processes with it.
        for p in [self.ssh.as_mut(), self.sshd.as_mut()]
            .into_iter()
            .flatten()
        {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn negotiated_names_cipher_and_compression() {
        let l = lines(
            "OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19 27 Jan 2026\n\
             debug1: kex: server->client cipher: chacha20-poly1305@openssh.com MAC: <implicit> compression: zlib@openssh.com\n\
             debug1: kex: client->server cipher: chacha20-poly1305@openssh.com MAC: <implicit> compression: zlib@openssh.com\n\
             debug1: Enabling compression at level 6.\n",
        );
        assert_eq!(
            negotiated(&l).expect("negotiated"),
            "OpenSSH_9.2p1 Debian-2+deb12u10: cipher chacha20-poly1305@openssh.com (OpenSSH's default), \
             compression zlib@openssh.com at level 6"
        );
    }

    #[test]
    fn no_compression_is_not_ssh_c() {
        let l = lines(
            "debug1: kex: server->client cipher: aes128-ctr MAC: umac-64@openssh.com compression: none\n\
             debug1: kex: client->server cipher: aes128-ctr MAC: umac-64@openssh.com compression: none\n",
        );
        let e = negotiated(&l).unwrap_err().to_string();
        assert!(e.contains("compression was not negotiated"), "{e}");
        assert!(negotiated(&lines("debug1: nothing\n")).is_err());
    }

    #[test]
    fn targets_as_socat_and_ssh_spell_them() {
        let t = PgTarget::Tcp("127.0.0.1:5432".parse().expect("addr"));
        assert_eq!(t.socat_address(), "TCP4:127.0.0.1:5432,nodelay");
        assert_eq!(t.ssh_forward_target(), "127.0.0.1:5432");
        let t = PgTarget::Tcp("[::1]:5433".parse().expect("addr"));
        assert_eq!(t.socat_address(), "TCP6:[::1]:5433,nodelay");
        assert_eq!(t.ssh_forward_target(), "[::1]:5433");
        let t = PgTarget::Unix {
            dir: "/tmp/pg sock".into(),
            port: 5434,
        };
        assert_eq!(t.socat_address(), "UNIX-CONNECT:/tmp/pg sock/.s.PGSQL.5434");
        assert_eq!(t.ssh_forward_target(), "/tmp/pg sock/.s.PGSQL.5434");
    }

    #[test]
    fn cpu_seconds_of_this_process_and_its_tree() {
        let me = std::process::id();
        // Burn a little CPU so the figure is above zero at 100 ticks per second.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert_ne!(x, 1);
        let own = cpu_seconds(me).expect("own");
        assert!(own > 0.0, "{own}");
        let mut sleeper = Command::new("sleep").arg("5").spawn().expect("sleep");
        assert!(descendants(me).contains(&sleeper.id()));
        let tree = tree_cpu_seconds(me).expect("tree");
        assert!(tree >= own, "{tree} < {own}");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(!descendants(me).contains(&sleeper.id()));
        assert!(cpu_seconds(u32::MAX).is_err());
    }
}
