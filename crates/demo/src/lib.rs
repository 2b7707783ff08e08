//! `pgcompress demo`: one seeded pgbench workload on a throwaway cluster (through [`pgcluster`]), once per
//! `wal_compression` setting, then the same WAL through `pgcompress archive`, the tunnel and the logical
//! spill, each beside what a DBA uses today, measured in the same run.
//!
//! The measuring pieces the demo is made of (runs isolated in their own WAL segments, archive tools timed
//! per segment, a tunnel pair as two child processes, the logical-spill comparison, CPU and process
//! helpers) are public: the benchmarks (`pgcompress-bench`, the `bench` crate) build on them. Nothing here
//! installs software, builds network namespaces or needs root.
//!
//! Every entry point takes a plain options struct and returns a report value or an [`Error`] (typed, its
//! cause kept as the source); each report type derives `Serialize` (the JSON output is that serialization)
//! and has one text renderer.

#![deny(missing_docs)]

pub mod archive_tools;
mod compare;
pub mod error;
pub mod long_run;
pub mod pair;
pub mod runs;
pub mod spill;
pub mod sys;
pub mod timing;

pub use compare::{
    compare, ArchiveComparison, Demo, LogicalSpill, Options, RunResult, StoredBy, TunnelSection,
    Workload, SETTINGS,
};
pub use error::{Error, Result};
pub use timing::Timing;

/// Hears what a long run is doing, for progress output; also asked whether to stop.
pub trait Progress {
    /// The step now under way.
    fn step(&self, msg: String);
    /// A line worth keeping (a finished run).
    fn note(&self, msg: String) {
        self.step(msg);
    }
    /// True once the user asked to stop (Ctrl-C): the run then ends with an error between steps.
    fn cancelled(&self) -> bool {
        false
    }
}

/// Fails with [`Error::Cancelled`] when the user asked to stop.
pub fn check_cancelled(p: &dyn Progress) -> Result<()> {
    if p.cancelled() {
        return Err(Error::Cancelled);
    }
    Ok(())
}
