//! What the advisor's "WAL bytes" count, on WAL written by PostgreSQL 18 (the wal
//! crate's fixture, which ends with a switched segment).

use advise::{advise, Advice, Options};
use std::path::PathBuf;
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::DecoderOptions;

/// The fixture's last `n` segments (the last one ends in an `XLOG_SWITCH`), unpacked
/// into a directory that lives as long as the returned guard.
fn last_segments(n: usize) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wal/testdata/pg18-small-1mb.tar.zst");
    let file = std::fs::File::open(fixture).expect("fixture tar.zst");
    let zst = zstd::Decoder::new(file).expect("zstd decoder");
    tar::Archive::new(zst).unpack(dir.path()).expect("unpack");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("pg18-small-1mb"))
        .expect("read fixture dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    let tail = files.split_off(files.len() - n);
    (dir, tail)
}

fn run(files: &[PathBuf]) -> (Advice, WalStats) {
    let set = SegmentSet::from_paths(files).expect("segment set");
    let opts = Options {
        candidates: vec![
            "none".parse().expect("spec"),
            "zstd".parse().expect("spec"),
            "lz4".parse().expect("spec"),
        ],
        threads: 2,
        ..Options::default()
    };
    let advice = advise(&set, &opts, &mut |_| {}).expect("advice");
    let dopts = DecoderOptions::default();
    let mut stats = WalStats::new(set.geometry, dopts.blcksz);
    set.read(dopts, |r, _| stats.add(r)).expect("read");
    (advice, stats)
}

fn saving(off: u64, c: u64) -> f64 {
    100.0 * (1.0 - c as f64 / off as f64)
}

/// Regression: the advisor counted the zeros after the last switch as WAL, so a
/// method that cut the records by 80% showed a saving of a fraction of that.
#[test]
fn wal_bytes_leave_out_the_unused_space_after_a_switch() {
    let (_dir, files) = last_segments(4);
    let (a, stats) = run(&files);
    // The span holds a switch, and its tail is reported apart from the WAL bytes.
    assert!(
        stats.switches > 0 && stats.switch_tail_bytes > 0,
        "{stats:?}"
    );
    assert_eq!(a.switch_tail_bytes, stats.switch_tail_bytes);
    assert_eq!(
        a.actual_wal_bytes + a.switch_tail_bytes,
        a.end_lsn.0 - a.start_lsn.0
    );
    // WAL bytes = records + page headers + padding, counted independently.
    let t = stats.total();
    assert_eq!(
        a.actual_wal_bytes,
        t.record_bytes + t.fpi_bytes + stats.page_header_bytes + stats.padding_bytes
    );
    // Savings against off agree with those of pg_waldump's combined size (what the
    // demo's run table shows) within one percentage point.
    let off = a
        .candidates
        .iter()
        .find(|c| c.spec.method == codec::Method::None)
        .expect("off");
    for c in a
        .candidates
        .iter()
        .filter(|c| c.spec.method != codec::Method::None)
    {
        let by_wal = saving(off.predicted_wal_bytes, c.predicted_wal_bytes);
        let by_combined = saving(off.predicted_combined_bytes, c.predicted_combined_bytes);
        eprintln!(
            "{}: WAL bytes {by_wal:.2}%, combined {by_combined:.2}%",
            c.spec
        );
        assert!(by_combined > 10.0, "{}: {by_combined}", c.spec);
        assert!(
            (by_wal - by_combined).abs() <= 1.0,
            "{}: {by_wal:.2}% of WAL bytes, {by_combined:.2}% of combined",
            c.spec
        );
    }
}
