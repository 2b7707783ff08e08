//! `wal advise` against the real server: on WAL that PostgreSQL 15 wrote with each
//! `wal_compression` setting, the advisor's prediction for that setting must match
//! what the server stored.
//!
//! Library versions matter for lz4 and zstd: the server here links liblz4 1.9.4 and
//! libzstd 1.5.4 (`ldd /usr/lib/postgresql/15/bin/postgres`), pgcompress links the
//! versions bundled by the `lz4-sys` (1.10.0) and `zstd-sys` (1.5.7) crates. Their
//! output may differ by a few bytes per page, so lz4 and zstd are held to 0.5% and
//! the measured difference is printed; pglz is ours, and must be exact.

mod common;

use advise::{Advice, Options};
use codec::parse_spec_list;
use common::{pgcompress, phase};
use pgtest::Cluster;
use std::path::PathBuf;
use wal::source::SegmentSet;

/// A cluster started with `wal_compression = setting` (so every process writes with
/// it), and the archived segments of a small workload: pgbench after a checkpoint,
/// then text pages that compress well.
/// Whether the server under test (PGCOMPRESS_PG_MAJOR) was built with `setting`: the packages of
/// 16 and 18 the matrix runs have pglz only. Says so on stderr when not.
fn build_offers(setting: &str) -> bool {
    let cluster = Cluster::start().expect("cluster");
    let offered = common::offered_settings(&cluster).contains(&setting);
    if !offered {
        let why = format!(
            "PostgreSQL {} in {} is built without wal_compression = {setting}: nothing to predict",
            cluster.install().major(),
            cluster.install().bindir().display()
        );
        // A CI machine must run every test: a server without the method there is a failure that
        // says so, not a pass that tested nothing.
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true: {why}; install a PostgreSQL built with it (scripts/setup.sh) or point \
             PGCOMPRESS_PG_BINDIR at one"
        );
        eprintln!("skipped: {why}");
    }
    offered
}

fn wal_written_with(setting: &str) -> (Cluster, Vec<PathBuf>) {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .guc("wal_compression", setting)
        .guc("autovacuum", "off")
        .start()
        .expect("cluster");
    // phase() starts after a switch, so initdb's WAL (written without
    // wal_compression) is left out.
    let files: Vec<PathBuf> = phase(&cluster, setting, || {
        cluster.pgbench_init(1).expect("init");
        cluster.checkpoint().expect("checkpoint");
        cluster
            .pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=5"])
            .expect("pgbench");
        cluster
            .psql(
                "CREATE TABLE txt AS SELECT g, repeat(md5(g::text), 6) AS t FROM generate_series(1, 15000) g;
                 CHECKPOINT;
                 UPDATE txt SET g = g WHERE g % 4 = 0;",
            )
            .expect("workload");
    });
    assert!(files.len() >= 3, "only {} segments", files.len());
    (cluster, files)
}

/// `pgcompress wal advise --json --exhaustive --methods off,SETTING FILES...`.
fn advise_json(setting: &str, files: &[PathBuf]) -> serde_json::Value {
    let methods = format!("off,{setting}");
    let mut args = vec![
        "wal",
        "advise",
        "--json",
        "--exhaustive",
        "--methods",
        &methods,
    ];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(|s| s.as_str()));
    let out = pgcompress(&args);
    assert!(
        out.status.success(),
        "advise failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// (predicted FPI, predicted combined, predicted WAL) of `spec`, and the actual three.
fn figures(v: &serde_json::Value, spec: &str) -> ([u64; 3], [u64; 3]) {
    let c = v["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|c| c["spec"] == spec)
        .expect("candidate");
    let n = |x: &serde_json::Value| x.as_u64().expect("number");
    (
        [
            n(&c["predicted_fpi_bytes"]),
            n(&c["predicted_combined_bytes"]),
            n(&c["predicted_wal_bytes"]),
        ],
        [
            n(&v["actual_fpi_bytes"]),
            n(&v["actual_combined_bytes"]),
            n(&v["actual_wal_bytes"]),
        ],
    )
}

fn rel_diff(pred: u64, actual: u64) -> f64 {
    (pred as f64 - actual as f64) / actual as f64
}

/// Checks the prediction of `setting` on its own WAL; returns the FPI error.
fn check_own_prediction(setting: &str, files: &[PathBuf], tolerance: f64) -> f64 {
    let v = advise_json(setting, files);
    let stats = common::stats_json(files);
    assert_eq!(v["actual_fpi_bytes"], stats["fpi_bytes"]);
    assert_eq!(v["actual_combined_bytes"], stats["combined_bytes"]);
    let stored = &stats["images"][setting]["count"];
    assert!(
        stored.as_u64().expect("count") > 200,
        "too few {setting} images: {stored}"
    );
    let (pred, actual) = figures(&v, setting);
    let errs: Vec<f64> = pred
        .iter()
        .zip(&actual)
        .map(|(p, a)| rel_diff(*p, *a))
        .collect();
    eprintln!(
        "{setting}: FPI predicted {} actual {} ({:+.4}%); combined {} vs {} ({:+.4}%); WAL {} vs {} ({:+.4}%)",
        pred[0], actual[0], 100.0 * errs[0], pred[1], actual[1], 100.0 * errs[1], pred[2], actual[2],
        100.0 * errs[2]
    );
    for e in &errs {
        assert!(e.abs() <= tolerance, "{setting}: {errs:?}");
    }
    // `off` predicts the same WAL with every image raw: more bytes than were written.
    let (off, _) = figures(&v, "none");
    assert!(off[0] > actual[0]);
    errs[0]
}

#[test]
fn pglz_prediction_equals_what_postgres_stored() {
    let (_cluster, files) = wal_written_with("pglz");
    let v = advise_json("pglz", &files);
    let (pred, actual) = figures(&v, "pglz");
    eprintln!("pglz: predicted {pred:?}, actual {actual:?} (FPI, combined, WAL bytes)");
    assert_eq!(pred[0], actual[0], "FPI bytes");
    assert_eq!(pred[1], actual[1], "combined bytes");
    assert_eq!(pred[2], actual[2], "WAL bytes");
    check_own_prediction("pglz", &files, 0.0);
}

#[test]
fn lz4_prediction_within_half_a_percent_and_damage_is_reported() {
    if !build_offers("lz4") {
        return;
    }
    let (_cluster, files) = wal_written_with("lz4");
    check_own_prediction("lz4", &files, 0.005);

    // Damage in the middle of the second segment: one line, exit 1, not a silent end.
    let dir = tempfile::tempdir().expect("tempdir");
    let copies = common::isolate(dir.path(), "damaged", &files);
    let mut bytes = std::fs::read(&copies[1]).expect("read");
    bytes[100_000..104_096].fill(0xAB);
    std::fs::write(&copies[1], bytes).expect("write");
    let d = copies[0].parent().expect("dir").display().to_string();
    let out = pgcompress(&["wal", "advise", "--methods", "lz4", &d]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("corrupt WAL"), "{err}");
}

#[test]
fn zstd_prediction_within_half_a_percent_and_samples_within_their_interval() {
    if !build_offers("zstd") {
        return;
    }
    let (_cluster, files) = wal_written_with("zstd");
    check_own_prediction("zstd", &files, 0.005);

    // Sampled figures against exhaustive ones on the same WAL.
    let set = SegmentSet::from_paths(&files).expect("segments");
    let candidates =
        parse_spec_list("off,pglz,lz4,zstd,zstd:-1,zstd:6,zstd:12,zstd:19,lz4:9,snappy")
            .expect("specs");
    let run = |sample_rate: Option<f64>, exhaustive: bool| -> Advice {
        let opts = Options {
            candidates: candidates.clone(),
            sample_rate,
            exhaustive,
            ..Options::default()
        };
        advise::advise(&set, &opts, &mut |_| {}).expect("advise")
    };
    let exact = run(None, true);
    let sampled = run(Some(0.2), false);
    let mut outside = Vec::new();
    for (s, e) in sampled.candidates.iter().zip(&exact.candidates) {
        assert_eq!(s.spec, e.spec);
        assert!(!e.sampled);
        if !s.sampled {
            assert_eq!(s.predicted_fpi_bytes, e.predicted_fpi_bytes, "{}", s.spec);
            continue;
        }
        let (lo, hi) = (s.ci_low.expect("low"), s.ci_high.expect("high"));
        eprintln!(
            "{}: sampled {} [{lo}, {hi}] (±{:.2}%), exhaustive {} ({:+.3}%)",
            s.spec,
            s.predicted_fpi_bytes,
            50.0 * (hi - lo) as f64 / s.predicted_fpi_bytes as f64,
            e.predicted_fpi_bytes,
            100.0 * rel_diff(s.predicted_fpi_bytes, e.predicted_fpi_bytes)
        );
        if !(lo..=hi).contains(&e.predicted_fpi_bytes) {
            outside.push(s.spec.to_string());
        }
    }
    assert!(
        sampled.candidates.iter().filter(|c| c.sampled).count() >= 5,
        "non-stock candidates were not sampled"
    );
    assert!(outside.is_empty(), "outside their interval: {outside:?}");
}

#[test]
fn bad_spec_and_empty_input_fail_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    for (args, what) in [
        (vec!["wal", "advise", "--methods", "zstd:99", &d], "99"),
        (
            vec!["wal", "advise", "--methods", "pglz,brotli", &d],
            "brotli",
        ),
        (vec!["wal", "advise", &d], "no WAL segment files"),
    ] {
        let out = pgcompress(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // A file that is not WAL.
    let junk = dir.path().join("000000010000000000000001");
    std::fs::write(&junk, vec![0u8; 8192]).expect("write");
    let out = pgcompress(&["wal", "advise", &junk.display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
