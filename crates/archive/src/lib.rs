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
/// less than zstd level 3 on whole segments (pgBackRest's `zst` default) for a little more
/// push CPU; higher levels save a little more for much more CPU. For the smallest archive use `xz:1`.
/// Figures: docs/BENCHMARKS.md (`bench archive`); settings: docs/ARCHIVE-FORMAT.md.
pub const DEFAULT_METHOD: &str = "zstd:level=3";

#[cfg(test)]
mod tests;
