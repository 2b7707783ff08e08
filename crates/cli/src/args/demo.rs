//! Arguments of `pgcompress demo`.

use clap::Args;

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
