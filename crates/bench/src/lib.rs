//! The lab of pgcompress, built into its own binary, `pgcompress-bench`: our tools against their peers
//! (pg_waldump, pgBackRest, gzip, zstd, xz, socat, `ssh -C`) on throwaway clusters, network namespaces with
//! shaped links, the installer of the peers the tunnel bench needs, and the reports of what was measured.
//! None of it ships in `pgcompress`; the measuring pieces it shares with `pgcompress demo` live in the
//! [`demo`] crate and are re-exported here under their old names.
//!
//! Every entry point takes a plain options struct and returns a report value or an [`Error`] (typed, its
//! cause kept as the source); each report type derives `Serialize` (the JSON output is that serialization)
//! and has one text renderer. The `pgcompress-bench` binary parses arguments into the options, shows
//! progress and prints the report.

#![deny(missing_docs)]

pub mod archive;
pub mod read;
pub mod tunnel;
pub mod wal;

pub use demo::{check_cancelled, error, runs, spill, sys, timing, Error, Progress, Result, Timing};
