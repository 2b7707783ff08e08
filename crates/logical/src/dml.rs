//! Row changes: Insert, Update, Delete and Truncate (protocol.sgml "Logical Replication Message
//! Formats"; `LOGICAL_REP_MSG_INSERT`, `_UPDATE`, `_DELETE`, `_TRUNCATE` in
//! `replication/logicalproto.h`).

use crate::reader::Reader;
use crate::{DecodeError, ErrorKind, TupleData};

/// Tag of Insert.
pub const INSERT: u8 = b'I';
/// Tag of Update.
pub const UPDATE: u8 = b'U';
/// Tag of Delete.
pub const DELETE: u8 = b'D';
/// Tag of Truncate.
pub const TRUNCATE: u8 = b'T';
/// Tuple marker: the new row.
pub const TUPLE_NEW: u8 = b'N';
/// Tuple marker: the old row's replica identity key columns (others are NULL).
pub const TUPLE_KEY: u8 = b'K';
/// Tuple marker: the whole old row (REPLICA IDENTITY FULL).
pub const TUPLE_OLD: u8 = b'O';
/// Truncate option: `CASCADE`.
pub const TRUNCATE_CASCADE: u8 = 1;
/// Truncate option: `RESTART IDENTITY`.
pub const TRUNCATE_RESTART_IDENTITY: u8 = 2;

/// The old row an Update or Delete carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple<'a> {
    /// `K`: only the key columns have values.
    Key(TupleData<'a>),
    /// `O`: the whole old row.
    Full(TupleData<'a>),
}

impl<'a> OldTuple<'a> {
    /// The values, whichever kind.
    pub fn tuple(&self) -> &TupleData<'a> {
        match self {
            OldTuple::Key(t) | OldTuple::Full(t) => t,
        }
    }
}

/// A new row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// Relation OID.
    pub relid: u32,
    /// The row.
    pub new: TupleData<'a>,
}

/// A changed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// Relation OID.
    pub relid: u32,
    /// The old key (when it changed) or the whole old row (REPLICA IDENTITY FULL).
    pub old: Option<OldTuple<'a>>,
    /// The new row; unchanged TOASTed columns are [`crate::Value::UnchangedToast`].
    pub new: TupleData<'a>,
}

/// A deleted row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// Relation OID.
    pub relid: u32,
    /// Its key or whole old row.
    pub old: OldTuple<'a>,
}

/// One TRUNCATE of one or more tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// [`TRUNCATE_CASCADE`] and [`TRUNCATE_RESTART_IDENTITY`] bits.
    pub options: u8,
    /// The truncated relations' OIDs.
    pub relids: Vec<u32>,
}

fn marker(r: &mut Reader<'_>) -> Result<(usize, u8), DecodeError> {
    let at = r.offset();
    Ok((at, r.u8()?))
}

fn old_tuple<'a>(r: &mut Reader<'a>, at: usize, m: u8) -> Result<OldTuple<'a>, DecodeError> {
    match m {
        TUPLE_KEY => Ok(OldTuple::Key(TupleData::read(r)?)),
        TUPLE_OLD => Ok(OldTuple::Full(TupleData::read(r)?)),
        other => Err(r.err_at(at, ErrorKind::UnexpectedTupleMarker(other))),
    }
}

fn new_tuple<'a>(r: &mut Reader<'a>, at: usize, m: u8) -> Result<TupleData<'a>, DecodeError> {
    if m == TUPLE_NEW {
        TupleData::read(r)
    } else {
        Err(r.err_at(at, ErrorKind::UnexpectedTupleMarker(m)))
    }
}

impl<'a> Insert<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        let relid = r.u32()?;
        let (at, m) = marker(r)?;
        Ok(Insert {
            xid,
            relid,
            new: new_tuple(r, at, m)?,
        })
    }
}

impl<'a> Update<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        let relid = r.u32()?;
        let (at, m) = marker(r)?;
        let (old, (at, m)) = if m == TUPLE_NEW {
            (None, (at, m))
        } else {
            (Some(old_tuple(r, at, m)?), marker(r)?)
        };
        Ok(Update {
            xid,
            relid,
            old,
            new: new_tuple(r, at, m)?,
        })
    }
}

impl<'a> Delete<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        let relid = r.u32()?;
        let (at, m) = marker(r)?;
        Ok(Delete {
            xid,
            relid,
            old: old_tuple(r, at, m)?,
        })
    }
}

impl Truncate {
    pub(crate) fn read(r: &mut Reader<'_>, xid: Option<u32>) -> Result<Self, DecodeError> {
        let at = r.offset();
        let nrels = r.i32()?;
        let options = r.u8()?;
        let n = r.check_count(at, i64::from(nrels), 4)?;
        let mut relids = Vec::with_capacity(n);
        for _ in 0..n {
            relids.push(r.u32()?);
        }
        Ok(Truncate {
            xid,
            options,
            relids,
        })
    }
}
