//! A throwaway PostgreSQL cluster, for the demo, the benchmarks and the tests.
//!
//! [`Cluster::builder`] runs `initdb` into a fresh temporary directory, starts the server on a Unix socket
//! only, and tears it all down on drop, even when the caller panics. [`PgInstall::find`] finds the
//! PostgreSQL binaries already installed; this crate installs nothing.
//!
//! PostgreSQL refuses to run as root. When the current effective uid is 0, every PostgreSQL binary started through
//! this crate runs as the `postgres` system user, and the directories it creates are handed to that user.
//!
//! ```no_run
//! # fn main() -> Result<(), pgcluster::Error> {
//! let cluster = pgcluster::Cluster::builder().wal_segsize_mb(1).start()?;
//! cluster.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (1);")?;
//! assert_eq!(cluster.query_one("SELECT count(*) FROM t")?, "1");
//! cluster.switch_wal()?;
//! assert!(!cluster.wal_segment_files()?.is_empty());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod backup;
mod builder;
mod cluster;
mod error;
mod install;
pub mod run;
mod wal;
pub mod workload;

pub use builder::ClusterBuilder;
pub use cluster::{Cluster, SUPERUSER};
pub use error::{Error, Result};
pub use install::{which, PgInstall, BINDIR_ENV, DEFAULT_MAJORS_ROOT, MAJORS_ROOT_ENV, MAJOR_ENV};
pub use run::run;
pub use wal::is_wal_segment_name;

/// A TCP port on 127.0.0.1 that nothing listened on a moment ago, for servers a test or a
/// benchmark starts (a tunnel half, an S3 stand-in). Another process may take it in between.
pub fn free_port() -> std::io::Result<u16> {
    Ok(
        std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port(),
    )
}
