//! `pgcompress-bench wal`: the Greenplum `wal_compression` study's workloads, once per setting, measured
//! by the server and predicted by the advisor from the `off` run alone.
//!
//! Every run of a workload starts from byte-identical pages (`CREATE DATABASE ... STRATEGY FILE_COPY` from a
//! template loaded once), then a checkpoint and a segment switch, so each run writes a full-page image the
//! first time it touches a page and its WAL sits alone in its own archived segments, as in `pgcompress demo`.

use crate::error::{Context, Error, Result};
use crate::runs::{guc_value, isolated_run, parse_tps, start_cluster, Server, DEFAULT_SEGMENT_MB};
use crate::sys::{postmaster_pid, server_cpu_s};
use codec::{Method, Spec};
use pgtest::greenplum::{self, Run, Setup, Workload};
use pgtest::{Cluster, PgInstall};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;
use wal::source::SegmentSet;
use wal::{DecoderOptions, ImageMethod};

/// Which workloads, how large.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Multiplies every workload's rows (and pgbench's scale and transactions).
    pub scale: u32,
    /// Workloads to run: names separated by commas (names contain commas too; they are matched whole);
    /// `None` runs all.
    pub workloads: Option<String>,
}

/// The whole benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `SHOW server_version`.
    pub pg_version: String,
    /// [`Options::scale`].
    pub scale: u32,
    /// One entry per workload, in the order they ran.
    pub workloads: Vec<WorkloadReport>,
}

/// One workload under every setting, and the advisor's check.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// The study's name of the workload.
    pub name: &'static str,
    /// What the rate counts: transactions/s or rows/s.
    pub rate_unit: &'static str,
    /// Images the advisor read in the off run.
    pub images_advised: u64,
    /// One run per setting, off first.
    pub runs: Vec<Measured>,
    /// The advisor's prediction from the off run, per stock setting.
    pub predictions: Vec<Prediction>,
}

/// What the advisor predicted for one setting, beside what the server wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    /// The `wal_compression` value.
    pub method: &'static str,
    /// Predicted image bytes.
    pub predicted_fpi_bytes: u64,
    /// Image bytes the server wrote.
    pub measured_fpi_bytes: u64,
    /// (predicted - measured) / measured image bytes, in percent.
    pub error_pct: f64,
    /// Predicted WAL bytes.
    pub predicted_wal_bytes: u64,
    /// Record plus image bytes the server wrote.
    pub measured_wal_bytes: u64,
}

/// Template database each workload is loaded into once.
const TEMPLATE_DB: &str = "benchwal_template";
/// Fresh copy of the template that one run works in.
const RUN_DB: &str = "benchwal_run";
/// The settings, in the order they run and print.
const SETTINGS: [ImageMethod; 4] = ImageMethod::ALL;

/// What one run wrote and how long it took.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// The `wal_compression` value.
    pub setting: &'static str,
    /// Record plus image bytes.
    pub wal_bytes: u64,
    /// Image bytes as stored.
    pub fpi_bytes: u64,
    /// Full-page images.
    pub fpi_count: u64,
    /// Wall time of the work.
    pub duration_s: f64,
    /// Transactions or rows per second.
    #[serde(rename = "tps")]
    pub rate: f64,
    /// CPU seconds of every server process during the work, when /proc tells.
    pub server_cpu_s: Option<f64>,
    /// The run's segments (read while the cluster exists).
    #[serde(skip)]
    pub paths: Vec<PathBuf>,
}

/// Runs the benchmark on a throwaway cluster.
pub fn run(o: &Options) -> Result<Report> {
    let workloads = select(o)?;
    let install = PgInstall::find().context("bench wal runs a throwaway PostgreSQL 15+ server")?;
    if install.major() < 15 {
        return Err(Error::ServerTooOld {
            command: "bench wal",
            found: install.major(),
            need: 15,
            why: "wal_compression = lz4 and zstd",
            bindir: install.bindir().to_path_buf(),
        });
    }
    eprintln!(
        "bench wal: starting PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    );
    let (cluster, server) = start_cluster(install, DEFAULT_SEGMENT_MB)?;
    let mut out = Vec::new();
    for w in &workloads {
        out.push(
            one_workload(&cluster, &server, w).with_context(|| format!("workload {:?}", w.name))?,
        );
    }
    cluster.stop().context("stopping the throwaway cluster")?;
    Ok(Report {
        pg_version: server.version,
        scale: o.scale,
        workloads: out,
    })
}

/// The workloads asked for, by name, or all.
///
/// The study's names contain ", " themselves, so the list is split at commas and the pieces joined again
/// until they spell a name.
fn select(a: &Options) -> Result<Vec<Workload>> {
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
        return Err(Error::UnknownWorkload {
            name: pending,
            choices: greenplum::NAMES.map(|n| format!("{n:?}")).join(", "),
        });
    }
    Ok(out)
}

/// Loads the template, runs every setting, then asks the advisor about the `off` run.
fn one_workload(cluster: &Cluster, server: &Server, w: &Workload) -> Result<WorkloadReport> {
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
        _ => return Err(Error::UnsupportedWorkload(w.name)),
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
        predictions.push(Prediction {
            method: setting,
            predicted_fpi_bytes: c.predicted_fpi_bytes,
            measured_fpi_bytes: r.fpi_bytes,
            error_pct: err,
            predicted_wal_bytes: c.predicted_wal_bytes,
            measured_wal_bytes: r.wal_bytes,
        });
    }
    let unit = match w.run {
        Run::Pgbench { .. } => "transactions/s",
        _ => "rows/s",
    };
    Ok(WorkloadReport {
        name: w.name,
        rate_unit: unit,
        images_advised: advice.images,
        runs,
        predictions,
    })
}

/// One setting of one workload, alone in its segments, with the server's CPU.
fn one_run(cluster: &Cluster, server: &Server, w: &Workload, m: ImageMethod) -> Result<Measured> {
    let setting = guc_value(m);
    let postmaster = postmaster_pid(&cluster.data_dir());
    let step = |s: String| eprintln!("bench wal: {}: {s}", w.name);
    let mut cpu0 = None;
    let run = isolated_run(cluster, server, m, (TEMPLATE_DB, RUN_DB), &step, || {
        cpu0 = postmaster.and_then(server_cpu_s);
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
            _ => return Err(Error::UnsupportedWorkload(w.name)),
        };
        // The backend exits with its client; once the postmaster reaps it, its CPU shows in cutime.
        std::thread::sleep(Duration::from_millis(50));
        Ok((rate_work, out, postmaster.and_then(server_cpu_s)))
    })?;
    let (rate_work, out, cpu1) = run.output;
    let server_cpu_s = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some((b - a).max(0.0)),
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

fn pct(x: f64, base: f64) -> String {
    if base == 0.0 {
        "-".into()
    } else {
        format!("{:+.1}%", (x - base) / base * 100.0)
    }
}

/// The text report: per workload, one row per setting with deltas against off, then the advisor's check.
impl Report {
    /// The text tables.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "PostgreSQL {}, scale {}; deltas are against wal_compression = off; server CPU is all server processes",
            self.pg_version, self.scale
        );
        for w in &self.workloads {
            let Some(off) = w.runs.first() else { continue };
            let _ = writeln!(s, "\n{}", w.name);
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
                w.rate_unit,
                "Δ",
                "CPU s",
                "Δ"
            );
            let cpu = |r: &Measured| r.server_cpu_s.unwrap_or(0.0);
            for r in &w.runs {
                let _ = writeln!(
                    s,
                    "  {:<6} {:>12} {:>8} {:>12} {:>8} {:>8.2} {:>8} {:>14.0} {:>8} {:>7.2} {:>8}",
                    r.setting,
                    r.wal_bytes,
                    pct(r.wal_bytes as f64, off.wal_bytes as f64),
                    r.fpi_bytes,
                    pct(r.fpi_bytes as f64, off.fpi_bytes as f64),
                    r.duration_s,
                    pct(r.duration_s, off.duration_s),
                    r.rate,
                    pct(r.rate, off.rate),
                    cpu(r),
                    pct(cpu(r), cpu(off)),
                );
            }
            let _ = writeln!(
                s,
                "  advisor on the off run's WAL ({} images):",
                w.images_advised
            );
            let _ = writeln!(
                s,
                "  {:<6} {:>14} {:>14} {:>8}",
                "method", "predicted FPI", "measured FPI", "error"
            );
            for p in &w.predictions {
                let _ = writeln!(
                    s,
                    "  {:<6} {:>14} {:>14} {:>+7.2}%",
                    p.method, p.predicted_fpi_bytes, p.measured_fpi_bytes, p.error_pct
                );
            }
        }
        s
    }
}
