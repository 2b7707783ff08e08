//! The replication CopyData messages around pgoutput (protocol.sgml "Streaming Replication
//! Protocol", `replication/walsender.c`): XLogData `w` and Primary keepalive `k` from the
//! server, and the client's Standby status update `r`.

use crate::reader::Reader;
use crate::{DecodeError, ErrorKind, Lsn};

/// Tag of XLogData.
pub const XLOG_DATA: u8 = b'w';
/// Tag of Primary keepalive.
pub const KEEPALIVE: u8 = b'k';
/// Tag of Standby status update (client to server).
pub const STANDBY_STATUS: u8 = b'r';
/// Bytes of an encoded Standby status update.
pub const STANDBY_STATUS_LEN: usize = 34;

/// WAL data: one pgoutput message and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XLogData<'a> {
    /// Start LSN of the data (0 for Relation and Type messages sent ahead of a change).
    pub start: Lsn,
    /// The server's current end of WAL.
    pub end: Lsn,
    /// Server send time, µs since 2000-01-01.
    pub send_time: i64,
    /// The pgoutput message, for [`crate::Decoder::decode`].
    pub payload: &'a [u8],
}

/// A keepalive; answer at once with a [`StandbyStatus`] when `reply_requested`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// The server's current end of WAL.
    pub wal_end: Lsn,
    /// Server send time, µs since 2000-01-01.
    pub send_time: i64,
    /// The server asks for an immediate reply, to avoid a timeout disconnect.
    pub reply_requested: bool,
}

/// A server-to-client CopyData message of a logical replication session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CopyMessage<'a> {
    /// `w`
    XLogData(XLogData<'a>),
    /// `k`
    Keepalive(Keepalive),
}

impl<'a> CopyMessage<'a> {
    /// Decodes one CopyData payload from the server.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let Some(&tag) = msg.first() else {
            return Err(DecodeError::new(None, 0, ErrorKind::Empty));
        };
        let mut r = Reader::after_tag(msg, tag);
        match tag {
            XLOG_DATA => {
                let start = r.lsn()?;
                let end = r.lsn()?;
                let send_time = r.i64()?;
                let n = r.remaining();
                Ok(CopyMessage::XLogData(XLogData {
                    start,
                    end,
                    send_time,
                    payload: r.take(n)?,
                }))
            }
            KEEPALIVE => {
                let k = Keepalive {
                    wal_end: r.lsn()?,
                    send_time: r.i64()?,
                    reply_requested: r.u8()? != 0,
                };
                r.finish()?;
                Ok(CopyMessage::Keepalive(k))
            }
            _ => Err(r.err_at(0, ErrorKind::UnknownTag)),
        }
    }
}

/// The client's progress report; the server confirms `flush` as the slot's
/// `confirmed_flush_lsn`, so it must never be ahead of what is durably handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandbyStatus {
    /// Last WAL byte + 1 received and written.
    pub written: Lsn,
    /// Last WAL byte + 1 durably handled.
    pub flushed: Lsn,
    /// Last WAL byte + 1 applied.
    pub applied: Lsn,
    /// Client time, µs since 2000-01-01.
    pub client_time: i64,
    /// Asks the server to reply at once.
    pub reply_requested: bool,
}

impl StandbyStatus {
    /// The CopyData payload to send.
    pub fn encode(&self) -> [u8; STANDBY_STATUS_LEN] {
        let mut out = [0u8; STANDBY_STATUS_LEN];
        out[0] = STANDBY_STATUS;
        out[1..9].copy_from_slice(&self.written.0.to_be_bytes());
        out[9..17].copy_from_slice(&self.flushed.0.to_be_bytes());
        out[17..25].copy_from_slice(&self.applied.0.to_be_bytes());
        out[25..33].copy_from_slice(&self.client_time.to_be_bytes());
        out[33] = u8::from(self.reply_requested);
        out
    }
}
