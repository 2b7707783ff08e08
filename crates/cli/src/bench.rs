//! `pgcompress bench ...`: our tools against their peers, measured in the same run.

use crate::args::{BenchCommand, BenchReadArgs};
use anyhow::{bail, Context};
use pgtest::{Cluster, PgInstall};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[path = "bench/wal.rs"]
mod bench_wal;
pub use bench_wal::BenchWalArgs;

#[path = "bench/archive.rs"]
pub(crate) mod bench_archive;
pub use bench_archive::BenchArchiveArgs;

pub fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Read(a) => read(a),
        BenchCommand::Wal(a) => bench_wal::run(a),
        BenchCommand::Archive(a) => bench_archive::run(a),
    }
}

/// Wall and CPU seconds of one child process.
#[derive(Clone, Copy, Debug)]
struct Sample {
    wall: f64,
    cpu: f64,
}

/// CPU seconds used so far by waited-for children.
fn children_cpu() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

/// Runs a command to completion, its output discarded, and measures it.
fn measure(cmd: &[String]) -> anyhow::Result<Sample> {
    let cpu0 = children_cpu();
    let t = Instant::now();
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", cmd[0]))?;
    let wall = t.elapsed().as_secs_f64();
    // pg_waldump exits 1 when the WAL ends inside the last file; that is not a failure here.
    if status.code().is_none_or(|c| c > 1) {
        bail!("{} failed: {status}", cmd.join(" "));
    }
    Ok(Sample {
        wall,
        cpu: children_cpu() - cpu0,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Writes about `mb` MB of WAL in 16 MB segments on a throwaway cluster (pgbench
/// tpcb-like after a checkpoint, so full-page images and records mix as in
/// production) and copies the archived segments into `dest`.
fn make_wal(mb: u64, dest: &Path) -> anyhow::Result<Vec<PathBuf>> {
    eprintln!("bench: writing about {mb} MB of WAL on a throwaway cluster...");
    let cluster = Cluster::builder()
        .archive_dir(true)
        .guc("max_wal_size", "4GB")
        .start()?;
    cluster.pgbench_init(10)?;
    cluster.checkpoint()?;
    let start: u64 = cluster
        .query_one("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")?
        .parse()?;
    let mut seed = 1;
    loop {
        let now: u64 = cluster
            .query_one("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")?
            .parse()?;
        if now - start >= mb << 20 {
            break;
        }
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
        let d = dest.join(f.file_name().context("segment name")?);
        std::fs::copy(&f, &d)?;
        files.push(d);
    }
    files.sort();
    Ok(files)
}

fn read(a: BenchReadArgs) -> anyhow::Result<ExitCode> {
    let install = PgInstall::find()?;
    let tmp = tempfile::tempdir()?;
    let files = if a.paths.is_empty() {
        make_wal(a.wal_mb, tmp.path())?
    } else {
        wal::source::SegmentSet::from_paths(&a.paths)?.files
    };
    let set = wal::source::SegmentSet::from_paths(&files)?;
    if set.geometry.version.major() != install.major() {
        bail!(
            "this WAL was written by PostgreSQL {} but the installed pg_waldump is {}'s: it reads only its own version",
            set.geometry.version,
            install.major()
        );
    }
    let dir = files[0]
        .parent()
        .context("segment directory")?
        .display()
        .to_string();
    let name = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    let me = std::env::current_exe()?.display().to_string();
    let peer = vec![
        install.bin("pg_waldump").display().to_string(),
        "--stats".into(),
        "-p".into(),
        dir.clone(),
        name(&files[0]),
        name(files.last().context("last segment")?),
    ];
    let mut ours = vec![me.clone(), "wal".into(), "stats".into()];
    ours.extend(files.iter().map(|f| f.display().to_string()));
    let mut ours1 = ours.clone();
    ours1.extend(["--threads".into(), "1".into()]);

    // Same work: our table must be pg_waldump's.
    let peer_out = Command::new(&peer[0]).args(&peer[1..]).output()?;
    let our_out = Command::new(&ours[0]).args(&ours[1..]).output()?;
    let agree = String::from_utf8_lossy(&our_out.stdout)
        .starts_with(&*String::from_utf8_lossy(&peer_out.stdout));
    if !agree {
        bail!("pgcompress and pg_waldump disagree on this WAL; not timing different work");
    }
    let bytes = set.total_bytes();
    eprintln!(
        "bench: {} segments, {:.0} MB; {} alternating runs of each after a warm-up",
        files.len(),
        bytes as f64 / 1e6,
        a.runs
    );
    let cmds = [
        ("pg_waldump --stats", &peer),
        ("pgcompress wal stats", &ours),
        ("pgcompress wal stats --threads 1", &ours1),
    ];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cmds.len()];
    for (_, c) in &cmds {
        measure(c)?;
    }
    for _ in 0..a.runs {
        for (i, (_, c)) in cmds.iter().enumerate() {
            samples[i].push(measure(c)?);
        }
    }
    let ratio = |i: usize, f: fn(&Sample) -> f64| {
        median(
            samples[i]
                .iter()
                .zip(&samples[0])
                .map(|(x, p)| f(x) / f(p))
                .collect(),
        )
    };
    let rows: Vec<_> = cmds
        .iter()
        .enumerate()
        .map(|(i, (label, _))| {
            json!({
                "command": label,
                "wall_s_median": median(samples[i].iter().map(|s| s.wall).collect()),
                "wall_s_min": samples[i].iter().map(|s| s.wall).fold(f64::INFINITY, f64::min),
                "cpu_s_median": median(samples[i].iter().map(|s| s.cpu).collect()),
                "wall_ratio_vs_pg_waldump": ratio(i, |s| s.wall),
                "cpu_ratio_vs_pg_waldump": ratio(i, |s| s.cpu),
                "mb_per_s": bytes as f64 / 1e6 / median(samples[i].iter().map(|s| s.wall).collect()),
            })
        })
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "segments": files.len(), "bytes": bytes, "runs": a.runs, "cpus": threads,
                "pg_waldump": peer.join(" "), "outputs_agree": agree, "results": rows,
            }))?
        );
    } else {
        println!(
            "WAL: {} segments of {} MB, {:.0} MB in all; {} CPUs; outputs agree: yes",
            files.len(),
            set.geometry.seg_size >> 20,
            bytes as f64 / 1e6,
            threads
        );
        println!(
            "{:<34} {:>10} {:>10} {:>10} {:>12} {:>12}",
            "command", "wall s", "cpu s", "MB/s", "wall ratio", "cpu ratio"
        );
        for r in &rows {
            println!(
                "{:<34} {:>10.3} {:>10.3} {:>10.0} {:>11.2}x {:>11.2}x",
                r["command"].as_str().unwrap_or(""),
                r["wall_s_median"].as_f64().unwrap_or(0.0),
                r["cpu_s_median"].as_f64().unwrap_or(0.0),
                r["mb_per_s"].as_f64().unwrap_or(0.0),
                r["wall_ratio_vs_pg_waldump"].as_f64().unwrap_or(0.0),
                r["cpu_ratio_vs_pg_waldump"].as_f64().unwrap_or(0.0),
            );
        }
        println!("Ratios are medians of per-pair ratios (ours / pg_waldump, runs alternate); below 1 is faster.");
    }
    Ok(ExitCode::SUCCESS)
}
