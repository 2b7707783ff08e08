//! A tunnel pair run as two `pgcompress` child processes: on loopback, or each half through a command
//! wrapper (`ip netns exec NS`) with the link between two addresses.

pub mod child;

use crate::error::{Error, IoContext, Result};
use crate::sys::checked_output;
use child::spawn_until;
use serde::Deserialize;
use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

/// How long a half may take to drain and exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(40);

/// What the pair connects and how.
#[derive(Clone, Debug)]
pub struct PairOptions {
    /// The `pgcompress` executable.
    pub pgcompress: PathBuf,
    /// PostgreSQL's Unix socket directory (the server half's upstream).
    pub socket_dir: PathBuf,
    /// PostgreSQL's port (names the socket file).
    pub port: u16,
    /// The link method (`zstd:1`, `lz4`, `none`).
    pub method: String,
}

/// Bytes of one direction, as a half counts them.
#[derive(Clone, Copy, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
pub struct Traffic {
    /// PostgreSQL protocol bytes: what a direct connection carries.
    pub raw_bytes: u64,
    /// Bytes on the link between the halves, TLS included.
    pub link_bytes: u64,
    /// Compressed chunks.
    #[serde(default)]
    pub chunks: u64,
}

/// A half's stats file (docs/TUNNEL.md), as written at its exit.
#[derive(Clone, Debug, Deserialize)]
pub struct HalfStats {
    /// `client` or `server`.
    pub half: String,
    /// Connections served.
    pub connections_total: u64,
    /// Application to PostgreSQL.
    pub frontend_to_backend: Traffic,
    /// PostgreSQL to the application.
    pub backend_to_frontend: Traffic,
}

/// Where each half runs: the command that starts a program on each side, and the address the server
/// half's link listener takes (the client half connects to it; its certificate names it).
pub struct Placement<'a> {
    /// Starts a program beside PostgreSQL (e.g. `ip netns exec <server ns> <program>`).
    pub server: &'a dyn Fn(&OsStr) -> Command,
    /// Starts a program beside the applications.
    pub client: &'a dyn Fn(&OsStr) -> Command,
    /// The server half listens for the client half on this address.
    pub server_addr: IpAddr,
}

/// A running server half and client half. Dropping it kills both.
pub struct Pair {
    server: Option<Child>,
    client: Option<Child>,
    client_port: u16,
    dir: tempfile::TempDir,
}

/// A port on 127.0.0.1 that was free a moment ago (in a fresh namespace, every port is).
pub fn free_port() -> Result<u16> {
    pgcluster::free_port().io(|| "finding a free port on 127.0.0.1".into())
}

/// Starts a half and waits until it says it listens; kills it if it does not.
fn spawn(what: &str, cmd: &mut Command) -> Result<Child> {
    let (mut child, ready) = spawn_until(cmd, "pgcompress", what, "listening on")?;
    if let Err(reason) = ready {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::Tunnel {
            what: what.into(),
            reason,
        });
    }
    Ok(child)
}

impl Pair {
    /// Writes keys, starts the server half upstream of PostgreSQL and the client half, both on
    /// loopback, and returns once both listen.
    pub fn start(o: &PairOptions) -> Result<Pair> {
        let here = |program: &OsStr| Command::new(program);
        Pair::start_in(
            o,
            &Placement {
                server: &here,
                client: &here,
                server_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            },
        )
    }

    /// Like [`Pair::start`], each half started through its [`Placement`] command: the server half
    /// listens on `server_addr`, the client half on 127.0.0.1 of its side.
    pub fn start_in(o: &PairOptions, place: &Placement<'_>) -> Result<Pair> {
        let dir = tempfile::Builder::new()
            .prefix("pgcompress-tunnel-")
            .tempdir()
            .io(|| "creating a directory for the tunnel's keys".into())?;
        let keys = dir.path().join("keys");
        checked_output(
            Command::new(&o.pgcompress)
                .args(["tunnel", "keys"])
                .arg(&keys)
                .arg("--server-name")
                .arg(place.server_addr.to_string()),
            &o.pgcompress.display().to_string(),
            "pgcompress tunnel keys",
        )?;
        let k = |f: &str| keys.join(f);
        let link_port = free_port()?;
        let link = std::net::SocketAddr::new(place.server_addr, link_port);
        let server = spawn(
            "the tunnel's server half",
            (place.server)(o.pgcompress.as_os_str())
                .args(["tunnel", "server", "--listen"])
                .arg(link.to_string())
                .arg("--upstream")
                .arg(&o.socket_dir)
                .arg("--upstream-port")
                .arg(o.port.to_string())
                .arg("--ca")
                .arg(k("ca.pem"))
                .arg("--cert")
                .arg(k("server.pem"))
                .arg("--key")
                .arg(k("server-key.pem"))
                .arg("--stats")
                .arg(dir.path().join("server.json")),
        )?;
        let mut pair = Pair {
            server: Some(server),
            client: None,
            client_port: free_port()?,
            dir,
        };
        let client = spawn(
            "the tunnel's client half",
            (place.client)(o.pgcompress.as_os_str())
                .args(["tunnel", "client", "--listen"])
                .arg(format!("127.0.0.1:{}", pair.client_port))
                .arg("--server")
                .arg(link.to_string())
                .args(["--method", &o.method])
                .arg("--ca")
                .arg(k("ca.pem"))
                .arg("--cert")
                .arg(k("client.pem"))
                .arg("--key")
                .arg(k("client-key.pem"))
                .arg("--stats")
                .arg(pair.dir.path().join("client.json")),
        )?;
        pair.client = Some(client);
        Ok(pair)
    }

    /// The client half's port on 127.0.0.1: applications connect here as to PostgreSQL.
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The halves' process ids, labelled `tunnel client` and `tunnel server`, for their CPU time.
    pub fn pids(&self) -> Vec<(String, u32)> {
        [
            ("tunnel client", &self.client),
            ("tunnel server", &self.server),
        ]
        .into_iter()
        .filter_map(|(label, child)| Some((label.to_string(), child.as_ref()?.id())))
        .collect()
    }

    /// Stops both halves with SIGTERM (they drain and write their final stats) and returns the
    /// client's and the server's stats.
    pub fn stop(mut self) -> Result<(HalfStats, HalfStats)> {
        // Both are stopped even when the first refuses to go quietly.
        let client = stop_half("client", self.client.take());
        let server = stop_half("server", self.server.take());
        let read = |name: &str| -> Result<HalfStats> {
            let path = self.dir.path().join(name);
            let text =
                std::fs::read_to_string(&path).io(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| Error::Tunnel {
                what: format!("the stats file {}", path.display()),
                reason: e.to_string(),
            })
        };
        client?;
        server?;
        Ok((read("client.json")?, read("server.json")?))
    }
}

/// SIGTERM, then wait for a clean exit.
fn stop_half(what: &str, child: Option<Child>) -> Result<()> {
    let Some(mut child) = child else {
        return Ok(());
    };
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = std::time::Instant::now() + STOP_TIMEOUT;
    loop {
        match child
            .try_wait()
            .io(|| format!("waiting for the tunnel's {what} half"))?
        {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                return Err(Error::Tunnel {
                    what: format!("the tunnel's {what} half"),
                    reason: format!("exited with {status} after SIGTERM"),
                })
            }
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Tunnel {
                    what: format!("the tunnel's {what} half"),
                    reason: format!("still running {} s after SIGTERM", STOP_TIMEOUT.as_secs()),
                });
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for child in [self.client.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
