//! Two network namespaces joined by a veth pair: a private, shapeable link between a server and its clients.
//!
//! Benchmarks and tests of the tunnel need a link whose bytes are counted by the kernel (not by the tool under
//! test) and whose rate can be limited. [`NetLink::create`] makes two fresh namespaces, `server` and `client`,
//! joined by a veth pair with the addresses `10.x.y.1/30` (server) and `10.x.y.2/30` (client); loopback is up
//! in both, and nothing else is reachable from either (no default route, no other interface). IPv6 is off
//! in both, so the veth counters hold only what programs sent over IPv4 (and ARP). The veth ends
//! are created directly inside their namespaces, so nothing appears in the caller's namespace at any moment.
//! [`NetLink::shape`] puts a token-bucket filter (`tbf`) on both ends; [`NetLink::bytes`] reads the ends'
//! kernel counters.
//!
//! Everything needs root (`ip netns` and `tc`). Dropping the link kills what still runs inside the
//! namespaces, deletes the veth pair and both namespaces, also when a test panics; [`NetLink::create`] first
//! sweeps namespaces left by processes of this harness that died without dropping theirs.
//!
//! Drop a [`Cluster`](crate::Cluster) started in a namespace (see
//! [`ClusterBuilder::netns`](crate::ClusterBuilder::netns)) before its link: declare the link first.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::run::run_as_current_user;
use crate::{Error, Result};

/// Every namespace this module creates starts with this, followed by the creating process id and a `-`;
/// that is how leftovers of dead processes are recognised.
const PREFIX: &str = "pgc-";

/// The veth end inside the server namespace (names are per namespace, so fixed names never collide).
const SERVER_DEV: &str = "pgcs0";
/// The veth end inside the client namespace.
const CLIENT_DEV: &str = "pgcc0";

/// Turns IPv6 off in a namespace, if the kernel has it.
const NO_IPV6: &str = "for c in all default; do f=/proc/sys/net/ipv6/conf/$c/disable_ipv6; \
                       if [ -e $f ]; then echo 1 > $f || exit 1; fi; done";

/// How long one `ip` or `tc` invocation may take.
const IP_TIMEOUT: Duration = Duration::from_secs(30);

/// The queueing delay `tbf` allows before dropping (`latency`): the queue holds `rate * 50 ms + burst` bytes.
const SHAPE_LATENCY_MS: u64 = 50;

/// The smallest token-bucket size, in bytes: at least a full 64 KiB segmentation-offload packet, so that
/// `tbf` never has to split the largest packet a veth hands it into pieces smaller than what it can send.
const MIN_BURST: u64 = 64 * 1024;

/// Kernel timer frequency assumed when sizing the bucket: with `HZ` = 100 (the lowest Linux offers), `tbf`
/// must be able to send a whole tick's worth of bytes at once to reach its rate, so the bucket is at least
/// `rate / 100` bytes. Higher `HZ` only needs less.
const ASSUMED_HZ: u64 = 100;

/// One side of a [`NetLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The namespace PostgreSQL (and the tunnel's server half) runs in; address `10.x.y.1`.
    Server,
    /// The namespace clients (and the tunnel's client half) run in; address `10.x.y.2`.
    Client,
}

/// The veth pair's kernel byte counters per direction: the `tx_bytes` of the sending end, which are Ethernet
/// frames (14-byte header, IP and TCP headers, payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VethBytes {
    /// Bytes the client end sent to the server end.
    pub client_to_server: u64,
    /// Bytes the server end sent to the client end.
    pub server_to_client: u64,
}

/// The veth pair's kernel packet counters per direction (`tx_packets` of the sending end); with
/// [`VethBytes`] they bound the framing overhead (headers per packet) a link's byte count leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VethPackets {
    /// Packets the client end sent to the server end.
    pub client_to_server: u64,
    /// Packets the server end sent to the client end.
    pub server_to_client: u64,
}

/// Two fresh network namespaces joined by a veth pair; removed (namespaces, veth) on Drop.
#[derive(Debug)]
pub struct NetLink {
    server_ns: String,
    client_ns: String,
    server_addr: Ipv4Addr,
    client_addr: Ipv4Addr,
}

impl NetLink {
    /// Creates the namespaces `pgc-<pid>-<n>-<tag>-s` and `...-c` (unique per process, `n` counts links of
    /// this process), the veth pair between them, and their addresses. `tag` names the user in `ip netns
    /// list`: ASCII letters, digits and `_`, at most 16 of them.
    pub fn create(tag: &str) -> Result<NetLink> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let valid = !tag.is_empty()
            && tag.len() <= 16
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(Error::InvalidNetnsTag { tag: tag.into() });
        }
        sweep_dead();
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{pid}-{n}-{tag}");
        // The /30 only has to be unique in its own namespaces; mixing the pid in keeps two concurrent test
        // processes' addresses apart in logs.
        let index = pid.wrapping_mul(131).wrapping_add(n) & 0xffff;
        let [x, y] = (index as u16).to_be_bytes();
        let link = NetLink {
            server_ns: format!("{base}-s"),
            client_ns: format!("{base}-c"),
            server_addr: Ipv4Addr::new(10, x, y, 1),
            client_addr: Ipv4Addr::new(10, x, y, 2),
        };
        // Drop removes whatever of the link exists, so every `?` below leaves nothing behind.
        ip(&["netns", "add", &link.server_ns])?;
        ip(&["netns", "add", &link.client_ns])?;
        for ns in [&link.server_ns, &link.client_ns] {
            // No IPv6: its router solicitations, MLD reports and duplicate-address probes would add
            // packets to the veth counters that no program sent. Done before the veth exists, so the
            // `default` setting covers it.
            ip_netns_exec(ns, &["sh", "-c", NO_IPV6])?;
        }
        ip(&[
            "link",
            "add",
            SERVER_DEV,
            "netns",
            &link.server_ns,
            "type",
            "veth",
            "peer",
            "name",
            CLIENT_DEV,
            "netns",
            &link.client_ns,
        ])?;
        for side in [Side::Server, Side::Client] {
            let ns = link.ns(side);
            let addr = format!("{}/30", link.addr(side));
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev(side)])?;
            ip(&["-n", ns, "link", "set", dev(side), "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(link)
    }

    /// Whether links can be made here: running as root, `ip` and `tc` on `PATH`, and a probe namespace can
    /// be created and removed. Computed once per process; [`NetLink::unavailable_reason`] says why not.
    pub fn available() -> bool {
        NetLink::unavailable_reason().is_none()
    }

    /// For a test that needs links: true when they can be made. Otherwise, under `CI=true` it panics
    /// with the reason (a CI machine must run every test), and elsewhere it prints the reason and
    /// returns false so the test can return early as skipped.
    pub fn available_or_skip() -> bool {
        match NetLink::unavailable_reason() {
            None => true,
            Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("CI=true but network namespaces are unavailable: {why}")
            }
            Some(why) => {
                eprintln!("skipped: network namespaces are unavailable: {why}");
                false
            }
        }
    }

    /// Why [`NetLink::available`] is false, or `None` when it is true.
    pub fn unavailable_reason() -> Option<String> {
        static REASON: OnceLock<Option<String>> = OnceLock::new();
        REASON.get_or_init(probe).clone()
    }

    /// The name of the namespace of `side`, for `ip netns exec` or `ip -n`.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::Server => &self.server_ns,
            Side::Client => &self.client_ns,
        }
    }

    /// The address of `side`'s veth end.
    pub fn addr(&self, side: Side) -> Ipv4Addr {
        match side {
            Side::Server => self.server_addr,
            Side::Client => self.client_addr,
        }
    }

    /// The name of `side`'s veth end inside its namespace.
    pub fn dev(&self, side: Side) -> &'static str {
        dev(side)
    }

    /// A command that runs `program` inside `side`'s namespace (`ip netns exec NS program`), as root.
    pub fn command(&self, side: Side, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns(side)]).arg(program);
        cmd
    }

    /// Limits both directions to `rate_mbit` megabits per second with a `tbf` qdisc on each veth end
    /// (`rate R`, `burst` = the larger of 64 KiB and `R / 100` bytes, `latency 50ms`); `None` removes the
    /// qdiscs, leaving the link unshaped. Replaces any previous shaping.
    pub fn shape(&self, rate_mbit: Option<u64>) -> Result<()> {
        for side in [Side::Server, Side::Client] {
            let ns = self.ns(side);
            match rate_mbit {
                Some(rate) => {
                    let bytes_per_sec = rate.saturating_mul(1_000_000) / 8;
                    let burst = (bytes_per_sec / ASSUMED_HZ).max(MIN_BURST);
                    ip_netns_exec(
                        ns,
                        &[
                            "tc",
                            "qdisc",
                            "replace",
                            "dev",
                            dev(side),
                            "root",
                            "tbf",
                            "rate",
                            &format!("{rate}mbit"),
                            "burst",
                            &burst.to_string(),
                            "latency",
                            &format!("{SHAPE_LATENCY_MS}ms"),
                        ],
                    )?;
                }
                None => {
                    let shown = ip_netns_exec(ns, &["tc", "qdisc", "show", "dev", dev(side)])?;
                    if String::from_utf8_lossy(&shown.stdout).contains("tbf") {
                        ip_netns_exec(ns, &["tc", "qdisc", "del", "dev", dev(side), "root"])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The kernel byte counters of the veth pair, per direction.
    pub fn bytes(&self) -> Result<VethBytes> {
        Ok(VethBytes {
            client_to_server: self.counter(Side::Client, "tx_bytes")?,
            server_to_client: self.counter(Side::Server, "tx_bytes")?,
        })
    }

    /// The kernel packet counters of the veth pair, per direction.
    pub fn packets(&self) -> Result<VethPackets> {
        Ok(VethPackets {
            client_to_server: self.counter(Side::Client, "tx_packets")?,
            server_to_client: self.counter(Side::Server, "tx_packets")?,
        })
    }

    /// One statistics file of `side`'s veth end; `/sys` shows a namespace's devices only from inside it
    /// (`ip netns exec` mounts a fresh sysfs).
    fn counter(&self, side: Side, name: &str) -> Result<u64> {
        let path = format!("/sys/class/net/{}/statistics/{name}", dev(side));
        let out = ip_netns_exec(self.ns(side), &["cat", &path])?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        text.parse().map_err(|_| Error::UnexpectedOutput {
            sql: format!("cat {path} in {}", self.ns(side)),
            output: text,
            expected: "a counter",
        })
    }
}

impl Drop for NetLink {
    fn drop(&mut self) {
        remove(&self.server_ns, &self.client_ns);
    }
}

fn dev(side: Side) -> &'static str {
    match side {
        Side::Server => SERVER_DEV,
        Side::Client => CLIENT_DEV,
    }
}

fn ip(args: &[&str]) -> Result<std::process::Output> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run_as_current_user(&mut cmd, None, IP_TIMEOUT)
}

fn ip_netns_exec(ns: &str, args: &[&str]) -> Result<std::process::Output> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).args(args);
    run_as_current_user(&mut cmd, None, IP_TIMEOUT)
}

/// Removes a pair of namespaces, whatever exists of them: processes still inside are killed (a namespace
/// outlives its name while a process holds it, and so would the veth pair), the veth pair is deleted
/// explicitly, then the names. Errors are ignored: this runs in Drop and in the sweep.
fn remove(server_ns: &str, client_ns: &str) {
    for ns in [server_ns, client_ns] {
        kill_inside(ns);
    }
    let _ = ip(&["-n", server_ns, "link", "del", SERVER_DEV]);
    let _ = ip(&["-n", client_ns, "link", "del", CLIENT_DEV]);
    for ns in [server_ns, client_ns] {
        let _ = ip(&["netns", "del", ns]);
    }
}

/// SIGKILLs the processes inside `ns` (`ip netns pids`); they were started there by whoever made the link.
fn kill_inside(ns: &str) {
    let Ok(out) = ip(&["netns", "pids", ns]) else {
        return;
    };
    for pid in String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Removes namespaces of this harness whose creating process no longer exists (killed before its Drop ran).
fn sweep_dead() {
    let Ok(out) = ip(&["netns", "list"]) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for name in text.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = owner_pid(name) else {
            continue;
        };
        if std::path::Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        // Each half of a pair is swept on its own; `remove` tolerates the partner being gone already.
        kill_inside(name);
        let dev = if name.ends_with("-s") {
            SERVER_DEV
        } else {
            CLIENT_DEV
        };
        let _ = ip(&["-n", name, "link", "del", dev]);
        let _ = ip(&["netns", "del", name]);
    }
}

/// The process id in a name this module made (`pgc-<pid>-...`), or `None` for anyone else's namespace.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

fn probe() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("network namespaces need root".into());
    }
    for program in ["ip", "tc"] {
        if crate::which(program).is_none() {
            return Some(format!("`{program}` is not on PATH (install iproute2)"));
        }
    }
    let name = format!("{PREFIX}{}-probe", std::process::id());
    if let Err(e) = ip(&["netns", "add", &name]) {
        return Some(format!("cannot create a network namespace: {e}"));
    }
    let _ = ip(&["netns", "del", &name]);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_read_from_our_names_only() {
        assert_eq!(owner_pid("pgc-1234-0-bench-s"), Some(1234));
        assert_eq!(owner_pid("pgc-77-probe"), Some(77));
        assert_eq!(owner_pid("docker-1234-s"), None);
        assert_eq!(owner_pid("pgc-x-0-t-s"), None);
    }

    #[test]
    fn tags_are_checked() {
        for tag in ["", "a b", "x;rm", "seventeen_chars__"] {
            let err = NetLink::create(tag).expect_err("bad tag");
            assert!(matches!(err, Error::InvalidNetnsTag { .. }), "{err}");
        }
    }
}
