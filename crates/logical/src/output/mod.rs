//! What `pgcompress logical recv` writes: committed transactions as JSON lines
//! ([`JsonLines`]) into a [`Sink`] that makes them durable before their LSN may be confirmed.

mod json;
mod sink;
pub mod state;
mod time;
pub mod types;

use std::io;
use std::path::PathBuf;

pub use json::{JsonLines, TxnInfo};
pub use sink::{read_state, state_path, Position, Sink};
pub use state::{State, StreamId};
pub use time::format_timestamp;

/// Why output could not be produced or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// A change names a relation no Relation message described.
    #[error("change for relation OID {relid}, which no Relation message described")]
    UnknownRelation {
        /// The relation OID.
        relid: u32,
    },
    /// A tuple's column count differs from its Relation message's.
    #[error("relation OID {relid}: tuple has {got} columns, its Relation message {expected}")]
    ColumnCount {
        /// The relation OID.
        relid: u32,
        /// Columns in the Relation message.
        expected: usize,
        /// Columns in the tuple.
        got: usize,
    },
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operation.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The state file cannot be read.
    #[error("state file {}: {reason} (it is written only by pgcompress; restore it or start a new output)", path.display())]
    BadState {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The output exists without a state file.
    #[error("{} exists and is not empty but has no state file beside it: not appending to output pgcompress did not write (remove it or choose another -o)", path.display())]
    NotOurs {
        /// The output file.
        path: PathBuf,
    },
    /// The output is shorter than its state says is durable.
    #[error("{} is {len} bytes, shorter than the {offset} its state file records as durable: it was changed outside pgcompress", path.display())]
    Shrunk {
        /// The output file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The durable offset recorded.
        offset: u64,
    },
}
