//! What `bench archive` measured: the report types (their serialization is the JSON output) and the text.

use crate::timing::{median, Timing};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The references every tool is set against.
pub const REFERENCES: [&str; 2] = ["pgbackrest zst:3", "xz -6"];

/// What one tool did on one segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outcome {
    pub(crate) original: u64,
    pub(crate) stored: u64,
    pub(crate) push: Timing,
    pub(crate) get: Timing,
    pub(crate) identical: bool,
}

/// The whole benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `SHOW server_version`.
    pub pg_version: String,
    /// WAL segment size in bytes.
    pub segment_size: u64,
    /// The setting the corpora were written with: always `off`.
    pub wal_compression: &'static str,
    /// Segments in each corpus.
    pub segments_per_corpus: u32,
    /// The machine the figures were taken on.
    pub machine: Machine,
    /// Push and get runs per segment and tool.
    pub rounds: u32,
    /// The tools every other is set against.
    pub references: [&'static str; 2],
    /// Every tool, its version and command lines.
    pub tools: Vec<ToolInfo>,
    /// One entry per corpus, then `all` when there are several.
    pub corpora: Vec<CorpusReport>,
}

/// The machine and how busy it was.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs available to this process.
    pub cpus: usize,
    /// From /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// One-minute load average before the corpora were written.
    pub load_average_start: Option<f64>,
    /// One-minute load average after the last segment.
    pub load_average_end: Option<f64>,
    /// Share of CPU time the host gave to other machines while the tools ran, in percent.
    pub steal_percent: Option<f64>,
}

/// One tool: its version and its commands as archive_command and restore_command would hold them.
#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    /// The name in tables.
    pub tool: String,
    /// The first line of its version output.
    pub version: String,
    /// The push command line.
    pub push: String,
    /// The get command line.
    pub get: String,
}

/// Every tool on one corpus.
#[derive(Clone, Debug, Serialize)]
pub struct CorpusReport {
    /// `pgbench`, `text` or `all`.
    pub name: String,
    /// What wrote the segments.
    pub workload: String,
    /// Segment files.
    pub segments: usize,
    /// Their bytes.
    pub original_bytes: u64,
    /// One entry per tool, in the order they are printed.
    pub results: Vec<ToolResult>,
}

/// One tool's figures on one corpus.
#[derive(Clone, Debug, Serialize)]
pub struct ToolResult {
    /// The tool's name.
    pub tool: String,
    /// Segments pushed and restored.
    pub segments: usize,
    /// Their bytes.
    pub original_bytes: u64,
    /// Bytes the tool stored.
    pub stored_bytes: u64,
    /// Original bytes / stored bytes.
    pub ratio: f64,
    /// Median wall seconds of a push.
    pub push_wall_s: f64,
    /// Median wall seconds of a get.
    pub get_wall_s: f64,
    /// Median CPU seconds of a push.
    pub push_cpu_s: f64,
    /// Median CPU seconds of a get.
    pub get_cpu_s: f64,
    /// Median minor page faults of a push: about one per 4 KiB of fresh memory it touched.
    pub push_faults: f64,
    /// Median minor page faults of a get.
    pub get_faults: f64,
    /// Round trips made.
    pub roundtrips: usize,
    /// Round trips whose restored file was identical to the original.
    pub roundtrips_identical: usize,
    /// Figures relative to each reference measured in this run, by its name.
    pub relative: BTreeMap<String, Relative>,
}

/// One tool against one reference: medians of per-segment ratios (times) and the ratio of ratios.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Relative {
    /// This tool's compression ratio over the reference's (above 1 stores less).
    pub ratio: f64,
    /// Push wall time over the reference's (below 1 is faster).
    pub push_wall: Option<f64>,
    /// Get wall time over the reference's.
    pub get_wall: Option<f64>,
    /// Push CPU over the reference's.
    pub push_cpu: Option<f64>,
    /// Get CPU over the reference's.
    pub get_cpu: Option<f64>,
}

/// Median over segments of `f(tool) / f(reference)`, pairs whose reference figure is zero left out.
fn relative(ours: &[Outcome], theirs: &[Outcome], f: fn(&Outcome) -> f64) -> Option<f64> {
    let v: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .filter(|(_, t)| f(t) > 0.0)
        .map(|(o, t)| f(o) / f(t))
        .collect();
    (!v.is_empty()).then(|| median(v))
}

/// (original, stored, original / stored) bytes of `o`.
fn ratio(o: &[Outcome]) -> (u64, u64, f64) {
    let stored: u64 = o.iter().map(|x| x.stored).sum();
    let original: u64 = o.iter().map(|x| x.original).sum();
    (original, stored, original as f64 / stored.max(1) as f64)
}

/// The figures of every tool (`outcomes[tool][segment]`, tools named by `labels`) on one corpus.
pub(crate) fn corpus_report(
    name: &str,
    workload: &str,
    outcomes: &[Vec<Outcome>],
    labels: &[String],
) -> CorpusReport {
    let results = outcomes
        .iter()
        .zip(labels)
        .map(|(o, label)| {
            let (original, stored, r) = ratio(o);
            let mut rel = BTreeMap::new();
            for reference in REFERENCES {
                let Some(t) = labels.iter().position(|l| l == reference) else {
                    continue;
                };
                let theirs = &outcomes[t];
                rel.insert(
                    reference.to_string(),
                    Relative {
                        ratio: r / ratio(theirs).2,
                        push_wall: relative(o, theirs, |x| x.push.wall),
                        get_wall: relative(o, theirs, |x| x.get.wall),
                        push_cpu: relative(o, theirs, |x| x.push.cpu),
                        get_cpu: relative(o, theirs, |x| x.get.cpu),
                    },
                );
            }
            let of = |f: fn(&Outcome) -> f64| median(o.iter().map(f).collect());
            ToolResult {
                tool: label.clone(),
                segments: o.len(),
                original_bytes: original,
                stored_bytes: stored,
                ratio: r,
                push_wall_s: of(|x| x.push.wall),
                get_wall_s: of(|x| x.get.wall),
                push_cpu_s: of(|x| x.push.cpu),
                get_cpu_s: of(|x| x.get.cpu),
                push_faults: of(|x| x.push.faults),
                get_faults: of(|x| x.get.faults),
                roundtrips: o.len(),
                roundtrips_identical: o.iter().filter(|x| x.identical).count(),
                relative: rel,
            }
        })
        .collect();
    CorpusReport {
        name: name.to_string(),
        workload: workload.to_string(),
        segments: outcomes.first().map_or(0, Vec::len),
        original_bytes: outcomes
            .first()
            .map_or(0, |o| o.iter().map(|x| x.original).sum()),
        results,
    }
}

impl Report {
    /// Tools that restored a segment different from the original (on any corpus).
    pub fn differing(&self) -> Vec<String> {
        let mut bad: Vec<String> = Vec::new();
        for r in self.corpora.iter().flat_map(|c| &c.results) {
            if r.roundtrips_identical < r.roundtrips && !bad.contains(&r.tool) {
                bad.push(r.tool.clone());
            }
        }
        bad
    }

    /// The text report: per corpus, absolute figures, then figures relative to each reference.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or("?".into(), f);
        let _ = writeln!(
            s,
            "PostgreSQL {}, {} MiB segments, wal_compression = off; {} CPUs; load average {} at start, {} at end; \
             CPU stolen by the host {}; {} round(s) per segment",
            self.pg_version,
            self.segment_size >> 20,
            m.cpus,
            opt(m.load_average_start, |l| format!("{l:.2}")),
            opt(m.load_average_end, |l| format!("{l:.2}")),
            opt(m.steal_percent, |p| format!("{p:.1}%")),
            self.rounds,
        );
        let x = |v: Option<f64>| v.map_or("-".to_string(), |r| format!("{r:.2}x"));
        for c in &self.corpora {
            let _ = writeln!(
                s,
                "\n{} corpus: {} segments, {:.1} MB; {}",
                c.name,
                c.segments,
                c.original_bytes as f64 / 1e6,
                c.workload
            );
            let _ = writeln!(
                s,
                "  {:<30} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11} {:>9}",
                "tool",
                "stored MB",
                "ratio",
                "push s/seg",
                "get s/seg",
                "push CPU",
                "get CPU",
                "push faults",
                "get faults",
                "restored"
            );
            for r in &c.results {
                let _ = writeln!(
                    s,
                    "  {:<30} {:>11.2} {:>6.2}x {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>12.0} {:>11.0} {:>4}/{:<4}",
                    r.tool,
                    r.stored_bytes as f64 / 1e6,
                    r.ratio,
                    r.push_wall_s,
                    r.get_wall_s,
                    r.push_cpu_s,
                    r.get_cpu_s,
                    r.push_faults,
                    r.get_faults,
                    r.roundtrips_identical,
                    r.roundtrips,
                );
            }
            for reference in self.references {
                let _ = writeln!(
                    s,
                    "  relative to {reference:<18} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10}",
                    "", "ratio", "push", "get", "push CPU", "get CPU"
                );
                for r in &c.results {
                    let rel = r.relative.get(reference);
                    let _ = writeln!(
                        s,
                        "  {:<30} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10}",
                        r.tool,
                        "",
                        x(rel.map(|v| v.ratio)),
                        x(rel.and_then(|v| v.push_wall)),
                        x(rel.and_then(|v| v.get_wall)),
                        x(rel.and_then(|v| v.push_cpu)),
                        x(rel.and_then(|v| v.get_cpu)),
                    );
                }
            }
        }
        s.push_str(
            "\nratio: original bytes / stored bytes (relative: above 1 stores less than the reference). Times are medians \
             over segments (each segment's time the median of its rounds), one process per file; CPU is user + sys; faults are minor page faults, about one per 4 KiB of fresh memory \
             a process touched. Relative times are medians of the per-segment \
             ratios (tool / reference); below 1 is faster. restored: round trips identical to the original (SHA-256).\n",
        );
        s
    }
}
