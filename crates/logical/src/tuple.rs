//! TupleData: the column values of Insert, Update and Delete (protocol.sgml "TupleData";
//! `LOGICALREP_COLUMN_*` in `replication/logicalproto.h`).

use crate::reader::Reader;
use crate::{DecodeError, ErrorKind};

/// Column kind `n`: the value is NULL.
pub const COLUMN_NULL: u8 = b'n';
/// Column kind `u`: an unchanged TOASTed value, not sent (only in Update new tuples and
/// old tuples of REPLICA IDENTITY FULL).
pub const COLUMN_UNCHANGED: u8 = b'u';
/// Column kind `t`: the value in the type's text output form.
pub const COLUMN_TEXT: u8 = b't';
/// Column kind `b`: the value in the type's binary send form (`binary 'true'`).
pub const COLUMN_BINARY: u8 = b'b';

/// One column value, borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// SQL NULL.
    Null,
    /// A TOASTed value that did not change; the consumer keeps the one it has.
    UnchangedToast,
    /// Text output form, in the server encoding.
    Text(&'a [u8]),
    /// Binary send form.
    Binary(&'a [u8]),
}

/// The values of one row, in column order of the table's Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TupleData<'a> {
    /// One value per column (dropped and generated columns are not sent).
    pub columns: Vec<Value<'a>>,
}

impl<'a> TupleData<'a> {
    /// Reads `Int16 ncols` and the columns. Each column takes at least its kind byte, so the
    /// count is checked against the bytes left before the vector is allocated.
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let at = r.offset();
        let ncols = r.u16()?;
        let n = r.check_count(at, i64::from(ncols), 1)?;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.offset();
            let value = match r.u8()? {
                COLUMN_NULL => Value::Null,
                COLUMN_UNCHANGED => Value::UnchangedToast,
                COLUMN_TEXT => Value::Text(r.len_bytes()?),
                COLUMN_BINARY => Value::Binary(r.len_bytes()?),
                other => return Err(r.err_at(at, ErrorKind::UnknownColumnKind(other))),
            };
            columns.push(value);
        }
        Ok(TupleData { columns })
    }
}
