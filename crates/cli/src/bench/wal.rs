//! `pgcompress bench wal`: the Greenplum `wal_compression` study's workloads, once per setting, measured
//! by the server and predicted by the advisor from the `off` run alone.
//!
//! Every run of a workload starts from byte-identical pages (`CREATE DATABASE ... STRATEGY FILE_COPY` from a
//! template loaded once), then a checkpoint and a segment switch, so each run writes a full-page image the
//! first time it touches a page and its WAL sits alone in its own archived segments, as in `pgcompress demo`.

use crate::runs::{guc_value, isolated_run, parse_tps, start_cluster, Server};
use anyhow::{bail, Context};
use clap::Args;
use codec::{Method, Spec};
use pgtest::greenplum::{self, Run, Setup, Workload};
use pgtest::{Cluster, PgInstall};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use wal::source::SegmentSet;
use wal::{DecoderOptions, ImageMethod};

/// Arguments of `pgcompress bench wal`.
#[derive(Args, Debug)]
pub struct BenchWalArgs {
    /// Multiplies every workload's rows (and pgbench's scale and transactions).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub scale: u32,
    /// Workloads to run: names separated by commas (names contain commas too; they are matched whole).
    #[arg(long)]
    pub workloads: Option<String>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Template database each workload is loaded into once.
const TEMPLATE_DB: &str = "benchwal_template";
/// Fresh copy of the template that one run works in.
const RUN_DB: &str = "benchwal_run";
/// The settings, in the order they run and print.
const SETTINGS: [ImageMethod; 4] = ImageMethod::ALL;
/// Linux reports /proc CPU times in USER_HZ ticks, which the kernel fixes at 100 for user space.
const TICKS_PER_SEC: f64 = 100.0;

/// What one run wrote and how long it took.
struct Measured {
    setting: &'static str,
    wal_bytes: u64,
    fpi_bytes: u64,
    fpi_count: u64,
    duration_s: f64,
    rate: f64,
    server_cpu_s: Option<f64>,
    paths: Vec<PathBuf>,
}

/// Runs the benchmark and prints tables or JSON.
pub fn run(a: BenchWalArgs) -> anyhow::Result<ExitCode> {
    let workloads = select(&a)?;
    let install = PgInstall::find().context("bench wal runs a throwaway PostgreSQL 15+ server")?;
    if install.major() < 15 {
        bail!(
            "PostgreSQL {} found; bench wal needs 15 or later (wal_compression = lz4 and zstd)",
            install.major()
        );
    }
    eprintln!(
        "bench wal: starting PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    );
    let (cluster, server) = start_cluster(install)?;
    let version = server.version.clone();
    let mut out = Vec::new();
    for w in &workloads {
        out.push(
            one_workload(&cluster, &server, w).with_context(|| format!("workload {:?}", w.name))?,
        );
    }
    cluster.stop().context("stopping the throwaway cluster")?;
    let doc = json!({ "pg_version": version, "scale": a.scale, "workloads": out });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", table(&doc));
    }
    Ok(ExitCode::SUCCESS)
}

/// The workloads asked for, by name, or all.
///
/// The study's names contain ", " themselves, so the list is split at commas and the pieces joined again
/// until they spell a name.
fn select(a: &BenchWalArgs) -> anyhow::Result<Vec<Workload>> {
    let Some(list) = &a.workloads else {
        return Ok(greenplum::all(a.scale));
    };
    let mut out = Vec::new();
    let mut pending = String::new();
    for piece in list.split(',') {
        if !pending.is_empty() {
            pending.push_str(", ");
        }
        pending.push_str(piece.trim());
        if let Some(w) = greenplum::workload(&pending, a.scale) {
            out.push(w);
            pending.clear();
        }
    }
    if !pending.is_empty() || out.is_empty() {
        bail!(
            "no workload named {pending:?}; choose from: {}",
            greenplum::NAMES.map(|n| format!("{n:?}")).join(", ")
        );
    }
    Ok(out)
}

/// Loads the template, runs every setting, then asks the advisor about the `off` run.
fn one_workload(cluster: &Cluster, server: &Server, w: &Workload) -> anyhow::Result<Value> {
    eprintln!("bench wal: {}: loading the template database", w.name);
    cluster.psql(&format!("DROP DATABASE IF EXISTS {RUN_DB}"))?;
    cluster.psql(&format!("DROP DATABASE IF EXISTS {TEMPLATE_DB}"))?;
    cluster.psql(&format!("CREATE DATABASE {TEMPLATE_DB}"))?;
    match &w.setup {
        Setup::Sql(sql) => {
            cluster.psql(&format!("\\connect {TEMPLATE_DB}\n{sql}"))?;
        }
        Setup::PgbenchInit { scale } => {
            cluster.pgbench(&["-i", "-q", "-s", &scale.to_string(), TEMPLATE_DB])?;
        }
        _ => bail!("unknown setup"),
    }
    let mut runs = Vec::new();
    for m in SETTINGS {
        let r = one_run(cluster, server, w, m)?;
        eprintln!(
            "bench wal: {}: {:<4} {:>11} B WAL, {:>11} B FPI ({} images), {:.2} s",
            w.name, r.setting, r.wal_bytes, r.fpi_bytes, r.fpi_count, r.duration_s
        );
        runs.push(r);
    }
    eprintln!("bench wal: {}: advising on the off run's WAL", w.name);
    let set = SegmentSet::from_paths(&runs[0].paths)?;
    let opts = advise::Options {
        decoder: DecoderOptions {
            blcksz: server.blcksz,
            ..DecoderOptions::default()
        },
        candidates: [Method::None, Method::Pglz, Method::Lz4, Method::Zstd]
            .into_iter()
            .map(Spec::new)
            .collect(),
        exhaustive: true,
        ..advise::Options::default()
    };
    let advice = advise::advise(&set, &opts, &mut |_| {})?;
    let mut predictions = Vec::new();
    for c in &advice.candidates {
        let Some(setting) = advise::wal_compression_setting(&c.spec) else {
            continue;
        };
        let Some(r) = runs.iter().find(|r| r.setting == setting) else {
            continue;
        };
        let err = if r.fpi_bytes == 0 {
            0.0
        } else {
            (c.predicted_fpi_bytes as f64 - r.fpi_bytes as f64) / r.fpi_bytes as f64 * 100.0
        };
        predictions.push(json!({
            "method": setting,
            "predicted_fpi_bytes": c.predicted_fpi_bytes,
            "measured_fpi_bytes": r.fpi_bytes,
            "error_pct": err,
            "predicted_wal_bytes": c.predicted_wal_bytes,
            "measured_wal_bytes": r.wal_bytes,
        }));
    }
    let unit = match w.run {
        Run::Pgbench { .. } => "transactions/s",
        _ => "rows/s",
    };
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "setting": r.setting,
                "wal_bytes": r.wal_bytes,
                "fpi_bytes": r.fpi_bytes,
                "fpi_count": r.fpi_count,
                "duration_s": r.duration_s,
                "tps": r.rate,
                "server_cpu_s": r.server_cpu_s,
            })
        })
        .collect();
    Ok(json!({
        "name": w.name,
        "rate_unit": unit,
        "images_advised": advice.images,
        "runs": runs,
        "predictions": predictions,
    }))
}

/// One setting of one workload, alone in its segments, with the server's CPU.
fn one_run(
    cluster: &Cluster,
    server: &Server,
    w: &Workload,
    m: ImageMethod,
) -> anyhow::Result<Measured> {
    let setting = guc_value(m);
    let postmaster = postmaster_pid(&cluster.data_dir());
    let step = |s: String| eprintln!("bench wal: {}: {s}", w.name);
    let mut cpu0 = None;
    let run = isolated_run(cluster, server, m, (TEMPLATE_DB, RUN_DB), &step, || {
        cpu0 = postmaster.and_then(server_cpu_ticks);
        let (rate_work, out) = match &w.run {
            Run::Sql { sql, rows } => {
                cluster.psql(&format!("\\connect {RUN_DB}\n{sql}"))?;
                (*rows as f64, String::new())
            }
            Run::Pgbench { transactions } => {
                let t = transactions.to_string();
                let seed = format!("--random-seed={}", pgtest::workload::PGBENCH_SEED);
                let out = cluster.pgbench(&["-n", "-c", "1", "-t", &t, &seed, RUN_DB])?;
                (f64::from(*transactions), out)
            }
            _ => bail!("unknown run"),
        };
        // The backend exits with its client; once the postmaster reaps it, its CPU shows in cutime.
        std::thread::sleep(Duration::from_millis(50));
        Ok((rate_work, out, postmaster.and_then(server_cpu_ticks)))
    })?;
    let (rate_work, out, cpu1) = run.output;
    let server_cpu_s = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / TICKS_PER_SEC),
        _ => None,
    };
    let t = run.stats.total();
    let rate = parse_tps(&out).unwrap_or(rate_work / run.duration_s.max(f64::EPSILON));
    Ok(Measured {
        setting,
        wal_bytes: t.record_bytes + t.fpi_bytes,
        fpi_bytes: t.fpi_bytes,
        fpi_count: t.fpi_count,
        duration_s: run.duration_s,
        rate,
        server_cpu_s,
        paths: run.segments,
    })
}

/// The postmaster's pid: the first line of `postmaster.pid`.
fn postmaster_pid(data_dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// `(ppid, utime + stime, cutime + cstime)` of a process, from `/proc/PID/stat` (proc(5)).
fn proc_stat(pid: &str) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces; fields resume after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    let ppid = u32::try_from(n(1)?).ok()?;
    Some((ppid, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// CPU ticks the server has used: the postmaster's own and its reaped children's, plus every live child's.
/// Backends exit with their sessions, so a run's whole CPU (compression included) lands in here.
fn server_cpu_ticks(postmaster: u32) -> Option<u64> {
    let (_, own, reaped) = proc_stat(&postmaster.to_string())?;
    let mut total = own + reaped;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some((ppid, cpu, _)) = proc_stat(pid) {
            if ppid == postmaster {
                total += cpu;
            }
        }
    }
    Some(total)
}

fn pct(x: f64, base: f64) -> String {
    if base == 0.0 {
        "-".into()
    } else {
        format!("{:+.1}%", (x - base) / base * 100.0)
    }
}

/// The text report: per workload, one row per setting with deltas against off, then the advisor's check.
fn table(doc: &Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "PostgreSQL {}, scale {}; deltas are against wal_compression = off; server CPU is all server processes",
        doc["pg_version"].as_str().unwrap_or("?"),
        doc["scale"]
    );
    let empty = Vec::new();
    for w in doc["workloads"].as_array().unwrap_or(&empty) {
        let runs = w["runs"].as_array().unwrap_or(&empty);
        let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or(0.0);
        let u = |r: &Value, k: &str| r[k].as_u64().unwrap_or(0);
        let Some(off) = runs.first() else { continue };
        let _ = writeln!(s, "\n{}", w["name"].as_str().unwrap_or(""));
        let _ = writeln!(
            s,
            "  {:<6} {:>12} {:>8} {:>12} {:>8} {:>8} {:>8} {:>14} {:>8} {:>7} {:>8}",
            "set",
            "WAL bytes",
            "Δ",
            "FPI bytes",
            "Δ",
            "time s",
            "Δ",
            w["rate_unit"].as_str().unwrap_or(""),
            "Δ",
            "CPU s",
            "Δ"
        );
        for r in runs {
            let _ = writeln!(
                s,
                "  {:<6} {:>12} {:>8} {:>12} {:>8} {:>8.2} {:>8} {:>14.0} {:>8} {:>7.2} {:>8}",
                r["setting"].as_str().unwrap_or(""),
                u(r, "wal_bytes"),
                pct(f(r, "wal_bytes"), f(off, "wal_bytes")),
                u(r, "fpi_bytes"),
                pct(f(r, "fpi_bytes"), f(off, "fpi_bytes")),
                f(r, "duration_s"),
                pct(f(r, "duration_s"), f(off, "duration_s")),
                f(r, "tps"),
                pct(f(r, "tps"), f(off, "tps")),
                f(r, "server_cpu_s"),
                pct(f(r, "server_cpu_s"), f(off, "server_cpu_s")),
            );
        }
        let _ = writeln!(
            s,
            "  advisor on the off run's WAL ({} images):",
            w["images_advised"]
        );
        let _ = writeln!(
            s,
            "  {:<6} {:>14} {:>14} {:>8}",
            "method", "predicted FPI", "measured FPI", "error"
        );
        for p in w["predictions"].as_array().unwrap_or(&empty) {
            let _ = writeln!(
                s,
                "  {:<6} {:>14} {:>14} {:>+7.2}%",
                p["method"].as_str().unwrap_or(""),
                u(p, "predicted_fpi_bytes"),
                u(p, "measured_fpi_bytes"),
                p["error_pct"].as_f64().unwrap_or(0.0)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_reads_this_process() {
        let (ppid, _, _) = proc_stat(&std::process::id().to_string()).unwrap();
        assert!(ppid > 0);
    }
}
