//! The server side of the demo: start a cluster, load the pgbench tables once, then for each setting copy
//! them, configure, checkpoint, run, isolate the run's WAL in its own segments, read and verify it.

use super::report::{Demo, RunResult};
use super::{check_interrupted, guc_value, Progress, SETTINGS};
use crate::args::DemoArgs;
use anyhow::{bail, Context};
use pgtest::{Cluster, PgInstall};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::{DecoderOptions, ImageMethod, Lsn, SegmentName, Stop};

/// Loaded once by `pgbench -i`, then copied file by file before every run.
const TEMPLATE_DB: &str = "demo_template";
/// The database each run works in: a fresh copy of [`TEMPLATE_DB`].
const BENCH_DB: &str = "demo_bench";
/// The oldest server with `wal_compression = lz4 | zstd` (and the oldest WAL the `wal` crate reads).
const MIN_MAJOR: u32 = 15;
/// How long the archiver may take to copy a run's last segment.
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(120);

/// What every run needs to know about the server.
struct Server {
    /// `SHOW server_version`.
    version: String,
    /// Timeline, to name segment files.
    tli: u32,
    /// WAL segment size in bytes.
    seg_size: u64,
    /// Data page size (`BLCKSZ`), which the WAL does not record.
    blcksz: usize,
    /// Where the archiver copies segments.
    archive: PathBuf,
}

/// Candidates the demo's advisor table compares.
const DEMO_CANDIDATES: &str = "none,pglz,lz4,zstd,zstd:-1,zstd:1,zstd:6,zstd:9,lz4:9,snappy";

/// Starts a throwaway cluster, runs the workload once per setting and returns the measurements.
///
/// The cluster uses the default 16 MB segments: the demo should show the WAL a DBA's server writes, and the
/// segment size changes nothing in the records and images measured (only the unused tail after each
/// `pg_switch_wal()`, which the demo leaves out). Autovacuum is off and checkpoints are only the demo's own,
/// so nothing but the workload writes between a run's checkpoint and its final segment switch.
pub fn compare(a: &DemoArgs, p: &Progress) -> anyhow::Result<Demo> {
    p.step("looking for PostgreSQL");
    let install =
        PgInstall::find().with_context(|| match std::env::var_os(pgtest::BINDIR_ENV) {
            Some(dir) => format!(
                "{}={} is not a usable PostgreSQL bin directory; fix or unset it",
                pgtest::BINDIR_ENV,
                dir.to_string_lossy()
            ),
            None => format!("the demo runs a throwaway PostgreSQL {MIN_MAJOR}+ server"),
        })?;
    if install.major() < MIN_MAJOR {
        bail!(
            "PostgreSQL {} found in {}; the demo needs {MIN_MAJOR} or later (wal_compression = lz4 and zstd); \
             install it or set {} to its bin directory",
            install.major(),
            install.bindir().display(),
            pgtest::BINDIR_ENV
        );
    }
    p.step(format!(
        "initdb and start PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    ));
    let cluster = Cluster::builder()
        .install(install)
        .archive_dir(true)
        .guc("autovacuum", "off")
        .guc("checkpoint_timeout", "1h")
        .guc("max_wal_size", "10GB")
        .start()
        .context("starting a throwaway PostgreSQL cluster")?;
    let server = describe(&cluster)?;
    check_interrupted()?;

    p.step(format!("loading the pgbench tables, scale {}", a.scale));
    cluster.psql(&format!("CREATE DATABASE {TEMPLATE_DB}"))?;
    cluster
        .pgbench(&["-i", "-q", "-s", &a.scale.to_string(), TEMPLATE_DB])
        .context("loading the pgbench tables")?;

    let mut runs = Vec::with_capacity(SETTINGS.len());
    for m in SETTINGS {
        check_interrupted()?;
        let r = one_run(&cluster, &server, m, a, p)
            .with_context(|| format!("run with wal_compression = {}", guc_value(m)))?;
        p.note(format!(
            "wal_compression = {:<4}  {:>10} of WAL, {} full-page images, {:.0} tps",
            r.setting,
            crate::output::bytes(r.wal_bytes),
            r.fpi_count,
            r.tps
        ));
        runs.push(r);
    }
    // The advisor's answer from the off run alone, to set beside what the server did.
    p.step("advisor: predicting every method and level from the off run's WAL");
    let off = runs.first().context("no run")?.segments.clone();
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
    p.step("stopping and deleting the cluster");
    cluster.stop().context("stopping the throwaway cluster")?;
    drop(cluster);
    Ok(Demo {
        pg_version: server.version,
        seg_size: server.seg_size,
        scale: a.scale,
        clients: a.clients,
        transactions: a.transactions,
        runs,
        advice: Some(advice),
    })
}

/// Reads the server facts the runs need.
fn describe(cluster: &Cluster) -> anyhow::Result<Server> {
    let number = |sql: &str| -> anyhow::Result<u64> {
        let text = cluster.query_one(sql)?;
        text.trim()
            .parse()
            .with_context(|| format!("{sql} returned {text:?}, expected a number"))
    };
    Ok(Server {
        version: cluster.query_one("SHOW server_version")?,
        tli: u32::try_from(number("SELECT timeline_id FROM pg_control_checkpoint()")?)?,
        seg_size: number("SELECT pg_size_bytes(current_setting('wal_segment_size'))")?,
        blcksz: usize::try_from(number("SHOW block_size")?)?,
        archive: cluster
            .archive_dir()
            .context("the cluster was started without an archive directory")?
            .to_path_buf(),
    })
}

/// One run: fresh data, the setting, a checkpoint, the workload alone in its segments, then its WAL read.
fn one_run(
    cluster: &Cluster,
    server: &Server,
    m: ImageMethod,
    a: &DemoArgs,
    p: &Progress,
) -> anyhow::Result<RunResult> {
    let setting = guc_value(m);
    p.step(format!("{setting}: fresh copy of the pgbench tables"));
    // FILE_COPY copies the template's files as they are, so every run starts from byte-identical pages
    // (including hint bits and the visibility map that `pgbench -i` set), and writes almost no WAL itself.
    cluster.psql(&format!("DROP DATABASE IF EXISTS {BENCH_DB}"))?;
    cluster.psql(&format!(
        "CREATE DATABASE {BENCH_DB} TEMPLATE {TEMPLATE_DB} STRATEGY FILE_COPY"
    ))?;
    cluster
        .set_guc_and_reload("wal_compression", setting)
        .with_context(|| {
            format!(
                "setting wal_compression = {setting} (was this PostgreSQL built with {setting}?)"
            )
        })?;
    let shown = cluster.query_one("SHOW wal_compression")?;
    if shown != setting {
        bail!("SHOW wal_compression says {shown:?} after setting it to {setting:?}");
    }
    check_interrupted()?;

    p.step(format!("{setting}: checkpoint and switch to a new segment"));
    cluster.checkpoint()?;
    cluster.switch_wal()?;
    let start = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;

    p.step(format!(
        "{setting}: pgbench, {} client(s) x {} transactions",
        a.clients, a.transactions
    ));
    let clients = a.clients.to_string();
    let transactions = a.transactions.to_string();
    let seed = format!("--random-seed={}", pgtest::workload::PGBENCH_SEED);
    let began = Instant::now();
    let out = cluster.pgbench(&[
        "-n",
        "-c",
        &clients,
        "-j",
        &clients,
        "-t",
        &transactions,
        &seed,
        BENCH_DB,
    ])?;
    let duration = began.elapsed().as_secs_f64();
    let end = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
    // pg_switch_wal() returns the end of its XLOG_SWITCH record, which lies in the run's last segment.
    let switched = lsn(&cluster.switch_wal()?)?;
    check_interrupted()?;

    let first = SegmentName::containing(server.tli, start, server.seg_size);
    let last = SegmentName::containing(server.tli, Lsn(switched.0 - 1), server.seg_size);
    let names: Vec<String> = (first.segno..=last.segno)
        .map(|segno| {
            SegmentName {
                tli: server.tli,
                segno,
            }
            .file_name(server.seg_size)
        })
        .collect();
    p.step(format!(
        "{setting}: waiting for {} segment(s) to be archived",
        names.len()
    ));
    // The archiver works in WAL order, so once the last is done all are.
    cluster.wait_for_archived(&names[names.len() - 1], ARCHIVE_TIMEOUT)?;
    let paths: Vec<PathBuf> = names.iter().map(|n| server.archive.join(n)).collect();

    p.step(format!(
        "{setting}: reading and verifying {} segment(s)",
        paths.len()
    ));
    let (stats, records) = read_run(&paths, server.blcksz, m)?;
    let t = stats.total();
    let images = stats.images;
    let tps = parse_tps(&out).unwrap_or_else(|| {
        f64::from(a.clients) * f64::from(a.transactions) / duration.max(f64::EPSILON)
    });
    Ok(RunResult {
        setting: setting.to_string(),
        wal_bytes: t.record_bytes + t.fpi_bytes,
        lsn_bytes: end.0.saturating_sub(start.0),
        fpi_count: t.fpi_count,
        fpi_bytes: t.fpi_bytes,
        fpi_raw_bytes: images.iter().map(|i| i.raw_bytes).sum(),
        record_bytes: t.record_bytes,
        duration_s: duration,
        tps,
        records,
        segments: paths,
    })
}

/// Reads a run's segments into statistics, verifies them, and checks that the images were stored the way
/// the setting says. Returns the statistics and the number of records.
fn read_run(paths: &[PathBuf], blcksz: usize, m: ImageMethod) -> anyhow::Result<(WalStats, u64)> {
    let set = SegmentSet::from_paths(paths)?;
    let opts = DecoderOptions {
        blcksz,
        ..DecoderOptions::default()
    };
    let mut stats = WalStats::new(set.geometry, blcksz);
    let summary = set.read(opts, |r, _| stats.add(r))?;
    if let Stop::Invalid(e) = &summary.stop {
        bail!("the run's WAL ends before its last segment does: {e}");
    }
    match wal::verify::verify(&set, opts, 2)? {
        Ok(_) => {}
        Err(c) => bail!("the run's WAL is not sound: {c}"),
    }
    // Images the compressor could not shrink are stored raw, so `none` may appear in every run; any other
    // method, or none of the chosen one, means the setting did not reach the backends.
    for other in ImageMethod::ALL {
        let count = stats.images[other.index()].count;
        if other != m && other != ImageMethod::None && count > 0 {
            bail!(
                "{count} image(s) stored with {} while wal_compression = {}",
                other.name(),
                guc_value(m)
            );
        }
    }
    if m != ImageMethod::None && stats.total().fpi_count > 0 && stats.images[m.index()].count == 0 {
        bail!(
            "no image stored with {} although wal_compression = {}",
            m.name(),
            guc_value(m)
        );
    }
    Ok((stats, summary.records))
}

/// Parses an LSN as PostgreSQL prints it.
fn lsn(text: &str) -> anyhow::Result<Lsn> {
    text.trim()
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))
}

/// The `tps = 1234.5 (without initial connection time)` figure of pgbench's summary.
fn parse_tps(out: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        l.trim()
            .strip_prefix("tps = ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tps_is_read_from_pgbench_output() {
        let out = "number of failed transactions: 0 (0.000%)\nlatency average = 0.612 ms\n\
                   initial connection time = 2.449 ms\ntps = 1634.276370 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(1634.27637));
        assert_eq!(parse_tps("no summary"), None);
    }
}
