//! Arguments of `pgcompress wal ...`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum WalCommand {
    /// What `pg_waldump --stats` reports, and what it does not.
    #[command(
        after_help = "Reads from the first record that starts in the first segment to the end of valid WAL,\n\
like `pg_waldump --stats -p DIR FIRST LAST`.\n\n\
Examples:\n  pgcompress wal stats $PGDATA/pg_wal\n  pgcompress wal stats --json /archive/000000010000000000000010 /archive/000000010000000000000011\n\n\
Exit status, as pg_waldump's on damage: 0 statistics printed, the WAL sound to its end;\n\
1 damaged or truncated WAL (as `wal verify` judges it): statistics up to the damage printed, and\n\
one line on stderr names the file, LSN and what is wrong; 2 unreadable input or not WAL.\n\
The ordinary end of a live pg_wal (zeros after the last record) is not damage: pg_waldump\n\
exits 1 there, pgcompress 0."
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
    Advise(AdviseArgs),
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
    after_help = "For every full-page image: restore the page, store it again as PostgreSQL's \
XLogCompressBackupBlock would with each candidate, and sum what each record would become.\n\n\
Default candidates: off, pglz, lz4, zstd (stock: wal_compression can write them today), and what \
stock PostgreSQL cannot write: zstd levels -7, -1, 1, 6, 9, 12, 15, 19, 22; lz4 high-compression \
levels 4, 9, 12; snappy. Stock candidates are measured on every image; slow others on a \
deterministic sample, shown with a 99.9% interval (--exhaustive measures every image).\n\n\
Predicted WAL bytes = sum of MAXALIGN(new record length) + page headers scaled by it: records, \
page headers and alignment padding as PostgreSQL writes them, not the unused space after a segment \
switch (the output says how much of it was left out); combined bytes (pg_waldump's) are exact.\n\n\
Ranking: sampled candidates are ranked only by what their interval establishes (a span such as \
2-4 where intervals overlap); an estimate whose interval is wider than 20% of it is listed apart, \
not ranked, with the share of images measured.\n\n\
Recommendation: the stock setting with the fewest WAL bytes, unless one within 1% of the off \
WAL bytes costs less CPU; then the best non-stock level costing at most 4x its CPU (a sampled one \
only when its whole interval is below).\n\n\
Examples:\n  pgcompress wal advise $PGDATA/pg_wal\n  pgcompress wal advise --methods pglz,lz4,zstd,zstd:9 --exhaustive /archive/wal\n  \
pgcompress wal advise --json /archive/000000010000000000000010\n  \
pgcompress wal advise --html report.html $PGDATA/pg_wal\n\n\
Exit status: 0 advice printed; 1 corrupt WAL; 2 bad usage, bad specification or unreadable input."
)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub input: WalInput,
    /// Candidates to compare instead of the default list: compression specifications
    /// separated by commas (off, pglz, lz4, lz4:9, zstd, zstd:19, snappy, ...).
    #[arg(long, value_name = "SPEC,...")]
    pub methods: Option<String>,
    /// Compress every image with every candidate (no sampling).
    #[arg(long)]
    pub exhaustive: bool,
    /// Measure each non-stock candidate on this share of the images (0 < R <= 1)
    /// instead of the share its CPU budget allows; stock candidates are always
    /// measured on every image.
    #[arg(long, value_name = "R", value_parser = sample_rate, conflicts_with = "exhaustive")]
    pub sample_rate: Option<f64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report (charts and table) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
}

/// A sampling rate: a number in (0, 1].
fn sample_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number; give a share of images, e.g. 0.1"))?;
    if r > 0.0 && r <= 1.0 {
        Ok(r)
    } else {
        Err(format!(
            "{s} is not in (0, 1]; give a share of images, e.g. 0.1"
        ))
    }
}
