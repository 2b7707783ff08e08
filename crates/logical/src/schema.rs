//! Schema messages: Relation and Type (protocol.sgml "Logical Replication Message Formats";
//! `LOGICAL_REP_MSG_RELATION`, `_TYPE` in `replication/logicalproto.h`). Inside a streamed
//! block they belong to that (sub)transaction and take effect only at its commit.

use crate::reader::Reader;
use crate::DecodeError;

/// Tag of Relation.
pub const RELATION: u8 = b'R';
/// Tag of Type.
pub const TYPE: u8 = b'Y';
/// Column flag: the column is part of the replica identity key.
pub const COLUMN_FLAG_KEY: u8 = 1;

/// `relreplident` values (`catalog/pg_class.h`).
pub mod replica_identity {
    /// Primary key (the default).
    pub const DEFAULT: u8 = b'd';
    /// No old values.
    pub const NOTHING: u8 = b'n';
    /// Every column.
    pub const FULL: u8 = b'f';
    /// A chosen unique index.
    pub const INDEX: u8 = b'i';
}

/// One column of a [`Relation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelationColumn<'a> {
    /// Flags; [`COLUMN_FLAG_KEY`] marks replica identity columns.
    pub flags: u8,
    /// Column name.
    pub name: &'a [u8],
    /// Type OID.
    pub type_oid: u32,
    /// `atttypmod` (-1 when none).
    pub type_modifier: i32,
}

impl RelationColumn<'_> {
    /// True when the column belongs to the replica identity key.
    pub fn is_key(&self) -> bool {
        self.flags & COLUMN_FLAG_KEY != 0
    }
}

/// The description of a table, sent before its first change in a session (and again after it
/// changes, and for every streamed (sub)transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// Relation OID, the key the DML messages use.
    pub relid: u32,
    /// Schema name (empty for `pg_catalog`).
    pub namespace: &'a [u8],
    /// Table name.
    pub name: &'a [u8],
    /// Replica identity setting, see [`replica_identity`].
    pub replica_identity: u8,
    /// The columns, in the order tuples carry them.
    pub columns: Vec<RelationColumn<'a>>,
}

impl<'a> Relation<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        let relid = r.u32()?;
        let namespace = r.cstr()?;
        let name = r.cstr()?;
        let replica_identity = r.u8()?;
        let at = r.offset();
        let ncols = r.u16()?;
        // flags, an empty name's NUL, type OID and typmod: at least 10 bytes a column.
        let n = r.check_count(at, i64::from(ncols), 10)?;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            columns.push(RelationColumn {
                flags: r.u8()?,
                name: r.cstr()?,
                type_oid: r.u32()?,
                type_modifier: r.i32()?,
            });
        }
        Ok(Relation {
            xid,
            relid,
            namespace,
            name,
            replica_identity,
            columns,
        })
    }
}

/// The name of a non-built-in type a later Relation refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Type<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// Type OID.
    pub type_oid: u32,
    /// Schema name (empty for `pg_catalog`).
    pub namespace: &'a [u8],
    /// Type name.
    pub name: &'a [u8],
}

impl<'a> Type<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        Ok(Type {
            xid,
            type_oid: r.u32()?,
            namespace: r.cstr()?,
            name: r.cstr()?,
        })
    }
}
