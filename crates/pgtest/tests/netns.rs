//! `pgtest::netns`: a cluster in the server namespace reached over the veth from the client namespace, the
//! kernel counters, `tbf` shaping, and nothing left behind after Drop or a panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::time::Duration;

use pgtest::netns::{NetLink, Side};
use pgtest::Cluster;

fn stdout_of(cmd: &mut Command) -> String {
    let out = pgtest::run::run_as_current_user(cmd, None, Duration::from_secs(120))
        .expect("command runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// psql from the client namespace to the server's veth address.
fn remote_psql(link: &NetLink, cluster: &Cluster, sql: &str) -> String {
    let mut cmd = link.command(Side::Client, cluster.install().bin("psql"));
    cmd.args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-h"])
        .arg(link.addr(Side::Server).to_string())
        .args([
            "-p",
            &cluster.port().to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
        ])
        .args(["-c", sql]);
    stdout_of(&mut cmd)
}

/// What the kernel counted on the tbf of one side's veth (`tc -s qdisc show`).
#[derive(Debug, Default, Clone, Copy)]
struct TbfCounters {
    /// Bytes the tbf passed to the device.
    sent_bytes: u64,
    /// Times a packet found the token bucket empty and waited.
    overlimits: u64,
}

impl TbfCounters {
    fn since(&self, earlier: &TbfCounters) -> TbfCounters {
        TbfCounters {
            sent_bytes: self.sent_bytes - earlier.sent_bytes,
            overlimits: self.overlimits - earlier.overlimits,
        }
    }
}

/// The counters of the tbf on `side`'s veth; fails the test when there is none.
fn tbf_counters(link: &NetLink, side: Side) -> TbfCounters {
    let text =
        stdout_of(
            link.command(side, "tc")
                .args(["-s", "qdisc", "show", "dev", link.dev(side)]),
        );
    // qdisc tbf 8001: dev pgcs0 root refcnt 2 rate 10Mbit burst 64Kb lat 50ms
    //  Sent 2104872 bytes 1419 pkt (dropped 0, overlimits 233 requeues 0)
    let mut lines = text.lines().skip_while(|l| !l.starts_with("qdisc tbf"));
    assert!(
        lines.next().is_some(),
        "no tbf on {}: {text}",
        link.dev(side)
    );
    let sent = lines.next().unwrap_or_default();
    let number_after = |word: &str| -> u64 {
        let words: Vec<&str> = sent
            .split(|c: char| c.is_whitespace() || c == ',' || c == '(')
            .collect();
        words
            .iter()
            .position(|w| *w == word)
            .and_then(|i| words.get(i + 1))
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no {word} count in {sent:?}"))
    };
    TbfCounters {
        sent_bytes: number_after("Sent"),
        overlimits: number_after("overlimits"),
    }
}

fn netns_names() -> String {
    stdout_of(Command::new("ip").args(["netns", "list"]))
}

#[test]
fn cluster_in_a_namespace_is_reached_over_the_veth_and_shaped() {
    if !NetLink::available_or_skip() {
        return;
    }
    let link = NetLink::create("pgtest").expect("link");
    let (server_ns, client_ns) = (
        link.ns(Side::Server).to_owned(),
        link.ns(Side::Client).to_owned(),
    );
    let server_addr = link.addr(Side::Server).to_string();
    let cluster = Cluster::builder()
        .netns(&server_ns)
        .listen_tcp(true)
        .guc("listen_addresses", &server_addr)
        .start()
        .expect("cluster in the server namespace");

    // The postmaster runs inside the server namespace: its network namespace is the named one's.
    let pid = std::fs::read_to_string(cluster.data_dir().join("postmaster.pid")).expect("pid");
    let pid = pid.lines().next().expect("pid line").trim().to_owned();
    let postmaster_ns = std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("ns link");
    let named_ns = stdout_of(
        link.command(Side::Server, "readlink")
            .arg("/proc/self/ns/net"),
    );
    assert_eq!(postmaster_ns.to_string_lossy(), named_ns.trim());

    // Only IPv4: nothing but the programs' traffic (and ARP) reaches the veth counters.
    let addrs = stdout_of(link.command(Side::Client, "ip").args(["addr", "show"]));
    assert!(!addrs.contains("inet6"), "{addrs}");

    // A known result over TCP from the client namespace; the veth carries at least its bytes.
    let before = link.bytes().expect("counters");
    let result = remote_psql(&link, &cluster, "SELECT repeat('x', 200000)");
    assert_eq!(result.trim_end().len(), 200_000);
    let after = link.bytes().expect("counters");
    assert!(
        after.server_to_client - before.server_to_client >= 200_000,
        "{before:?} -> {after:?}"
    );
    assert!(after.client_to_server > before.client_to_server);

    // The server is not reachable from the caller's namespace: it listens on the veth address only.
    let mut outside = Command::new(cluster.install().bin("psql"));
    outside
        .args([
            "-X",
            "-At",
            "-h",
            &server_addr,
            "-p",
            &cluster.port().to_string(),
        ])
        .args(["-U", "postgres", "-c", "SELECT 1"])
        .env("PGCONNECT_TIMEOUT", "2");
    assert!(
        pgtest::run::run_as_current_user(&mut outside, None, Duration::from_secs(30)).is_err(),
        "reached {server_addr} from outside the namespaces"
    );

    // At 10 Mbit/s the token bucket, not the veth, decides when each packet leaves: the kernel's own
    // counters of the tbf on the sending side show the bytes it passed and the times a packet found
    // the bucket empty and had to wait (overlimits). A link that is not shaped has no tbf to count.
    link.shape(Some(10)).expect("shape");
    let n: usize = 2_000_000;
    let down_before = tbf_counters(&link, Side::Server);
    let result = remote_psql(&link, &cluster, &format!("SELECT repeat('y', {n})"));
    assert_eq!(result.trim_end().len(), n);
    let down = tbf_counters(&link, Side::Server).since(&down_before);
    eprintln!("{n} bytes down at 10 Mbit/s: {down:?}");
    assert!(down.sent_bytes >= n as u64, "{down:?}");
    assert!(
        down.overlimits > 0,
        "the server side's tbf never held a packet back: {down:?}"
    );
    // The other direction is limited too: the same bytes sent by the client (COPY FROM STDIN).
    cluster.psql("CREATE TABLE sink (t text)").expect("table");
    let mut copy = link.command(Side::Client, cluster.install().bin("psql"));
    copy.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
        .arg(link.addr(Side::Server).to_string())
        .args(["-p", &cluster.port().to_string(), "-U", "postgres"])
        .args(["-c", "COPY sink FROM STDIN"]);
    let line = format!("{}\n", "z".repeat(n));
    let up_before = tbf_counters(&link, Side::Client);
    pgtest::run::run_as_current_user(&mut copy, Some(line.as_bytes()), Duration::from_secs(120))
        .expect("COPY FROM STDIN");
    let up = tbf_counters(&link, Side::Client).since(&up_before);
    eprintln!("{n} bytes up at 10 Mbit/s: {up:?}");
    assert!(up.sent_bytes >= n as u64, "{up:?}");
    assert!(
        up.overlimits > 0,
        "the client side's tbf never held a packet back: {up:?}"
    );
    assert_eq!(
        cluster
            .query_one("SELECT sum(length(t)) FROM sink")
            .expect("sum"),
        n.to_string()
    );

    // Unshaped, no tbf is left on either end, and the same read still arrives whole over the veth.
    link.shape(None).expect("unshape");
    for side in [Side::Server, Side::Client] {
        let qdisc = stdout_of(link.command(side, "tc").args(["qdisc", "show"]));
        assert!(!qdisc.contains("tbf"), "{qdisc}");
    }
    let before = link.bytes().expect("counters");
    let result = remote_psql(&link, &cluster, &format!("SELECT repeat('y', {n})"));
    assert_eq!(result.trim_end().len(), n);
    let after = link.bytes().expect("counters");
    assert!(
        after.server_to_client - before.server_to_client >= n as u64,
        "{before:?} -> {after:?}"
    );

    drop(cluster);
    drop(link);
    let names = netns_names();
    assert!(
        !names.contains(&server_ns) && !names.contains(&client_ns),
        "{names}"
    );
    let links = stdout_of(Command::new("ip").args(["link"]));
    assert!(
        !links.contains("pgcs0") && !links.contains("pgcc0"),
        "{links}"
    );
}

#[test]
fn a_panic_removes_the_namespaces() {
    if !NetLink::available_or_skip() {
        return;
    }
    let mut names = None;
    let mut child = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let link = NetLink::create("panic").expect("link");
        names = Some((
            link.ns(Side::Server).to_owned(),
            link.ns(Side::Client).to_owned(),
        ));
        // A process left running inside would keep the namespace (and the veth) alive without its name.
        let mut sleeper = link.command(Side::Server, "sleep");
        sleeper.arg("600");
        child = Some(sleeper.spawn().expect("sleep"));
        panic!("test failure while a link exists");
    }));
    assert!(result.is_err());
    let (server_ns, client_ns) = names.expect("link was created");
    let status = child.expect("spawned").wait().expect("wait");
    assert!(
        !status.success(),
        "the process inside was not killed: {status}"
    );
    let listed = netns_names();
    assert!(
        !listed.contains(&server_ns) && !listed.contains(&client_ns),
        "{listed}"
    );
}

#[test]
fn leftovers_of_dead_processes_are_swept() {
    if !NetLink::available_or_skip() {
        return;
    }
    // A pid that cannot be running: above the kernel's pid_max limit (2^22).
    let stale = "pgc-4194305-0-stale-s";
    let _ = Command::new("ip").args(["netns", "add", stale]).status();
    assert!(netns_names().contains(stale));
    let link = NetLink::create("sweep").expect("link");
    assert!(!netns_names().contains(stale), "{}", netns_names());
    // Our own process's namespaces are not touched by the sweep.
    let again = NetLink::create("sweep").expect("second link");
    assert!(netns_names().contains(link.ns(Side::Server)));
    assert_ne!(link.ns(Side::Server), again.ns(Side::Server));
}
