//! Two-phase commit messages (protocol v3+, `two_phase 'true'`): Begin Prepare, Prepare,
//! Commit Prepared, Rollback Prepared and Stream Prepare (protocol.sgml "Logical Replication
//! Message Formats"; `LOGICAL_REP_MSG_BEGIN_PREPARE`, `_PREPARE`, `_COMMIT_PREPARED`,
//! `_ROLLBACK_PREPARED`, `_STREAM_PREPARE` in `replication/logicalproto.h`).

use crate::reader::Reader;
use crate::{DecodeError, Lsn};

/// Tag of Begin Prepare.
pub const BEGIN_PREPARE: u8 = b'b';
/// Tag of Prepare.
pub const PREPARE: u8 = b'P';
/// Tag of Commit Prepared.
pub const COMMIT_PREPARED: u8 = b'K';
/// Tag of Rollback Prepared.
pub const ROLLBACK_PREPARED: u8 = b'r';
/// Tag of Stream Prepare.
pub const STREAM_PREPARE: u8 = b'p';

/// Start of a prepared transaction's changes (then a Prepare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeginPrepare<'a> {
    /// LSN of the prepare record.
    pub prepare_lsn: Lsn,
    /// End LSN of the prepared transaction.
    pub end_lsn: Lsn,
    /// Prepare time, µs since 2000-01-01.
    pub prepare_time: i64,
    /// The transaction id.
    pub xid: u32,
    /// The user's global identifier (`PREPARE TRANSACTION 'gid'`).
    pub gid: &'a [u8],
}

impl<'a> BeginPrepare<'a> {
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(BeginPrepare {
            prepare_lsn: r.lsn()?,
            end_lsn: r.lsn()?,
            prepare_time: r.i64()?,
            xid: r.u32()?,
            gid: r.cstr()?,
        })
    }
}

/// Prepare, Commit Prepared and Stream Prepare share one layout: flags, two LSNs, a time, the
/// xid and the gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedEnd<'a> {
    /// Flags, currently unused (0).
    pub flags: u8,
    /// LSN of the prepare (Prepare, Stream Prepare) or commit (Commit Prepared) record.
    pub lsn: Lsn,
    /// End LSN of that record.
    pub end_lsn: Lsn,
    /// Prepare or commit time, µs since 2000-01-01.
    pub time: i64,
    /// The transaction id.
    pub xid: u32,
    /// The user's global identifier.
    pub gid: &'a [u8],
}

impl<'a> PreparedEnd<'a> {
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(PreparedEnd {
            flags: r.u8()?,
            lsn: r.lsn()?,
            end_lsn: r.lsn()?,
            time: r.i64()?,
            xid: r.u32()?,
            gid: r.cstr()?,
        })
    }
}

/// ROLLBACK PREPARED of a transaction prepared earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollbackPrepared<'a> {
    /// Flags, currently unused (0).
    pub flags: u8,
    /// End LSN of the prepared transaction.
    pub prepare_end_lsn: Lsn,
    /// End LSN of the rollback.
    pub rollback_end_lsn: Lsn,
    /// Prepare time, µs since 2000-01-01.
    pub prepare_time: i64,
    /// Rollback time, µs since 2000-01-01.
    pub rollback_time: i64,
    /// The transaction id.
    pub xid: u32,
    /// The user's global identifier.
    pub gid: &'a [u8],
}

impl<'a> RollbackPrepared<'a> {
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(RollbackPrepared {
            flags: r.u8()?,
            prepare_end_lsn: r.lsn()?,
            rollback_end_lsn: r.lsn()?,
            prepare_time: r.i64()?,
            rollback_time: r.i64()?,
            xid: r.u32()?,
            gid: r.cstr()?,
        })
    }
}
