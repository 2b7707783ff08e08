//! `pgcompress logical recv`: arguments to [`logical::recv::RecvOptions`], the SIGINT/SIGTERM
//! flag, the progress line, the metrics endpoint and the `--json` summary; the consumer loop
//! itself is [`logical::recv::Recv`].

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Result;
use logical::conn::{ConnConfig, Env};
use logical::recv::{render_metrics, Output, Progress, Recv, RecvOptions, Summary};
use serde::Serialize;

use crate::args::logical::{LogicalCommand, RecvArgs};
use crate::output::bytes;

pub fn run(cmd: LogicalCommand) -> Result<ExitCode> {
    match cmd {
        LogicalCommand::Recv(a) => recv(a),
    }
}

/// Seconds from the command line as a duration: negative and NaN are zero, too large is
/// forever.
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// How often the progress line and the metrics are refreshed.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

fn options(args: &RecvArgs, progress: Option<Duration>) -> RecvOptions {
    let output = if args.output == "-" {
        Output::Stdout
    } else {
        Output::File(PathBuf::from(&args.output))
    };
    let mut o = RecvOptions::new(args.slot.clone(), args.publication.clone(), output);
    o.create_slot = args.create_slot;
    o.if_not_exists = args.if_not_exists;
    o.start = args.start;
    o.start_over = args.start_over;
    o.spill_dir = args.spill_dir.clone();
    o.spill_compression = args.spill_compression;
    o.work_mem = args.work_mem;
    o.fsync_interval = seconds(args.fsync_interval);
    o.status_interval = seconds(args.status_interval);
    o.begin_commit = args.begin_commit;
    o.stop_at_lsn = args.stop_at_lsn;
    o.idle_exit = args.idle_exit.map(seconds);
    o.progress_interval = progress;
    o.proto_version = args.proto_version;
    o
}

fn recv(args: RecvArgs) -> Result<ExitCode> {
    let stop = Arc::clone(service::stop::install()?.flag());
    if args.start_over && args.output == "-" {
        anyhow::bail!("--start-over empties an output file: it needs -o FILE");
    }
    let config = ConnConfig::parse(&args.dbname, &Env::from_process())?;
    // Bound before connecting: an address in use fails before the slot is touched.
    let scrape = args
        .metrics
        .as_deref()
        .map(service::endpoint::bind)
        .transpose()?;
    let terminal = std::io::stderr().is_terminal();
    // Without a terminal (a service's log) and without --json: plain lines, one per status
    // interval (at least a second apart).
    let plain = !terminal && !args.json;
    let line_every = seconds(args.status_interval).max(PROGRESS_EVERY);
    let progress = if terminal || scrape.is_some() {
        Some(PROGRESS_EVERY)
    } else {
        plain.then_some(line_every)
    };
    let opts = options(&args, progress);
    let mut r = match Recv::start_until(&config, opts, Some(Arc::clone(&stop))) {
        Ok(r) => r,
        // A stop asked for before the stream began: as a stop during it, status 0; the
        // output was not opened yet, and a slot creation under way was cancelled.
        Err(e) if e.stopped() => {
            eprintln!(
                "pgcompress: logical recv: {:#}; nothing written",
                anyhow::Error::from(e)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    // What the last progress report said, for the metrics endpoint.
    let latest = Arc::new(Mutex::new(r.progress()));
    if let Some(listener) = scrape {
        let shown = Arc::clone(&latest);
        service::endpoint::serve(listener, move || {
            let p = *shown.lock().unwrap_or_else(PoisonError::into_inner);
            render_metrics(&p)
        });
    }
    if r.recovered_tail() > 0 {
        eprintln!(
            "pgcompress: {}: cut a torn tail of {} bytes left by an interrupted run",
            args.output,
            r.recovered_tail()
        );
    }
    if terminal || plain {
        say(&started(&args, &r));
    }
    let mut last_line = std::time::Instant::now();
    let outcome = r.run(&stop, &mut |p: &Progress| {
        *latest.lock().unwrap_or_else(PoisonError::into_inner) = *p;
        if terminal {
            show_progress(p);
        } else if plain && last_line.elapsed() >= line_every {
            say(&progress_line(p));
            last_line = std::time::Instant::now();
        }
    });
    if terminal {
        eprintln!();
    }
    let summary = r.finish(outcome?)?;
    if terminal || plain {
        say(&format!(
            "stopped ({}): {}; confirmed {}",
            summary.reason.as_str(),
            written(summary.transactions, summary.changes),
            summary.flushed_lsn
        ));
    }
    if args.json {
        let line = summary_json(&summary);
        if args.output == "-" {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of what `logical recv` does, on stderr; a stderr gone (a log collector that
/// died) does not stop the consumer.
fn say(what: &str) {
    let _ = writeln!(std::io::stderr(), "pgcompress logical recv: {what}");
}

/// What the run reads, from where, and where it writes.
fn started(args: &RecvArgs, r: &Recv) -> String {
    let to = if args.output == "-" {
        "standard output".to_owned()
    } else {
        args.output.clone()
    };
    format!(
        "started on slot \"{}\" (publications {}) from {}, writing to {to}, spill directory {}",
        args.slot,
        args.publication.join(", "),
        r.start_lsn(),
        r.spill_dir().display()
    )
}

fn written(transactions: u64, changes: u64) -> String {
    format!("{transactions} transactions, {changes} changes written")
}

/// One line of where the run stands, for a log.
fn progress_line(p: &Progress) -> String {
    format!(
        "{}; confirmed {}, lag {}; memory {}, spilled {} raw, {} on disk",
        written(p.transactions, p.changes),
        p.confirmed,
        bytes(p.received.0.saturating_sub(p.confirmed.0)),
        bytes(p.memory_bytes),
        bytes(p.spill_raw_bytes),
        bytes(p.spill_disk_bytes),
    )
}

fn show_progress(p: &Progress) {
    let lag = p.received.0.saturating_sub(p.confirmed.0);
    eprint!(
        "\rLSN {}  lag {}  txns {}  spilled raw {} on disk {}   ",
        p.confirmed,
        bytes(lag),
        p.transactions,
        bytes(p.spill_raw_bytes),
        bytes(p.spill_disk_bytes),
    );
    let _ = std::io::stderr().flush();
}

/// The `--json` summary line: the run's counters, LSNs as PostgreSQL prints them. Keys in
/// alphabetical order, as the line has always had them.
#[derive(Serialize)]
struct SummaryLine<'a> {
    changes: u64,
    flushed_lsn: String,
    last_commit_lsn: String,
    output_bytes: u64,
    reason: &'a str,
    received_bytes: u64,
    seconds: f64,
    skipped_transactions: u64,
    spill_disk_bytes: u64,
    spill_raw_bytes: u64,
    spilled_transactions: u64,
    transactions: u64,
}

fn summary_json(s: &Summary) -> String {
    let line = SummaryLine {
        changes: s.changes,
        flushed_lsn: s.flushed_lsn.to_string(),
        last_commit_lsn: s.last_commit_lsn.to_string(),
        output_bytes: s.output_bytes,
        reason: s.reason.as_str(),
        received_bytes: s.received_bytes,
        seconds: s.seconds,
        skipped_transactions: s.skipped_transactions,
        spill_disk_bytes: s.spill_disk_bytes,
        spill_raw_bytes: s.spill_raw_bytes,
        spilled_transactions: s.spilled_transactions,
        transactions: s.transactions,
    };
    // Numbers and strings only: serde_json has no error to return here.
    serde_json::to_string(&line).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_from_the_command_line() {
        assert_eq!(seconds(-1.0), Duration::ZERO);
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(1.5), Duration::from_millis(1500));
        assert_eq!(seconds(f64::INFINITY), Duration::MAX);
    }
}
