//! Logical decoding messages from `pg_logical_emit_message` (protocol.sgml "Message";
//! `LOGICAL_REP_MSG_MESSAGE` in `replication/logicalproto.h`); sent with `messages 'true'`.

use crate::reader::Reader;
use crate::{DecodeError, Lsn};

/// Tag of Message.
pub const MESSAGE: u8 = b'M';
/// Flag: the message is transactional (part of the enclosing transaction).
pub const FLAG_TRANSACTIONAL: u8 = 1;

/// A message emitted with `pg_logical_emit_message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalMessage<'a> {
    /// The streamed (sub)transaction it belongs to, inside a streamed block.
    pub xid: Option<u32>,
    /// [`FLAG_TRANSACTIONAL`] bit.
    pub flags: u8,
    /// LSN of the message's WAL record.
    pub lsn: Lsn,
    /// The prefix given to `pg_logical_emit_message`.
    pub prefix: &'a [u8],
    /// The content.
    pub content: &'a [u8],
}

impl LogicalMessage<'_> {
    /// True for a transactional message, delivered with its transaction's changes.
    pub fn is_transactional(&self) -> bool {
        self.flags & FLAG_TRANSACTIONAL != 0
    }
}

impl<'a> LogicalMessage<'a> {
    pub(crate) fn read(r: &mut Reader<'a>, xid: Option<u32>) -> Result<Self, DecodeError> {
        Ok(LogicalMessage {
            xid,
            flags: r.u8()?,
            lsn: r.lsn()?,
            prefix: r.cstr()?,
            content: r.len_bytes()?,
        })
    }
}
