//! Scale: 500 concurrent pgbench clients through one tunnel pair with zstd:1,
//! first idle, then each running a short query loop (`pgbench -S`), with no error; the resident memory
//! of each half is reported before any connection, at 500 idle and at 500 active connections, and the
//! growth stays under 2 MiB per active connection, also when every connection compresses both ways.

mod tunnel_support;

use std::time::{Duration, Instant};

use pgtest::Cluster;
use tunnel_support::{client, Keys, Stats, Tunnel, Upstream, Via};

const CLIENTS: u64 = 500;
/// The acceptance bound on a half's resident memory per active connection.
const MAX_PER_CONNECTION: u64 = 2 * 1024 * 1024;
/// Seconds of the active phase.
const ACTIVE_SECS: u64 = 20;

/// VmRSS of a process, in bytes (`/proc/PID/status` gives kB).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kb * 1024
}

/// The soft limit on open files of a process.
fn nofile(pid: &str) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("proc limits");
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Raises the open-file limit of `pid` to at least `want` (each half holds two sockets per connection,
/// pgbench one per client).
fn ensure_nofile(pid: &str, want: u64) {
    if nofile(pid) >= want {
        return;
    }
    let status = std::process::Command::new("prlimit")
        .args(["--pid", pid, &format!("--nofile={want}:{want}")])
        .status()
        .expect("run prlimit");
    assert!(
        status.success() && nofile(pid) >= want,
        "cannot raise RLIMIT_NOFILE of {pid}"
    );
}

/// Polls `read` until both halves serve `n` connections.
fn wait_open(tunnel: &Tunnel, n: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (c, s) = (tunnel.client_stats_now(), tunnel.server_stats_now());
        if c.connections_open >= n && s.connections_open >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: open {} / {} after 60 s\n{}",
            c.connections_open,
            s.connections_open,
            tunnel.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The largest resident size of each half over `samples` readings a second apart.
fn peak_rss(pids: (u32, u32), samples: u32) -> (u64, u64) {
    let mut peak = (0, 0);
    for _ in 0..samples {
        peak = (peak.0.max(rss(pids.0)), peak.1.max(rss(pids.1)));
        std::thread::sleep(Duration::from_secs(1));
    }
    peak
}

/// Size of the compressing phase's Query text and of its one-row result, KiB.
const BULK_QUERY_KIB: usize = 8;
const BULK_ROW_KIB: usize = 32;

/// A pgbench script whose one query is BULK_QUERY_KIB KiB of SQL text (a literal of English-like
/// words, so it compresses) returning a BULK_ROW_KIB KiB value that differs per transaction.
fn bulk_script_text() -> String {
    let words = [
        "ledger", "account", "balance", "branch", "teller", "history", "amount",
    ];
    let mut literal = String::new();
    let mut i = 0usize;
    while literal.len() < BULK_QUERY_KIB * 1024 {
        literal.push_str(words[i * 7 % words.len()]);
        literal.push(' ');
        literal.push_str(&(i * 7919 % 100_000).to_string());
        literal.push(' ');
        i += 1;
    }
    format!(
        "\\set aid random(1, 100000)\n\
         SELECT length('{literal}'), repeat(md5(:aid::text) || ' ' || :aid, {});\n",
        BULK_ROW_KIB * 1024 / 40
    )
}

/// Runs pgbench with `args` on all CLIENTS connections for ACTIVE_SECS seconds, sampling each
/// half's resident memory meanwhile; returns the peaks and pgbench's output.
fn active_phase(
    cluster: &Cluster,
    tunnel: &Tunnel,
    pids: (u32, u32),
    args: &[&str],
) -> ((u64, u64), String) {
    std::thread::scope(|s| {
        let run = s.spawn(|| {
            let mut cmd = client(cluster, "pgbench", Via::Tunnel(tunnel));
            cmd.args(["-n", "-c", "500", "-j", "2", "-T", &ACTIVE_SECS.to_string()])
                .args(args);
            pgtest::run::run_as_current_user(&mut cmd, None, Duration::from_secs(300))
        });
        wait_open(tunnel, CLIENTS, "active phase");
        let peak = peak_rss(pids, (ACTIVE_SECS as u32).saturating_sub(6));
        let out = run.join().expect("pgbench thread");
        let out = out.unwrap_or_else(|e| panic!("active pgbench {args:?}: {e}\n{}", tunnel.logs()));
        (peak, String::from_utf8_lossy(&out.stdout).into_owned())
    })
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[test]
fn five_hundred_connections_through_one_tunnel_pair() {
    let cluster = Cluster::builder()
        .guc("max_connections", "600")
        .start()
        .expect("cluster");
    cluster.pgbench_init(1).expect("pgbench tables");
    let keys = Keys::new();
    let limit = ["--max-connections".to_owned(), "1000".to_owned()];
    let tunnel = Tunnel::start_with(&keys, &cluster, Upstream::Socket, "zstd:1", &limit, &limit);
    tunnel.wait_stats_files();
    let pids = tunnel.pids();
    for pid in [pids.0, pids.1] {
        ensure_nofile(&pid.to_string(), 4096);
    }
    ensure_nofile("self", 4096);
    std::thread::sleep(Duration::from_secs(1));
    let before = (rss(pids.0), rss(pids.1));

    // Idle: 500 sessions that connect (startup, authentication, the first ReadyForQuery) and sleep.
    let script = tempfile::NamedTempFile::new().expect("script file");
    std::fs::write(script.path(), "\\sleep 12 s\n").expect("write script");
    let idle = std::thread::scope(|s| {
        let run = s.spawn(|| {
            let mut cmd = client(&cluster, "pgbench", Via::Tunnel(&tunnel));
            cmd.args(["-n", "-c", "500", "-j", "2", "-t", "1", "-f"])
                .arg(script.path());
            pgtest::run::run_as_current_user(&mut cmd, None, Duration::from_secs(120))
        });
        wait_open(&tunnel, CLIENTS, "idle phase");
        let peak = peak_rss(pids, 4);
        let out = run.join().expect("pgbench thread");
        let out = out.unwrap_or_else(|e| panic!("idle pgbench: {e}\n{}", tunnel.logs()));
        (peak, String::from_utf8_lossy(&out.stdout).into_owned())
    });
    let ((idle_client, idle_server), idle_out) = idle;
    assert!(
        idle_out.contains("number of transactions actually processed: 500/500"),
        "{idle_out}"
    );

    // Active: the same 500 each in a loop of primary-key SELECTs for ACTIVE_SECS seconds. Messages
    // this small mostly travel verbatim, so a second active phase follows in which every
    // connection compresses in both directions.
    let ((active_client, active_server), active_out) =
        active_phase(&cluster, &tunnel, pids, &["-S"]);
    let bulk_script = tempfile::NamedTempFile::new().expect("script file");
    std::fs::write(bulk_script.path(), bulk_script_text()).expect("write script");
    let bulk_args = ["-f".to_owned(), bulk_script.path().display().to_string()];
    let bulk_args: Vec<&str> = bulk_args.iter().map(String::as_str).collect();
    let ((bulk_client, bulk_server), bulk_out) = active_phase(&cluster, &tunnel, pids, &bulk_args);
    assert!(
        bulk_out.contains("number of failed transactions: 0"),
        "{bulk_out}"
    );
    let tps = active_out
        .lines()
        .find(|l| l.starts_with("tps = "))
        .unwrap_or_else(|| panic!("no tps line: {active_out}"))
        .to_owned();
    let bulk_tps = bulk_out
        .lines()
        .find(|l| l.starts_with("tps = "))
        .unwrap_or_else(|| panic!("no tps line: {bulk_out}"))
        .to_owned();
    assert!(
        active_out.contains("number of failed transactions: 0"),
        "{active_out}"
    );
    assert!(
        active_out.contains("number of clients: 500"),
        "{active_out}"
    );

    let done = tunnel.finish();
    for s in [&done.client, &done.server] {
        let s: &Stats = s;
        assert_eq!(s.decompression_errors, 0, "{s:?}");
        assert_eq!(s.refused_connections, 0, "{s:?}");
        // pgbench also opens one connection of its own per run, before its clients.
        assert!(s.connections_total >= 2 * CLIENTS, "{s:?}");
        // The compressing phase sent CLIENTS * (its transactions) chunks each way at least.
        assert!(
            s.frontend_to_backend.chunks >= CLIENTS && s.backend_to_frontend.chunks >= CLIENTS,
            "not every connection compressed both ways: {s:?}"
        );
    }
    for line in done.client_log.lines().chain(done.server_log.lines()) {
        assert!(!line.contains("error"), "{line}");
    }

    let mut table = format!(
        "resident memory (VmRSS), zstd:1, {CLIENTS} connections; pgbench -S: {tps}\n\
         active: each connection loops over a short query (pgbench -S), then over one that\n\
         compresses both ways (an {BULK_QUERY_KIB} KiB Query, a {BULK_ROW_KIB} KiB DataRow): {bulk_tps}\n\
         half                    before     500 idle   500 active  per idle conn  per active conn\n"
    );
    for (name, b, i, a) in [
        ("client", before.0, idle_client, active_client),
        ("server", before.1, idle_server, active_server),
        ("client, compressing", before.0, idle_client, bulk_client),
        ("server, compressing", before.1, idle_server, bulk_server),
    ] {
        table.push_str(&format!(
            "{name:<20}  {:>7.1} MiB {:>7.1} MiB {:>8.1} MiB {:>9.1} KiB {:>12.1} KiB\n",
            mib(b),
            mib(i),
            mib(a),
            i.saturating_sub(b) as f64 / CLIENTS as f64 / 1024.0,
            a.saturating_sub(b) as f64 / CLIENTS as f64 / 1024.0,
        ));
    }
    eprintln!("{table}");
    for (name, b, a) in [
        ("client", before.0, active_client.max(bulk_client)),
        ("server", before.1, active_server.max(bulk_server)),
    ] {
        let per = a.saturating_sub(b) / CLIENTS;
        assert!(
            per < MAX_PER_CONNECTION,
            "{name} half: {:.2} MiB per active connection\n{table}",
            mib(per)
        );
    }
}
