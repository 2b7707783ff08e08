//! `bench tunnel`'s HTML report, rendered from a report file as `--json` writes it, is one self-contained
//! page whose charts a real browser draws. Headless Chromium (Debian's package, installed by
//! scripts/setup.sh through scripts/chromium.sh) is the oracle, as for the advisor's report
//! (crates/cli/tests/advise_html.rs): its DOM must hold every chart and bar, and its screenshot the
//! configurations' colours.

use bench::tunnel::report::{Measurement, TunnelReport};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

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

/// Fails, rather than skips, when Chromium is missing: the acceptance test of the report is that a real
/// browser renders it.
fn require_chromium() {
    let ok = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "chromium is not installed: run `bash scripts/setup.sh` (it installs Debian's chromium \
         through scripts/chromium.sh), then rerun this test"
    );
}

/// Runs headless Chromium on `page` with the flags that keep it quiet on a closed network and working as
/// root, plus `extra`; at most 90 s.
fn chromium(page: &Path, extra: &[&str]) -> Output {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new("timeout")
        .arg("90")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {extra:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

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
        });
    }
    TunnelReport {
        machine: "2 cores, 7.7 GiB RAM, Linux 6.1, Test CPU @ 2.0GHz".into(),
        scale: 1.0,
        command: "pgcompress bench tunnel --rate 50,1000 --html <report.html>".into(),
        notes: vec!["ssh -C skipped at 50 Mbit/s: sshd did not start".into()],
        runs,
    }
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Decodes an RGB(A) PNG: (width, height, bytes per pixel, pixels).
fn decode_png(path: &Path) -> (usize, usize, usize, Vec<u8>) {
    let mut dec = png::Decoder::new(std::fs::File::open(path).expect("open png"));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("png frame");
    let bpp = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, bpp, buf)
}

#[test]
fn html_report_from_a_report_file_renders_in_chromium() {
    require_chromium();
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
    let dom = String::from_utf8(chromium(&page, &["--dump-dom"]).stdout).expect("utf-8 DOM");
    assert_eq!(count(&dom, "<svg id=\"chart-"), 4, "DOM charts");
    assert_eq!(count(&dom, "<rect class=\"bar\""), 2 * runs, "DOM bars");
    assert_eq!(count(&dom, "<tr class=\"run\""), runs, "DOM table rows");
    assert!(dom.contains("sshd did not start"), "DOM notes");

    // (c) The screenshot: a real image with the configurations' colours where the charts are.
    let shot = dir.path().join("report.png");
    chromium(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
        ],
    );
    let (w, h, bpp, px) = decode_png(&shot);
    assert_eq!((w, h), (1280, 1400));
    let mut colours = std::collections::HashSet::new();
    let (mut zstd1, mut auto, mut ssh) = (0usize, 0usize, 0usize);
    for p in px.chunks_exact(bpp) {
        let rgb = [p[0], p[1], p[2]];
        colours.insert(rgb);
        zstd1 += usize::from(rgb == ZSTD1_RGB);
        auto += usize::from(rgb == AUTO_RGB);
        ssh += usize::from(rgb == SSH_RGB);
    }
    assert!(
        colours.len() > 100,
        "only {} colours: the page did not render",
        colours.len()
    );
    // Bars are 14 px high and tens of px long, in several charts: hundreds of pixels each.
    assert!(zstd1 > 300, "{zstd1} pixels of zstd:1's colour");
    assert!(auto > 300, "{auto} pixels of auto's colour");
    assert!(ssh > 300, "{ssh} pixels of ssh -C's colour");
}
