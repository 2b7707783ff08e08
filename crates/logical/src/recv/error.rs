//! Errors of the consumer loop: what failed, with the step or the transaction it belonged to.

use std::path::PathBuf;

use crate::conn::ConnError;
use crate::output::{OutputError, StreamId};
use crate::{AssembleError, DecodeError, Lsn};

/// Why [`crate::recv::Recv`] could not start or stopped.
///
/// Each variant's message says what was being done; the underlying error is its
/// [`std::error::Error::source`], so a chain printer (`{:#}` of `anyhow`) shows both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The connection or a replication command failed.
    #[error("{context}")]
    Conn {
        /// What was being done (`connecting for replication`, `START_REPLICATION on slot s`, …).
        context: String,
        /// The connection error.
        #[source]
        source: ConnError,
    },
    /// The spill store failed: a spill file could not be written or read back, or a message
    /// did not fit the stream (a protocol violation).
    #[error("{context}")]
    Assemble {
        /// The message or transaction concerned.
        context: String,
        /// The store's error (a corrupt record names its file and offset).
        #[source]
        source: AssembleError,
    },
    /// A stored message could not be decoded.
    #[error("{context}")]
    Decode {
        /// The message or transaction concerned.
        context: String,
        /// The decoder's error.
        #[source]
        source: DecodeError,
    },
    /// Output could not be written, made durable or produced.
    #[error("{context}")]
    Output {
        /// What was being done.
        context: String,
        /// The output error.
        #[source]
        source: OutputError,
    },
    /// The pgoutput protocol version asked for is one the server (or this decoder) does not
    /// speak.
    #[error(
        "pgoutput protocol version {asked} is not one PostgreSQL {server_major} speaks \
         (1 to {highest}): leave --proto-version out for the highest"
    )]
    ProtoVersion {
        /// The version asked for.
        asked: u32,
        /// The server's major version.
        server_major: u32,
        /// The highest version the server speaks.
        highest: u32,
    },
    /// The output file continues another stream than this run's: another cluster, timeline,
    /// database, slot, set of publications or format.
    #[error(
        "{} was written from {file}; this run reads {here}: use another -o file, or \
         --start-over to empty it and begin again",
        path.display()
    )]
    OtherStream {
        /// The output file.
        path: PathBuf,
        /// The stream its state records.
        file: Box<StreamId>,
        /// The stream of this run.
        here: Box<StreamId>,
    },
    /// The slot the output file continues does not exist (dropped): what was committed since
    /// the file's position is in no slot.
    #[error(
        "{} continues slot {slot} up to {holds}, but no slot {slot} exists: it was dropped, and \
         changes committed since are in no slot; use another -o file, or --start-over to empty \
         it and begin again (--create-slot creates the slot)",
        path.display()
    )]
    SlotGone {
        /// The output file.
        path: PathBuf,
        /// The slot.
        slot: String,
        /// The highest position the file's consumer confirmed.
        holds: Lsn,
    },
    /// The slot was confirmed past what the output file holds: dropped and re-created, or
    /// advanced by another consumer; the changes in between would be missing.
    #[error(
        "slot {slot} has confirmed_flush_lsn {confirmed}, past {holds} where {} stops: the slot \
         was re-created or advanced by someone else and the changes between are missing; use \
         another -o file, or --start-over to empty it and begin again",
        path.display()
    )]
    SlotAhead {
        /// The output file.
        path: PathBuf,
        /// The slot.
        slot: String,
        /// The highest position the file's consumer confirmed.
        holds: Lsn,
        /// The slot's `confirmed_flush_lsn`.
        confirmed: Lsn,
    },
    /// `--start` asks for a position past what the output file holds: what lies between would
    /// be missing.
    #[error(
        "--start {start} is past {holds} where {} stops: the changes between would be missing; \
         leave --start out, or use another -o file, or --start-over to empty it and begin again",
        path.display()
    )]
    StartPastFile {
        /// The output file.
        path: PathBuf,
        /// The position asked for.
        start: Lsn,
        /// The highest position the file's consumer confirmed.
        holds: Lsn,
    },
    /// The output's state was written by a version that did not record the stream.
    #[error(
        "{p}.state was written by an older pgcompress and does not say which stream {p} \
         continues: move {p} and its state aside and run again (the slot goes on from its \
         confirmed position into a new file), or --start-over to empty it and begin again",
        p = path.display()
    )]
    UnboundState {
        /// The output file.
        path: PathBuf,
    },
    /// Publications asked for do not exist in the database (START_REPLICATION would take
    /// them and fail at the first change).
    #[error("{}", missing_publications(names, database))]
    MissingPublications {
        /// The names that are not publications there, as given.
        names: Vec<String>,
        /// The database connected to.
        database: String,
    },
    /// The slot is not a pgoutput slot: another output plugin, or a physical slot.
    #[error(
        "slot \"{slot}\" {}, and logical recv reads pgoutput: give --slot a pgoutput slot, or \
         make one (--create-slot with a new --slot name, or SELECT \
         pg_create_logical_replication_slot('NAME', 'pgoutput'))",
        plugin.as_deref().map_or_else(
            || "is a physical slot".to_owned(),
            |p| format!("decodes with {p}")
        )
    )]
    SlotPlugin {
        /// The slot.
        slot: String,
        /// Its output plugin (`None` for a physical slot).
        plugin: Option<String>,
    },
    /// With standard output and no spill directory given, there is no home directory for the
    /// default one.
    #[error(
        "no home directory for the spill files of -o - (HOME and XDG_CACHE_HOME are not set, \
         and the effective user has no home in the password database): choose a spill \
         directory (--spill-dir)"
    )]
    NoSpillDir,
}

fn missing_publications(names: &[String], database: &str) -> String {
    let list = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let (what, them) = if names.len() == 1 {
        ("publication", "it")
    } else {
        ("publications", "them")
    };
    format!(
        "no {what} {list} in database \"{database}\": check --publication, or create {them} \
         there (CREATE PUBLICATION name FOR TABLE ...)"
    )
}

impl RecvError {
    /// Whether the stop flag ended a wait before streaming (see [`crate::recv::Recv::start_until`]):
    /// a stop asked for, not a failure.
    pub fn stopped(&self) -> bool {
        matches!(
            self,
            RecvError::Conn {
                source: ConnError::Stopped(_),
                ..
            }
        )
    }

    pub(crate) fn conn(context: impl Into<String>) -> impl FnOnce(ConnError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Conn { context, source }
    }

    pub(crate) fn assemble(context: impl Into<String>) -> impl FnOnce(AssembleError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Assemble { context, source }
    }

    pub(crate) fn decode(context: impl Into<String>) -> impl FnOnce(DecodeError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Decode { context, source }
    }

    pub(crate) fn output(context: impl Into<String>) -> impl FnOnce(OutputError) -> RecvError {
        let context = context.into();
        move |source| RecvError::Output { context, source }
    }
}
