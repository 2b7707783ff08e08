//! `pgcompress bench archive`: `pgcompress archive push|get` against pgBackRest's `archive-push|get` and the
//! plain gzip, zstd and xz programs, on the same WAL segments, in one run.
//!
//! The command writes its own corpora on a throwaway cluster with `wal_compression = off` (pgbench tpcb-like
//! after a checkpoint, and English-like prose rows with [`pgtest::workload::prose_round`]), each a run of full
//! 16 MB segments that the workload alone wrote. It creates a pgBackRest stanza per compress type against that
//! same cluster (pgBackRest checks the system identifier in every segment it archives), stops the server, and
//! then archives and restores every segment with every tool, one process per file exactly as
//! `archive_command` and `restore_command` would run them, the tools taking turns in an order that changes
//! from segment to segment so that background load falls on all of them alike.

use super::{children_cpu, median};
use crate::runs::{lsn, start_cluster};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use codec::Spec;
use indicatif::{ProgressBar, ProgressStyle};
use pgtest::Cluster;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};
use wal::SegmentName;

/// pgcompress settings measured unless `--methods` says otherwise: `default` is `archive push` without
/// `--method`; the others are candidates worth comparing with it. Edit this list to change the default run.
pub const DEFAULT_METHODS: &str = "default,xz:1";

/// Arguments of `pgcompress bench archive`.
#[derive(Args, Debug)]
#[command(after_help = "\
Writes the corpora itself on a throwaway PostgreSQL 15+ cluster with wal_compression = off: full 16 MB \
segments of pgbench tpcb-like WAL (scale 10, after a checkpoint) and of English-like prose rows (inserts and \
edits, a checkpoint per round). Creates one pgBackRest stanza per compress type (gz:6, lz4:1, zst:3) against \
that cluster, then pushes and gets every segment with every tool, one process per file as archive_command \
and restore_command run them, alternating the order of the tools. Every restored file is compared (SHA-256) \
with the original.\n\n\
Per tool: compression ratio (original bytes / stored bytes), median wall time per segment of push and of get, \
median CPU (user + sys) per segment (with --rounds N, each segment's time is the median of N runs), and the same relative to pgBackRest zst:3 and to xz -6 (times: median of \
the per-segment ratios, below 1 is faster; ratio: above 1 stores less).\n\n\
Needs pgbackrest, gzip, zstd and xz on PATH (scripts/setup.sh installs them).\n\n\
Examples:\n  pgcompress bench archive\n  pgcompress bench archive --segments 16 --corpus text\n  \
pgcompress bench archive --methods default,zstd:3,zstd:19,lz4 --json > archive.json\n  \
pgcompress bench archive --rounds 3   # each time the median of 3 runs: for a shared machine\n\n\
Exit status: 0 figures printed; 1 a restored file differs from the original; 2 bad usage, a tool missing or \
failing.")]
pub struct BenchArchiveArgs {
    /// Segments of 16 MB in each corpus.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub segments: u32,
    /// Which corpus to write and measure.
    #[arg(long, value_enum, default_value_t = CorpusChoice::All)]
    pub corpus: CorpusChoice,
    /// pgcompress settings to measure, separated by commas: `default` (archive push without --method) or a
    /// method in PostgreSQL's syntax.
    #[arg(long, value_name = "SPEC,...", default_value = DEFAULT_METHODS)]
    pub methods: String,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also copy each corpus's segments to DIR/<corpus>/ (for `wal stats`, `wal advise` or
    /// another compressor); DIR is created if missing.
    #[arg(long, value_name = "DIR")]
    pub keep_corpus: Option<PathBuf>,
    /// Push and get every segment this many times with every tool (what a round stored is deleted before
    /// the next) and keep each segment's median time: steadier figures on a busy or shared machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub rounds: u32,
}

/// `--corpus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CorpusChoice {
    /// pgbench tpcb-like transactions after a checkpoint.
    Pgbench,
    /// English-like prose: rows inserted, then edited after a checkpoint.
    Text,
    /// Both.
    All,
}

/// pgbench scale of the pgbench corpus (1,000,000 accounts, 160 MB of table).
const PGBENCH_SCALE: u32 = 10;
/// Rows of prose each round of the text corpus inserts.
const PROSE_ROWS: u32 = 10_000;
/// The stanza name in every pgBackRest configuration.
const STANZA: &str = "bench";
/// How long the archiver may take to copy a corpus's segments.
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(300);
/// The references every tool is set against.
const REFERENCES: [&str; 2] = ["pgbackrest zst:3", "xz -6"];

/// One archiver being compared.
#[derive(Clone, Debug)]
pub(crate) enum Tool {
    /// `pgcompress archive push [--method SPEC]` and `archive get`.
    Pgcompress(Option<Spec>),
    /// `pgbackrest archive-push|archive-get` with a compress type and level.
    Pgbackrest(&'static str, u32),
    /// A compressor program: name, level flag, file suffix. Push compresses into a file, get decompresses it.
    Program(&'static str, &'static str, &'static str),
}

/// The programs compared, in the order they are printed.
pub(crate) const GZIP: Tool = Tool::Program("gzip", "-6", "gz");
/// See [`GZIP`].
pub(crate) const ZSTD: Tool = Tool::Program("zstd", "-3", "zst");
/// See [`GZIP`].
pub(crate) const XZ: Tool = Tool::Program("xz", "-6", "xz");

impl Tool {
    /// The name in tables and JSON.
    pub(crate) fn label(&self) -> String {
        match self {
            Tool::Pgcompress(None) => format!(
                "pgcompress (default {})",
                Spec::from_str(::archive::DEFAULT_METHOD)
                    .map_or_else(|_| ::archive::DEFAULT_METHOD.to_string(), |s| s.to_string())
            ),
            Tool::Pgcompress(Some(s)) => format!("pgcompress --method {s}"),
            Tool::Pgbackrest(t, l) => format!("pgbackrest {t}:{l}"),
            Tool::Program(p, l, _) => format!("{p} {l}"),
        }
    }

    /// The program that must be on PATH (pgcompress is this executable).
    fn program(&self) -> Option<&'static str> {
        match self {
            Tool::Pgcompress(_) => None,
            Tool::Pgbackrest(..) => Some("pgbackrest"),
            Tool::Program(p, ..) => Some(*p),
        }
    }
}

/// Where one tool keeps its files during the run.
struct Place {
    tool: Tool,
    /// The repository (pgcompress, pgBackRest) or the directory of compressed files (programs).
    repo: PathBuf,
    /// pgBackRest's configuration file.
    conf: Option<PathBuf>,
}

impl Place {
    /// The archive command for `segment`, and the file its standard output goes to.
    fn push(&self, me: &Path, segment: &Path) -> (Command, Option<PathBuf>) {
        let name = file_name(segment);
        match &self.tool {
            Tool::Pgcompress(method) => {
                let mut c = Command::new(me);
                c.args(["archive", "push", "--repo"]).arg(&self.repo);
                if let Some(m) = method {
                    c.arg("--method").arg(m.to_string());
                }
                c.arg(segment);
                (c, None)
            }
            Tool::Pgbackrest(..) => (
                self.pgbackrest("archive-push", &[segment.as_os_str()]),
                None,
            ),
            Tool::Program(p, level, suffix) => {
                let mut c = Command::new(p);
                c.args([*level, "-c"]).arg(segment);
                (c, Some(self.repo.join(format!("{name}.{suffix}"))))
            }
        }
    }

    /// The restore command for segment `name` into `dest`, and the file its standard output goes to.
    fn get(&self, me: &Path, name: &str, dest: &Path) -> (Command, Option<PathBuf>) {
        match &self.tool {
            Tool::Pgcompress(_) => {
                let mut c = Command::new(me);
                c.args(["archive", "get", "--repo"])
                    .arg(&self.repo)
                    .arg(name)
                    .arg(dest);
                (c, None)
            }
            Tool::Pgbackrest(..) => (
                self.pgbackrest(
                    "archive-get",
                    &[std::ffi::OsStr::new(name), dest.as_os_str()],
                ),
                None,
            ),
            Tool::Program(p, _, suffix) => {
                let mut c = Command::new(p);
                c.args(["-d", "-c"])
                    .arg(self.repo.join(format!("{name}.{suffix}")));
                (c, Some(dest.to_path_buf()))
            }
        }
    }

    fn pgbackrest(&self, command: &str, args: &[&std::ffi::OsStr]) -> Command {
        let mut c = Command::new("pgbackrest");
        if let Some(conf) = &self.conf {
            c.arg(format!("--config={}", conf.display()));
        }
        c.arg(format!("--stanza={STANZA}")).arg(command).args(args);
        c
    }

    /// Bytes the tool stored for segment `name`.
    fn stored(&self, name: &str) -> anyhow::Result<u64> {
        let path = self.stored_path(name)?;
        Ok(std::fs::metadata(&path)
            .with_context(|| format!("{} stored nothing at {}", self.tool.label(), path.display()))?
            .len())
    }

    /// Deletes what the tool stored for segment `name`, so that the next push of it does the whole work again.
    fn forget(&self, name: &str) -> anyhow::Result<()> {
        let path = self.stored_path(name)?;
        std::fs::remove_file(&path).with_context(|| format!("deleting {}", path.display()))
    }

    /// The file the tool stored segment `name` in.
    fn stored_path(&self, name: &str) -> anyhow::Result<PathBuf> {
        Ok(match &self.tool {
            Tool::Pgcompress(_) => self.repo.join(format!("{name}.pgcz")),
            // pgBackRest names the file `<segment>-<sha1>.<ext>` under archive/<stanza>/<id>/<first 16 digits>/.
            Tool::Pgbackrest(..) => find_prefixed(&self.repo.join("archive"), &format!("{name}-"))?
                .with_context(|| {
                    format!(
                        "pgbackrest archived {name} but no file for it is in {}",
                        self.repo.display()
                    )
                })?,
            Tool::Program(_, _, suffix) => self.repo.join(format!("{name}.{suffix}")),
        })
    }
}

/// The first file under `dir` (recursively) whose name starts with `prefix`.
fn find_prefixed(dir: &Path, prefix: &str) -> anyhow::Result<Option<PathBuf>> {
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e?;
        let path = e.path();
        if e.file_type()?.is_dir() {
            if let Some(found) = find_prefixed(&path, prefix)? {
                return Ok(Some(found));
            }
        } else if e.file_name().to_string_lossy().starts_with(prefix) {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Wall and CPU seconds of one process.
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// Runs `cmd` as the server user (when we are root), its standard output into `stdout` when given, and times
/// it, file creation included (the shell of an archive_command opens that file too). Fails on a non-zero exit
/// with the first line the program printed on stderr.
fn timed(mut cmd: Command, stdout: Option<&Path>, what: &str) -> anyhow::Result<Timing> {
    pgtest::run::as_server_user(&mut cmd)?;
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    let cpu0 = children_cpu();
    let began = Instant::now();
    match stdout {
        Some(p) => {
            let f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            cmd.stdout(f);
        }
        None => {
            cmd.stdout(Stdio::null());
        }
    }
    let out = cmd
        .output()
        .with_context(|| format!("{what}: cannot run {}", cmd.get_program().to_string_lossy()))?;
    let wall = began.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{what} failed ({}): {}",
            out.status,
            err.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
        );
    }
    Ok(Timing { wall, cpu })
}

/// One corpus: a name, what wrote it, and its segments.
struct Corpus {
    name: &'static str,
    workload: String,
    segments: Vec<PathBuf>,
}

/// What one tool did on one segment.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    original: u64,
    stored: u64,
    push: Timing,
    get: Timing,
    identical: bool,
}

/// Runs the benchmark and prints tables or JSON.
pub fn run(a: BenchArchiveArgs) -> anyhow::Result<ExitCode> {
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
        .filter(|p| which(p).is_none())
        .collect();
    if !missing.is_empty() {
        bail!(
            "bench archive needs {} on PATH; install with scripts/setup.sh (Debian: apt-get install {})",
            missing.join(", "),
            missing
                .iter()
                .map(|p| if *p == "xz" { "xz-utils" } else { p })
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let install = pgtest::PgInstall::find()
        .context("bench archive runs a throwaway PostgreSQL 15+ server")?;
    if install.major() < 15 {
        bail!(
            "PostgreSQL {} found; bench archive needs 15 or later",
            install.major()
        );
    }
    let me = std::env::current_exe().context("locating this executable")?;
    let load_start = load_average();
    let tmp = tempfile::Builder::new()
        .prefix("pgcompress-bench-archive-")
        .tempdir()?;
    let root = tmp.path();
    pgtest::run::chown_to_server_user(root)?;

    eprintln!(
        "bench archive: starting PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    );
    let (cluster, server) = start_cluster(install)?;
    cluster.set_guc_and_reload("wal_compression", "off")?;
    if server.seg_size != 16 << 20 {
        bail!(
            "the cluster's WAL segments are {} bytes, not 16 MB",
            server.seg_size
        );
    }
    let mut corpora = Vec::new();
    if a.corpus != CorpusChoice::Text {
        corpora.push(pgbench_corpus(&cluster, &server, a.segments, root)?);
    }
    if a.corpus != CorpusChoice::Pgbench {
        corpora.push(text_corpus(&cluster, &server, a.segments, root)?);
    }
    if let Some(keep) = &a.keep_corpus {
        for c in &corpora {
            let dir = keep.join(c.name);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for seg in &c.segments {
                let to = dir.join(file_name(seg));
                std::fs::copy(seg, &to)
                    .with_context(|| format!("copying {} to {}", seg.display(), to.display()))?;
            }
        }
    }
    let places = prepare(&tools, &cluster, root)?;
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
        let original = std::fs::read(seg).with_context(|| format!("reading {}", seg.display()))?;
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
                let (cmd, out) = p.push(&me, seg);
                let what = format!("{} push of {name}", p.tool.label());
                pushed[t] = Some(timed(cmd, out.as_deref(), &what)?);
                bar.inc(1);
            }
            for &t in order.iter().rev() {
                let p = &places[t];
                bar.set_message(format!("{}: get {name}", p.tool.label()));
                let dest = restore.join(format!("{t}-{name}"));
                let (cmd, out) = p.get(&me, &name, &dest);
                let what = format!("{} get of {name}", p.tool.label());
                let get = timed(cmd, out.as_deref(), &what)?;
                bar.inc(1);
                let back = std::fs::read(&dest)
                    .with_context(|| format!("{what} wrote nothing at {}", dest.display()))?;
                identical[t] &= Sha256::digest(&back) == digest;
                std::fs::remove_file(&dest)?;
                let push = pushed[t].context("every tool pushes before it gets")?;
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
                },
                get: Timing {
                    wall: of(|x| x.1.wall),
                    cpu: of(|x| x.1.cpu),
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
    let mut corpus_docs: Vec<Value> = corpora
        .iter()
        .zip(&outcomes)
        .map(|(k, o)| corpus_json(k.name, &k.workload, o, &labels))
        .collect();
    if corpora.len() > 1 {
        let all: Vec<Vec<Outcome>> = (0..places.len())
            .map(|t| outcomes.iter().flat_map(|o| o[t].iter().copied()).collect())
            .collect();
        corpus_docs.push(corpus_json("all", "every segment above", &all, &labels));
    }
    let versions: Vec<Value> = places
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
            json!({
                "tool": p.tool.label(),
                "version": tool_version(&p.tool),
                "push": line(p.push(&me, Path::new("%p"))),
                "get": line(p.get(&me, "%f", Path::new("%p"))),
            })
        })
        .collect();
    let doc = json!({
        "pg_version": server.version,
        "segment_size": server.seg_size,
        "wal_compression": "off",
        "segments_per_corpus": a.segments,
        "machine": {
            "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "cpu_model": cpu_model(),
            "load_average_start": load_start,
            "load_average_end": load_end,
            "steal_percent": steal.map(|s| s * 100.0),
        },
        "rounds": a.rounds,
        "references": REFERENCES,
        "tools": versions,
        "corpora": corpus_docs,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", table(&doc));
    }
    let bad: Vec<String> = outcomes
        .iter()
        .flat_map(|o| o.iter().enumerate())
        .filter(|(_, v)| v.iter().any(|x| !x.identical))
        .map(|(t, _)| labels[t].clone())
        .collect();
    if !bad.is_empty() {
        eprintln!(
            "bench archive: a restored segment differs from the original with: {}",
            bad.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--methods`: `default` is `None`; every other item a [`Spec`] (options such as `long` join the item
/// before them, as in [`codec::parse_spec_list`]).
fn parse_methods(list: &str) -> anyhow::Result<Vec<Option<Spec>>> {
    let mut out = Vec::new();
    let mut pending: Vec<&str> = Vec::new();
    let flush = |pending: &mut Vec<&str>, out: &mut Vec<Option<Spec>>| -> anyhow::Result<()> {
        if !pending.is_empty() {
            let specs = codec::parse_spec_list(&pending.join(","))
                .map_err(|e| anyhow::anyhow!("--methods: {e}"))?;
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
            bail!("--methods: empty item in {list:?}; give methods separated by commas, e.g. default,zstd:19");
        } else {
            pending.push(item);
        }
    }
    flush(&mut pending, &mut out)?;
    let labels: Vec<String> = out.iter().map(|m| Tool::Pgcompress(*m).label()).collect();
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            bail!("--methods: {l:?} is listed twice");
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

/// A directory the server user can write into.
fn mkdir_for_server(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    pgtest::run::chown_to_server_user(dir)?;
    Ok(())
}

/// Repositories for every tool, and a stanza for every pgBackRest compress type (while the server runs).
fn prepare(tools: &[Tool], cluster: &Cluster, root: &Path) -> anyhow::Result<Vec<Place>> {
    let mut places = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let dir = root.join(format!("tool{i}"));
        mkdir_for_server(&dir)?;
        let repo = dir.join("repo");
        mkdir_for_server(&repo)?;
        let conf = match tool {
            Tool::Pgbackrest(kind, level) => {
                eprintln!("bench archive: pgbackrest stanza-create with compress-type={kind} compress-level={level}");
                for sub in ["lock", "log"] {
                    mkdir_for_server(&dir.join(sub))?;
                }
                let conf = dir.join("pgbackrest.conf");
                let text = format!(
                    "[global]\nrepo1-path={repo}\ncompress-type={kind}\ncompress-level={level}\narchive-async=n\n\
                     log-level-console=warn\nlog-level-file=off\nlog-path={log}\nlock-path={lock}\n\n\
                     [{STANZA}]\npg1-path={data}\npg1-socket-path={sock}\npg1-port={port}\npg1-user={user}\n",
                    repo = repo.display(),
                    log = dir.join("log").display(),
                    lock = dir.join("lock").display(),
                    data = cluster.data_dir().display(),
                    sock = cluster.socket_dir().display(),
                    port = cluster.port(),
                    user = pgtest::SUPERUSER,
                );
                std::fs::write(&conf, text)?;
                pgtest::run::chown_to_server_user(&conf)?;
                let place = Place {
                    tool: tool.clone(),
                    repo: repo.clone(),
                    conf: Some(conf.clone()),
                };
                let cmd = place.pgbackrest("stanza-create", &[]);
                timed(cmd, None, &format!("{} stanza-create", tool.label()))?;
                Some(conf)
            }
            _ => None,
        };
        places.push(Place {
            tool: tool.clone(),
            repo,
            conf,
        });
    }
    Ok(places)
}

/// Runs `chunk(round)` until the WAL written since a fresh segment fills `n` segments, then copies exactly
/// those `n` segments from the archive into `root/<name>/`.
fn isolate(
    cluster: &Cluster,
    server: &crate::runs::Server,
    n: u32,
    root: &Path,
    name: &str,
    mut chunk: impl FnMut(u32) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<PathBuf>> {
    cluster.switch_wal()?;
    let start = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
    let first = SegmentName::containing(server.tli, start, server.seg_size);
    let end = (first.segno + u64::from(n)) * server.seg_size;
    let began = Instant::now();
    let mut round = 0;
    loop {
        let now = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
        if now.0 >= end {
            break;
        }
        eprintln!(
            "bench archive: {name} corpus: {:.0} of {} MB written ({:.0} s)",
            now.0.saturating_sub(start.0) as f64 / f64::from(1 << 20),
            u64::from(n) * (server.seg_size >> 20),
            began.elapsed().as_secs_f64()
        );
        chunk(round)?;
        round += 1;
    }
    let names: Vec<String> = (first.segno..first.segno + u64::from(n))
        .map(|segno| {
            SegmentName {
                tli: server.tli,
                segno,
            }
            .file_name(server.seg_size)
        })
        .collect();
    let last = names.last().context("no segment")?;
    cluster.wait_for_archived(last, ARCHIVE_TIMEOUT)?;
    let dir = root.join(name);
    mkdir_for_server(&dir)?;
    let mut out = Vec::new();
    for n in &names {
        let to = dir.join(n);
        std::fs::copy(server.archive.join(n), &to)
            .with_context(|| format!("copying segment {n} of the {name} corpus"))?;
        pgtest::run::chown_to_server_user(&to)?;
        out.push(to);
    }
    Ok(out)
}

fn pgbench_corpus(
    cluster: &Cluster,
    server: &crate::runs::Server,
    n: u32,
    root: &Path,
) -> anyhow::Result<Corpus> {
    eprintln!("bench archive: pgbench corpus: pgbench -i -s {PGBENCH_SCALE}, then a checkpoint");
    cluster.pgbench_init(PGBENCH_SCALE)?;
    cluster.checkpoint()?;
    let segments = isolate(cluster, server, n, root, "pgbench", |round| {
        let seed = format!(
            "--random-seed={}",
            pgtest::workload::PGBENCH_SEED + u64::from(round)
        );
        cluster.pgbench(&["-n", "-c", "2", "-j", "2", "-t", "2000", &seed])?;
        Ok(())
    })?;
    Ok(Corpus {
        name: "pgbench",
        workload: format!(
            "pgbench tpcb-like, scale {PGBENCH_SCALE}, 2 clients, from a checkpoint (full-page images, then small records)"
        ),
        segments,
    })
}

fn text_corpus(
    cluster: &Cluster,
    server: &crate::runs::Server,
    n: u32,
    root: &Path,
) -> anyhow::Result<Corpus> {
    let segments = isolate(cluster, server, n, root, "text", |round| {
        pgtest::workload::prose_round(cluster, round, PROSE_ROWS)?;
        Ok(())
    })?;
    Ok(Corpus {
        name: "text",
        workload: format!(
            "English-like prose rows ({PROSE_ROWS} inserted per round, one in eight older rows edited after a checkpoint)"
        ),
        segments,
    })
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

fn corpus_json(name: &str, workload: &str, outcomes: &[Vec<Outcome>], labels: &[String]) -> Value {
    let ratio = |o: &[Outcome]| {
        let stored: u64 = o.iter().map(|x| x.stored).sum();
        let original: u64 = o.iter().map(|x| x.original).sum();
        (original, stored, original as f64 / stored.max(1) as f64)
    };
    let results: Vec<Value> = outcomes
        .iter()
        .zip(labels)
        .map(|(o, label)| {
            let (original, stored, r) = ratio(o);
            let mut rel = serde_json::Map::new();
            for reference in REFERENCES {
                let Some(t) = labels.iter().position(|l| l == reference) else {
                    continue;
                };
                let theirs = &outcomes[t];
                rel.insert(
                    reference.to_string(),
                    json!({
                        "ratio": r / ratio(theirs).2,
                        "push_wall": relative(o, theirs, |x| x.push.wall),
                        "get_wall": relative(o, theirs, |x| x.get.wall),
                        "push_cpu": relative(o, theirs, |x| x.push.cpu),
                        "get_cpu": relative(o, theirs, |x| x.get.cpu),
                    }),
                );
            }
            json!({
                "tool": label,
                "segments": o.len(),
                "original_bytes": original,
                "stored_bytes": stored,
                "ratio": r,
                "push_wall_s": median(o.iter().map(|x| x.push.wall).collect()),
                "get_wall_s": median(o.iter().map(|x| x.get.wall).collect()),
                "push_cpu_s": median(o.iter().map(|x| x.push.cpu).collect()),
                "get_cpu_s": median(o.iter().map(|x| x.get.cpu).collect()),
                "roundtrips": o.len(),
                "roundtrips_identical": o.iter().filter(|x| x.identical).count(),
                "relative": rel,
            })
        })
        .collect();
    let segments = outcomes.first().map_or(0, Vec::len);
    let original: u64 = outcomes
        .first()
        .map_or(0, |o| o.iter().map(|x| x.original).sum());
    json!({
        "name": name,
        "workload": workload,
        "segments": segments,
        "original_bytes": original,
        "results": results,
    })
}

/// The text report: per corpus, absolute figures, then figures relative to each reference.
fn table(doc: &Value) -> String {
    let mut s = String::new();
    let m = &doc["machine"];
    let _ = writeln!(
        s,
        "PostgreSQL {}, {} MiB segments, wal_compression = off; {} CPUs; load average {} at start, {} at end; \
         CPU stolen by the host {}; {} round(s) per segment",
        doc["pg_version"].as_str().unwrap_or("?"),
        doc["segment_size"].as_u64().unwrap_or(0) >> 20,
        m["cpus"],
        m["load_average_start"].as_f64().map_or("?".into(), |l| format!("{l:.2}")),
        m["load_average_end"].as_f64().map_or("?".into(), |l| format!("{l:.2}")),
        m["steal_percent"].as_f64().map_or("?".into(), |p| format!("{p:.1}%")),
        doc["rounds"],
    );
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let x = |v: &Value| v.as_f64().map_or("-".to_string(), |r| format!("{r:.2}x"));
    let empty = Vec::new();
    for c in doc["corpora"].as_array().unwrap_or(&empty) {
        let _ = writeln!(
            s,
            "\n{} corpus: {} segments, {:.1} MB; {}",
            c["name"].as_str().unwrap_or(""),
            c["segments"],
            c["original_bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
            c["workload"].as_str().unwrap_or("")
        );
        let _ = writeln!(
            s,
            "  {:<30} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9}",
            "tool",
            "stored MB",
            "ratio",
            "push s/seg",
            "get s/seg",
            "push CPU",
            "get CPU",
            "restored"
        );
        let results = c["results"].as_array().unwrap_or(&empty);
        for r in results {
            let _ = writeln!(
                s,
                "  {:<30} {:>11.2} {:>6.2}x {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>4}/{:<4}",
                r["tool"].as_str().unwrap_or(""),
                r["stored_bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
                f(r, "ratio"),
                f(r, "push_wall_s"),
                f(r, "get_wall_s"),
                f(r, "push_cpu_s"),
                f(r, "get_cpu_s"),
                r["roundtrips_identical"],
                r["roundtrips"],
            );
        }
        for reference in REFERENCES {
            let _ = writeln!(
                s,
                "  relative to {reference:<18} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10}",
                "", "ratio", "push", "get", "push CPU", "get CPU"
            );
            for r in results {
                let rel = &r["relative"][reference];
                let _ = writeln!(
                    s,
                    "  {:<30} {:>11} {:>7} {:>10} {:>10} {:>10} {:>10}",
                    r["tool"].as_str().unwrap_or(""),
                    "",
                    x(&rel["ratio"]),
                    x(&rel["push_wall"]),
                    x(&rel["get_wall"]),
                    x(&rel["push_cpu"]),
                    x(&rel["get_cpu"]),
                );
            }
        }
    }
    s.push_str(
        "\nratio: original bytes / stored bytes (relative: above 1 stores less than the reference). Times are medians \
         over segments (each segment's time the median of its rounds), one process per file; CPU is user + sys. Relative times are medians of the per-segment \
         ratios (tool / reference); below 1 is faster. restored: round trips identical to the original (SHA-256).\n",
    );
    s
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

/// The path of `program` on PATH.
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// The first line of `--version` (pgBackRest: `version`).
fn tool_version(tool: &Tool) -> String {
    let output = match tool {
        Tool::Pgcompress(_) => return format!("pgcompress {}", env!("CARGO_PKG_VERSION")),
        Tool::Pgbackrest(..) => Command::new("pgbackrest").arg("version").output(),
        Tool::Program(p, ..) => Command::new(p).arg("--version").output(),
    };
    output
        .ok()
        .and_then(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// The one-minute load average, from /proc/loadavg.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine's CPU time counters, from the first line of /proc/stat (in clock ticks, every CPU together).
struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    fn now() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = text
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
        Some(CpuTimes {
            steal: *fields.get(7)?,
            total: fields.iter().take(8).sum(),
        })
    }
}

/// The share of the machine's CPU time that its host gave to other virtual machines ("steal") between
/// `start` and `end`: the figures were taken on a machine that much slower than it looked, and unevenly so.
fn steal_share(start: Option<&CpuTimes>, end: Option<&CpuTimes>) -> Option<f64> {
    let (start, end) = (start?, end?);
    let total = end.total.checked_sub(start.total).filter(|&t| t > 0)?;
    Some(end.steal.saturating_sub(start.steal) as f64 / total as f64)
}

/// The CPU model, from /proc/cpuinfo.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Stored bytes of `segments` with each of `tools` (pushed one file at a time, as archive_command would),
/// for the demo; the repositories live in `dir`. Tools whose program is not installed are left out.
pub(crate) fn stored_bytes(
    tools: &[Tool],
    segments: &[PathBuf],
    dir: &Path,
) -> anyhow::Result<Vec<(Tool, u64)>> {
    let me = std::env::current_exe().context("locating this executable")?;
    mkdir_for_server(dir)?;
    let mut out = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        if matches!(tool, Tool::Pgbackrest(..)) {
            bail!("the demo does not set up pgBackRest");
        }
        if tool.program().is_some_and(|p| which(p).is_none()) {
            continue;
        }
        let repo = dir.join(format!("tool{i}"));
        mkdir_for_server(&repo)?;
        let place = Place {
            tool: tool.clone(),
            repo,
            conf: None,
        };
        let mut total = 0;
        for seg in segments {
            let (cmd, to) = place.push(&me, seg);
            timed(
                cmd,
                to.as_deref(),
                &format!("{} of {}", tool.label(), seg.display()),
            )?;
            total += place.stored(&file_name(seg))?;
        }
        out.push((tool.clone(), total));
    }
    Ok(out)
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

    #[test]
    fn steal_share_is_stolen_ticks_over_all_ticks() {
        let at = |steal, total| Some(CpuTimes { steal, total });
        assert_eq!(
            steal_share(at(10, 1000).as_ref(), at(60, 1200).as_ref()),
            Some(0.25)
        );
        // No time passed, or a counter missing: no figure rather than a division by zero.
        assert_eq!(
            steal_share(at(10, 1000).as_ref(), at(10, 1000).as_ref()),
            None
        );
        assert_eq!(steal_share(None, at(10, 1000).as_ref()), None);
        // This machine's own counters read, and give a share.
        let now = CpuTimes::now().expect("/proc/stat has a cpu line");
        assert!(now.steal <= now.total);
    }
}
