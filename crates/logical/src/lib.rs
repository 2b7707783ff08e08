//! Logical replication for pgcompress: a sans-IO decoder of PostgreSQL's `pgoutput` messages
//! (protocol versions 1 to 4) and of the replication CopyData wrappers around them, and the
//! [`Assembler`] that turns a session's messages into committed transactions, holding streamed
//! (in-progress) transactions in memory up to a limit and then in compressed [`spill`] files.
//!
//! The formats mirror `src/include/replication/logicalproto.h` and the "Logical Replication
//! Message Formats" and "Streaming Replication Protocol" sections of `doc/src/sgml/protocol.sgml`.
//! Everything is big-endian and read through [`codec::Cursor`], so short or hostile input is an
//! error, never a panic, and no count read from input sizes an allocation before it is checked
//! against the bytes that remain.
//!
//! ```
//! use logical::{Decoder, Message, Options, Streaming};
//! let mut dec = Decoder::new(Options { proto_version: 2, streaming: Streaming::On }).unwrap();
//! // Stream Start for xid 7, first segment.
//! let msg = dec.decode(&[b'S', 0, 0, 0, 7, 1]).unwrap();
//! assert!(matches!(msg, Message::StreamStart(s) if s.xid == 7 && s.first_segment));
//! assert_eq!(dec.stream_xid(), Some(7));
//! ```
#![deny(missing_docs)]

pub mod assemble;
#[cfg(feature = "net")]
pub mod conn;
pub mod copy;
mod decoder;
pub mod dml;
mod error;
mod lsn;
pub mod message;
pub mod output;
mod reader;
#[cfg(feature = "net")]
pub mod recv;
pub mod schema;
pub mod spill;
pub mod stream;
pub mod tuple;
pub mod twophase;
pub mod txn;

pub use assemble::{
    AssembleError, Assembler, AssemblerConfig, CommittedTxn, Ready, SpillStats, TxnStats, Violation,
};
pub use copy::{CopyMessage, Keepalive, StandbyStatus, XLogData};
pub use decoder::{Decoder, Message, Options, Streaming, MAX_PROTO_VERSION, MIN_PROTO_VERSION};
pub use error::{DecodeError, ErrorKind};
pub use lsn::{Lsn, PG_EPOCH_UNIX_SECS};
pub use tuple::{TupleData, Value};
