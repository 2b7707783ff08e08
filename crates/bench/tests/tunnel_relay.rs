//! The peers `bench tunnel` measures against, started on loopback (the wrapper is plain `Command::new`) in
//! front of a real cluster: a query's output through each relay is byte for byte what a direct connection
//! gets, to the Unix socket and to TCP; a connection held open while the relay is dropped is cut, and every
//! process of the relay (forked socat children and sshd's per-connection processes included) is gone.

use bench::sys::{descendants, tree_cpu_seconds};
use bench::tunnel::relay::{PgTarget, SocatPair, SshForward};
use pgtest::Cluster;
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// About 40 MB of COPY text: enough for the relays to show CPU time at 100 clock ticks per second.
const COPY: &str = "COPY (SELECT g, md5(g::text), repeat('pgcompress', 3) FROM generate_series(1, 650000) g) TO STDOUT";

fn plain(program: &OsStr) -> Command {
    Command::new(program)
}

fn cluster() -> Cluster {
    Cluster::builder()
        .listen_tcp(true)
        .start()
        .expect("cluster")
}

/// psql to `port` on 127.0.0.1 (or the cluster's socket when `None`): runs `sql`, returns stdout.
fn psql(c: &Cluster, port: Option<u16>, sql: &str) -> Vec<u8> {
    let mut cmd = c.command("psql");
    cmd.args([
        "-X",
        "-q",
        "-At",
        "-v",
        "ON_ERROR_STOP=1",
        "-U",
        "postgres",
        "-c",
        sql,
    ]);
    match port {
        Some(p) => cmd.args(["-h", "127.0.0.1", "-p", &p.to_string()]),
        None => cmd.args(c.conn_args()),
    };
    pgtest::run(&mut cmd).expect("psql").stdout
}

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

fn targets(c: &Cluster) -> Vec<PgTarget> {
    vec![
        PgTarget::Unix {
            dir: c.socket_dir(),
            port: c.port(),
        },
        PgTarget::Tcp(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            c.tcp_port().expect("tcp"),
        ))),
    ]
}

/// Present in /proc and not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            t.rfind(')')
                .map(|i| t[i + 1..].trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

fn present(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Holds a session through `port` (a psql sleeping in the server) and waits until the server sees it.
/// The backend sleeps on after its client is cut (nothing checks the socket), so the session is found
/// by its application name, unique to the port.
fn hold_session(c: &Cluster, port: u16) -> std::process::Child {
    let child = c
        .command("psql")
        .args(["-X", "-q", "-At", "-U", "postgres", "-h", "127.0.0.1"])
        .args(["-p", &port.to_string(), "-c", "SELECT pg_sleep(120)"])
        .env("PGAPPNAME", format!("held through {port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql");
    let deadline = Instant::now() + Duration::from_secs(20);
    while c
        .query_one(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'held through {port}'"
        ))
        .expect("pg_stat_activity")
        != "1"
    {
        assert!(
            Instant::now() < deadline,
            "the held session never reached the server"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Drops `relay` while a session is held through it and checks the session is cut, nothing listens on
/// the port any more and every process the relay had (parents and descendants) is gone.
fn drop_cuts_everything<R>(
    c: &Cluster,
    relay: R,
    port: u16,
    pids: Vec<(String, u32)>,
    forking: &[&str],
) {
    let mut held = hold_session(c, port);
    let mut all = Vec::new();
    for (label, pid) in &pids {
        let tree = descendants(*pid);
        if forking.contains(&label.as_str()) {
            assert!(
                !tree.is_empty(),
                "{label} has no process for the held connection"
            );
        }
        all.push(*pid);
        all.extend(tree);
    }
    drop(relay);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = held.try_wait().expect("try_wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the held session outlived the relay"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "the held session ended well: {status}");
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "something still listens on {port}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while all.iter().any(|&p| present(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = all.iter().copied().filter(|&p| running(p)).collect();
    assert!(
        left.is_empty(),
        "still running after drop: {left:?} of {all:?}"
    );
    let unreaped: Vec<u32> = all.iter().copied().filter(|&p| present(p)).collect();
    assert!(
        unreaped.is_empty(),
        "not reaped after drop: {unreaped:?} of {all:?}"
    );
}

#[test]
fn socat_pair_carries_a_query_and_leaves_nothing_behind() {
    let c = cluster();
    let direct = sha(&psql(&c, None, COPY));
    for target in targets(&c) {
        let relay = SocatPair::start(&plain, &plain, Ipv4Addr::LOCALHOST, target.clone())
            .expect("socat pair");
        let port = relay.local_port();
        let out = psql(&c, Some(port), COPY);
        assert!(out.len() > 40_000_000, "{} bytes", out.len());
        assert_eq!(sha(&out), direct, "{target:?}: output differs from direct");
        let pids = relay.pids();
        let labels: Vec<&str> = pids.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["socat client", "socat server"]);
        // The connection has ended: each parent reaped its child and counts its CPU (socat copies
        // 40 MB in tens of milliseconds: only the two together are sure to pass a clock tick).
        let cpu: f64 = pids
            .iter()
            .map(|(_, pid)| tree_cpu_seconds(*pid).expect("cpu"))
            .sum();
        assert!(cpu > 0.0, "{cpu} CPU seconds after relaying 40 MB");
        drop_cuts_everything(&c, relay, port, pids, &["socat client", "socat server"]);
    }
}

#[test]
fn ssh_forward_carries_a_query_compressed_and_leaves_nothing_behind() {
    let c = cluster();
    let direct = sha(&psql(&c, None, COPY));
    for target in targets(&c) {
        let relay = SshForward::start(&plain, &plain, Ipv4Addr::LOCALHOST, target.clone())
            .expect("ssh forward");
        let n = relay.negotiated();
        assert!(n.starts_with("OpenSSH_"), "{n}");
        assert!(n.contains("compression zlib"), "{n}");
        let port = relay.local_port();
        let out = psql(&c, Some(port), COPY);
        assert_eq!(sha(&out), direct, "{target:?}: output differs from direct");
        let pids = relay.pids();
        let labels: Vec<&str> = pids.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["ssh", "sshd"]);
        for (label, pid) in &pids {
            let cpu = tree_cpu_seconds(*pid).expect("cpu");
            assert!(
                cpu > 0.0,
                "{label}: {cpu} CPU seconds after 40 MB through zlib"
            );
        }
        drop_cuts_everything(&c, relay, port, pids, &["sshd"]);
    }
}
