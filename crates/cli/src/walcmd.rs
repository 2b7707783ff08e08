//! `pgcompress wal ...`.

use crate::args::wal::{StatsArgs, VerifyArgs, WalCommand, WalInput};
use crate::output::{bytes, pct};
use serde_json::json;
use std::process::ExitCode;
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::{DecoderOptions, Stop};

pub fn run(cmd: WalCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        WalCommand::Stats(a) => stats(a),
        WalCommand::Verify(a) => verify(a),
        WalCommand::Advise(a) => crate::advise::run(a),
    }
}

fn options(input: &WalInput) -> anyhow::Result<DecoderOptions> {
    let b = input.blcksz;
    if !b.is_power_of_two() || !(1024..=32768).contains(&b) {
        anyhow::bail!("--blcksz {b} is not a PostgreSQL block size (1024 to 32768, a power of 2)");
    }
    Ok(DecoderOptions {
        blcksz: b,
        ..DecoderOptions::default()
    })
}

/// A progress bar over segment files on stderr; drawn only on a terminal and for
/// inputs large enough to take a moment.
fn progress(set: &SegmentSet, what: &str) -> indicatif::ProgressBar {
    let big = set.files.len() as u64 * set.geometry.seg_size >= 1 << 30;
    if !big || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(set.files.len() as u64);
    let style =
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} segments, {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// Threads to read with: `--threads`, or one per CPU.
fn threads(input: &WalInput) -> usize {
    input.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    )
}

/// Reads the WAL and gathers statistics.
pub fn collect_stats(input: &WalInput) -> anyhow::Result<WalStats> {
    let opts = options(input)?;
    let set = SegmentSet::from_paths(&input.paths)?;
    let threads = threads(input);
    let bar = progress(&set, "reading");
    let read = set.read_parallel_with_progress(
        opts,
        threads,
        |_| WalStats::new(set.geometry, opts.blcksz),
        |s, r| s.add(r),
        &|_| bar.inc(1),
    )?;
    bar.finish_and_clear();
    let mut stats = WalStats::new(set.geometry, opts.blcksz);
    for part in &read.parts {
        stats.merge(part);
    }
    let summary = read.summary;
    stats.segments = summary.files_read;
    stats.file_bytes = set.total_bytes();
    stats.stop = Some(summary.stop);
    Ok(stats)
}

/// How reading ended, in words ([`Stop`]'s own), or `unknown`.
fn stop_text(stop: &Option<Stop>) -> String {
    stop.as_ref()
        .map_or_else(|| "unknown".into(), Stop::to_string)
}

fn stats(a: StatsArgs) -> anyhow::Result<ExitCode> {
    let s = collect_stats(&a.input)?;
    if s.start_lsn == wal::Lsn::INVALID {
        anyhow::bail!("no valid WAL record found: {}", stop_text(&s.stop));
    }
    let damage = damage(&a.input, &s)?;
    if a.json {
        let mut j = stats_json(&s);
        j["damage"] = damage.as_ref().map_or(
            serde_json::Value::Null,
            |c| json!({"file": c.file, "lsn": c.lsn.to_string(), "error": c.what}),
        );
        outln!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        out!("{}", s.pg_waldump_table());
        print_extras(&s);
    }
    // pg_waldump prints what it read, then the error, and exits 1: so do we, so that
    // a script reading the status learns of damage.
    match damage {
        Some(c) => {
            eprintln!("pgcompress: corrupt WAL: {c}; the statistics cover the WAL before it");
            Ok(ExitCode::from(1))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Whether reading stopped at damage rather than at the ordinary end of WAL (zeros
/// after the last record, recycled pages), as `wal verify` judges it. pg_waldump
/// cannot tell them apart and exits 1 on both; a live pg_wal is not damaged.
fn damage(input: &WalInput, s: &WalStats) -> anyhow::Result<Option<wal::verify::Corruption>> {
    let Some(Stop::Invalid(e)) = &s.stop else {
        return Ok(None);
    };
    let set = SegmentSet::from_paths(&input.paths)?;
    Ok(wal::verify::judge_end(&set, e)?)
}

pub fn stats_json(s: &WalStats) -> serde_json::Value {
    let t = s.total();
    let rmgrs: Vec<_> = s
        .rows()
        .into_iter()
        .map(|(name, r)| {
            json!({"name": name, "records": r.records, "record_bytes": r.record_bytes,
                   "fpi_bytes": r.fpi_bytes, "fpi_count": r.fpi_count,
                   "combined_bytes": r.record_bytes + r.fpi_bytes})
        })
        .collect();
    let mut images = serde_json::Map::new();
    for (m, i) in s.image_rows() {
        images.insert(
            m.name().to_string(),
            json!({"count": i.count, "stored_bytes": i.stored_bytes, "raw_bytes": i.raw_bytes,
                   "hole_bytes": i.hole_bytes, "verify_only": i.verify_only}),
        );
    }
    let (stop_kind, stop_lsn) = match &s.stop {
        Some(Stop::EndOfInput { lsn }) => ("end_of_input", lsn.to_string()),
        Some(Stop::Invalid(e)) => ("end_of_valid_wal", e.lsn.to_string()),
        _ => ("unknown", String::new()),
    };
    json!({
        "pg_version": s.geometry.version.major(),
        "segment_size": s.geometry.seg_size,
        "wal_page_size": s.geometry.page_size,
        "blcksz": s.blcksz,
        "system_identifier": s.geometry.sysid.to_string(),
        "segments": s.segments,
        "file_bytes": s.file_bytes,
        "start_lsn": s.start_lsn.to_string(),
        "end_lsn": s.end_lsn.to_string(),
        "records": t.records,
        "record_bytes": t.record_bytes,
        "fpi_bytes": t.fpi_bytes,
        "fpi_count": t.fpi_count,
        "combined_bytes": t.record_bytes + t.fpi_bytes,
        "rmgrs": rmgrs,
        "images": images,
        "hole_bytes": s.images.iter().map(|i| i.hole_bytes).sum::<u64>(),
        "page_header_bytes": s.page_header_bytes,
        "padding_bytes": s.padding_bytes,
        "switch_tail_bytes": s.switch_tail_bytes,
        "switches": s.switches,
        "records_crossing_pages": s.records_crossing_pages,
        "records_crossing_segments": s.records_crossing_segments,
        "stop": {"kind": stop_kind, "lsn": stop_lsn, "detail": stop_text(&s.stop)},
    })
}

fn print_extras(s: &WalStats) {
    let t = s.total();
    outln!();
    outln!(
        "PostgreSQL {} WAL, {} segment(s) of {}, page {} B, system {}",
        s.geometry.version,
        s.segments,
        bytes(s.geometry.seg_size),
        s.geometry.page_size,
        s.geometry.sysid
    );
    outln!("Full-page images by storage method (pg_waldump does not show this):");
    outln!(
        "{:<8} {:>10} {:>16} {:>18} {:>8} {:>16}",
        "method",
        "images",
        "stored bytes",
        "before compression",
        "ratio",
        "hole elided"
    );
    for (m, i) in s.image_rows() {
        let ratio = if i.stored_bytes == 0 {
            0.0
        } else {
            i.raw_bytes as f64 / i.stored_bytes as f64
        };
        outln!(
            "{:<8} {:>10} {:>16} {:>18} {:>7.2}x {:>16}",
            m.name(),
            i.count,
            i.stored_bytes,
            i.raw_bytes,
            ratio,
            i.hole_bytes
        );
    }
    let span = s.end_lsn.0 - s.start_lsn.0;
    let combined = t.record_bytes + t.fpi_bytes;
    outln!(
        "Where the {} bytes between the first and last record went:",
        span
    );
    for (what, n) in [
        ("records", combined),
        ("page headers", s.page_header_bytes),
        ("alignment padding", s.padding_bytes),
        ("unused after switch", s.switch_tail_bytes),
    ] {
        outln!(
            "  {:<22} {:>16} ({:>6.2}%)  {}",
            what,
            n,
            pct(n, span),
            bytes(n)
        );
    }
    outln!(
        "Records crossing a page boundary: {}, a segment boundary: {}; XLOG_SWITCH records: {}",
        s.records_crossing_pages,
        s.records_crossing_segments,
        s.switches
    );
    outln!("Stopped: {}", stop_text(&s.stop));
}

fn verify(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let opts = options(&a.input)?;
    let set = SegmentSet::from_paths(&a.input.paths)?;
    let bar = progress(&set, "verifying");
    let result = wal::verify::verify_with_progress(&set, opts, threads(&a.input), &|_| bar.inc(1))?;
    bar.finish_and_clear();
    match result {
        Ok(r) => {
            if a.json {
                let images: serde_json::Map<_, _> = wal::ImageMethod::ALL
                    .iter()
                    .map(|m| (m.name().to_string(), json!(r.images[m.index()])))
                    .collect();
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({
                        "ok": true, "segments": r.segments, "records": r.records,
                        "images": images, "start_lsn": r.start_lsn.to_string(),
                        "end_lsn": r.end_lsn.to_string(), "end": r.end,
                        "pg_version": set.geometry.version.major(),
                    }))?
                );
            } else {
                let imgs: u64 = r.images.iter().sum();
                outln!(
                    "OK: PostgreSQL {} WAL, {} segment(s), {} records from {} to {}, {} page images restored; {}",
                    set.geometry.version, r.segments, r.records, r.start_lsn, r.end_lsn, imgs, r.end
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(c) => {
            if a.json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({
                        "ok": false, "file": c.file, "lsn": c.lsn.to_string(), "error": c.what,
                    }))?
                );
            }
            crate::errors::print(format_args!("corrupt WAL: {c}"));
            Ok(ExitCode::from(1))
        }
    }
}
