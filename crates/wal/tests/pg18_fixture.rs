//! The PostgreSQL 18 fixture against PostgreSQL itself: `WalStats` must reproduce
//! what PostgreSQL 18.3's `pg_waldump --stats` printed for the same segments, and
//! `verify` must accept the WAL and restore images of every compression method.

mod common;

use common::{fixture_dir, segment_paths, testdata, FIXTURE};
use wal::source::SegmentSet;
use wal::stats::{RmgrStats, WalStats};
use wal::verify::verify;
use wal::{DecoderOptions, ImageMethod, Lsn, Stop};

/// What `pg_waldump --stats` printed, parsed from the golden file.
struct Expected {
    start: Lsn,
    end: Lsn,
    /// (name, N, record size, FPI size) for every row, in order.
    rows: Vec<(String, u64, u64, u64)>,
    /// (N, record size, FPI size) of the Total line.
    total: (u64, u64, u64),
    text: String,
}

fn expected() -> Expected {
    let text = std::fs::read_to_string(testdata(&format!("{FIXTURE}.pg_waldump-stats.txt")))
        .expect("golden pg_waldump output");
    let mut lines = text.lines();
    // "WAL statistics between 0/700210 and 0/2A00000:"
    let head = lines.next().expect("header line");
    let range = head
        .strip_prefix("WAL statistics between ")
        .and_then(|s| s.strip_suffix(':'))
        .expect("header wording");
    let (start, end) = range.split_once(" and ").expect("two LSNs");
    let mut rows = Vec::new();
    let mut total = None;
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        // Column titles, dashes and the separator line carry no numbers.
        let Some(n) = words.get(1).and_then(|w| w.parse::<u64>().ok()) else {
            continue;
        };
        if words[0] == "Total" {
            // Total N rec [x%] fpi [y%] combined [100%]
            total = Some((n, num(words[2]), num(words[4])));
        } else {
            // Name N (pct) rec (pct) fpi (pct) combined (pct); "( 8.46)" may split in two words.
            let nums: Vec<u64> = words[2..]
                .iter()
                .filter_map(|w| w.parse::<u64>().ok())
                .collect();
            rows.push((words[0].to_string(), n, nums[0], nums[1]));
        }
    }
    Expected {
        start: start.parse().expect("start LSN"),
        end: end.parse().expect("end LSN"),
        rows,
        total: total.expect("Total line"),
        text,
    }
}

fn num(w: &str) -> u64 {
    w.parse()
        .unwrap_or_else(|_| panic!("number expected, got {w:?}"))
}

fn fixture_stats() -> WalStats {
    stats_of(&SegmentSet::from_paths(&segment_paths()).expect("segment set"))
}

fn stats_of(set: &SegmentSet) -> WalStats {
    let opts = DecoderOptions::default();
    let mut stats = WalStats::new(set.geometry, opts.blcksz);
    let summary = set.read(opts, |r, _| stats.add(r)).expect("read");
    stats.stop = Some(summary.stop);
    stats.segments = summary.files_read;
    stats
}

#[test]
fn stats_match_pg_waldump_row_by_row() {
    let exp = expected();
    let stats = fixture_stats();
    assert_eq!(stats.start_lsn, exp.start, "first record");
    assert_eq!(stats.end_lsn, exp.end, "end of the last record");
    let rows: Vec<(String, u64, u64, u64)> = stats
        .rows()
        .into_iter()
        .map(|(name, s)| (name, s.records, s.record_bytes, s.fpi_bytes))
        .collect();
    // pg_waldump prints all 22 built-in resource managers of PostgreSQL 18.
    assert_eq!(exp.rows.len(), 22);
    assert_eq!(rows, exp.rows);
    let RmgrStats {
        records,
        record_bytes,
        fpi_bytes,
        ..
    } = stats.total();
    assert_eq!((records, record_bytes, fpi_bytes), exp.total);
}

#[test]
fn stats_table_is_pg_waldump_byte_for_byte() {
    let exp = expected();
    let stats = fixture_stats();
    assert_eq!(stats.pg_waldump_table(), exp.text);
}

#[test]
fn stream_ends_after_the_final_switch() {
    let stats = fixture_stats();
    // The last segment was switched: its XLOG_SWITCH record carries the stream to the
    // segment's end, where the input ends (no further segment was given).
    assert!(stats.switches >= 1);
    let files = segment_paths();
    assert_eq!(files.len(), 35);
    let seg = stats.geometry.seg_size;
    let last_seg_end = Lsn(0x700000 + 35 * seg);
    assert_eq!(stats.end_lsn, last_seg_end);
    match stats.stop {
        Some(Stop::EndOfInput { lsn }) => assert_eq!(lsn, last_seg_end),
        other => panic!("expected end of input after the switch, got {other:?}"),
    }
}

#[test]
fn verify_passes_and_restores_every_image_method() {
    let set = SegmentSet::from_paths(&segment_paths()).expect("segment set");
    let report = verify(&set, DecoderOptions::default(), 1)
        .expect("no I/O error")
        .unwrap_or_else(|c| panic!("fixture reported corrupt: {c}"));
    // Reading segments in parallel must not change the outcome.
    for threads in [2, 4] {
        let r = verify(&set, DecoderOptions::default(), threads)
            .expect("no I/O error")
            .unwrap_or_else(|c| panic!("fixture reported corrupt on {threads} threads: {c}"));
        assert_eq!(
            (r.records, r.images, r.start_lsn, r.end_lsn, &r.end),
            (
                report.records,
                report.images,
                report.start_lsn,
                report.end_lsn,
                &report.end
            ),
            "{threads} threads"
        );
    }
    let exp = expected();
    assert_eq!(report.start_lsn, exp.start);
    assert_eq!(report.end_lsn, exp.end);
    assert_eq!(report.records, exp.total.0);
    assert_eq!(report.segments, 35);
    // The fixture ran pgbench with wal_compression off, pglz, lz4 and zstd in turn, so
    // verify must have decompressed and checked images of all four kinds.
    for m in ImageMethod::ALL {
        assert!(
            report.images[m.index()] > 0,
            "no {} images verified: {:?}",
            m.name(),
            report.images
        );
    }
    // And the statistics agree with verify on how many images there are.
    let stats = fixture_stats();
    for (m, s) in stats.image_rows() {
        assert_eq!(s.count, report.images[m.index()], "{} images", m.name());
    }
}

/// Regression: a directory of symbolic links to segments was "no WAL segment files
/// found"; links are followed as pg_waldump follows them, broken ones skipped.
#[test]
fn directory_of_symlinks_reads_like_the_segments() {
    let dir = tempfile::tempdir().expect("temp dir");
    for p in segment_paths() {
        let name = p.file_name().expect("file name");
        std::os::unix::fs::symlink(&p, dir.path().join(name)).expect("symlink");
    }
    // A dangling link named like a segment is not a segment file.
    std::os::unix::fs::symlink(
        dir.path().join("missing"),
        dir.path().join("0000000100000000000000FF"),
    )
    .expect("symlink");
    let linked = SegmentSet::from_paths(&[dir.path()]).expect("segment set from links");
    let real = SegmentSet::from_paths(&[fixture_dir()]).expect("segment set");
    assert_eq!(linked.files.len(), real.files.len());
    let (a, b) = (stats_of(&linked), stats_of(&real));
    assert_eq!(a.pg_waldump_table(), b.pg_waldump_table());
    assert_eq!((a.start_lsn, a.end_lsn), (b.start_lsn, b.end_lsn));
    assert_eq!(a.segments, b.segments);
}
