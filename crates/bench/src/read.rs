//! `pgcompress-bench read`: `pgcompress wal stats` against `pg_waldump --stats` on the same segments.

use crate::error::{Error, IoContext, Result};
use crate::timing::{measure, median, Timing};
use pgtest::{Cluster, PgInstall};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What to read and how often.
#[derive(Clone, Debug)]
pub struct Options {
    /// Segments to read (a directory or files); empty: WAL written for the purpose.
    pub paths: Vec<PathBuf>,
    /// MB of WAL to write when `paths` is empty.
    pub wal_mb: u64,
    /// Timed runs of each command, alternating, after one warm-up run each.
    pub runs: u32,
    /// The `pgcompress` executable to time.
    pub pgcompress: PathBuf,
}

/// The figures of one command.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The command, as the table names it.
    pub command: &'static str,
    /// Median wall seconds.
    pub wall_s_median: f64,
    /// Fastest wall seconds.
    pub wall_s_min: f64,
    /// Median CPU seconds.
    pub cpu_s_median: f64,
    /// Median of the per-pair ratios of wall time to pg_waldump's.
    pub wall_ratio_vs_pg_waldump: f64,
    /// Median of the per-pair ratios of CPU time to pg_waldump's.
    pub cpu_ratio_vs_pg_waldump: f64,
    /// Bytes read per second (MB of 10^6), at the median wall time.
    pub mb_per_s: f64,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Segment files read.
    pub segments: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Timed runs of each command.
    pub runs: u32,
    /// CPUs of this machine.
    pub cpus: usize,
    /// The pg_waldump command line.
    pub pg_waldump: String,
    /// Whether our table starts with pg_waldump's (the run fails otherwise).
    pub outputs_agree: bool,
    /// One row per command, pg_waldump first.
    pub results: Vec<Row>,
    /// The segment size, for the text.
    #[serde(skip)]
    pub seg_size: u64,
}

/// Writes about `mb` MB of WAL in 16 MB segments on a throwaway cluster (pgbench
/// tpcb-like after a checkpoint, so full-page images and records mix as in
/// production) and copies the archived segments into `dest`.
fn make_wal(mb: u64, dest: &Path) -> Result<Vec<PathBuf>> {
    eprintln!("bench: writing about {mb} MB of WAL on a throwaway cluster...");
    let cluster = Cluster::builder()
        .archive_dir(true)
        .guc("max_wal_size", "4GB")
        .start()?;
    cluster.pgbench_init(10)?;
    cluster.checkpoint()?;
    let position = || -> Result<u64> {
        let sql = "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn";
        let text = cluster.query_one(sql)?;
        text.trim().parse().map_err(|_| Error::Parse {
            what: sql.into(),
            text,
            expected: "a byte position",
        })
    };
    let start = position()?;
    let mut seed = 1;
    while position()? - start < mb << 20 {
        cluster.pgbench(&[
            "-n",
            "-c",
            "2",
            "-t",
            "3000",
            &format!("--random-seed={seed}"),
        ])?;
        seed += 1;
    }
    let last = cluster.query_one("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")?;
    cluster.switch_wal()?;
    cluster.wait_for_archived(&last, Duration::from_secs(120))?;
    let mut files = Vec::new();
    for f in cluster.archived_segments()? {
        let d = dest.join(f.file_name().ok_or(Error::Internal(
            "an archived segment path without a file name",
        ))?);
        std::fs::copy(&f, &d).io(|| format!("copying {} to {}", f.display(), d.display()))?;
        files.push(d);
    }
    files.sort();
    Ok(files)
}

/// Runs the comparison: checks that both tools print the same table, then times them in turn.
pub fn run(o: &Options) -> Result<Report> {
    let install = PgInstall::find()?;
    let tmp = tempfile::tempdir().io(|| "creating a temporary directory for the WAL".into())?;
    let files = if o.paths.is_empty() {
        make_wal(o.wal_mb, tmp.path())?
    } else {
        wal::source::SegmentSet::from_paths(&o.paths)?.files
    };
    let set = wal::source::SegmentSet::from_paths(&files)?;
    if set.geometry.version.major() != install.major() {
        return Err(Error::WalVersion {
            wal: set.geometry.version.to_string(),
            installed: install.major(),
        });
    }
    let dir = files[0]
        .parent()
        .ok_or(Error::Internal("a segment path without a directory"))?
        .display()
        .to_string();
    let name = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    let me = o.pgcompress.display().to_string();
    let peer = vec![
        install.bin("pg_waldump").display().to_string(),
        "--stats".into(),
        "-p".into(),
        dir,
        name(&files[0]),
        name(files.last().ok_or(Error::Internal("no segment"))?),
    ];
    let mut ours = vec![me, "wal".into(), "stats".into()];
    ours.extend(files.iter().map(|f| f.display().to_string()));
    let mut ours1 = ours.clone();
    ours1.extend(["--threads".into(), "1".into()]);

    // Same work: our table must be pg_waldump's.
    let output = |cmd: &[String]| {
        Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .map_err(|source| Error::Spawn {
                what: "comparing the outputs".into(),
                program: cmd[0].clone(),
                source,
            })
    };
    let peer_out = output(&peer)?;
    let our_out = output(&ours)?;
    let agree = String::from_utf8_lossy(&our_out.stdout)
        .starts_with(&*String::from_utf8_lossy(&peer_out.stdout));
    if !agree {
        return Err(Error::OutputsDisagree);
    }
    let bytes = set.total_bytes();
    eprintln!(
        "bench: {} segments, {:.0} MB; {} alternating runs of each after a warm-up",
        files.len(),
        bytes as f64 / 1e6,
        o.runs
    );
    let cmds = [
        ("pg_waldump --stats", &peer),
        ("pgcompress wal stats", &ours),
        ("pgcompress wal stats --threads 1", &ours1),
    ];
    let mut samples: Vec<Vec<Timing>> = vec![Vec::new(); cmds.len()];
    for (_, c) in &cmds {
        measure(c)?;
    }
    for _ in 0..o.runs {
        for (i, (_, c)) in cmds.iter().enumerate() {
            samples[i].push(measure(c)?);
        }
    }
    let ratio = |i: usize, f: fn(&Timing) -> f64| {
        median(
            samples[i]
                .iter()
                .zip(&samples[0])
                .map(|(x, p)| f(x) / f(p))
                .collect(),
        )
    };
    let results = cmds
        .iter()
        .enumerate()
        .map(|(i, (label, _))| {
            let wall = median(samples[i].iter().map(|s| s.wall).collect());
            Row {
                command: label,
                wall_s_median: wall,
                wall_s_min: samples[i]
                    .iter()
                    .map(|s| s.wall)
                    .fold(f64::INFINITY, f64::min),
                cpu_s_median: median(samples[i].iter().map(|s| s.cpu).collect()),
                wall_ratio_vs_pg_waldump: ratio(i, |s| s.wall),
                cpu_ratio_vs_pg_waldump: ratio(i, |s| s.cpu),
                mb_per_s: bytes as f64 / 1e6 / wall,
            }
        })
        .collect();
    Ok(Report {
        segments: files.len(),
        bytes,
        runs: o.runs,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        pg_waldump: peer.join(" "),
        outputs_agree: agree,
        results,
        seg_size: set.geometry.seg_size,
    })
}

impl Report {
    /// The text table.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "WAL: {} segments of {} MB, {:.0} MB in all; {} CPUs; outputs agree: yes",
            self.segments,
            self.seg_size >> 20,
            self.bytes as f64 / 1e6,
            self.cpus
        );
        let _ = writeln!(
            s,
            "{:<34} {:>10} {:>10} {:>10} {:>12} {:>12}",
            "command", "wall s", "cpu s", "MB/s", "wall ratio", "cpu ratio"
        );
        for r in &self.results {
            let _ = writeln!(
                s,
                "{:<34} {:>10.3} {:>10.3} {:>10.0} {:>11.2}x {:>11.2}x",
                r.command,
                r.wall_s_median,
                r.cpu_s_median,
                r.mb_per_s,
                r.wall_ratio_vs_pg_waldump,
                r.cpu_ratio_vs_pg_waldump,
            );
        }
        s.push_str("Ratios are medians of per-pair ratios (ours / pg_waldump, runs alternate); below 1 is faster.\n");
        s
    }
}
