//! `pgcompress-bench tunnel` end to end at a tiny scale: network namespaces, PostgreSQL in one, the
//! clients in the other, the link counted by the kernel. Checked from `--json`: every run asked for is
//! there, bytes went over the veth, every check passed, and zstd:1 put fewer bytes on the link than a
//! direct connection on the load. No timing is checked. Needs root (namespaces); tpchgen-cli, socat
//! and OpenSSH come from scripts/bench-tools.sh, which the bench runs when they are missing.

mod support;

use serde_json::Value;

const CONFIGS: [&str; 4] = ["direct", "socat", "tunnel zstd:1", "ssh -C"];
const WORKLOADS: [&str; 3] = ["load", "copy-out", "pgbench-S"];

fn run_of<'a>(doc: &'a Value, config: &str, workload: &str) -> &'a Value {
    doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["config"] == config && r["workload"] == workload)
        .unwrap_or_else(|| panic!("no run of {config} {workload} in {doc:#}"))
}

fn bytes(r: &Value) -> (u64, u64) {
    let b = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    (b("bytes_c2s"), b("bytes_s2c"))
}

#[test]
fn bench_tunnel_measures_every_configuration_on_the_veth() {
    if !namespaces_or_skip() {
        return;
    }
    let cache = tempfile::tempdir().expect("tempdir");
    let out = support::bench()
        .args(["tunnel", "--json", "--scale", "0.01", "--rate", "none"])
        .args(["--configs", "direct,socat,zstd:1,ssh"])
        .args(["--workloads", &WORKLOADS.join(",")])
        .args(["--pgbench-time", "2", "--pgbench-scale", "1"])
        .arg("--cache")
        .arg(cache.path())
        .output()
        .expect("pgcompress runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench tunnel failed: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(doc["scale"].as_f64(), Some(0.01));
    assert_eq!(
        doc["runs"].as_array().expect("runs").len(),
        CONFIGS.len() * WORKLOADS.len(),
        "{doc:#}"
    );
    for c in CONFIGS {
        for w in WORKLOADS {
            let r = run_of(&doc, c, w);
            assert!(r["rate_mbit"].is_null(), "{r}");
            let (c2s, s2c) = bytes(r);
            assert!(c2s > 0 && s2c > 0, "{c} {w}: no bytes on the veth: {r}");
            let check = r["check"].as_str().expect("check");
            assert!(
                !check.starts_with("FAILED") && !check.is_empty(),
                "{c} {w}: {check}"
            );
            assert!(r["wall_s"].as_f64().is_some_and(|t| t > 0.0), "{r}");
        }
        let pgb = run_of(&doc, c, "pgbench-S");
        assert!(pgb["tps"].as_f64().is_some_and(|t| t > 0.0), "{pgb}");
    }
    // The load sends about 10 MB of CSV from the client: zstd:1 must cut it well below direct.
    let (direct_up, _) = bytes(run_of(&doc, "direct", "load"));
    let (zstd_up, _) = bytes(run_of(&doc, "tunnel zstd:1", "load"));
    assert!(
        direct_up > 8_000_000,
        "direct load sent only {direct_up} bytes"
    );
    assert!(
        zstd_up * 2 < direct_up,
        "tunnel zstd:1 sent {zstd_up} bytes on the load, direct {direct_up}"
    );
    // The relays' and the halves' CPU was measured.
    let cpu = &run_of(&doc, "tunnel zstd:1", "load")["cpu_s"];
    assert!(
        cpu.get("tunnel client").is_some() && cpu.get("tunnel server").is_some(),
        "{cpu}"
    );
}

/// Whether the bench can build its namespaces here. As root it must: a root run that cannot is a
/// failure with the reason, never a skip. Not root, the test fails with the reason under `CI=true` (a CI
/// machine runs every test) and elsewhere says why it skips.
fn namespaces_or_skip() -> bool {
    let why = match pgtest::netns::NetLink::unavailable_reason() {
        None => return true,
        Some(why) => why,
    };
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !is_root() && !ci,
        "bench tunnel needs network namespaces (root, ip, tc) and cannot make them: {why}"
    );
    eprintln!("skipped: bench tunnel needs root for network namespaces: {why}");
    false
}

/// True when the effective uid (the second field of `Uid:` in /proc/self/status) is 0.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
