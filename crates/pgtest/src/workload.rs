//! Deterministic workloads that make WAL worth compressing, shared by tests, benchmarks and demos.
//!
//! Each function creates its own tables (dropping earlier ones of the same name), runs, and reports the WAL range
//! it wrote. Data comes from `generate_series` and `md5`, and pgbench uses a fixed `--random-seed`, so the same
//! arguments give the same rows; only concurrent pgbench clients interleave differently from run to run.

use crate::cluster::Cluster;
use crate::error::{Error, Result};

/// The seed passed to `pgbench --random-seed`.
pub const PGBENCH_SEED: u64 = 42;

/// What a workload did: the WAL range it wrote and any program output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkloadReport {
    /// `pg_current_wal_lsn()` before the workload.
    pub start_lsn: String,
    /// `pg_current_wal_lsn()` after the workload.
    pub end_lsn: String,
    /// WAL bytes between the two LSNs.
    pub wal_bytes: u64,
    /// Standard output of the programs run (pgbench's summary), empty for pure SQL workloads.
    pub output: String,
}

/// Runs `f` and reports the WAL it wrote.
fn measured(cluster: &Cluster, f: impl FnOnce() -> Result<String>) -> Result<WorkloadReport> {
    let start_lsn = cluster.current_wal_lsn()?;
    let output = f()?;
    let end_lsn = cluster.current_wal_lsn()?;
    let sql = format!("SELECT pg_wal_lsn_diff('{end_lsn}', '{start_lsn}')");
    let diff = cluster.query_one(&sql)?;
    let wal_bytes = diff.parse().map_err(|_| Error::UnexpectedOutput {
        sql,
        output: diff.clone(),
        expected: "a non-negative integer",
    })?;
    Ok(WorkloadReport {
        start_lsn,
        end_lsn,
        wal_bytes,
        output,
    })
}

/// pgbench's TPC-B-like workload: `pgbench -i -s scale`, then `transactions` transactions per client from
/// `clients` clients. Mostly small heap and index updates, the bread and butter of OLTP WAL.
pub fn pgbench_tpcb(
    cluster: &Cluster,
    scale: u32,
    transactions: u32,
    clients: u32,
) -> Result<WorkloadReport> {
    measured(cluster, || {
        cluster.pgbench_init(scale)?;
        let clients = clients.max(1).to_string();
        let transactions = transactions.to_string();
        let seed = format!("--random-seed={PGBENCH_SEED}");
        cluster.pgbench(&["-n", "-c", &clients, "-j", "1", "-t", &transactions, &seed])
    })
}

/// Inserts `rows` rows of long, repetitive but varied text into `text_heavy`, then updates a third of them.
///
/// Bodies are a few hundred bytes of recurring phrases plus an md5, and every 50th row is long enough
/// (about 3 kB) to be TOAST-compressed with pglz, so the WAL holds both plain and compressed text.
pub fn text_heavy(cluster: &Cluster, rows: u32) -> Result<WorkloadReport> {
    let sql = format!(
        "DROP TABLE IF EXISTS text_heavy;
         CREATE TABLE text_heavy (id int PRIMARY KEY, category text NOT NULL, body text NOT NULL);
         INSERT INTO text_heavy
         SELECT i,
                (ARRAY['invoice', 'shipment', 'refund', 'support', 'audit'])[1 + i % 5],
                repeat('customer ' || (i % 97) || ' ordered item ' || (i % 13) || ' with note: ', 1 + i % 7)
                  || md5(i::text)
                  || repeat(' lorem ipsum dolor sit amet', 2 + i % 11)
                  || CASE WHEN i % 50 = 0 THEN repeat(' the quick brown fox ' || (i % 7), 120) ELSE '' END
         FROM generate_series(1, {rows}) AS i;
         UPDATE text_heavy SET body = body || ' [updated ' || md5((id * 7)::text) || ']' WHERE id % 3 = 0;"
    );
    measured(cluster, || cluster.psql(&sql).map(|_| String::new()))
}

/// Fills `bulk_updates` with `rows` fixed-width rows, then runs `rounds` full-table updates, each after a
/// checkpoint so that the first touch of every page writes a full-page image.
pub fn bulk_updates(cluster: &Cluster, rows: u32, rounds: u32) -> Result<WorkloadReport> {
    let setup = format!(
        "DROP TABLE IF EXISTS bulk_updates;
         CREATE TABLE bulk_updates (id int PRIMARY KEY, counter bigint NOT NULL DEFAULT 0,
                                    flag boolean NOT NULL DEFAULT false, pad char(100) NOT NULL)
           WITH (fillfactor = 70);
         INSERT INTO bulk_updates (id, pad) SELECT i, 'row ' || i FROM generate_series(1, {rows}) AS i;"
    );
    let round = "CHECKPOINT; UPDATE bulk_updates SET counter = counter + 1, flag = NOT flag;";
    measured(cluster, || {
        cluster.psql(&setup)?;
        for _ in 0..rounds {
            cluster.psql(round)?;
        }
        Ok(String::new())
    })
}
