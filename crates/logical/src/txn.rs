//! Transaction framing: Begin, Commit and Origin (protocol.sgml "Logical Replication Message
//! Formats"; `LOGICAL_REP_MSG_BEGIN`, `_COMMIT`, `_ORIGIN` in `replication/logicalproto.h`).

use crate::reader::Reader;
use crate::{DecodeError, Lsn};

/// Tag of Begin.
pub const BEGIN: u8 = b'B';
/// Tag of Commit.
pub const COMMIT: u8 = b'C';
/// Tag of Origin.
pub const ORIGIN: u8 = b'O';

/// Start of a transaction that was not streamed: its changes follow, then a Commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begin {
    /// The transaction's final LSN (its commit record).
    pub final_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_time: i64,
    /// The transaction id.
    pub xid: u32,
}

impl Begin {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Begin {
            final_lsn: r.lsn()?,
            commit_time: r.i64()?,
            xid: r.u32()?,
        })
    }
}

/// End of a transaction opened by Begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// Flags, currently unused (0).
    pub flags: u8,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// End LSN of the transaction: what a client confirms as flushed once it is durable.
    pub end_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_time: i64,
}

impl Commit {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Commit {
            flags: r.u8()?,
            commit_lsn: r.lsn()?,
            end_lsn: r.lsn()?,
            commit_time: r.i64()?,
        })
    }
}

/// The replication origin the current transaction came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin<'a> {
    /// Commit LSN on the origin server.
    pub commit_lsn: Lsn,
    /// Origin name.
    pub name: &'a [u8],
}

impl<'a> Origin<'a> {
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Origin {
            commit_lsn: r.lsn()?,
            name: r.cstr()?,
        })
    }
}
