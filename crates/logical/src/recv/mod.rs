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

mod bind;
mod error;
mod metrics;
mod open;
mod options;
mod outcome;
mod run;

pub use error::RecvError;
pub use metrics::render_metrics;
pub use options::{Output, RecvOptions};
pub use outcome::{Progress, StopReason, Summary};

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::conn::{proto_version_for, ConnConfig, Connection, StartOptions};
use crate::output::{read_state, JsonLines, Sink, StreamId};
use crate::{Assembler, AssemblerConfig, Decoder, Lsn, Options, Streaming};
use open::OpenTxns;

/// The output plugin this consumer reads.
const PGOUTPUT: &str = "pgoutput";

/// SQLSTATE duplicate_object: the slot exists.
const DUPLICATE_OBJECT: &str = "42710";

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
    /// Where the server streams from: the slot's confirmed position, or --start past it.
    start_lsn: Lsn,
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
    /// Connects, refuses an output file that does not continue this run's stream (another
    /// cluster, timeline, database, slot, publications or format; a slot gone, or confirmed
    /// past what the file holds; a version 1 state) unless `start_over`, creates the slot if
    /// asked, starts replication with the protocol version asked for or else the highest the
    /// server speaks (`streaming` from version 2, `messages` on), and only then opens the
    /// output (cutting a torn tail, or emptying it for `start_over`) and the spill store
    /// (removing leftover spill files): a slot streams to one session at a time, so a second
    /// run started on the same slot by mistake fails before it could touch the first one's
    /// files.
    pub fn start(config: &ConnConfig, opts: RecvOptions) -> Result<Recv, RecvError> {
        Recv::start_until(config, opts, None)
    }

    /// As [`Recv::start`], and a raised `stop` (the flag [`Recv::run`] is given) ends any
    /// wait of the start with an error for which [`RecvError::stopped`] holds: connecting,
    /// logging in, a command, a slot creation waiting for open transactions (cancelled on the
    /// server, so no slot is left). The output is opened only after all of these, so such a
    /// stop leaves it untouched.
    pub fn start_until(
        config: &ConnConfig,
        opts: RecvOptions,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<Recv, RecvError> {
        // What can be checked without the server, before connecting.
        crate::assemble::check_spill_spec(&opts.spill_compression)
            .map_err(RecvError::assemble("--spill-compression"))?;
        let mut conn = Connection::connect_until(config, stop)
            .map_err(RecvError::conn("connecting for replication"))?;
        let server_major = conn
            .server_major()
            .map_err(RecvError::conn("connecting for replication"))?;
        let highest = proto_version_for(server_major);
        let proto = match opts.proto_version {
            None => highest,
            Some(asked) if (1..=highest).contains(&asked) => asked,
            Some(asked) => {
                return Err(RecvError::ProtoVersion {
                    asked,
                    server_major,
                    highest,
                })
            }
        };
        let streaming = proto >= 2;
        let ident = conn
            .identify_system()
            .map_err(RecvError::conn("IDENTIFY_SYSTEM"))?;
        let system_id = ident.system_id.clone();
        let database = ident.dbname.unwrap_or_default();
        // Before anything is created or started: the publications exist, the slot (if it
        // does) is pgoutput's.
        let missing = conn
            .missing_publications(&opts.publications)
            .map_err(RecvError::conn("looking up the publications"))?;
        if !missing.is_empty() {
            return Err(RecvError::MissingPublications {
                names: missing,
                database,
            });
        }
        let stream = StreamId::new(
            ident.system_id,
            ident.timeline,
            database,
            opts.slot.clone(),
            opts.publications.clone(),
            opts.begin_commit,
        );
        // Before the slot is created or anything is touched: does the output continue this
        // stream, from where the slot stands?
        let slot_query = |conn: &mut Connection| {
            conn.slot_info(&opts.slot)
                .map_err(RecvError::conn(format!("looking up slot {}", opts.slot)))
        };
        let slot = slot_query(&mut conn)?;
        if let Some(info) = &slot {
            if info.plugin.as_deref() != Some(PGOUTPUT) {
                return Err(RecvError::SlotPlugin {
                    slot: opts.slot.clone(),
                    plugin: info.plugin.clone(),
                });
            }
        }
        let held = match &opts.output {
            Output::File(p) if !opts.start_over => {
                read_state(p).map_err(RecvError::output("reading the output's state"))?
            }
            _ => None,
        };
        if let (Output::File(p), Some(state)) = (&opts.output, &held) {
            bind::check(p, state, &stream, slot.as_ref(), opts.start)?;
        }
        let mut created = false;
        if opts.create_slot {
            match conn.create_slot(&opts.slot) {
                Ok(_) => created = true,
                Err(e) if opts.if_not_exists && e.sqlstate() == Some(DUPLICATE_OBJECT) => {}
                Err(e) => {
                    return Err(RecvError::conn(format!("creating slot {}", opts.slot))(e));
                }
            }
        }
        // Where a new file begins: the slot's position (or --start past it).
        let slot = if created {
            slot_query(&mut conn)?
        } else {
            slot
        };
        let begin_at = slot
            .and_then(|s| s.confirmed_flush)
            .unwrap_or(Lsn::INVALID)
            .max(opts.start.unwrap_or(Lsn::INVALID));
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
        // The spill store first: a spill directory refused leaves the output as it was.
        let spill_dir = match &opts.spill_dir {
            Some(d) => d.clone(),
            None => opts
                .default_spill_dir(&system_id)
                .ok_or(RecvError::NoSpillDir)?,
        };
        let asm = Assembler::open(
            AssemblerConfig {
                work_mem: opts.work_mem,
                spill_dir: spill_dir.clone(),
                spec: opts.spill_compression,
            },
            options,
        )
        .map_err(RecvError::assemble("opening the spill store"))?;
        let sink = match &opts.output {
            Output::Stdout => Sink::stdout(),
            Output::File(p) => Sink::open(p, &stream, begin_at, opts.start_over)
                .map_err(RecvError::output("opening the output"))?,
        };
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
            start_lsn: begin_at,
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

    /// Where the server streams from: the slot's confirmed position, or `start` when that is
    /// past it.
    pub fn start_lsn(&self) -> Lsn {
        self.start_lsn
    }

    /// Where the consumer stands now.
    pub fn progress(&self) -> Progress {
        let s = self.asm.stats();
        Progress {
            confirmed: self.reported,
            received: self.received,
            transactions: self.txns,
            skipped_transactions: self.skipped,
            changes: self.changes,
            output_bytes: self.sink.durable().offset,
            received_bytes: s.received_bytes,
            open_transactions: s.open_txns,
            memory_bytes: s.memory_bytes,
            spilled_transactions: s.spilled_txns,
            spill_raw_bytes: s.raw_bytes,
            spill_disk_bytes: s.disk_written_bytes,
            spill_files: s.files,
            spill_file_bytes: s.disk_bytes,
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
