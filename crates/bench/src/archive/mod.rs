//! `pgcompress-bench archive`: `pgcompress archive push|get` against pgBackRest's `archive-push|get` and the
//! plain gzip, zstd and xz programs, on the same WAL segments, in one run.
//!
//! The command writes its own corpora on a throwaway cluster with `wal_compression = off` (pgbench tpcb-like
//! after a checkpoint, and English-like prose rows with [`pgtest::workload::prose_round`]), each a run of full
//! segments (16 MB unless [`Options::segment_mb`] says otherwise) that the workload alone wrote. It creates a pgBackRest stanza per compress type against that
//! same cluster (pgBackRest checks the system identifier in every segment it archives), stops the server, and
//! then archives and restores every segment with every tool, one process per file exactly as
//! `archive_command` and `restore_command` would run them, the tools taking turns in an order that changes
//! from segment to segment so that background load falls on all of them alike.

mod corpus;
mod files;
mod report;
mod s3;
mod sustained;
mod sustained_report;
use demo::archive_tools as tools;

pub use report::{CorpusReport, Machine, Relative, Report, ToolInfo, ToolResult, REFERENCES};
pub use sustained::run_sustained;
pub use sustained_report::{Archiver, Store, SustainedRatios, SustainedReport, SustainedRun};
pub use tools::{stored_bytes, Tool, GZIP, XZ, ZSTD};

use crate::error::{Context, Error, IoContext, Result};
use crate::runs::start_cluster;
use crate::sys::{cpu_model, load_average, steal_share, CpuTimes};
use crate::timing::{median, timed, Timing};
use codec::Spec;
use corpus::{pgbench_corpus, text_corpus};
use indicatif::{ProgressBar, ProgressStyle};
use report::{corpus_report, Outcome};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use tools::{file_name, mkdir_for_server, prepare, tool_version};

/// pgcompress settings measured unless `--methods` says otherwise: `default` is `archive push` without
/// `--method`; the others are candidates worth comparing with it. Edit this list to change the default run.
pub const DEFAULT_METHODS: &str = "default,xz:1";

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    /// Segments in each corpus.
    pub segments: u32,
    /// WAL segment size of the throwaway cluster in MB (`initdb --wal-segsize`: a power of two from 1 to
    /// 1024); PostgreSQL's default is 16.
    pub segment_mb: u32,
    /// Which corpora to write and measure.
    pub corpus: Corpora,
    /// pgcompress settings to measure, separated by commas: `default` (archive push without --method) or a
    /// method in PostgreSQL's syntax; see [`DEFAULT_METHODS`].
    pub methods: String,
    /// Also copy each corpus's segments to DIR/<corpus>/.
    pub keep_corpus: Option<PathBuf>,
    /// Push and get every segment this many times with every tool and keep each segment's median time.
    pub rounds: u32,
    /// The `pgcompress` executable to time.
    pub pgcompress: PathBuf,
}

/// Which corpora to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corpora {
    /// pgbench tpcb-like transactions after a checkpoint.
    Pgbench,
    /// English-like prose: rows inserted, then edited after a checkpoint.
    Text,
    /// Both.
    All,
}

/// Runs the benchmark; see the module documentation. [`Report::differing`] names the tools that restored a
/// segment different from the original.
pub fn run(a: &Options) -> Result<Report> {
    let methods = parse_methods(&a.methods)?;
    let mut tools: Vec<Tool> = methods.into_iter().map(Tool::Pgcompress).collect();
    tools.extend([
        Tool::Pgbackrest("gz", 6),
        Tool::Pgbackrest("lz4", 1),
        Tool::Pgbackrest("zst", 3),
        GZIP,
        ZSTD,
        XZ,
    ]);
    let missing: Vec<&str> = tools
        .iter()
        .filter_map(Tool::program)
        .filter(|p| pgtest::which(p).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(Error::MissingPrograms {
            command: "bench archive",
            programs: missing.iter().map(|p| p.to_string()).collect(),
            packages: missing
                .iter()
                .map(|p| if *p == "xz" { "xz-utils" } else { p }.to_string())
                .collect(),
        });
    }
    let install = pgtest::PgInstall::find()
        .context("bench archive runs a throwaway PostgreSQL 15+ server")?;
    if install.major() < 15 {
        return Err(Error::ServerTooOld {
            command: "bench archive",
            found: install.major(),
            need: 15,
            why: "the WAL format the wal crate reads",
            bindir: install.bindir().to_path_buf(),
        });
    }
    let me = a.pgcompress.as_path();
    let load_start = load_average();
    let tmp = tempfile::Builder::new()
        .prefix("pgcompress-bench-archive-")
        .tempdir()
        .io(|| "creating a temporary directory for the corpora and repositories".into())?;
    let root = tmp.path();
    pgtest::run::chown_to_server_user(root)?;

    eprintln!(
        "bench archive: starting PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    );
    let (cluster, server) = start_cluster(install, a.segment_mb)?;
    cluster.set_guc_and_reload("wal_compression", "off")?;
    if server.seg_size != u64::from(a.segment_mb) << 20 {
        return Err(Error::SegmentSize {
            found: server.seg_size,
            asked_mb: a.segment_mb,
        });
    }
    let mut corpora = Vec::new();
    if a.corpus != Corpora::Text {
        corpora.push(pgbench_corpus(&cluster, &server, a.segments, root)?);
    }
    if a.corpus != Corpora::Pgbench {
        corpora.push(text_corpus(&cluster, &server, a.segments, root)?);
    }
    if let Some(keep) = &a.keep_corpus {
        for c in &corpora {
            let dir = keep.join(c.name);
            std::fs::create_dir_all(&dir).io(|| format!("creating {}", dir.display()))?;
            for seg in &c.segments {
                let to = dir.join(file_name(seg));
                std::fs::copy(seg, &to)
                    .io(|| format!("copying {} to {}", seg.display(), to.display()))?;
            }
        }
    }
    let places = prepare(me, &tools, &cluster, root)?;
    eprintln!(
        "bench archive: stopping the server (pgBackRest reads only its pg_control from now on)"
    );
    cluster.stop().context("stopping the throwaway cluster")?;

    let restore = root.join("restore");
    mkdir_for_server(&restore)?;
    let segments: Vec<(usize, &PathBuf)> = corpora
        .iter()
        .enumerate()
        .flat_map(|(c, k)| k.segments.iter().map(move |s| (c, s)))
        .collect();
    let rounds = a.rounds as usize;
    let bar = progress_bar((segments.len() * places.len() * 2 * rounds) as u64);
    let plain = !std::io::stderr().is_terminal();
    let cpu_start = CpuTimes::now();
    // outcomes[corpus][tool][segment]
    let mut outcomes: Vec<Vec<Vec<Outcome>>> = vec![vec![Vec::new(); places.len()]; corpora.len()];
    for (i, (c, seg)) in segments.iter().enumerate() {
        let name = file_name(seg);
        let original = std::fs::read(seg).io(|| format!("reading {}", seg.display()))?;
        let digest = Sha256::digest(&original);
        // times[tool]: (push, get) of every round.
        let mut times: Vec<Vec<(Timing, Timing)>> = vec![Vec::new(); places.len()];
        let mut identical = vec![true; places.len()];
        for round in 0..rounds {
            let order = turn_order(places.len(), i * rounds + round);
            let mut pushed = vec![None; places.len()];
            for &t in &order {
                let p = &places[t];
                bar.set_message(format!("{}: push {name}", p.tool.label()));
                let (cmd, out) = p.push(me, seg);
                let what = format!("{} push of {name}", p.tool.label());
                pushed[t] = Some(timed(cmd, out.as_deref(), &what)?);
                bar.inc(1);
            }
            for &t in order.iter().rev() {
                let p = &places[t];
                bar.set_message(format!("{}: get {name}", p.tool.label()));
                let dest = restore.join(format!("{t}-{name}"));
                let (cmd, out) = p.get(me, &name, &dest);
                let what = format!("{} get of {name}", p.tool.label());
                let get = timed(cmd, out.as_deref(), &what)?;
                bar.inc(1);
                let back = std::fs::read(&dest)
                    .io(|| format!("{what} wrote nothing at {}", dest.display()))?;
                identical[t] &= Sha256::digest(&back) == digest;
                std::fs::remove_file(&dest).io(|| format!("deleting {}", dest.display()))?;
                let push =
                    pushed[t].ok_or(Error::Internal("a tool got a segment it did not push"))?;
                times[t].push((push, get));
            }
            if round + 1 < rounds {
                for p in &places {
                    p.forget(&name)?;
                }
            }
        }
        for (t, p) in places.iter().enumerate() {
            let of = |f: fn(&(Timing, Timing)) -> f64| median(times[t].iter().map(f).collect());
            outcomes[*c][t].push(Outcome {
                original: original.len() as u64,
                stored: p.stored(&name)?,
                push: Timing {
                    wall: of(|x| x.0.wall),
                    cpu: of(|x| x.0.cpu),
                    faults: of(|x| x.0.faults),
                },
                get: Timing {
                    wall: of(|x| x.1.wall),
                    cpu: of(|x| x.1.cpu),
                    faults: of(|x| x.1.faults),
                },
                identical: identical[t],
            });
        }
        if plain {
            eprintln!(
                "bench archive: segment {}/{} ({} corpus) pushed and restored by {} tools",
                i + 1,
                segments.len(),
                corpora[*c].name,
                places.len()
            );
        }
    }
    bar.finish_and_clear();
    let load_end = load_average();
    let steal = steal_share(cpu_start.as_ref(), CpuTimes::now().as_ref());

    let labels: Vec<String> = places.iter().map(|p| p.tool.label()).collect();
    let mut corpus_reports: Vec<CorpusReport> = corpora
        .iter()
        .zip(&outcomes)
        .map(|(k, o)| corpus_report(k.name, &k.workload, o, &labels))
        .collect();
    if corpora.len() > 1 {
        let all: Vec<Vec<Outcome>> = (0..places.len())
            .map(|t| outcomes.iter().flat_map(|o| o[t].iter().copied()).collect())
            .collect();
        corpus_reports.push(corpus_report("all", "every segment above", &all, &labels));
    }
    let tools = places
        .iter()
        .map(|p| {
            // The command lines as archive_command and restore_command would hold them.
            let line = |(cmd, out): (Command, Option<PathBuf>)| {
                let mut l = pgtest::run::command_line(&cmd);
                if let Some(out) = out {
                    let _ = write!(l, " > {}", out.display());
                }
                // A program's compressed file is named after the segment (%f), not its path.
                l.replace(&me.display().to_string(), "pgcompress")
                    .replace("/%p.", "/%f.")
            };
            ToolInfo {
                tool: p.tool.label(),
                version: tool_version(&p.tool),
                push: line(p.push(me, Path::new("%p"))),
                get: line(p.get(me, "%f", Path::new("%p"))),
            }
        })
        .collect();
    Ok(Report {
        pg_version: server.version,
        segment_size: server.seg_size,
        wal_compression: "off",
        segments_per_corpus: a.segments,
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: cpu_model(),
            load_average_start: load_start,
            load_average_end: load_end,
            steal_percent: steal.map(|s| s * 100.0),
        },
        rounds: a.rounds,
        references: REFERENCES,
        tools,
        corpora: corpus_reports,
    })
}

/// `--methods`: `default` is `None`; every other item a [`Spec`] (options such as `long` join the item
/// before them, as in [`codec::parse_spec_list`]).
fn parse_methods(list: &str) -> Result<Vec<Option<Spec>>> {
    let mut out = Vec::new();
    let mut pending: Vec<&str> = Vec::new();
    let flush = |pending: &mut Vec<&str>, out: &mut Vec<Option<Spec>>| -> Result<()> {
        if !pending.is_empty() {
            let specs = codec::parse_spec_list(&pending.join(",")).map_err(Error::Methods)?;
            out.extend(specs.into_iter().map(Some));
            pending.clear();
        }
        Ok(())
    };
    for item in list.split(',').map(str::trim) {
        if item == "default" {
            flush(&mut pending, &mut out)?;
            out.push(None);
        } else if item.is_empty() {
            return Err(Error::MethodsList(format!(
                "empty item in {list:?}; give methods separated by commas, e.g. default,zstd:19"
            )));
        } else {
            pending.push(item);
        }
    }
    flush(&mut pending, &mut out)?;
    let labels: Vec<String> = out.iter().map(|m| Tool::Pgcompress(*m).label()).collect();
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            return Err(Error::MethodsList(format!("{l:?} is listed twice")));
        }
    }
    Ok(out)
}

/// The order the tools take turns in for segment `i`: reversed on odd segments and rotated by one every two,
/// so over `2n` segments every tool runs in every position, before and after every other.
fn turn_order(n: usize, i: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).map(|t| (t + i / 2) % n).collect();
    if i % 2 == 1 {
        v.reverse();
    }
    v
}

/// A bar on a terminal; hidden otherwise (plain progress lines are printed instead).
fn progress_bar(len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left: {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_list() {
        let m = parse_methods("default,zstd:19").expect("parses");
        assert_eq!(m.len(), 2);
        assert!(m[0].is_none());
        assert_eq!(
            m[1].as_ref().map(ToString::to_string).as_deref(),
            Some("zstd:19")
        );
        let m = parse_methods("zstd:level=19,long,default,lz4").expect("parses");
        assert_eq!(m.len(), 3);
        assert!(parse_methods("default,default").is_err());
        assert!(parse_methods("zstd:99").is_err());
        assert!(parse_methods("default,,lz4").is_err());
    }

    #[test]
    fn every_tool_runs_in_every_position() {
        for n in [5, 8] {
            for t in 0..n {
                let positions: std::collections::BTreeSet<usize> = (0..2 * n)
                    .map(|i| {
                        turn_order(n, i)
                            .iter()
                            .position(|&x| x == t)
                            .expect("present")
                    })
                    .collect();
                assert_eq!(positions.len(), n, "tool {t} of {n}");
            }
        }
    }
}
