//! Arguments of `pgcompress bench ...` and `pgcompress demo`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Starts a throwaway PostgreSQL 15+ cluster (found like the tests find it: $PGCOMPRESS_PG_BINDIR, \
pg_config, initdb on PATH, /usr/lib/postgresql/*/bin), runs the same seeded pgbench workload after a \
checkpoint once per wal_compression setting (off, pglz, lz4, zstd) on an identical copy of the data, and \
reads each run's archived WAL. The cluster is stopped and deleted at the end, on error and on Ctrl-C.\n\n\
Examples:\n  pgcompress demo\n  pgcompress demo --scale 10 --transactions 5000 --json\n\n\
Exit status: 0 comparison printed; 2 PostgreSQL missing or failing, or a run's WAL not sound; 130 interrupted."
)]
pub struct DemoArgs {
    /// pgbench scale factor of the workload (100,000 accounts per unit).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub scale: u32,
    /// Transactions per client per run.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(1..))]
    pub transactions: u32,
    /// pgbench clients; with 1 the transaction sequence is the same in every run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub clients: u32,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// `pgcompress wal stats` against `pg_waldump --stats` on the same segments.
    #[command(
        after_help = "Without PATH, writes --wal-mb of WAL (16 MB segments) on a throwaway cluster first.\n\n\
Examples:\n  pgcompress bench read\n  pgcompress bench read --runs 9 /archive/wal"
    )]
    Read(BenchReadArgs),
    /// The Greenplum wal_compression workloads under each setting, and the advisor's predictions checked.
    Wal(BenchWalArgs),
    /// `pgcompress archive push|get` against pgBackRest, gzip, zstd and xz on the same WAL segments.
    Archive(BenchArchiveArgs),
}

#[derive(Args, Debug)]
pub struct BenchReadArgs {
    /// Segments to read (a directory or files); default: WAL written for the purpose.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// MB of WAL to write when no PATH is given.
    #[arg(long, default_value_t = 320)]
    pub wal_mb: u64,
    /// Timed runs of each command, alternating, after one warm-up run each.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `pgcompress bench wal`.
#[derive(Args, Debug)]
pub struct BenchWalArgs {
    /// Multiplies every workload's rows (and pgbench's scale and transactions).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub scale: u32,
    /// Workloads to run: names separated by commas (names contain commas too; they are matched whole).
    #[arg(long)]
    pub workloads: Option<String>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `pgcompress bench archive`.
#[derive(Args, Debug)]
#[command(after_help = "\
Writes the corpora itself on a throwaway PostgreSQL 15+ cluster with wal_compression = off: full segments \
(16 MB, or --segment-size) of pgbench tpcb-like WAL (scale 10, after a checkpoint) and of English-like prose rows (inserts and \
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
pgcompress bench archive --rounds 3   # each time the median of 3 runs: for a shared machine\n  \
pgcompress bench archive --segment-size 64   # clusters initialized with --wal-segsize=64\n\n\
Exit status: 0 figures printed; 1 a restored file differs from the original; 2 bad usage, a tool missing or \
failing.")]
pub struct BenchArchiveArgs {
    /// Segments in each corpus.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub segments: u32,
    /// WAL segment size in MB of the cluster that writes the corpora (initdb --wal-segsize: a power of two
    /// from 1 to 1024): measure the size your servers use. PostgreSQL's default is 16.
    #[arg(long, value_name = "MB", default_value_t = 16, value_parser = segment_size)]
    pub segment_size: u32,
    /// Which corpus to write and measure.
    #[arg(long, value_enum, default_value_t = CorpusChoice::All)]
    pub corpus: CorpusChoice,
    /// pgcompress settings to measure, separated by commas: `default` (archive push without --method) or a
    /// method in PostgreSQL's syntax.
    #[arg(long, value_name = "SPEC,...", default_value = bench::archive::DEFAULT_METHODS)]
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

/// `--segment-size`: what `initdb --wal-segsize` accepts.
fn segment_size(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(mb) if (1..=1024).contains(&mb) && mb.is_power_of_two() => Ok(mb),
        _ => Err(format!(
            "{s:?} is not a WAL segment size: give a power of two from 1 to 1024 (MB)"
        )),
    }
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

impl From<CorpusChoice> for bench::archive::Corpora {
    fn from(c: CorpusChoice) -> Self {
        match c {
            CorpusChoice::Pgbench => bench::archive::Corpora::Pgbench,
            CorpusChoice::Text => bench::archive::Corpora::Text,
            CorpusChoice::All => bench::archive::Corpora::All,
        }
    }
}
