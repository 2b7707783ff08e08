//! `bench tunnel`'s HTML report, rendered from a report file as `--json` writes it, is one self-contained
//! page whose charts a real browser draws. Headless Chromium (Debian's package, installed by
//! scripts/setup.sh through scripts/chromium.sh) is the oracle, as for the advisor's report
//! (crates/cli/tests/advise_html.rs): its DOM must hold every chart and bar, and its screenshot the
//! configurations' colours.

use bench::tunnel::report::{Measurement, TunnelReport};
use pgtest::browser::{Chromium, Screenshot};
use std::collections::BTreeMap;

const RATES: [Option<u64>; 3] = [Some(50), Some(1000), None];
const CONFIGS: [&str; 8] = [
    "direct",
    "socat",
    "tunnel none",
    "tunnel lz4",
    "tunnel zstd:1",
    "tunnel zstd:3",
    "tunnel auto",
    "ssh -C",
];
/// Chart colours of three configurations (crates/bench/src/tunnel/report/html.rs).
const ZSTD1_RGB: [u8; 3] = [0x1f, 0x5f, 0xbf];
const AUTO_RGB: [u8; 3] = [0x12, 0x80, 0x5c];
const SSH_RGB: [u8; 3] = [0xe0, 0x7b, 0x00];

/// A full-sized report: every configuration at every rate for the load, pgbench -S unshaped only, and
/// `ssh -C` missing at 50 Mbit/s (skipped, with a note).
fn report() -> TunnelReport {
    let mut runs = Vec::new();
    for (ri, &rate) in RATES.iter().enumerate() {
        for (ci, &config) in CONFIGS.iter().enumerate() {
            if rate == Some(50) && config == "ssh -C" {
                continue;
            }
            let shrink: f64 = [1.0, 1.0, 0.98, 0.55, 0.3, 0.27, 0.29, 0.4][ci];
            let c2s = (1_200_000_000.0 * shrink) as u64;
            let mut cpu = BTreeMap::new();
            if config.starts_with("tunnel") {
                cpu.insert("tunnel client".to_string(), 10.0 + ci as f64);
                cpu.insert("tunnel server".to_string(), 2.0 + ci as f64);
            }
            runs.push(Measurement {
                rate_mbit: rate,
                config: config.into(),
                workload: "load".into(),
                wall_s: [200.0, 12.0, 9.0][ri] * shrink.max(0.4),
                bytes_c2s: c2s,
                bytes_s2c: c2s / 100,
                tps: None,
                latency_ms: None,
                cpu_s: cpu,
                check: "row counts equal".into(),
                zstd1_bytes: None,
                round: 0,
            });
        }
    }
    for (ci, &config) in CONFIGS.iter().enumerate() {
        runs.push(Measurement {
            rate_mbit: None,
            config: config.into(),
            workload: "pgbench-S".into(),
            wall_s: 30.0,
            bytes_c2s: 40_000_000 + ci as u64 * 1_000_000,
            bytes_s2c: 90_000_000 - ci as u64 * 5_000_000,
            tps: Some(15_000.0 - ci as f64 * 900.0),
            latency_ms: Some(0.5 + ci as f64 * 0.03),
            cpu_s: BTreeMap::new(),
            check: "pgbench: 0 failed transactions".into(),
            zstd1_bytes: None,
            round: 0,
        });
    }
    TunnelReport {
        machine: "2 cores, 7.7 GiB RAM, Linux 6.1, Test CPU @ 2.0GHz".into(),
        scale: 1.0,
        command: "pgcompress-bench tunnel --rate 50,1000 --html <report.html>".into(),
        notes: vec!["ssh -C skipped at 50 Mbit/s: sshd did not start".into()],
        runs,
    }
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn html_report_from_a_report_file_renders_in_chromium() {
    // Fails, rather than skips, when Chromium is missing: the acceptance test of the report is that a
    // real browser renders it.
    let chromium = Chromium::find().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    // The report file, as `--json` writes it, read back as the renderer's input.
    let json = dir.path().join("report.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&report()).expect("json")).expect("write json");
    let r: TunnelReport =
        serde_json::from_slice(&std::fs::read(&json).expect("read json")).expect("parse json");
    let runs = r.runs.len();
    assert_eq!(runs, 3 * 8 - 1 + 8);
    let page = dir.path().join("report.html");
    advise::html::write_file(&page, &r.html()).expect("write html");

    // (a) The file itself: self-contained, escaped, a bar per measurement in each of two charts.
    let html = std::fs::read_to_string(&page).expect("report written");
    assert!(html.starts_with("<!DOCTYPE html>"));
    for id in [
        "chart-bytes-load",
        "chart-wall-load",
        "chart-bytes-pgbench-s",
        "chart-tps-pgbench-s",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no {id}");
    }
    assert_eq!(count(&html, "<rect class=\"bar\""), 2 * runs, "bars");
    assert!(
        html.contains("--html &lt;report.html&gt;"),
        "command escaped"
    );
    assert!(!html.contains("<script"), "no scripts needed");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing from a network"
    );

    // (b) Chromium's DOM: the charts and every bar are there once a browser parsed the page.
    let dom = chromium.dom(&page).expect("chromium --dump-dom");
    assert_eq!(count(&dom, "<svg id=\"chart-"), 4, "DOM charts");
    assert_eq!(count(&dom, "<rect class=\"bar\""), 2 * runs, "DOM bars");
    assert_eq!(count(&dom, "<tr class=\"run\""), runs, "DOM table rows");
    assert!(dom.contains("sshd did not start"), "DOM notes");

    // (c) The screenshot: a real image with the configurations' colours where the charts are.
    let shot = dir.path().join("report.png");
    chromium
        .screenshot(&page, 1280, 1400, &shot)
        .expect("chromium --screenshot");
    let shot = Screenshot::read(&shot).expect("screenshot");
    assert_eq!((shot.width, shot.height), (1280, 1400));
    let colours = shot.colours();
    assert!(
        colours > 100,
        "only {colours} colours: the page did not render"
    );
    let (zstd1, auto, ssh) = (
        shot.count(ZSTD1_RGB),
        shot.count(AUTO_RGB),
        shot.count(SSH_RGB),
    );
    // Bars are 14 px high and tens of px long, in several charts: hundreds of pixels each.
    assert!(zstd1 > 300, "{zstd1} pixels of zstd:1's colour");
    assert!(auto > 300, "{auto} pixels of auto's colour");
    assert!(ssh > 300, "{ssh} pixels of ssh -C's colour");
}
