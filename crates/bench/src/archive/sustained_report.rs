//! The types and the table of `bench archive --sustained` (the runs themselves are in `sustained.rs`).

use serde::Serialize;
use std::fmt::Write as _;

/// pgbench's scale for the sustained run.
pub(super) const SCALE: u32 = 10;
/// The segment size of the throwaway clusters (initdb's default).
pub(super) const SEGMENT_BYTES: u64 = 16 << 20;

/// The archivers compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Archiver {
    /// `archive_command = 'true'`: no archive, the machine's WAL rate.
    None,
    /// `pgcompress archive push --async` to a local directory.
    Pgcompress,
    /// pgBackRest `archive-push` with `archive-async=y`, `process-max=2`, zst:3, to a local directory.
    Pgbackrest,
    /// `pgcompress archive push --async` to an S3-compatible server.
    PgcompressS3,
    /// pgBackRest as [`Archiver::Pgbackrest`], to an S3-compatible server (over HTTPS: the only way it
    /// speaks to S3).
    PgbackrestS3,
}

impl Archiver {
    pub(super) fn label(self) -> &'static str {
        match self {
            Archiver::None => "no archiving (true)",
            Archiver::Pgcompress => "pgcompress push --async",
            Archiver::Pgbackrest => "pgbackrest async process-max=2 zst:3",
            Archiver::PgcompressS3 => "pgcompress push --async, S3",
            Archiver::PgbackrestS3 => "pgbackrest async process-max=2 zst:3, S3",
        }
    }

    /// Whether its repository is on the S3-compatible server.
    pub(super) fn s3(self) -> bool {
        matches!(self, Archiver::PgcompressS3 | Archiver::PgbackrestS3)
    }

    /// Whether it is pgBackRest.
    pub(super) fn pgbackrest(self) -> bool {
        matches!(self, Archiver::Pgbackrest | Archiver::PgbackrestS3)
    }
}

/// Where the sustained run keeps the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// A directory on the machine's disk.
    Local,
    /// A bucket on an S3-compatible server on loopback (moto_server).
    S3,
}

/// One archiver's run.
#[derive(Clone, Debug, Serialize)]
pub struct SustainedRun {
    /// Which archiver.
    pub archiver: Archiver,
    /// Its label in tables.
    pub label: &'static str,
    /// WAL written during the pgbench run, bytes.
    pub wal_bytes: u64,
    /// Seconds pgbench ran.
    pub seconds: f64,
    /// WAL written per second, MB.
    pub wal_mb_per_s: f64,
    /// pgbench's transactions per second.
    pub tps: Option<f64>,
    /// Most `.ready` files seen at once during the run.
    pub ready_max: usize,
    /// `.ready` files when pgbench stopped.
    pub ready_at_end: usize,
    /// Seconds from pgbench's end until no `.ready` file was left.
    pub drain_s: f64,
    /// Bytes the repository holds after the run.
    pub stored_bytes: u64,
    /// WAL segments the repository holds (those of `pgbench -i` included).
    pub stored_segments: u64,
    /// CPU seconds the whole machine spent (user, nice, system, irq) from pgbench's start to the drain.
    pub machine_cpu_s: f64,
    /// Seconds from starting the restored server to its promotion at the end of the archive.
    pub recovery_s: Option<f64>,
    /// Whether the restored server has the primary's data.
    pub recovered_identical: Option<bool>,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SustainedReport {
    /// pgbench clients.
    pub clients: u32,
    /// pgbench seconds per run.
    pub seconds: u32,
    /// One run per archiver.
    pub runs: Vec<SustainedRun>,
}

impl SustainedReport {
    /// The table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "sustained archiving: pgbench scale {SCALE}, {} clients, {} s per run, 16 MB segments, \
             wal_compression off, synchronous_commit off\n\n",
            self.clients, self.seconds
        );
        let _ = writeln!(
            s,
            "| archiver | WAL GB | WAL MB/s | tps | .ready max | .ready at end | drain s | stored MB | ratio (segments x 16 MB / stored) | machine CPU s per GB WAL | recovery s | recovered identical |"
        );
        let _ = writeln!(
            s,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for r in &self.runs {
            let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
            let _ = writeln!(
                s,
                "| {} | {:.2} | {:.1} | {} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {} |",
                r.label,
                r.wal_bytes as f64 / 1e9,
                r.wal_mb_per_s,
                opt(r.tps),
                r.ready_max,
                r.ready_at_end,
                r.drain_s,
                r.stored_bytes as f64 / 1e6,
                if r.stored_bytes > 0 {
                    format!(
                        "{:.2}x",
                        (r.stored_segments * SEGMENT_BYTES) as f64 / r.stored_bytes as f64
                    )
                } else {
                    "-".into()
                },
                r.machine_cpu_s / (r.wal_bytes as f64 / 1e9).max(1e-9),
                opt(r.recovery_s),
                r.recovered_identical
                    .map_or("-".into(), |b| if b { "yes" } else { "NO" }.to_string()),
            );
        }
        s
    }
}
