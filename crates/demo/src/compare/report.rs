//! What the demo measured, and how it is printed: a side-by-side table or one JSON object.

use advise::fmt::bytes;
use serde::Serialize;
use std::fmt::Write as _;

/// The measurements of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The `wal_compression` value, as `SHOW` prints it.
    pub setting: String,
    /// Record plus image bytes of every record (pg_waldump's combined size).
    pub wal_bytes: u64,
    /// Distance between the insert positions before and after the workload (adds page headers and padding).
    pub lsn_bytes: u64,
    /// Full-page images.
    pub fpi_count: u64,
    /// Image bytes as stored in the WAL.
    pub fpi_bytes: u64,
    /// Image bytes before compression (pages without their holes).
    pub fpi_raw_bytes: u64,
    /// Record bytes other than images.
    pub record_bytes: u64,
    /// Wall time of the pgbench run in seconds.
    pub duration_s: f64,
    /// Transactions per second as pgbench reports them.
    pub tps: f64,
    /// WAL records read.
    pub records: u64,
    /// The run's archived segment files (read while the cluster exists).
    pub segments: Vec<std::path::PathBuf>,
}

/// The whole comparison. Its serialization is the demo's JSON (the binary adds the advisor's report as
/// `advice`, in the form `wal advise --json` prints).
#[derive(Debug, Clone, Serialize)]
pub struct Demo {
    /// `SHOW server_version`.
    pub pg_version: String,
    /// WAL segment size in bytes.
    #[serde(rename = "segment_size")]
    pub seg_size: u64,
    /// The pgbench workload every run ran.
    pub workload: Workload,
    /// One run per setting, `off` first.
    pub runs: Vec<RunResult>,
    /// What the advisor predicts from the `off` run's WAL alone.
    #[serde(skip)]
    pub advice: Option<advise::Advice>,
    /// The `off` run's segments archived by pgcompress and by the usual compressors.
    pub archive: Option<ArchiveComparison>,
    /// The pgbench accounts read directly and through the tunnel.
    pub tunnel: Option<super::TunnelSection>,
    /// A large transaction over logical replication: the server's spill against ours.
    pub logical_spill: Option<LogicalSpill>,
}

/// The demo's logical decoding section: `bench spill`'s seed workload at a small scale.
#[derive(Debug, Clone, Serialize)]
pub struct LogicalSpill {
    /// The server's `logical_decoding_work_mem`.
    pub logical_decoding_work_mem: &'static str,
    /// Our assembler's memory limit per transaction, in bytes.
    pub work_mem: u64,
    /// The seed workload as `bench spill --json` reports it.
    pub seed: crate::spill::WorkloadReport,
}

impl LogicalSpill {
    /// A few lines for the table.
    pub fn table(&self) -> String {
        let w = &self.seed;
        let mut out = format!(
            "A large transaction over logical replication: one INSERT of {} rows ('Hello number n°'||i), \
             logical_decoding_work_mem = {}:\n",
            w.rows_inserted, self.logical_decoding_work_mem
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>12} (pg_stat_replication_slots.spill_bytes)",
            "PostgreSQL spills it itself (streaming off)",
            bytes(w.server.spill_bytes)
        );
        for o in &w.ours {
            let r = &o.result;
            let _ = writeln!(
                out,
                "  {:<44} {:>12} ({:.3}x of {} of changes{}; every row replayed: {})",
                format!("pgcompress streams it, spills with {}", r.spec),
                bytes(r.disk_bytes),
                r.ratio,
                bytes(r.raw_bytes),
                o.vs_server_spill
                    .filter(|&v| v > 0.0)
                    .map_or(String::new(), |v| format!(
                        ", {:.0}x less than the server",
                        1.0 / v
                    )),
                if o.matched { "yes" } else { "NO" },
            );
        }
        out
    }
}

/// The pgbench workload.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Always `pgbench tpcb-like`.
    pub kind: &'static str,
    /// pgbench scale factor.
    pub scale: u32,
    /// pgbench clients.
    pub clients: u32,
    /// Transactions per client per run.
    pub transactions_per_client: u32,
}

/// Bytes an archive of the same segments holds, per tool.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveComparison {
    /// The run whose segments were archived: `off`.
    pub run: &'static str,
    /// Segment files archived.
    pub segments: usize,
    /// Their size before compression.
    pub original_bytes: u64,
    /// One entry per tool, pgcompress first.
    pub tools: Vec<StoredBy>,
}

/// What one tool stored.
#[derive(Debug, Clone, Serialize)]
pub struct StoredBy {
    /// The tool's name.
    pub tool: String,
    /// Bytes stored.
    pub stored_bytes: u64,
    /// Original bytes / stored bytes.
    pub ratio: f64,
}

impl ArchiveComparison {
    /// A few lines for the table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "Archiving the off run's {} WAL segment(s), {} (the zeros after its final switch included), one process per file as archive_command runs it:\n",
            self.segments,
            bytes(self.original_bytes)
        );
        for t in &self.tools {
            let _ = writeln!(
                out,
                "  {:<30} {:>12} stored, ratio {:>6.2}x",
                t.tool,
                bytes(t.stored_bytes),
                t.ratio
            );
        }
        out
    }
}

impl Demo {
    /// The human table, one column per setting, and what it means.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "pgbench TPC-B-like workload, scale {}, {} client(s) x {} transactions per run, after a checkpoint;",
            self.workload.scale, self.workload.clients, self.workload.transactions_per_client
        );
        let _ = writeln!(
            out,
            "PostgreSQL {}, {} WAL segments. Same seed and identical data for every run.\n",
            self.pg_version,
            bytes(self.seg_size)
        );
        let base = self.runs.first();
        let change = |v: fn(&RunResult) -> u64| -> Vec<String> {
            self.runs
                .iter()
                .enumerate()
                .map(|(i, r)| match base {
                    Some(b) if i > 0 => signed_pct(v(r), v(b)),
                    _ => "baseline".into(),
                })
                .collect()
        };
        let rows: Vec<(&str, Vec<String>)> = vec![
            ("wal_compression", self.col(|r| r.setting.clone())),
            (
                "WAL bytes (records + FPI)",
                self.col(|r| bytes(r.wal_bytes)),
            ),
            ("  change vs off", change(|r| r.wal_bytes)),
            ("LSN distance", self.col(|r| bytes(r.lsn_bytes))),
            ("WAL records", self.col(|r| thousands(r.records))),
            (
                "Full-page images (FPI)",
                self.col(|r| thousands(r.fpi_count)),
            ),
            ("FPI bytes as stored", self.col(|r| bytes(r.fpi_bytes))),
            (
                "FPI bytes before compression",
                self.col(|r| bytes(r.fpi_raw_bytes)),
            ),
            (
                "FPI compression ratio",
                self.col(|r| format!("{:.2}x", ratio(r))),
            ),
            ("  FPI bytes change vs off", change(|r| r.fpi_bytes)),
            (
                "Record bytes (non-FPI)",
                self.col(|r| bytes(r.record_bytes)),
            ),
            (
                "pgbench duration",
                self.col(|r| format!("{:.1} s", r.duration_s)),
            ),
            ("TPS", self.col(|r| format!("{:.0}", r.tps))),
        ];
        for (i, (label, cells)) in rows.iter().enumerate() {
            let _ = write!(out, "{label:<30}");
            for c in cells {
                let _ = write!(out, " {c:>12}");
            }
            out.push('\n');
            if i == 0 {
                let width = 30 + 13 * cells.len();
                let _ = writeln!(out, "{}", "-".repeat(width));
            }
        }
        out.push('\n');
        out.push_str(&self.summary());
        out.push('\n');
        if let Some(a) = &self.archive {
            out.push('\n');
            out.push_str(&a.table());
        }
        if let Some(t) = &self.tunnel {
            out.push('\n');
            out.push_str(&t.table());
        }
        if let Some(l) = &self.logical_spill {
            out.push('\n');
            out.push_str(&l.table());
        }
        out
    }

    /// One cell per run.
    fn col(&self, f: impl Fn(&RunResult) -> String) -> Vec<String> {
        self.runs.iter().map(f).collect()
    }

    /// Two plain sentences: which setting saved most, and why.
    pub fn summary(&self) -> String {
        let Some(off) = self.runs.first() else {
            return String::new();
        };
        let best = self.runs[1..]
            .iter()
            .min_by_key(|r| r.wal_bytes)
            .filter(|r| r.wal_bytes < off.wal_bytes);
        let first = match best {
            Some(b) => format!(
                "{} cut WAL by {:.1}% vs off on this workload ({} instead of {}): wal_compression compresses only \
                 full-page images, {:.0}% of the WAL here, and {} shrank them {:.2}x.",
                b.setting,
                100.0 - pct(b.wal_bytes, off.wal_bytes),
                bytes(b.wal_bytes),
                bytes(off.wal_bytes),
                pct(off.fpi_bytes, off.wal_bytes),
                b.setting,
                ratio(b)
            ),
            None => "No setting wrote less WAL than off on this workload.".into(),
        };
        format!(
            "{first} pgbench rows are mostly blank filler and most pages are touched once per checkpoint, so expect \
             a smaller saving on real tables; TPS from runs this short is a rough guide only."
        )
    }
}

/// A share as a percentage, 0 when the whole is 0.
fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// How much smaller the images were stored than their raw pages; 1 when there were none.
fn ratio(r: &RunResult) -> f64 {
    if r.fpi_bytes == 0 {
        1.0
    } else {
        r.fpi_raw_bytes as f64 / r.fpi_bytes as f64
    }
}

/// `-56.8%` or `+1.2%`: the change of `v` relative to `base`.
fn signed_pct(v: u64, base: u64) -> String {
    if base == 0 {
        return "n/a".into();
    }
    format!("{:+.1}%", 100.0 * (v as f64 - base as f64) / base as f64)
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_figures() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(signed_pct(50, 100), "-50.0%");
        assert_eq!(signed_pct(101, 100), "+1.0%");
        assert_eq!(signed_pct(1, 0), "n/a");
    }
}
