//! The pgoutput decoder: one XLogData payload in, one typed [`Message`] out. It remembers only
//! what the format needs: the negotiated options and whether a streamed block is open (the
//! xid field of DML, Relation, Type, Message and Truncate exists only inside one).

use crate::dml::{self, Delete, Insert, Truncate, Update};
use crate::message::{self, LogicalMessage};
use crate::reader::Reader;
use crate::schema::{self, Relation, Type};
use crate::stream::{self, StreamAbort, StreamCommit, StreamStart};
use crate::twophase::{self, BeginPrepare, PreparedEnd, RollbackPrepared};
use crate::txn::{self, Begin, Commit, Origin};
use crate::{DecodeError, ErrorKind};

/// Lowest pgoutput `proto_version`.
pub const MIN_PROTO_VERSION: u32 = 1;
/// Highest pgoutput `proto_version` (PostgreSQL 16+; PostgreSQL 15 speaks up to 3).
pub const MAX_PROTO_VERSION: u32 = 4;

/// The `streaming` option negotiated in START_REPLICATION.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Streaming {
    /// `off`: large transactions are spilled by the server and sent at commit.
    #[default]
    Off,
    /// `on`: large in-progress transactions are streamed (proto_version ≥ 2).
    On,
    /// `parallel`: streamed, and Stream Abort carries the abort LSN and time
    /// (proto_version ≥ 4).
    Parallel,
}

/// What was negotiated with the server; it decides the layout of some messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The `proto_version` sent in START_REPLICATION, 1 to 4.
    pub proto_version: u32,
    /// The `streaming` option sent.
    pub streaming: Streaming,
}

/// One decoded pgoutput message, borrowing strings and values from the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message<'a> {
    /// `B`
    Begin(Begin),
    /// `C`
    Commit(Commit),
    /// `O`
    Origin(Origin<'a>),
    /// `R`
    Relation(Relation<'a>),
    /// `Y`
    Type(Type<'a>),
    /// `I`
    Insert(Insert<'a>),
    /// `U`
    Update(Update<'a>),
    /// `D`
    Delete(Delete<'a>),
    /// `T`
    Truncate(Truncate),
    /// `M`
    Message(LogicalMessage<'a>),
    /// `S`
    StreamStart(StreamStart),
    /// `E`
    StreamStop,
    /// `c`
    StreamCommit(StreamCommit),
    /// `A`
    StreamAbort(StreamAbort),
    /// `b`
    BeginPrepare(BeginPrepare<'a>),
    /// `P`
    Prepare(PreparedEnd<'a>),
    /// `K`
    CommitPrepared(PreparedEnd<'a>),
    /// `r`
    RollbackPrepared(RollbackPrepared<'a>),
    /// `p`
    StreamPrepare(PreparedEnd<'a>),
}

impl Message<'_> {
    /// The (sub)transaction xid a message inside a streamed block carries (Relation, Type,
    /// Insert, Update, Delete, Truncate, Message); `None` outside a block and for other kinds.
    /// A spill store files the change under the block's top-level xid
    /// ([`Decoder::stream_xid`]) and notes this one for subtransaction aborts.
    pub fn stream_xid(&self) -> Option<u32> {
        match self {
            Message::Relation(m) => m.xid,
            Message::Type(m) => m.xid,
            Message::Insert(m) => m.xid,
            Message::Update(m) => m.xid,
            Message::Delete(m) => m.xid,
            Message::Truncate(m) => m.xid,
            Message::Message(m) => m.xid,
            _ => None,
        }
    }
}

/// Decodes pgoutput messages of one replication session, in order.
#[derive(Debug, Clone)]
pub struct Decoder {
    options: Options,
    stream_xid: Option<u32>,
}

impl Decoder {
    /// A decoder for a session started with `options`; fails for a version outside 1..=4.
    pub fn new(options: Options) -> Result<Self, DecodeError> {
        if !(MIN_PROTO_VERSION..=MAX_PROTO_VERSION).contains(&options.proto_version) {
            return Err(DecodeError::new(
                None,
                0,
                ErrorKind::UnsupportedVersion(options.proto_version),
            ));
        }
        Ok(Decoder {
            options,
            stream_xid: None,
        })
    }

    /// The negotiated options.
    pub fn options(&self) -> Options {
        self.options
    }

    /// The top-level xid of the open streamed block, if one is open.
    pub fn stream_xid(&self) -> Option<u32> {
        self.stream_xid
    }

    /// Decodes one message (an XLogData payload). The stream state changes only when the
    /// message decodes without error, so a bad message leaves the decoder as it was.
    pub fn decode<'a>(&mut self, msg: &'a [u8]) -> Result<Message<'a>, DecodeError> {
        let Some(&tag) = msg.first() else {
            return Err(DecodeError::new(None, 0, ErrorKind::Empty));
        };
        let mut r = Reader::after_tag(msg, tag);
        let out = self.body(tag, &mut r)?;
        r.finish()?;
        match out {
            Message::StreamStart(s) => self.stream_xid = Some(s.xid),
            Message::StreamStop => self.stream_xid = None,
            _ => {}
        }
        Ok(out)
    }

    /// Decodes a message stored by the assembler: `stream_xid` is the transaction's xid when
    /// it was received inside a streamed block (so DML and schema messages carry a subxid),
    /// `None` otherwise. The decoder's own stream state is left as it was.
    pub(crate) fn decode_stored<'a>(
        &mut self,
        msg: &'a [u8],
        stream_xid: Option<u32>,
    ) -> Result<Message<'a>, DecodeError> {
        let saved = std::mem::replace(&mut self.stream_xid, stream_xid);
        let out = self.decode(msg);
        self.stream_xid = saved;
        out
    }

    fn body<'a>(&self, tag: u8, r: &mut Reader<'a>) -> Result<Message<'a>, DecodeError> {
        // Inside a streamed block, these kinds carry the (sub)transaction xid after the tag.
        let xid = |r: &mut Reader<'a>| -> Result<Option<u32>, DecodeError> {
            match self.stream_xid {
                Some(_) => r.u32().map(Some),
                None => Ok(None),
            }
        };
        Ok(match tag {
            txn::BEGIN => Message::Begin(Begin::read(r)?),
            txn::COMMIT => Message::Commit(Commit::read(r)?),
            txn::ORIGIN => Message::Origin(Origin::read(r)?),
            schema::RELATION => {
                let x = xid(r)?;
                Message::Relation(Relation::read(r, x)?)
            }
            schema::TYPE => {
                let x = xid(r)?;
                Message::Type(Type::read(r, x)?)
            }
            dml::INSERT => {
                let x = xid(r)?;
                Message::Insert(Insert::read(r, x)?)
            }
            dml::UPDATE => {
                let x = xid(r)?;
                Message::Update(Update::read(r, x)?)
            }
            dml::DELETE => {
                let x = xid(r)?;
                Message::Delete(Delete::read(r, x)?)
            }
            dml::TRUNCATE => {
                let x = xid(r)?;
                Message::Truncate(Truncate::read(r, x)?)
            }
            message::MESSAGE => {
                let x = xid(r)?;
                Message::Message(LogicalMessage::read(r, x)?)
            }
            stream::STREAM_START => {
                if let Some(open) = self.stream_xid {
                    return Err(r.err_at(0, ErrorKind::NestedStreamStart { open }));
                }
                Message::StreamStart(StreamStart::read(r)?)
            }
            stream::STREAM_STOP => {
                if self.stream_xid.is_none() {
                    return Err(r.err_at(0, ErrorKind::StreamStopOutsideStream));
                }
                Message::StreamStop
            }
            stream::STREAM_COMMIT => Message::StreamCommit(StreamCommit::read(r)?),
            // Decoded whatever the options: PostgreSQL 18 before aa4c52b808 could send 'A'
            // to a client that asked for streaming off (reference §2.4).
            stream::STREAM_ABORT => {
                let info = self.options.proto_version >= 4
                    && self.options.streaming == Streaming::Parallel;
                Message::StreamAbort(StreamAbort::read(r, info)?)
            }
            twophase::BEGIN_PREPARE => Message::BeginPrepare(BeginPrepare::read(r)?),
            twophase::PREPARE => Message::Prepare(PreparedEnd::read(r)?),
            twophase::COMMIT_PREPARED => Message::CommitPrepared(PreparedEnd::read(r)?),
            twophase::ROLLBACK_PREPARED => Message::RollbackPrepared(RollbackPrepared::read(r)?),
            twophase::STREAM_PREPARE => Message::StreamPrepare(PreparedEnd::read(r)?),
            _ => return Err(r.err_at(0, ErrorKind::UnknownTag)),
        })
    }
}
