//! `wal advise --html`: the report written from real WAL is one self-contained file
//! whose charts render in a real browser. Headless Chromium (Debian's package,
//! installed by scripts/setup.sh through scripts/chromium.sh) is the oracle: it
//! must load the file, its DOM must hold one point and one bar per candidate, and
//! its screenshot must show the charts' colours.

mod common;

use common::{pgcompress, phase};
use pgtest::browser::{Chromium, Screenshot};
use pgtest::Cluster;
use std::path::PathBuf;

/// The candidates the test asks for: six, two of them not stock.
const METHODS: &str = "off,pglz,lz4,zstd,zstd:9,lz4:9";
const CANDIDATES: usize = 6;
/// The chart colours of stock and non-stock candidates (crates/advise/src/html.rs).
const STOCK_RGB: [u8; 3] = [0x1f, 0x5f, 0xbf];
const OTHER_RGB: [u8; 3] = [0xe0, 0x7b, 0x00];

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

#[test]
fn html_report_renders_in_chromium() {
    // Fails, rather than skips, when Chromium is missing: the acceptance test of the report is that a
    // real browser renders it.
    let chromium = Chromium::find().unwrap_or_else(|e| panic!("{e}"));
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
    let dom = chromium.dom(&page).expect("chromium --dump-dom");
    assert!(
        dom.contains("id=\"chart-saving-vs-cpu\""),
        "DOM lacks scatter"
    );
    assert!(dom.contains("id=\"chart-wal-bytes\""), "DOM lacks bars");
    assert_eq!(count(&dom, "class=\"point "), CANDIDATES, "DOM points");
    assert_eq!(count(&dom, "class=\"bar "), CANDIDATES, "DOM bars");

    // The screenshot: a real image with the charts' colours in the chart region.
    let shot = dir.path().join("out.png");
    chromium
        .screenshot(&page, 1280, 2000, &shot)
        .expect("chromium --screenshot");
    let size = std::fs::metadata(&shot).expect("screenshot written").len();
    assert!(size > 20_000, "screenshot only {size} bytes");
    let shot = Screenshot::read(&shot).expect("screenshot");
    assert_eq!((shot.width, shot.height), (1280, 2000));
    // Charts sit in the top 1300 pixel rows.
    let charts = shot.top(1300);
    let colours = charts.colours();
    assert!(
        colours > 100,
        "only {colours} colours: the page did not render"
    );
    let (stock, other) = (charts.count(STOCK_RGB), charts.count(OTHER_RGB));
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
