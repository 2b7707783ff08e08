//! The test and benchmark harness around [`pgcluster`]'s throwaway clusters.
//!
//! PostgreSQL is the oracle for everything pgcompress does with WAL, so tests start a real server rather than a
//! mock. Everything of [`pgcluster`] is re-exported here ([`Cluster::builder`], [`PgInstall`], [`run`]); this
//! crate adds what only tests and benchmarks need, and never ships in `pgcompress`:
//! [`netns::NetLink`] gives benchmarks and tests a private link with kernel byte counters and `tc` shaping (two
//! network namespaces joined by a veth pair; [`ClusterBuilder::netns`] starts a cluster inside one of them),
//! [`browser`] drives headless Chromium for the HTML reports, [`greenplum`] holds the Greenplum
//! wal_compression workloads.
//!
//! ```no_run
//! # fn main() -> Result<(), pgtest::Error> {
//! let cluster = pgtest::Cluster::builder().wal_segsize_mb(1).start()?;
//! cluster.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (1);")?;
//! assert_eq!(cluster.query_one("SELECT count(*) FROM t")?, "1");
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod browser;
pub mod greenplum;
pub mod netns;

pub use pgcluster::*;
