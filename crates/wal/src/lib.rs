//! A sans-IO reader of PostgreSQL 15-18 write-ahead log.
//!
//! [`WalDecoder`] turns the bytes of consecutive WAL segments into CRC-checked,
//! decoded records and stops exactly where PostgreSQL's own reader (and so
//! `pg_waldump`) stops. [`source`] feeds it from files; [`stats`] reproduces
//! `pg_waldump --stats` and adds what pg_waldump does not show; [`verify`] checks
//! every page, record and image.
#![deny(missing_docs)]

pub mod consts;
pub mod decoder;
pub mod error;
mod input;
pub mod lsn;
pub mod page;
pub mod parallel;
pub mod record;
pub mod rmgr;
pub mod version;

pub use decoder::{DecoderOptions, Next, Record, Stop, WalDecoder};
pub use error::{BodyDefect, Defect, WalError};
pub use lsn::{Lsn, SegmentName};
pub use page::Geometry;
pub use record::{BlockRef, ImageHeader, ImageMethod, RecordHeader};
pub use version::PgVersion;
pub mod source;
pub mod stats;
pub mod verify;
