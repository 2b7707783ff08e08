//! Benchmarks and the demo of pgcompress: throwaway PostgreSQL clusters (through [`pgtest`]), workloads run
//! once per `wal_compression` setting, our tools timed against their peers in the same run, and the reports
//! of what was measured.
//!
//! Every entry point takes a plain options struct and returns a report value or an [`Error`] (typed, its
//! cause kept as the source); each report type derives `Serialize` (the JSON output is that serialization)
//! and has one text renderer. The `pgcompress` binary
//! parses arguments into the options, shows progress and prints the report.

#![deny(missing_docs)]

pub mod archive;
pub mod demo;
mod error;
pub mod read;
pub mod runs;
pub mod spill;
pub mod sys;
pub mod timing;
pub mod tunnel;
pub mod wal;

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
