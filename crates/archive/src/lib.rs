//! WAL-aware, lossless, durable archiving for `archive_command` and `restore_command`.
//!
//! [`container`] is the self-describing file format (sans-IO, capped) and [`pipeline`] its
//! threaded decoder; [`pack`] takes a WAL
//! segment apart into streams ([`walsplit`]) and stores its zero or stale tail apart,
//! compresses everything else plainly, and checks every container by decoding it before it
//! is used; [`repo`] gives a local directory or an S3-compatible bucket the semantics of
//! PostgreSQL's `contrib/basic_archive`.
#![deny(missing_docs)]

pub mod container;
pub mod error;
pub mod identity;
mod images;
pub mod input;
mod lanes;
pub mod pack;
pub mod pipeline;
pub mod repo;
pub mod retention;
pub mod spool;
pub mod walsplit;
pub use codec::words;

pub use container::{Header, Part, PartKind, Role, Transform, WalInfo};
pub use error::{ArchiveError, ContainerError};
pub use identity::Identity;
pub use pack::{pack, Packed};
pub use pipeline::decode;
pub use repo::{Entry, Expired, Location, PushOutcome, Repository, Retain, S3Options};

/// The default method. With the WAL records transform, zstd level 3 on the streams stores
/// about 1.3 times less than zstd level 3 on whole 16 MB segments (pgBackRest's `zst`
/// default) on pgbench and on text WAL; a push takes about nine tenths of pgBackRest's wall
/// time on two cores and 1.3 to 1.5 times its CPU. Level 6 saves another 8% for almost twice the CPU.
/// For the smallest archive use `xz:1` (docs/BENCHMARKS.md, docs/ARCHIVE-FORMAT.md).
pub const DEFAULT_METHOD: &str = "zstd:level=3";

#[cfg(test)]
mod tests;
