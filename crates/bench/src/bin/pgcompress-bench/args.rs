//! Arguments of `pgcompress-bench ...`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// `pgcompress wal stats` against `pg_waldump --stats` on the same segments.
    #[command(
        after_help = "Without PATH, writes --wal-mb of WAL (16 MB segments) on a throwaway cluster first.\n\n\
Examples:\n  pgcompress-bench read\n  pgcompress-bench read --runs 9 /archive/wal"
    )]
    Read(BenchReadArgs),
    /// The Greenplum wal_compression workloads under each setting, and the advisor's predictions checked.
    Wal(BenchWalArgs),
    /// `pgcompress archive push|get` against pgBackRest, gzip, zstd and xz on the same WAL segments.
    Archive(BenchArchiveArgs),
    /// PostgreSQL's own logical-decoding spill against our compressed consumer-side spill, per workload.
    Spill(BenchSpillArgs),
    /// The tunnel against a direct link, a socat relay and `ssh -C` on a shaped link between two
    /// network namespaces: bytes on the wire, time, TPS and CPU per workload.
    Tunnel(BenchTunnelArgs),
}

/// Arguments of `pgcompress-bench tunnel`.
#[derive(Args, Debug)]
#[command(after_help = "\
Needs root (network namespaces). Creates two network namespaces joined by a veth pair, starts a throwaway \
PostgreSQL 15+ in the server namespace (listening on its veth address and its Unix socket) and runs every \
client program (psql, pg_dump, pg_restore, pgbench, pg_basebackup) in the client namespace. At each --rate \
the link is shaped with tc tbf on both veth ends; each configuration then runs each workload: direct (to \
PostgreSQL's veth address), socat (a TCP relay in each namespace), the tunnel (client half in the client \
namespace, server half beside PostgreSQL) with each method, and an OpenSSH `ssh -C` port forward through \
an sshd the bench starts. Bytes are the veth's kernel counters.\n\n\
Workloads: load (COPY FROM of the 8 TPC-H tables with psql \\copy), dump (pg_dump -Fc to a file), restore \
(pg_restore -j 2 into an empty database), copy-out (COPY lineitem TO STDOUT), select (SELECT * FROM \
lineitem through psql), pgbench-S and tpcb (8 clients, --pgbench-time seconds), basebackup \
(pg_basebackup -X stream). Every result is checked: row counts, SHA-256 against the same read over the \
Unix socket, pg_restore -l, pg_verifybackup.\n\n\
TPC-H data comes from tpchgen-cli, generated once per scale into --cache. scripts/bench-tools.sh installs \
tpchgen-cli (from PyPI, or compiled from crates.io where pip has no wheel), socat and OpenSSH when missing; the bench runs it itself.\n\n\
Examples:\n  pgcompress-bench tunnel\n  \
pgcompress-bench tunnel --rate 50 --workloads load,restore --configs direct,zstd:1,auto,ssh\n  \
pgcompress-bench tunnel --scale 0.1 --json > tunnel.json\n  \
pgcompress-bench tunnel --rate none --workloads pgbench-S --configs socat,auto --pgbench-time 30\n  \
pgcompress-bench tunnel --rate none,50 --workloads pgbench-S,tpcb --configs socat,zstd:1 --rounds 3\n  \
pgcompress-bench tunnel --rate none,50 --workloads narrow-copy,narrow-select,pgbench-S,tpcb \\\n      --configs direct,socat,zstd:1,auto\n  \
pgcompress-bench tunnel --html tunnel.html\n\n\
Exit status: 0 figures printed; 1 a run failed or its check did not match; 2 bad usage, PostgreSQL or a \
tool missing or failing, not root.")]
pub struct BenchTunnelArgs {
    /// Link rates in Mbit/s, separated by commas; `none` for an unshaped link.
    #[arg(long, value_name = "MBIT,...", default_value = bench::tunnel::run::DEFAULT_RATES)]
    pub rate: String,
    /// TPC-H scale factor (1 is about 1 GB of CSV).
    #[arg(long, value_name = "SF", default_value_t = 1.0)]
    pub scale: f64,
    /// Workloads, separated by commas: load, dump, restore, copy-out, select, narrow-copy,
    /// narrow-select (400,000 rows of ~40 bytes; compared with zstd -1 of the output), pgbench-S,
    /// tpcb, basebackup, or all.
    #[arg(long, value_name = "NAME,...", default_value = bench::tunnel::run::DEFAULT_WORKLOADS)]
    pub workloads: String,
    /// Configurations, separated by commas: direct, direct-tls (PostgreSQL's own TLS, sslmode=require),
    /// socat, ssh (ssh -C), or a tunnel method (none, lz4, zstd:1, zstd:3, auto, ...).
    #[arg(long, value_name = "NAME,...", default_value = bench::tunnel::run::DEFAULT_CONFIGS)]
    pub configs: String,
    /// Seconds each pgbench run lasts (-T).
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub pgbench_time: u32,
    /// pgbench's scale factor for its tables (pgbench -i -s).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pgbench_scale: u32,
    /// Run every configuration's workloads this many times at each rate, the configurations taking
    /// turns (socat, tunnel, socat, tunnel, ...), and report each one's median round; TPS against
    /// socat is then the median of the ratios within a round, with their range. TPS on a shared
    /// machine drifts over minutes; pairs taken side by side compare fairly.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub rounds: u32,
    /// Directory for the generated TPC-H data (default: ~/.cache/pgcompress/tpch).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report with charts to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Arguments of `pgcompress-bench spill`.
#[derive(Args, Debug)]
#[command(after_help = "\
Starts a throwaway PostgreSQL 15+ cluster with wal_level = logical and logical_decoding_work_mem = 64kB (its \
minimum), and runs each workload into its own table with two pgoutput slots created before it. The first slot \
is decoded with streaming off: PostgreSQL spills every large transaction itself, and the report shows \
pg_stat_replication_slots.spill_bytes and the peak bytes under pg_replslot/. The second is decoded with \
streaming on and captured once; its payloads then go through our transaction assembler once per --specs \
compression, spilling above --work-mem, and every committed transaction is replayed from its spill file, \
decoded and written as JSON lines (logical recv's writer, to a temporary file). Per compression: raw change \
bytes, bytes on disk, their ratio, our bytes against the server's, the decode time (also relative to none) \
and whether the replay saw every row the workload inserted.\n\n\
Workloads: seed (one INSERT of 'Hello number n°'||i, --rows rows), bytea (rows/20 rows of 1 KiB random \
bytes, sent binary), wide (rows/10 rows of 40 columns), mix (2,000 small transactions, then 4 of rows/8 rows), \
interleaved (two concurrent transactions of rows/4 rows with savepoint rollbacks), and large (rows/8 rows of \
8 KiB out-of-line text, about 1 KB of changes per --rows; only when named).\n\n\
Examples:\n  pgcompress-bench spill\n  pgcompress-bench spill --rows 100000 --workloads seed,bytea --json\n  \
pgcompress-bench spill --specs lz4,zstd:1 --work-mem 64MB\n  \
# one streamed transaction of over 1 GB, held with 64 MB of memory:\n  \
pgcompress-bench spill --workloads large --rows 1100000 --specs lz4 --work-mem 64MB\n\n\
Exit status: 0 figures printed; 1 a replay missed or added rows; 2 bad usage, PostgreSQL missing or failing.")]
pub struct BenchSpillArgs {
    /// Rows of the seed workload; the other workloads scale from it.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    pub rows: u64,
    /// Workloads to run, separated by commas: seed, bytea, wide, mix, interleaved, large.
    #[arg(long, value_name = "NAME,...", default_value = bench::spill::DEFAULT_WORKLOADS)]
    pub workloads: String,
    /// Spill compressions to measure, separated by commas, in the project's syntax (none, lz4, zstd:N, pglz).
    #[arg(long, value_name = "SPEC,...", default_value = bench::spill::DEFAULT_SPECS)]
    pub specs: String,
    /// Memory the open transactions may use together in our assembler before it spills (bytes, or with kB,
    /// MB or GB); small by default so that every large transaction of the default run spills.
    #[arg(long, value_name = "SIZE", default_value = "1MB", value_parser = at_least_1k)]
    pub work_mem: u64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `bench spill --work-mem`: a size ([`service::size::parse_size`]) of at least 1kB.
fn at_least_1k(s: &str) -> Result<u64, String> {
    let n = service::size::parse_size(s)?;
    if n < 1024 {
        return Err(format!("{s:?}: give at least 1kB, e.g. 64MB"));
    }
    Ok(n)
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

/// Arguments of `pgcompress-bench wal`.
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

/// Arguments of `pgcompress-bench archive`.
#[derive(Args, Debug)]
#[command(after_help = "\
Writes the corpora itself on a throwaway PostgreSQL 15+ cluster with wal_compression = off: full segments \
(16 MB, or --segment-size) of pgbench tpcb-like WAL (scale 10, after a checkpoint) and of English-like prose rows (inserts and \
edits, a checkpoint per round). Creates one pgBackRest stanza per compress type (gz:6, lz4:1, zst:3) against \
that cluster, then pushes and gets every segment with every tool, one process per file as archive_command \
and restore_command run them, alternating the order of the tools. Every restored file is compared (SHA-256) \
with the original.\n\n\
Per tool: compression ratio (original bytes / stored bytes), median wall time per segment of push and of get, \
median CPU (user + sys) per segment (with --rounds N, each segment's time is the median of N runs), median minor \
page faults per push and get (about one per 4 KiB of fresh memory touched), and the same relative to pgBackRest \
zst:3 and to xz -6 (times: median of \
the per-segment ratios, below 1 is faster; ratio: above 1 stores less).\n\n\
Needs pgbackrest, gzip, zstd and xz on PATH (scripts/setup.sh installs them).\n\n\
Examples:\n  pgcompress-bench archive\n  pgcompress-bench archive --segments 16 --corpus text\n  \
pgcompress-bench archive --methods default,zstd:3,zstd:19,lz4 --json > archive.json\n  \
pgcompress-bench archive --rounds 3   # each time the median of 3 runs: for a shared machine\n  \
pgcompress-bench archive --segment-size 64   # clusters initialized with --wal-segsize=64\n  \
pgcompress-bench archive --sustained 150   # a busy primary, archived locally and to S3\n  \
pgcompress-bench archive --sustained 300 --stores local --rounds 2   # each tool twice, first once each\n\n\
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
    /// the next) and keep each segment's median time: steadier figures on a busy or shared machine. With
    /// --sustained: run both tools this many times on every store, pgcompress first in odd rounds and
    /// pgBackRest first in even ones, and compare their means.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub rounds: u32,
    /// Instead of the per-segment comparison: pgbench flat out for SECS seconds per archiver (none,
    /// `archive push --async`, pgBackRest archive-async process-max=2 zst:3, each tool on every one of
    /// --stores), with the WAL rate, the .ready backlog, bytes stored, machine CPU and a recovery of a base
    /// backup through the whole archive with each tool's prefetching get.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(5..=3600))]
    pub sustained: Option<u32>,
    /// pgbench clients for --sustained.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub clients: u32,
    /// Where --sustained keeps each tool's archive, separated by commas: a local directory, a bucket on
    /// an S3-compatible server on loopback (moto_server, installed by scripts/setup.sh), or both.
    #[arg(
        long,
        value_name = "STORE,...",
        value_delimiter = ',',
        default_value = "local,s3"
    )]
    pub stores: Vec<StoreChoice>,
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

/// `--stores`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StoreChoice {
    /// A directory on the local disk.
    Local,
    /// An S3-compatible server (moto_server) on loopback.
    S3,
}

impl From<StoreChoice> for bench::archive::Store {
    fn from(c: StoreChoice) -> Self {
        match c {
            StoreChoice::Local => bench::archive::Store::Local,
            StoreChoice::S3 => bench::archive::Store::S3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::at_least_1k;

    #[test]
    fn work_mem_sizes() {
        assert_eq!(at_least_1k("64MB"), Ok(64 << 20));
        assert_eq!(at_least_1k("64kB"), Ok(64 << 10));
        assert_eq!(at_least_1k("2048"), Ok(2048));
        assert_eq!(at_least_1k("1 GB"), Ok(1 << 30));
        // The units of every size flag, terabytes included.
        assert_eq!(at_least_1k("5TB"), Ok(5 << 40));
        assert!(at_least_1k("12").is_err());
        assert!(at_least_1k("MB").is_err());
    }
}
