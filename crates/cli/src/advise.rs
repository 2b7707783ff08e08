//! `pgcompress wal advise`: the table of what each method and level would save,
//! and the recommendation. The work is the `advise` crate's.

use crate::args::wal::AdviseArgs;
use crate::output::bytes;
use advise::{Advice, AdviseError, CandidateAdvice, Options, Progress};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::io::IsTerminal;
use std::process::ExitCode;
use wal::source::SegmentSet;
use wal::DecoderOptions;

pub fn run(a: AdviseArgs) -> anyhow::Result<ExitCode> {
    let candidates = match &a.methods {
        Some(m) => codec::parse_spec_list(m).map_err(|e| anyhow::anyhow!("--methods: {e}"))?,
        None => advise::default_candidates(),
    };
    let b = a.input.blcksz;
    if !b.is_power_of_two() || !(1024..=32768).contains(&b) {
        anyhow::bail!("--blcksz {b} is not a PostgreSQL block size (1024 to 32768, a power of 2)");
    }
    let opts = Options {
        decoder: DecoderOptions {
            blcksz: b,
            ..DecoderOptions::default()
        },
        candidates,
        threads: a.input.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        ),
        exhaustive: a.exhaustive,
        sample_rate: a.sample_rate,
        ..Options::default()
    };
    let set = SegmentSet::from_paths(&a.input.paths)?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        if let Ok(s) = ProgressStyle::with_template(
            "{spinner} [{elapsed:>3}] {msg} {wide_bar} {bytes}/{total_bytes} ({eta})",
        ) {
            bar.set_style(s);
        }
        bar
    });
    let mut on_progress = |p: Progress| {
        let Some(bar) = &bar else { return };
        match p {
            Progress::Scanning => bar.set_message("reading WAL"),
            Progress::Compressing { done, total } => {
                bar.set_message("compressing images");
                bar.set_length(total);
                bar.set_position(done);
            }
            _ => {}
        }
    };
    let result = advise::advise(&set, &opts, &mut on_progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let advice = match result {
        Ok(a) => a,
        Err(e @ (AdviseError::Corrupt(_) | AdviseError::Image { .. })) => {
            crate::errors::print(format_args!("corrupt WAL: {e}"));
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&to_json(&advice))?);
    } else {
        print_table(&advice);
    }
    if let Some(path) = &a.html {
        let meta = advise::html::Meta {
            inputs: a
                .input
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            generator: format!("pgcompress {}", env!("CARGO_PKG_VERSION")),
        };
        advise::html::write_file(path, &advise::html::render(&advice, &meta))
            .map_err(|e| anyhow::anyhow!("--html {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn off_wal(a: &Advice) -> Option<u64> {
    a.candidates
        .iter()
        .find(|c| c.spec.method == codec::Method::None)
        .map(|c| c.predicted_wal_bytes)
}

fn mb_per_s(ns_per_mb: f64) -> String {
    if ns_per_mb <= 0.0 {
        "-".into()
    } else {
        format!("{:.0}", 1e9 / ns_per_mb)
    }
}

pub(crate) fn print_table(a: &Advice) {
    let stored: Vec<String> = wal::ImageMethod::ALL
        .iter()
        .filter(|m| a.images_by_method[m.index()] > 0)
        .map(|m| format!("{} {}", a.images_by_method[m.index()], m.name()))
        .collect();
    outln!(
        "PostgreSQL {} WAL, {} segment(s), {} to {}: {} records, {} full-page images ({}) of {} page data",
        a.pg_version,
        a.segments,
        a.start_lsn,
        a.end_lsn,
        a.records,
        a.images,
        stored.join(", "),
        bytes(a.image_page_bytes)
    );
    outln!(
        "Actual: FPI {} bytes, combined {} bytes, WAL {} bytes ({})",
        a.actual_fpi_bytes,
        a.actual_combined_bytes,
        a.actual_wal_bytes,
        bytes(a.actual_wal_bytes)
    );
    outln!(
        "({}; {} of such space left out here)",
        advise::WAL_BYTES_MEANING,
        bytes(a.switch_tail_bytes)
    );
    outln!();
    let off = off_wal(a);
    let places = advise::rank::ranking(a);
    let (ranked, unranked): (Vec<&advise::rank::Place>, Vec<_>) =
        places.iter().partition(|p| p.rank.is_some());
    outln!(
        "{:<5} {:<12} {:<5} {:>14} {:>14} {:>9} {:>8} {:>9} {:>9} {:>8}  sampled",
        "rank",
        "spec",
        "stock",
        "FPI bytes",
        "WAL bytes",
        "vs actual",
        "vs off",
        "comp MB/s",
        "dec MB/s",
        "ctx KiB",
    );
    for p in ranked {
        outln!(
            "{:<5} {}  {}",
            p.rank_text(),
            row(a, off, p.candidate),
            advise::fmt::interval(p.candidate)
        );
    }
    if !unranked.is_empty() {
        outln!(
            "Not ranked: sampled too thinly to place among the others (estimates, by WAL bytes; --exhaustive measures every image):"
        );
        for p in unranked {
            outln!(
                "{}  {}",
                row(a, off, p.candidate),
                advise::rank::unranked_note(p.candidate, a.images)
            );
        }
    }
    outln!(
        "(saving = fewer WAL bytes; MB/s per core of page data; liblz4 {}, libzstd {}; {} threads, {:.1} s)",
        a.lz4_version,
        a.zstd_version,
        a.threads,
        a.elapsed.as_secs_f64()
    );
    if let Some(r) = advise::recommend(a) {
        outln!("{}", r.sentence(a));
    }
}

/// The figures of one candidate, from spec to context size.
fn row(a: &Advice, off: Option<u64>, c: &CandidateAdvice) -> String {
    format!(
        "{:<12} {:<5} {:>14} {:>14} {:>8.1}% {:>7} {:>9} {:>9} {:>8}",
        c.spec.to_string(),
        if c.stock { "yes" } else { "no" },
        c.predicted_fpi_bytes,
        c.predicted_wal_bytes,
        advise::fmt::saving(a.actual_wal_bytes, c.predicted_wal_bytes as f64),
        off.map_or("-".into(), |o| format!(
            "{:.1}%",
            advise::fmt::saving(o, c.predicted_wal_bytes as f64)
        )),
        mb_per_s(c.compress_ns_per_mb),
        mb_per_s(c.decompress_ns_per_mb),
        c.context_bytes
            .map_or("?".into(), |b| format!("{:.0}", b as f64 / 1024.0)),
    )
}

pub(crate) fn to_json(a: &Advice) -> serde_json::Value {
    let cands: Vec<_> = advise::rank::ranking(a)
        .into_iter()
        .map(|p| {
            let c = p.candidate;
            json!({
                "spec": c.spec.to_string(),
                "stock": c.stock,
                "predicted_fpi_bytes": c.predicted_fpi_bytes,
                "predicted_combined_bytes": c.predicted_combined_bytes,
                "predicted_wal_bytes": c.predicted_wal_bytes,
                "images_compressed": c.images_compressed,
                "images_measured": c.images_measured,
                "compress_ns_per_mb": c.compress_ns_per_mb,
                "decompress_ns_per_mb": c.decompress_ns_per_mb,
                "context_bytes": c.context_bytes,
                "sampled": c.sampled,
                "sample_rate": c.sample_rate,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "interval_informative": advise::rank::informative(c),
                "rank": p.rank.map(|(best, worst)| json!({"best": best, "worst": worst})),
            })
        })
        .collect();
    let rec = advise::recommend(a).map(|r| {
        json!({
            "wal_compression": r.setting,
            "spec": a.candidates[r.stock].spec.to_string(),
            "level": r.level.map(|i| a.candidates[i].spec.to_string()),
            "text": r.sentence(a),
        })
    });
    json!({
        "pg_version": a.pg_version,
        "segments": a.segments,
        "start_lsn": a.start_lsn.to_string(),
        "end_lsn": a.end_lsn.to_string(),
        "end": a.end,
        "records": a.records,
        "images": a.images,
        "image_page_bytes": a.image_page_bytes,
        "actual_fpi_bytes": a.actual_fpi_bytes,
        "actual_combined_bytes": a.actual_combined_bytes,
        "actual_wal_bytes": a.actual_wal_bytes,
        "switch_tail_bytes": a.switch_tail_bytes,
        "wal_bytes_counts": advise::WAL_BYTES_MEANING,
        "candidates": cands,
        "recommendation": rec,
        "lz4_version": a.lz4_version,
        "zstd_version": a.zstd_version,
        "threads": a.threads,
        "elapsed_ms": a.elapsed.as_millis() as u64,
    })
}
