//! Runs of a workload under one `wal_compression` setting, each in its own WAL
//! segments, as the demo and `bench wal` make them.
//!
//! A run starts from a byte-identical copy of a template database (CREATE DATABASE
//! ... STRATEGY FILE_COPY copies the files as they are, hint bits included, and
//! writes almost no WAL), sets the method, checkpoints so the run writes full-page
//! images as production does after a checkpoint, switches to a fresh segment, runs
//! the work, switches again, waits for the archiver, and reads and verifies exactly
//! the run's segments.

use crate::error::{Context, Error, Result};
use pgcluster::Cluster;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wal::source::SegmentSet;
use wal::stats::WalStats;
use wal::{DecoderOptions, ImageMethod, Lsn, SegmentName, Stop};

/// PostgreSQL's default WAL segment size in MB, which the demo and `bench wal` use.
pub const DEFAULT_SEGMENT_MB: u32 = 16;

/// How long the archiver may take to copy a run's segments.
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(120);

/// Server facts every run needs.
pub struct Server {
    /// `SHOW server_version`.
    pub version: String,
    /// Timeline, to name segment files.
    pub tli: u32,
    /// WAL segment size in bytes.
    pub seg_size: u64,
    /// Data page size (`BLCKSZ`), which the WAL does not record.
    pub blcksz: usize,
    /// Where the archiver copies segments.
    pub archive: PathBuf,
}

impl Server {
    /// Reads the facts from a running cluster started with an archive directory.
    pub fn describe(cluster: &Cluster) -> Result<Server> {
        let number = |sql: &str, expected: &'static str| -> Result<u64> {
            let text = cluster.query_one(sql)?;
            text.trim().parse().map_err(|_| Error::Parse {
                what: sql.to_string(),
                text: text.clone(),
                expected,
            })
        };
        let tli_sql = "SELECT timeline_id FROM pg_control_checkpoint()";
        let blcksz_sql = "SHOW block_size";
        Ok(Server {
            version: cluster.query_one("SHOW server_version")?,
            tli: number(tli_sql, "a 32-bit timeline")?
                .try_into()
                .map_err(|_| Error::Parse {
                    what: tli_sql.into(),
                    text: "a number above 2^32".into(),
                    expected: "a 32-bit timeline",
                })?,
            seg_size: number(
                "SELECT pg_size_bytes(current_setting('wal_segment_size'))",
                "a number",
            )?,
            blcksz: usize::try_from(number(blcksz_sql, "a block size")?).map_err(|_| {
                Error::Parse {
                    what: blcksz_sql.into(),
                    text: "a number too large for this machine".into(),
                    expected: "a block size",
                }
            })?,
            archive: cluster
                .archive_dir()
                .ok_or(Error::Internal(
                    "the cluster was started without an archive directory",
                ))?
                .to_path_buf(),
        })
    }
}

/// Starts a throwaway cluster for isolated runs: every segment archived, and nothing
/// but the runs writing between a run's checkpoint and its final switch (no
/// autovacuum, no timed checkpoints). Its WAL segments are `segment_mb` MB (`initdb --wal-segsize`).
pub fn start_cluster(install: pgcluster::PgInstall, segment_mb: u32) -> Result<(Cluster, Server)> {
    let cluster = Cluster::builder()
        .install(install)
        .wal_segsize_mb(segment_mb)
        .archive_dir(true)
        .guc("autovacuum", "off")
        .guc("checkpoint_timeout", "1h")
        .guc("max_wal_size", "10GB")
        .start()
        .context("starting a throwaway PostgreSQL cluster")?;
    let server = Server::describe(&cluster)?;
    Ok((cluster, server))
}

/// The value `wal_compression` takes for a storage method.
pub fn guc_value(m: ImageMethod) -> &'static str {
    match m {
        ImageMethod::None => "off",
        other => other.name(),
    }
}

/// What one isolated run produced.
pub struct Isolated<T> {
    /// What the work returned.
    pub output: T,
    /// Wall time of the work alone.
    pub duration_s: f64,
    /// Insert position before the work.
    pub start: Lsn,
    /// Insert position after the work.
    pub end: Lsn,
    /// The run's archived segments.
    pub segments: Vec<PathBuf>,
    /// Statistics of those segments.
    pub stats: WalStats,
    /// Records in them.
    pub records: u64,
}

/// Makes database `run_db` a fresh copy of `template_db`, sets `wal_compression` to
/// `m`, and runs `work` alone in its own segments; see the module documentation.
/// `step` hears what is happening, for progress output.
pub fn isolated_run<T>(
    cluster: &Cluster,
    server: &Server,
    m: ImageMethod,
    (template_db, run_db): (&str, &str),
    step: &dyn Fn(String),
    work: impl FnOnce() -> Result<T>,
) -> Result<Isolated<T>> {
    let setting = guc_value(m);
    step(format!("{setting}: fresh copy of the data"));
    cluster.psql(&format!("DROP DATABASE IF EXISTS {run_db}"))?;
    cluster.psql(&format!(
        "CREATE DATABASE {run_db} TEMPLATE {template_db} STRATEGY FILE_COPY"
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
        return Err(Error::SettingNotShown {
            shown,
            set: setting,
        });
    }
    step(format!("{setting}: checkpoint and switch to a new segment"));
    cluster.checkpoint()?;
    cluster.switch_wal()?;
    let start = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
    step(format!("{setting}: running the workload"));
    let began = Instant::now();
    let output = work()?;
    let duration_s = began.elapsed().as_secs_f64();
    let end = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
    // pg_switch_wal() returns the end of its XLOG_SWITCH record, in the run's last segment.
    let switched = lsn(&cluster.switch_wal()?)?;
    let first = SegmentName::containing(server.tli, start, server.seg_size);
    let last = SegmentName::containing(server.tli, Lsn(switched.0 - 1), server.seg_size);
    let names = segment_names(server, first.segno..=last.segno);
    step(format!(
        "{setting}: waiting for {} segment(s) to be archived",
        names.len()
    ));
    // The archiver works in WAL order, so once the last is done all are.
    cluster.wait_for_archived(&names[names.len() - 1], ARCHIVE_TIMEOUT)?;
    let segments: Vec<PathBuf> = names.iter().map(|n| server.archive.join(n)).collect();
    step(format!(
        "{setting}: reading and verifying {} segment(s)",
        segments.len()
    ));
    let (stats, records) = read_run(&segments, server.blcksz, m)?;
    Ok(Isolated {
        output,
        duration_s,
        start,
        end,
        segments,
        stats,
        records,
    })
}

/// Reads a run's segments into statistics, verifies them, and checks that the images
/// were stored the way the setting says. Returns the statistics and the record count.
fn read_run(paths: &[PathBuf], blcksz: usize, m: ImageMethod) -> Result<(WalStats, u64)> {
    let set = SegmentSet::from_paths(paths)?;
    let opts = DecoderOptions {
        blcksz,
        ..DecoderOptions::default()
    };
    let mut stats = WalStats::new(set.geometry, blcksz);
    let summary = set.read(opts, |r, _| stats.add(r))?;
    if let Stop::Invalid(e) = &summary.stop {
        return Err(Error::WalEndsEarly(e.clone()));
    }
    if let Err(c) = wal::verify::verify(&set, opts, 2)? {
        return Err(Error::WalUnsound(c.to_string()));
    }
    // Images the compressor could not shrink are stored raw, so `none` may appear in
    // every run; any other method, or none of the chosen one, means the setting did
    // not reach the backends.
    for other in ImageMethod::ALL {
        let count = stats.images[other.index()].count;
        if other != m && other != ImageMethod::None && count > 0 {
            return Err(Error::OtherMethod {
                count,
                found: other.name(),
                setting: guc_value(m),
            });
        }
    }
    if m != ImageMethod::None && stats.total().fpi_count > 0 && stats.images[m.index()].count == 0 {
        return Err(Error::NoImageWithMethod {
            method: m.name(),
            setting: guc_value(m),
        });
    }
    Ok((stats, summary.records))
}

/// Parses an LSN as PostgreSQL prints it.
pub fn lsn(text: &str) -> Result<Lsn> {
    text.trim().parse().map_err(|_: String| Error::Parse {
        what: "the server".into(),
        text: text.to_string(),
        expected: "an LSN such as 16/B374D848",
    })
}

/// The `tps = ...` figure of pgbench's summary.
pub fn parse_tps(out: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        l.trim()
            .strip_prefix("tps = ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The file names of segments `segnos` on the server's timeline, in order.
pub fn segment_names(server: &Server, segnos: impl Iterator<Item = u64>) -> Vec<String> {
    segnos
        .map(|segno| {
            SegmentName {
                tli: server.tli,
                segno,
            }
            .file_name(server.seg_size)
        })
        .collect()
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
        assert_eq!(lsn("16/B374D848").expect("lsn"), Lsn(0x16_B374_D848));
    }
}
