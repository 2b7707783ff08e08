//! The change-data-capture consumer behind `pgcompress logical recv`, without argument parsing
//! or rendering: a replication connection ([`crate::conn`]), the transaction assembler and its
//! spill store ([`crate::Assembler`]) and the durable JSON-lines output ([`crate::output`])
//! joined in one loop.
//!
//! The flush LSN sent to the server is the end LSN of the last transaction whose output is
//! fsynced (or skipped as already written); when no transaction is open and nothing is waiting
//! for an fsync, the server's keepalive position may be confirmed too, as PostgreSQL's apply
//! worker does: a transaction that commits later is decoded again from the slot's restart LSN.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use logical::conn::{ConnConfig, Env};
//! use logical::recv::{Output, Recv, RecvOptions};
//! let config = ConnConfig::parse("dbname=shop", &Env::from_process()).unwrap();
//! let mut options = RecvOptions::new("cdc", vec!["shop_pub".into()], Output::File("out.jsonl".into()));
//! options.idle_exit = Some(std::time::Duration::from_secs(5));
//! let mut recv = Recv::start(&config, options).unwrap();
//! let reason = recv.run(&AtomicBool::new(false), &mut |_| {}).unwrap();
//! let summary = recv.finish(reason).unwrap();
//! println!("{} transactions", summary.transactions);
//! ```

mod error;
mod open;
mod run;

pub use error::RecvError;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use codec::{Method, Spec};

use crate::conn::{proto_version_for, ConnConfig, Connection, StartOptions};
use crate::output::{JsonLines, Sink};
use crate::{Assembler, AssemblerConfig, Decoder, Lsn, Options, Streaming};
use open::OpenTxns;

/// SQLSTATE duplicate_object: the slot exists.
const DUPLICATE_OBJECT: &str = "42710";

/// Where committed transactions are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Standard output, flushed per transaction; nothing is kept across runs.
    Stdout,
    /// A file, appended and made durable, its state file beside it (exactly once across
    /// crashes, see [`crate::output::Sink`]).
    File(PathBuf),
}

/// What a consumer reads and how; [`RecvOptions::new`] gives the defaults of
/// `pgcompress logical recv`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecvOptions {
    /// The logical replication slot (pgoutput).
    pub slot: String,
    /// Publications to receive.
    pub publications: Vec<String>,
    /// Create the slot first.
    pub create_slot: bool,
    /// With `create_slot`: an existing slot of that name is fine.
    pub if_not_exists: bool,
    /// Start position (the server starts at the later of this and the slot's confirmed LSN).
    pub start: Option<Lsn>,
    /// Where the output goes.
    pub output: Output,
    /// Directory of spill files; `None` for [`RecvOptions::default_spill_dir`].
    pub spill_dir: Option<PathBuf>,
    /// Compression of spill files.
    pub spill_compression: Spec,
    /// Bytes open transactions may hold in memory together before they spill.
    pub work_mem: usize,
    /// Time between fsyncs; zero fsyncs after every transaction.
    pub fsync_interval: Duration,
    /// Time between status updates to the server (at least 100 ms), besides the ones it asks
    /// for and the one after each fsync.
    pub status_interval: Duration,
    /// Also write a `B` line before and a `C` line after each transaction.
    pub begin_commit: bool,
    /// Stop once the server has sent WAL up to this LSN and no transaction is open.
    pub stop_at_lsn: Option<Lsn>,
    /// Stop after this long without data from the server.
    pub idle_exit: Option<Duration>,
    /// How often [`Recv::run`] reports [`Progress`]; `None` never.
    pub progress_interval: Option<Duration>,
}

impl RecvOptions {
    /// Slot `slot`, `publications`, into `output`: lz4 spill files, 64 MiB of memory, an fsync
    /// per transaction, a status update every 10 s, no B/C lines, no stop condition.
    pub fn new(slot: impl Into<String>, publications: Vec<String>, output: Output) -> Self {
        RecvOptions {
            slot: slot.into(),
            publications,
            create_slot: false,
            if_not_exists: false,
            start: None,
            output,
            spill_dir: None,
            spill_compression: Spec::new(Method::Lz4),
            work_mem: crate::assemble::DEFAULT_WORK_MEM,
            fsync_interval: Duration::ZERO,
            status_interval: Duration::from_secs(10),
            begin_commit: false,
            stop_at_lsn: None,
            idle_exit: None,
            progress_interval: None,
        }
    }

    /// The spill directory used when `spill_dir` is `None`: `FILE.spill` beside the output
    /// file, or `pgcompress-spill-<slot>` in the system temporary directory for standard output.
    pub fn default_spill_dir(&self) -> PathBuf {
        match &self.output {
            Output::Stdout => std::env::temp_dir().join(format!("pgcompress-spill-{}", self.slot)),
            Output::File(p) => {
                let mut s = p.clone().into_os_string();
                s.push(".spill");
                PathBuf::from(s)
            }
        }
    }
}

/// Why [`Recv::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The stop flag was raised (SIGINT, SIGTERM).
    Signal,
    /// The server ended the COPY stream.
    ServerEnded,
    /// The server sent WAL up to [`RecvOptions::stop_at_lsn`] and no transaction was open.
    StopAtLsn,
    /// [`RecvOptions::idle_exit`] passed without data.
    Idle,
}

impl StopReason {
    /// The reason in words, as `--json`'s summary gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Signal => "signal",
            StopReason::ServerEnded => "server ended the stream",
            StopReason::StopAtLsn => "reached --stop-at-lsn",
            StopReason::Idle => "idle for --idle-exit",
        }
    }
}

/// Where the consumer stands, as [`Recv::run`] reports it every
/// [`RecvOptions::progress_interval`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The flush LSN last confirmed to the server.
    pub confirmed: Lsn,
    /// The highest position the server has sent.
    pub received: Lsn,
    /// Transactions written.
    pub transactions: u64,
    /// Raw change bytes written to spill files.
    pub spill_raw_bytes: u64,
    /// Bytes written to spill files.
    pub spill_disk_bytes: u64,
}

/// What a run did, from [`Recv::finish`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Summary {
    /// Why the run ended.
    pub reason: StopReason,
    /// Transactions written.
    pub transactions: u64,
    /// Transactions skipped as already written by an earlier run.
    pub skipped_transactions: u64,
    /// Lines of changes written.
    pub changes: u64,
    /// Durable bytes of the output (0 on standard output).
    pub output_bytes: u64,
    /// Commit LSN of the last durable transaction.
    pub last_commit_lsn: Lsn,
    /// The flush LSN last confirmed to the server.
    pub flushed_lsn: Lsn,
    /// Payload bytes of every stored message received.
    pub received_bytes: u64,
    /// Transactions that had a spill file.
    pub spilled_transactions: u64,
    /// Raw change bytes written to spill files.
    pub spill_raw_bytes: u64,
    /// Bytes written to spill files.
    pub spill_disk_bytes: u64,
    /// Seconds since the start.
    pub seconds: f64,
}

/// A running consumer: started by [`Recv::start`], driven by [`Recv::run`], ended by
/// [`Recv::finish`].
pub struct Recv {
    opts: RecvOptions,
    conn: Connection,
    sink: Sink,
    asm: Assembler,
    json: JsonLines,
    decoder: Decoder,
    options: Options,
    open: OpenTxns,
    /// Highest position the server has sent (XLogData start or keepalive end).
    received: Lsn,
    keepalive_end: Lsn,
    /// End LSN of the last transaction skipped as already written.
    skipped_end: Lsn,
    reported: Lsn,
    txns: u64,
    skipped: u64,
    changes: u64,
    spill_dir: PathBuf,
    last_data: Instant,
    last_status: Instant,
    last_sync: Instant,
    last_progress: Instant,
    started: Instant,
}

impl std::fmt::Debug for Recv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recv")
            .field("slot", &self.opts.slot)
            .field("received", &self.received)
            .field("reported", &self.reported)
            .field("txns", &self.txns)
            .finish_non_exhaustive()
    }
}

impl Recv {
    /// Connects, creates the slot if asked, starts replication with the highest protocol
    /// version the server speaks (`streaming` from version 2, `messages` on), and only then
    /// opens the output (cutting a torn tail) and the spill store (removing leftover spill
    /// files): a slot streams to one session at a time, so a second run started on the same
    /// slot by mistake fails before it could touch the first one's files.
    pub fn start(config: &ConnConfig, opts: RecvOptions) -> Result<Recv, RecvError> {
        let mut conn =
            Connection::connect(config).map_err(RecvError::conn("connecting for replication"))?;
        let proto = proto_version_for(conn.server_major().unwrap_or(15));
        let streaming = proto >= 2;
        conn.identify_system()
            .map_err(RecvError::conn("IDENTIFY_SYSTEM"))?;
        if opts.create_slot {
            match conn.create_slot(&opts.slot) {
                Ok(_) => {}
                Err(e) if opts.if_not_exists && e.sqlstate() == Some(DUPLICATE_OBJECT) => {}
                Err(e) => {
                    return Err(RecvError::conn(format!("creating slot {}", opts.slot))(e));
                }
            }
        }
        let options = Options {
            proto_version: proto,
            streaming: if streaming {
                Streaming::On
            } else {
                Streaming::Off
            },
        };
        conn.start_replication(&StartOptions {
            slot: opts.slot.clone(),
            start: opts.start.unwrap_or(Lsn::INVALID),
            proto_version: proto,
            publications: opts.publications.clone(),
            streaming,
            messages: true,
        })
        .map_err(RecvError::conn(format!(
            "START_REPLICATION on slot {}",
            opts.slot
        )))?;
        let sink = match &opts.output {
            Output::Stdout => Sink::stdout(),
            Output::File(p) => Sink::open(p).map_err(RecvError::output("opening the output"))?,
        };
        let spill_dir = opts
            .spill_dir
            .clone()
            .unwrap_or_else(|| opts.default_spill_dir());
        std::fs::create_dir_all(&spill_dir).map_err(|source| RecvError::SpillDir {
            path: spill_dir.clone(),
            source,
        })?;
        let asm = Assembler::new(
            AssemblerConfig {
                work_mem: opts.work_mem,
                spill_dir: spill_dir.clone(),
                spec: opts.spill_compression,
            },
            options,
        )
        .map_err(RecvError::assemble(format!(
            "opening the spill store in {}",
            spill_dir.display()
        )))?;
        let decoder = Decoder::new(options).map_err(RecvError::decode("pgoutput options"))?;
        let now = Instant::now();
        Ok(Recv {
            json: JsonLines::new(opts.begin_commit),
            decoder,
            opts,
            conn,
            sink,
            asm,
            options,
            open: OpenTxns::default(),
            received: Lsn::INVALID,
            keepalive_end: Lsn::INVALID,
            skipped_end: Lsn::INVALID,
            reported: Lsn::INVALID,
            txns: 0,
            skipped: 0,
            changes: 0,
            spill_dir,
            last_data: now,
            last_status: now,
            last_sync: now,
            last_progress: now,
            started: now,
        })
    }

    /// Bytes of a torn tail that opening the output cut (left by an interrupted run).
    pub fn recovered_tail(&self) -> u64 {
        self.sink.recovered_tail()
    }

    /// The spill directory in use.
    pub fn spill_dir(&self) -> &std::path::Path {
        &self.spill_dir
    }

    /// Where the consumer stands now.
    pub fn progress(&self) -> Progress {
        let s = self.asm.stats();
        Progress {
            confirmed: self.reported,
            received: self.received,
            transactions: self.txns,
            spill_raw_bytes: s.raw_bytes,
            spill_disk_bytes: s.disk_written_bytes,
        }
    }

    /// Makes the output durable, sends a last status update, closes the connection and says
    /// what the run did.
    pub fn finish(mut self, reason: StopReason) -> Result<Summary, RecvError> {
        self.sink
            .sync()
            .map_err(RecvError::output("making the output durable"))?;
        // The output is durable; a server gone by now only misses the last confirmation.
        let _ = self.send_status(false);
        let s = self.asm.stats();
        let durable = self.sink.durable();
        let summary = Summary {
            reason,
            transactions: self.txns,
            skipped_transactions: self.skipped,
            changes: self.changes,
            output_bytes: durable.offset,
            last_commit_lsn: durable.lsn,
            flushed_lsn: self.reported,
            received_bytes: s.received_bytes,
            spilled_transactions: s.spilled_txns,
            spill_raw_bytes: s.raw_bytes,
            spill_disk_bytes: s.disk_written_bytes,
            seconds: self.started.elapsed().as_secs_f64(),
        };
        self.conn.close();
        Ok(summary)
    }
}
