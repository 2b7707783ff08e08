//! `wal advise --html`: the report written from real WAL is one self-contained file
//! whose charts render in a real browser. Headless Chromium (Debian's package,
//! installed by scripts/setup.sh through scripts/chromium.sh) is the oracle: it
//! must load the file, its DOM must hold one point and one bar per candidate, and
//! its screenshot must show the charts' colours.

mod common;

use common::{pgcompress, phase};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The candidates the test asks for: six, two of them not stock.
const METHODS: &str = "off,pglz,lz4,zstd,zstd:9,lz4:9";
const CANDIDATES: usize = 6;
/// The chart colours of stock and non-stock candidates (crates/advise/src/html.rs).
const STOCK_RGB: [u8; 3] = [0x1f, 0x5f, 0xbf];
const OTHER_RGB: [u8; 3] = [0xe0, 0x7b, 0x00];

/// Fails, rather than skips, when Chromium is missing: the acceptance test of the
/// report is that a real browser renders it.
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

/// Runs headless Chromium on `page` with the flags that keep it quiet on a closed
/// network and working as root, plus `extra`; at most 90 s.
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

/// Real WAL with uncompressed images: pgbench after a checkpoint, on 1 MB segments.
fn small_wal() -> (Cluster, Vec<PathBuf>) {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .guc("wal_compression", "off")
        .guc("autovacuum", "off")
        .start()
        .expect("cluster");
    let files: Vec<PathBuf> = phase(&cluster, "off", || {
        cluster.pgbench_init(1).expect("init");
        cluster.checkpoint().expect("checkpoint");
        cluster
            .pgbench(&["-n", "-t", "150", "-c", "2", "--random-seed=3"])
            .expect("pgbench");
    });
    assert!(!files.is_empty(), "no archived segments");
    (cluster, files)
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
fn html_report_renders_in_chromium() {
    require_chromium();
    let (_cluster, files) = small_wal();
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("out.html");
    let page_arg = page.display().to_string();
    let mut args = vec!["wal", "advise", "--html", &page_arg, "--methods", METHODS];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(|s| s.as_str()));
    let out = pgcompress(&args);
    assert!(
        out.status.success(),
        "advise --html failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table still goes to stdout.
    assert!(String::from_utf8_lossy(&out.stdout).contains("Recommendation:"));

    // (a) The file itself.
    let html = std::fs::read_to_string(&page).expect("report written");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("id=\"chart-saving-vs-cpu\""),
        "no scatter chart"
    );
    assert!(html.contains("id=\"chart-wal-bytes\""), "no bar chart");
    assert_eq!(count(&html, "class=\"point "), CANDIDATES, "points");
    assert_eq!(count(&html, "class=\"bar "), CANDIDATES, "bars");
    assert_eq!(count(&html, "class=\"point other\""), 2, "non-stock points");
    assert!(html.contains("Recommendation: wal_compression = "));
    assert!(html.contains("PostgreSQL 15 WAL") || html.contains("PostgreSQL 1"));
    for (k, spec) in ["none", "pglz", "lz4", "zstd", "zstd:9", "lz4:9"]
        .iter()
        .enumerate()
    {
        assert!(
            html.contains(&format!("<td>{spec}</td>")),
            "row {k}: {spec}"
        );
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the report must not load anything from a network"
    );
    assert!(!html.contains("<script"), "no scripts needed");
    // No temporary file left behind by the rename.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left.len(), 1, "files left: {left:?}");

    // (b) Chromium's DOM: the charts are there once parsed by a browser.
    let dom = String::from_utf8(chromium(&page, &["--dump-dom"]).stdout).expect("utf-8 DOM");
    assert!(
        dom.contains("id=\"chart-saving-vs-cpu\""),
        "DOM lacks scatter"
    );
    assert!(dom.contains("id=\"chart-wal-bytes\""), "DOM lacks bars");
    assert_eq!(count(&dom, "class=\"point "), CANDIDATES, "DOM points");
    assert_eq!(count(&dom, "class=\"bar "), CANDIDATES, "DOM bars");

    // The screenshot: a real image with the charts' colours in the chart region.
    let shot = dir.path().join("out.png");
    chromium(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000",
        ],
    );
    let size = std::fs::metadata(&shot).expect("screenshot written").len();
    assert!(size > 20_000, "screenshot only {size} bytes");
    let (w, h, bpp, px) = decode_png(&shot);
    assert_eq!((w, h), (1280, 2000));
    // Charts sit in the top 1300 pixel rows.
    let region = &px[..w * 1300.min(h) * bpp];
    let mut colours = std::collections::HashSet::new();
    let (mut stock, mut other) = (0usize, 0usize);
    for p in region.chunks_exact(bpp) {
        let rgb = [p[0], p[1], p[2]];
        colours.insert(rgb);
        stock += usize::from(rgb == STOCK_RGB);
        other += usize::from(rgb == OTHER_RGB);
    }
    assert!(
        colours.len() > 100,
        "only {} colours: the page did not render",
        colours.len()
    );
    // Three stock bars and points, two others: hundreds of pixels of each colour.
    assert!(stock > 500, "{stock} pixels of the stock colour");
    assert!(other > 300, "{other} pixels of the non-stock colour");

    // An unwritable report: one line on stderr, non-zero exit.
    let bad = "/nonexistent-dir/report.html";
    let mut args = vec!["wal", "advise", "--html", bad, "--methods", "off,pglz"];
    args.extend(names.iter().map(|s| s.as_str()));
    let out = pgcompress(&args);
    assert!(!out.status.success(), "unwritable --html must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(bad), "names the file: {err}");
}
