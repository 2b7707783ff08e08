//! `pgcompress-bench ...`: our tools against their peers, measured in the same run. The work is the
//! `bench` crate's; this module turns arguments into its options and prints its reports.

use crate::args::{
    BenchArchiveArgs, BenchCommand, BenchReadArgs, BenchSpillArgs, BenchTunnelArgs, BenchWalArgs,
};
use crate::pgcompress as me;
use anyhow::Context;
use demo::long_run::{self, EXIT_INTERRUPTED};
use serde::Serialize;
use std::process::ExitCode;

/// Runs one `bench` command.
pub fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Read(a) => read(a),
        BenchCommand::Wal(a) => wal(a),
        BenchCommand::Archive(a) => archive(a),
        BenchCommand::Spill(a) => spill(a),
        BenchCommand::Tunnel(a) => tunnel(a),
    }
}

/// Prints `report` as pretty JSON or as its text.
fn print<R: Serialize>(
    json: bool,
    report: &R,
    text: impl FnOnce(&R) -> String,
) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?);
    } else {
        out!("{}", text(report));
    }
    Ok(())
}

fn read(a: BenchReadArgs) -> anyhow::Result<ExitCode> {
    let report = bench::read::run(&bench::read::Options {
        paths: a.paths,
        wal_mb: a.wal_mb,
        runs: a.runs,
        pgcompress: me()?,
    })?;
    print(a.json, &report, bench::read::Report::text)?;
    Ok(ExitCode::SUCCESS)
}

fn wal(a: BenchWalArgs) -> anyhow::Result<ExitCode> {
    let report = bench::wal::run(&bench::wal::Options {
        scale: a.scale,
        workloads: a.workloads,
    })?;
    print(a.json, &report, bench::wal::Report::text)?;
    Ok(ExitCode::SUCCESS)
}

fn archive(a: BenchArchiveArgs) -> anyhow::Result<ExitCode> {
    if let Some(seconds) = a.sustained {
        let stores: Vec<bench::archive::Store> = a.stores.iter().map(|&s| s.into()).collect();
        let progress = long_run::start("pgcompress-bench archive --sustained");
        let result =
            bench::archive::run_sustained(&me()?, seconds, a.clients, &stores, a.rounds, &progress);
        progress.finish();
        if matches!(&result, Err(e) if e.is_cancelled()) || long_run::interrupted() {
            eprintln!(
                "pgcompress-bench: interrupted; the temporary clusters were stopped and deleted"
            );
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        let report = result?;
        print(a.json, &report, bench::archive::SustainedReport::text)?;
        if report
            .runs
            .iter()
            .any(|r| r.recovered_identical == Some(false))
        {
            eprintln!("bench archive: a recovery did not reach the primary's data");
            return Ok(ExitCode::from(1));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = bench::archive::run(&bench::archive::Options {
        segments: a.segments,
        segment_mb: a.segment_size,
        corpus: a.corpus.into(),
        methods: a.methods,
        keep_corpus: a.keep_corpus,
        rounds: a.rounds,
        pgcompress: me()?,
    })?;
    print(a.json, &report, bench::archive::Report::text)?;
    let bad = report.differing();
    if !bad.is_empty() {
        eprintln!(
            "bench archive: a restored segment differs from the original with: {}",
            bad.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn spill(a: BenchSpillArgs) -> anyhow::Result<ExitCode> {
    let progress = long_run::start("pgcompress-bench spill");
    let result = bench::spill::run(
        &bench::spill::Options {
            rows: a.rows,
            workloads: a.workloads,
            specs: a.specs,
            work_mem: a.work_mem,
        },
        &progress,
    );
    progress.finish();
    if matches!(&result, Err(e) if e.is_cancelled()) || long_run::interrupted() {
        eprintln!("pgcompress-bench: interrupted; the temporary cluster was stopped and deleted");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let report = result?;
    print(a.json, &report, bench::spill::Report::text)?;
    let bad = report.unmatched();
    if !bad.is_empty() {
        eprintln!(
            "bench spill: the replay did not see every inserted row with: {}",
            bad.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn tunnel(a: BenchTunnelArgs) -> anyhow::Result<ExitCode> {
    // Ctrl-C ends the run between steps; dropping the cluster, the relays and the namespaces cleans up.
    let progress = long_run::start("pgcompress-bench tunnel");
    // The command line as a shell would take it back, recorded in the report.
    let args: Vec<String> = std::env::args().collect();
    let command =
        shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "));
    let result = bench::tunnel::run::run(
        &bench::tunnel::run::Options {
            pgcompress: me()?,
            rates: a.rate,
            scale: a.scale,
            workloads: a.workloads,
            configs: a.configs,
            pgbench_seconds: a.pgbench_time,
            pgbench_scale: a.pgbench_scale,
            rounds: a.rounds,
            cache: a.cache,
            command,
        },
        &progress,
    );
    progress.finish();
    if matches!(&result, Err(e) if e.is_cancelled()) || long_run::interrupted() {
        eprintln!(
            "pgcompress-bench: interrupted; the cluster, the relays and the namespaces were removed"
        );
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let report = result?;
    if let Some(path) = &a.html {
        std::fs::write(path, report.html())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        report.text(&mut std::io::stdout().lock())?;
    }
    let bad = bench::tunnel::run::failures(&report);
    if !bad.is_empty() {
        eprintln!("bench tunnel: {} run(s) failed:", bad.len());
        for b in bad {
            eprintln!("  {b}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
