//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Cut the bytes PostgreSQL writes and sends, and measure it.
#[derive(Parser, Debug)]
#[command(name = "pgcompress", version, about, long_about = None)]
#[command(
    after_help = "Examples:\n  pgcompress wal stats $PGDATA/pg_wal\n  pgcompress wal stats --json 000000010000000000000003 000000010000000000000004\n  pgcompress wal verify /archive/wal\n  pgcompress demo"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read real WAL: statistics and verification.
    #[command(subcommand)]
    Wal(WalCommand),
    /// Benchmarks against the tools DBAs use today, measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run a throwaway cluster under each wal_compression setting and compare.
    Demo(DemoArgs),
    /// WAL-aware archive_command / restore_command, to a directory or S3-compatible storage.
    #[command(subcommand, after_help = crate::archive::ARCHIVE_HELP)]
    Archive(crate::archive::ArchiveCommand),
}

#[derive(Subcommand, Debug)]
pub enum WalCommand {
    /// What `pg_waldump --stats` reports, and what it does not.
    #[command(
        after_help = "Reads from the first record that starts in the first segment to the end of valid WAL,\n\
like `pg_waldump --stats -p DIR FIRST LAST`.\n\n\
Examples:\n  pgcompress wal stats $PGDATA/pg_wal\n  pgcompress wal stats --json /archive/000000010000000000000010 /archive/000000010000000000000011\n\n\
Exit status: 0 statistics printed; 2 unreadable input or not WAL."
    )]
    Stats(StatsArgs),
    /// Check every page header, record CRC, block header and image.
    #[command(
        after_help = "Exit status: 0 the WAL is sound up to its end; 1 corruption found (one line names file,\n\
LSN and what was expected); 2 unreadable input or not WAL.\n\n\
Examples:\n  pgcompress wal verify $PGDATA/pg_wal\n  pgcompress wal verify --json /archive/wal"
    )]
    Verify(VerifyArgs),
    /// What each compression method and level would save on this WAL, and which to use.
    Advise(crate::advise::AdviseArgs),
}

/// Options shared by the WAL readers.
#[derive(Args, Debug, Clone)]
pub struct WalInput {
    /// A directory of WAL segments, or segment files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Data page size (BLCKSZ) the server was built with; WAL does not record it.
    #[arg(long, default_value_t = 8192, value_name = "BYTES")]
    pub blcksz: usize,
    /// Threads reading segments in parallel (default: the number of CPUs). The
    /// result is the same as one sequential read.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub input: WalInput,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub input: WalInput,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

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
    Wal(crate::bench::BenchWalArgs),
    /// `pgcompress archive push|get` against pgBackRest, gzip, zstd and xz on the same WAL segments.
    Archive(crate::bench::BenchArchiveArgs),
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
