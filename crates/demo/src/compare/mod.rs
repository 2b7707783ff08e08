//! The server side of the demo: start a cluster, load the pgbench tables once, then for each setting copy
//! them, configure, checkpoint, run, isolate the run's WAL in its own segments, read and verify it.

mod report;
mod tunnel;

pub use report::{ArchiveComparison, Demo, LogicalSpill, RunResult, StoredBy, Workload};
pub use tunnel::TunnelSection;

use crate::error::{Context, Error, IoContext, Result};
use crate::runs::{guc_value, isolated_run, parse_tps, start_cluster, Server, DEFAULT_SEGMENT_MB};
use crate::{check_cancelled, Progress};
use pgcluster::{Cluster, PgInstall};
use std::path::{Path, PathBuf};
use wal::source::SegmentSet;
use wal::{DecoderOptions, ImageMethod};

/// The settings compared, in the order they run and are printed.
pub const SETTINGS: [ImageMethod; 4] = ImageMethod::ALL;

/// The workload of the demo.
#[derive(Clone, Debug)]
pub struct Options {
    /// pgbench scale factor of the workload.
    pub scale: u32,
    /// Transactions per client per run.
    pub transactions: u32,
    /// pgbench clients.
    pub clients: u32,
    /// The `pgcompress` executable that archives the off run.
    pub pgcompress: PathBuf,
}

/// Loaded once by `pgbench -i`, then copied file by file before every run.
const TEMPLATE_DB: &str = "demo_template";
/// The database each run works in: a fresh copy of [`TEMPLATE_DB`].
const BENCH_DB: &str = "demo_bench";
/// The oldest server with `wal_compression = lz4 | zstd` (and the oldest WAL the `wal` crate reads).
const MIN_MAJOR: u32 = 15;

/// The tunnel section's link method: the setting the tunnel's figures lead with.
const TUNNEL_METHOD: &str = "zstd:1";

/// Candidates the demo's advisor table compares.
const DEMO_CANDIDATES: &str = "none,pglz,lz4,zstd,zstd:-1,zstd:1,zstd:6,zstd:9,lz4:9,snappy";

/// Starts a throwaway cluster, runs the workload once per setting and returns the measurements.
///
/// The cluster uses the default 16 MB segments: the demo should show the WAL a DBA's server writes, and the
/// segment size changes nothing in the records and images measured (only the unused tail after each
/// `pg_switch_wal()`, which the demo leaves out). Autovacuum is off and checkpoints are only the demo's own,
/// so nothing but the workload writes between a run's checkpoint and its final segment switch.
pub fn compare(a: &Options, p: &dyn Progress) -> Result<Demo> {
    p.step("looking for PostgreSQL".into());
    let install =
        PgInstall::find().with_context(|| match std::env::var_os(pgcluster::BINDIR_ENV) {
            Some(dir) => format!(
                "{}={} is not a usable PostgreSQL bin directory; fix or unset it",
                pgcluster::BINDIR_ENV,
                dir.to_string_lossy()
            ),
            None => format!("the demo runs a throwaway PostgreSQL {MIN_MAJOR}+ server"),
        })?;
    if install.major() < MIN_MAJOR {
        return Err(Error::ServerTooOld {
            command: "the demo",
            found: install.major(),
            need: MIN_MAJOR,
            why: "wal_compression = lz4 and zstd",
            bindir: install.bindir().to_path_buf(),
        });
    }
    p.step(format!(
        "initdb and start PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    ));
    let (cluster, server) = start_cluster(install, DEFAULT_SEGMENT_MB)?;
    check_cancelled(p)?;

    p.step(format!("loading the pgbench tables, scale {}", a.scale));
    cluster.psql(&format!("CREATE DATABASE {TEMPLATE_DB}"))?;
    cluster
        .pgbench(&["-i", "-q", "-s", &a.scale.to_string(), TEMPLATE_DB])
        .context("loading the pgbench tables")?;

    // Some builds lack lz4 or zstd (the PyPI and npm packages of 16 and 18 offer pglz only):
    // the demo compares what this server can write and says what it left out.
    let offered = cluster
        .query_one(
            "SELECT array_to_string(enumvals, ',') FROM pg_settings WHERE name = 'wal_compression'",
        )
        .context("reading the wal_compression values this server offers")?;
    let offered: Vec<&str> = offered.split(',').collect();
    let mut runs = Vec::with_capacity(SETTINGS.len());
    for m in SETTINGS {
        check_cancelled(p)?;
        if !offered.contains(&guc_value(m)) {
            p.note(format!(
                "wal_compression = {:<4}  not built into this server, skipped",
                guc_value(m)
            ));
            continue;
        }
        let r = one_run(&cluster, &server, m, a, p)
            .with_context(|| format!("run with wal_compression = {}", guc_value(m)))?;
        p.note(format!(
            "wal_compression = {:<4}  {:>10} of WAL, {} full-page images, {:.0} tps",
            r.setting,
            advise::fmt::bytes(r.wal_bytes),
            r.fpi_count,
            r.tps
        ));
        runs.push(r);
    }
    // The advisor's answer from the off run alone, to set beside what the server did.
    p.step("advisor: predicting every method and level from the off run's WAL".into());
    let off = runs
        .first()
        .ok_or(Error::Internal("no run"))?
        .segments
        .clone();
    // The stock settings and the levels worth knowing about; `wal advise` without
    // --methods also tries the slow top zstd levels, too slow for a one-minute demo.
    let opts = advise::Options {
        decoder: DecoderOptions {
            blcksz: server.blcksz,
            ..DecoderOptions::default()
        },
        candidates: codec::parse_spec_list(DEMO_CANDIDATES)?,
        ..advise::Options::default()
    };
    let advice = advise::advise(&SegmentSet::from_paths(&off)?, &opts, &mut |_| {})
        .context("running the advisor on the off run's WAL")?;
    // What an archive would hold: the off run's segments pushed one by one, as archive_command does.
    p.step("archiving the off run's segments with pgcompress, gzip -6 and zstd -3".into());
    let archive = archive_off_run(&a.pgcompress, &off).context("archiving the off run's WAL")?;
    check_cancelled(p)?;
    p.step(format!(
        "tunnel: `COPY pgbench_accounts TO STDOUT` directly and through a {TUNNEL_METHOD} tunnel"
    ));
    let tunnel = tunnel::run(&cluster, TEMPLATE_DB, &a.pgcompress, TUNNEL_METHOD)
        .context("copying the pgbench accounts through the tunnel")?;
    p.step("stopping and deleting the cluster".into());
    cluster.stop().context("stopping the throwaway cluster")?;
    drop(cluster);
    check_cancelled(p)?;
    let logical_spill = logical_section(p).context("the logical decoding section")?;
    Ok(Demo {
        pg_version: server.version,
        seg_size: server.seg_size,
        workload: Workload {
            kind: "pgbench tpcb-like",
            scale: a.scale,
            clients: a.clients,
            transactions_per_client: a.transactions,
        },
        runs,
        advice: Some(advice),
        archive: Some(archive),
        tunnel: Some(tunnel),
        logical_spill: Some(logical_spill),
    })
}

/// Rows of the seed workload in the demo's logical section: enough for the server to spill and for the
/// ratios to settle, a few seconds in all.
pub const SPILL_ROWS: u64 = 100_000;

/// The logical section: the seed workload at [`SPILL_ROWS`] through `bench spill` on a cluster of its own
/// (`wal_level = logical` would change the WAL the runs above measure), the server's spill beside ours with
/// lz4 and zstd:1.
fn logical_section(p: &dyn Progress) -> Result<LogicalSpill> {
    let options = crate::spill::Options {
        rows: SPILL_ROWS,
        workloads: "seed".into(),
        specs: "lz4,zstd:1".into(),
        work_mem: 64 << 10,
    };
    let mut report = crate::spill::run(&options, p)?;
    let seed = report
        .workloads
        .pop()
        .ok_or(Error::Internal("bench spill measured no workload"))?;
    Ok(LogicalSpill {
        logical_decoding_work_mem: report.logical_decoding_work_mem,
        work_mem: report.work_mem,
        seed,
    })
}

/// Stored bytes of the off run's segments with `pgcompress archive push` (default method), `gzip -6` and
/// `zstd -3`, each file pushed by its own process; a program that is not installed is left out.
fn archive_off_run(me: &Path, segments: &[PathBuf]) -> Result<ArchiveComparison> {
    use crate::archive_tools::{stored_bytes, Tool, GZIP, ZSTD};
    let mut original = 0;
    for s in segments {
        original += std::fs::metadata(s)
            .io(|| format!("reading {}", s.display()))?
            .len();
    }
    let dir = tempfile::Builder::new()
        .prefix("pgcompress-demo-archive-")
        .tempdir()
        .io(|| "creating a temporary directory for the archives".into())?;
    let stored = stored_bytes(
        me,
        &[Tool::Pgcompress(None), GZIP, ZSTD],
        segments,
        dir.path(),
    )?;
    Ok(ArchiveComparison {
        run: "off",
        segments: segments.len(),
        original_bytes: original,
        tools: stored
            .into_iter()
            .map(|(t, b)| StoredBy {
                tool: t.label(),
                stored_bytes: b,
                ratio: original as f64 / b.max(1) as f64,
            })
            .collect(),
    })
}

/// One run: fresh data, the setting, a checkpoint, the workload alone in its segments, then its WAL read.
fn one_run(
    cluster: &Cluster,
    server: &Server,
    m: ImageMethod,
    a: &Options,
    p: &dyn Progress,
) -> Result<RunResult> {
    let setting = guc_value(m);
    let clients = a.clients.to_string();
    let transactions = a.transactions.to_string();
    let seed = format!("--random-seed={}", pgcluster::workload::PGBENCH_SEED);
    let run = isolated_run(
        cluster,
        server,
        m,
        (TEMPLATE_DB, BENCH_DB),
        &|s| p.step(s),
        || {
            check_cancelled(p)?;
            let args = [
                "-n",
                "-c",
                &clients,
                "-j",
                &clients,
                "-t",
                &transactions,
                &seed,
                BENCH_DB,
            ];
            Ok(cluster.pgbench(&args)?)
        },
    )?;
    check_cancelled(p)?;
    let t = run.stats.total();
    let tps = parse_tps(&run.output).unwrap_or_else(|| {
        f64::from(a.clients) * f64::from(a.transactions) / run.duration_s.max(f64::EPSILON)
    });
    Ok(RunResult {
        setting: setting.to_string(),
        wal_bytes: t.record_bytes + t.fpi_bytes,
        lsn_bytes: run.end.0.saturating_sub(run.start.0),
        fpi_count: t.fpi_count,
        fpi_bytes: t.fpi_bytes,
        fpi_raw_bytes: run.stats.images.iter().map(|i| i.raw_bytes).sum(),
        record_bytes: t.record_bytes,
        duration_s: run.duration_s,
        tps,
        records: run.records,
        segments: run.segments,
    })
}
