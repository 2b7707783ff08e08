//! The Prometheus endpoint against the kernel: PostgreSQL and the server half in
//! one network namespace, the client half and psql in another, joined by a veth pair that carries the
//! link and nothing else. After COPYs of some MB each way, both halves' `link_bytes` per direction
//! agree with the veth's byte counters within the packets' headers.

mod tunnel_support;

use std::process::Command;
use std::time::{Duration, Instant};

use pgtest::netns::{NetLink, Side};
use pgtest::run::run_as_current_user;
use pgtest::Cluster;
use tunnel_support::{Keys, Tunnel};

/// The Ethernet, IPv4 and TCP header bytes a veth frame adds to the TCP payload a half counts.
///
/// Every frame on the veth is either ARP (42 bytes, no payload: Ethernet 14 + ARP 28) or IPv4 TCP
/// (IPv6 is off in the namespaces): Ethernet 14 + IPv4 20 (Linux adds no IP options) + TCP 20 to 40.
/// Linux's longest TCP header is the SYN's (MSS 4, SACK-permitted 2, timestamps 10, window scale 3,
/// a NOP: 40 bytes); every other segment carries timestamps (32 bytes); SACK blocks only follow a
/// loss, which a veth without a qdisc does not have. So per frame the overhead is 42 to 74 bytes, and
/// `packets * 42 <= veth_bytes - link_bytes <= packets * 74` per direction. A segmentation-offload
/// frame counts once in `tx_packets` and carries one set of headers, so the rule holds for it too.
const MIN_OVERHEAD: u64 = 14 + 28;
const MAX_OVERHEAD: u64 = 14 + 20 + 40;

/// Rows of the table moved both ways (about 11 MB as COPY text).
const ROWS: u32 = 200_000;

fn scrape(link: &NetLink, side: Side, addr: &str) -> String {
    let mut cmd = link.command(side, "curl");
    cmd.args([
        "-sSf",
        "--max-time",
        "10",
        &format!("http://{addr}/metrics"),
    ]);
    let out = run_as_current_user(&mut cmd, None, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `name{labels}` in a Prometheus text body.
fn sample(body: &str, name_and_labels: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{body}"))
        .trim()
        .parse()
        .expect("an integer sample")
}

fn link_bytes(body: &str, half: &str, direction: &str) -> u64 {
    sample(
        body,
        &format!("pgcompress_tunnel_link_bytes_total{{half=\"{half}\",direction=\"{direction}\"}}"),
    )
}

fn run_ok(cmd: &mut Command, stdin: Option<&[u8]>) -> Vec<u8> {
    run_as_current_user(cmd, stdin, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("{e}"))
        .stdout
}

/// Checks the rule of [`MIN_OVERHEAD`] for one half and direction; returns the overhead per packet.
fn check(what: &str, veth_bytes: u64, packets: u64, link: u64) -> f64 {
    let overhead = veth_bytes.checked_sub(link).unwrap_or_else(|| {
        panic!("{what}: the half counts {link} link bytes, more than the veth's {veth_bytes}")
    });
    assert!(
        overhead >= packets * MIN_OVERHEAD && overhead <= packets * MAX_OVERHEAD,
        "{what}: veth {veth_bytes} bytes in {packets} packets, link {link} bytes: \
         overhead {overhead} outside {}..={}",
        packets * MIN_OVERHEAD,
        packets * MAX_OVERHEAD
    );
    overhead as f64 / packets as f64
}

#[test]
fn metrics_link_bytes_agree_with_the_veth_counters() {
    if !NetLink::available_or_skip() {
        return;
    }
    let link = NetLink::create("metrics").expect("link");
    let cluster = Cluster::builder()
        .netns(link.ns(Side::Server))
        .start()
        .expect("cluster in the server namespace");
    cluster
        .psql(&format!(
            "CREATE TABLE src AS SELECT g, md5(g::text) AS h, g * 7 AS n, now() AS t \
             FROM generate_series(1, {ROWS}) g; CREATE TABLE dst (LIKE src)"
        ))
        .expect("tables");
    let keys = Keys::new();
    // Fresh namespaces: the same port is free on each side's loopback.
    let metrics = "127.0.0.1:9187";
    let tunnel = Tunnel::start_netns(
        &keys,
        &cluster,
        &link,
        "zstd:1",
        &["--metrics".into(), metrics.into()],
        &["--metrics".into(), metrics.into()],
    );
    let (bytes_before, packets_before) =
        (link.bytes().expect("veth"), link.packets().expect("veth"));
    for (side, half) in [(Side::Client, "client"), (Side::Server, "server")] {
        let body = scrape(&link, side, metrics);
        for direction in ["frontend_to_backend", "backend_to_frontend"] {
            assert_eq!(link_bytes(&body, half, direction), 0, "{body}");
        }
    }

    // Out through the tunnel, then the same rows back in.
    let mut out = tunnel.netns_client(&link, &cluster, "psql");
    out.args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "COPY src TO STDOUT",
    ]);
    let rows = run_ok(&mut out, None);
    assert!(rows.len() > 8_000_000, "{} bytes of COPY text", rows.len());
    let mut back = tunnel.netns_client(&link, &cluster, "psql");
    back.args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "COPY dst FROM STDIN",
    ]);
    run_ok(&mut back, Some(&rows));
    let mut count = tunnel.netns_client(&link, &cluster, "psql");
    count.args([
        "-X",
        "-At",
        "-c",
        "SELECT count(*) FROM (SELECT * FROM src EXCEPT SELECT * FROM dst) d",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&run_ok(&mut count, None)).trim(),
        "0"
    );

    // Once both halves closed all three connections, nothing more crosses the veth (the last ACKs get a
    // moment); the scrapes travel on each namespace's loopback.
    let deadline = Instant::now() + Duration::from_secs(30);
    let settled = |side: Side, half: &str| {
        let body = scrape(&link, side, metrics);
        sample(
            &body,
            &format!("pgcompress_tunnel_connections_open{{half=\"{half}\"}}"),
        ) == 0
            && sample(
                &body,
                &format!("pgcompress_tunnel_connections_total{{half=\"{half}\"}}"),
            ) == 3
    };
    while !(settled(Side::Client, "client") && settled(Side::Server, "server")) {
        assert!(
            Instant::now() < deadline,
            "connections never closed: {}",
            tunnel.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (bytes_after, packets_after) = (link.bytes().expect("veth"), link.packets().expect("veth"));
    let client = scrape(&link, Side::Client, metrics);
    let server = scrape(&link, Side::Server, metrics);

    let c2s = bytes_after.client_to_server - bytes_before.client_to_server;
    let s2c = bytes_after.server_to_client - bytes_before.server_to_client;
    let c2s_packets = packets_after.client_to_server - packets_before.client_to_server;
    let s2c_packets = packets_after.server_to_client - packets_before.server_to_client;
    let mut report = Vec::new();
    for (body, half) in [(&client, "client"), (&server, "server")] {
        let f2b = link_bytes(body, half, "frontend_to_backend");
        let b2f = link_bytes(body, half, "backend_to_frontend");
        let up = check(
            &format!("{half} half, frontend_to_backend"),
            c2s,
            c2s_packets,
            f2b,
        );
        let down = check(
            &format!("{half} half, backend_to_frontend"),
            s2c,
            s2c_packets,
            b2f,
        );
        report.push(format!(
            "{half}: f2b link {f2b} (veth {c2s} in {c2s_packets} packets, {up:.1} B/packet), \
             b2f link {b2f} (veth {s2c} in {s2c_packets} packets, {down:.1} B/packet)"
        ));
    }
    eprintln!("{}", report.join("\n"));
    // The workload really went over the link, compressed: COPY text both ways, far fewer link bytes.
    let raw_b2f = sample(
        &client,
        "pgcompress_tunnel_raw_bytes_total{half=\"client\",direction=\"backend_to_frontend\"}",
    );
    assert!(raw_b2f >= rows.len() as u64, "{client}");
    assert!(s2c < raw_b2f, "veth {s2c} bytes for {raw_b2f} raw");

    // The halves' resident memory as the endpoint reports it and as /proc shows it from outside.
    let (client_pid, server_pid) = tunnel.pids();
    for (side, half, pid) in [
        (Side::Client, "client", client_pid),
        (Side::Server, "server", server_pid),
    ] {
        let body = scrape(&link, side, metrics);
        let reported = sample(
            &body,
            &format!("process_resident_memory_bytes{{half=\"{half}\"}}"),
        );
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        let seen = kb * 1024;
        // The two readings are moments apart on an idle half: within a quarter of each other.
        assert!(
            reported * 4 >= seen * 3 && reported * 3 <= seen * 4,
            "{half} half reports {reported} resident bytes, /proc/{pid} shows {seen}"
        );
        assert!(sample(&body, &format!("process_open_fds{{half=\"{half}\"}}")) >= 3);
    }
    drop(tunnel);
    drop(cluster);
}
