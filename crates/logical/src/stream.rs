//! Streaming of in-progress transactions (protocol v2+, `streaming 'on'` or `'parallel'`):
//! Stream Start, Stop, Commit and Abort (protocol.sgml "Logical Replication Message Formats";
//! `LOGICAL_REP_MSG_STREAM_*` in `replication/logicalproto.h`).
//!
//! Between Stream Start and Stream Stop, the DML, Relation, Type, Message and Truncate messages
//! carry the (sub)transaction xid after their tag; [`crate::Decoder`] tracks the block.

use crate::reader::Reader;
use crate::{DecodeError, Lsn};

/// Tag of Stream Start.
pub const STREAM_START: u8 = b'S';
/// Tag of Stream Stop.
pub const STREAM_STOP: u8 = b'E';
/// Tag of Stream Commit.
pub const STREAM_COMMIT: u8 = b'c';
/// Tag of Stream Abort.
pub const STREAM_ABORT: u8 = b'A';

/// Opens a block of changes of an in-progress transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStart {
    /// Top-level xid.
    pub xid: u32,
    /// True for the first block of this xid in this decoding session: a consumer that holds
    /// partial data for it (from before a reconnect) must start over.
    pub first_segment: bool,
}

impl StreamStart {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(StreamStart {
            xid: r.u32()?,
            first_segment: r.u8()? == 1,
        })
    }
}

/// Commit of a streamed transaction: its changes apply now, in this commit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCommit {
    /// Top-level xid.
    pub xid: u32,
    /// Flags, currently unused (0).
    pub flags: u8,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// End LSN: what a client confirms as flushed once the transaction is durable.
    pub end_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_time: i64,
}

impl StreamCommit {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(StreamCommit {
            xid: r.u32()?,
            flags: r.u8()?,
            commit_lsn: r.lsn()?,
            end_lsn: r.lsn()?,
            commit_time: r.i64()?,
        })
    }
}

/// Where and when a streamed (sub)transaction aborted; sent only by protocol v4 with
/// `streaming 'parallel'`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortInfo {
    /// LSN of the abort record.
    pub abort_lsn: Lsn,
    /// Abort time, µs since 2000-01-01.
    pub abort_time: i64,
}

/// Abort of a streamed transaction (`subxid == xid`) or of one of its subtransactions (the
/// changes of `subxid` and of subtransactions started after it are discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamAbort {
    /// Top-level xid.
    pub xid: u32,
    /// The aborted (sub)transaction.
    pub subxid: u32,
    /// Present with protocol v4 and `streaming 'parallel'`.
    pub abort: Option<AbortInfo>,
}

impl StreamAbort {
    /// True when the whole transaction aborted.
    pub fn is_top_level(&self) -> bool {
        self.xid == self.subxid
    }

    pub(crate) fn read(r: &mut Reader<'_>, with_abort_info: bool) -> Result<Self, DecodeError> {
        let xid = r.u32()?;
        let subxid = r.u32()?;
        let abort = if with_abort_info {
            Some(AbortInfo {
                abort_lsn: r.lsn()?,
                abort_time: r.i64()?,
            })
        } else {
            None
        };
        Ok(StreamAbort { xid, subxid, abort })
    }
}
