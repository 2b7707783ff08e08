//! `pgcompress logical recv`: the loop that joins the replication connection, the transaction
//! assembler (spill store) and the durable JSON-lines output.
//!
//! The flush LSN sent to the server is the end LSN of the last transaction whose output is
//! fsynced (or skipped as already written); when no transaction is open and nothing is waiting
//! for an fsync, the server's keepalive position may be confirmed too, as PostgreSQL's apply
//! worker does: a transaction that commits later is decoded again from the slot's restart LSN.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use logical::conn::{proto_version_for, ConnConfig, Connection, CopyEvent, Env, StartOptions};
use logical::output::{JsonLines, Sink, TxnInfo};
use logical::{
    Assembler, AssemblerConfig, CommittedTxn, CopyMessage, Decoder, Lsn, Message, Options, Ready,
    StandbyStatus, Streaming, PG_EPOCH_UNIX_SECS,
};

use crate::args::logical::{LogicalCommand, RecvArgs};
use crate::output::bytes;

/// How long one read waits, so signals, timers and the progress line are looked at.
const POLL: Duration = Duration::from_millis(200);
/// Longest gap between status updates while a transaction is replayed: well inside any
/// sensible `wal_sender_timeout` (60 s by default; the tests run with 10 s).
const REPLAY_STATUS_SECS: f64 = 1.0;
/// Output gathered before it is handed to the sink.
const CHUNK: usize = 1 << 20;
/// SQLSTATE duplicate_object: the slot exists.
const DUPLICATE_OBJECT: &str = "42710";

pub fn run(cmd: LogicalCommand) -> Result<ExitCode> {
    match cmd {
        LogicalCommand::Recv(a) => recv(a),
    }
}

fn now_pg_us() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    d.as_micros() as i64 - PG_EPOCH_UNIX_SECS * 1_000_000
}

/// The tag and, for Stream Start/Commit/Abort, the xid fields of a payload: enough to know
/// which transactions are open without decoding twice.
fn track_open(open: &mut HashSet<u32>, in_txn: &mut bool, payload: &[u8]) {
    let xid_at = |i: usize| {
        payload
            .get(i..i + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    match payload.first() {
        Some(b'B') => *in_txn = true,
        Some(b'C') => *in_txn = false,
        Some(b'S') => {
            if let Some(x) = xid_at(1) {
                open.insert(x);
            }
        }
        Some(b'c') => {
            if let Some(x) = xid_at(1) {
                open.remove(&x);
            }
        }
        Some(b'A') => {
            if let (Some(x), Some(sub)) = (xid_at(1), xid_at(5)) {
                if x == sub {
                    open.remove(&x);
                }
            }
        }
        _ => {}
    }
}

/// The flush LSN that may be confirmed: the end of durable (or already written and skipped)
/// output; the server's keepalive position only when nothing waits for an fsync and no
/// transaction is open (one that commits later is decoded again from the restart LSN).
fn confirmable(durable_end: Lsn, keepalive_end: Lsn, pending: bool, quiet: bool) -> Lsn {
    if !pending && quiet {
        durable_end.max(keepalive_end)
    } else {
        durable_end
    }
}

struct Recv {
    args: RecvArgs,
    conn: Connection,
    sink: Sink,
    asm: Assembler,
    json: JsonLines,
    decoder: Decoder,
    options: Options,
    open: HashSet<u32>,
    in_txn: bool,
    /// Highest position the server has sent (XLogData start or keepalive end).
    received: Lsn,
    keepalive_end: Lsn,
    /// End LSN of the last transaction skipped as already written.
    skipped_end: Lsn,
    reported: Lsn,
    txns: u64,
    skipped: u64,
    changes: u64,
    last_data: Instant,
    last_status: Instant,
    last_sync: Instant,
    last_progress: Instant,
    progress: bool,
    started: Instant,
}

fn recv(args: RecvArgs) -> Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let config = ConnConfig::parse(&args.dbname, &Env::from_process())?;
    let mut conn = Connection::connect(&config).context("connecting for replication")?;
    let proto = proto_version_for(conn.server_major().unwrap_or(15));
    let streaming = proto >= 2;
    conn.identify_system().context("IDENTIFY_SYSTEM")?;
    if args.create_slot {
        match conn.create_slot(&args.slot) {
            Ok(_) => {}
            Err(e) if args.if_not_exists && e.sqlstate() == Some(DUPLICATE_OBJECT) => {}
            Err(e) => return Err(e).with_context(|| format!("creating slot {}", args.slot)),
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
        slot: args.slot.clone(),
        start: args.start.unwrap_or(Lsn::INVALID),
        proto_version: proto,
        publications: args.publication.clone(),
        streaming,
        messages: true,
    })
    .with_context(|| format!("START_REPLICATION on slot {}", args.slot))?;
    // Only now, with the slot ours (a slot streams to one session at a time), are the output
    // and the spill directory touched: a second run started by mistake fails above instead of
    // cutting the first one's unsynced tail or removing its spill files.
    let to_stdout = args.output == "-";
    let sink = if to_stdout {
        Sink::stdout()
    } else {
        Sink::open(Path::new(&args.output))?
    };
    if sink.recovered_tail() > 0 {
        eprintln!(
            "pgcompress: {}: cut a torn tail of {} bytes left by an interrupted run",
            args.output,
            sink.recovered_tail()
        );
    }
    let spill_dir = args.spill_dir.clone().unwrap_or_else(|| {
        if to_stdout {
            std::env::temp_dir().join(format!("pgcompress-spill-{}", args.slot))
        } else {
            PathBuf::from(format!("{}.spill", args.output))
        }
    });
    std::fs::create_dir_all(&spill_dir)
        .with_context(|| format!("creating spill directory {}", spill_dir.display()))?;

    let asm = Assembler::new(
        AssemblerConfig {
            work_mem: args.work_mem,
            spill_dir: spill_dir.clone(),
            spec: args.spill_compression,
        },
        options,
    )
    .with_context(|| format!("opening the spill store in {}", spill_dir.display()))?;

    let now = Instant::now();
    let mut r = Recv {
        json: JsonLines::new(args.begin_commit),
        decoder: Decoder::new(options)?,
        progress: std::io::stderr().is_terminal(),
        args,
        conn,
        sink,
        asm,
        options,
        open: HashSet::new(),
        in_txn: false,
        received: Lsn::INVALID,
        keepalive_end: Lsn::INVALID,
        skipped_end: Lsn::INVALID,
        reported: Lsn::INVALID,
        txns: 0,
        skipped: 0,
        changes: 0,
        last_data: now,
        last_status: now,
        last_sync: now,
        last_progress: now,
        started: now,
    };
    let outcome = r.run(&stop);
    if outcome.is_err() {
        // Keep what is whole, drop the transaction that failed: nothing wrong is left behind.
        let _ = r.sink.discard_open_txn();
        let _ = r.sink.sync();
    }
    if r.progress {
        eprintln!();
    }
    let reason = outcome?;
    r.finish(reason)
}

impl Recv {
    fn run(&mut self, stop: &AtomicBool) -> Result<&'static str> {
        let fsync_every = Duration::from_secs_f64(self.args.fsync_interval.max(0.0));
        let status_every = Duration::from_secs_f64(self.args.status_interval.max(0.1));
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok("signal");
            }
            match self.conn.recv_copy(POLL)? {
                None => {}
                Some(CopyEvent::Done) => return Ok("server ended the stream"),
                Some(CopyEvent::Data(d)) => self.on_copy(&d)?,
            }
            if self.sink.has_pending() && self.last_sync.elapsed() >= fsync_every {
                self.sync()?;
            }
            if self.last_status.elapsed() >= status_every {
                self.send_status(false)?;
            }
            if self.progress && self.last_progress.elapsed() >= Duration::from_secs(1) {
                self.show_progress();
            }
            if let Some(stop_at) = self.args.stop_at_lsn {
                if self.received >= stop_at && self.quiet() {
                    return Ok("reached --stop-at-lsn");
                }
            }
            if let Some(idle) = self.args.idle_exit {
                if self.last_data.elapsed() >= Duration::from_secs_f64(idle.max(0.0)) {
                    return Ok("idle for --idle-exit");
                }
            }
        }
    }

    /// No transaction open on the server's side of the stream.
    fn quiet(&self) -> bool {
        self.open.is_empty() && !self.in_txn
    }

    fn on_copy(&mut self, data: &[u8]) -> Result<()> {
        match CopyMessage::decode(data).context("replication message")? {
            CopyMessage::XLogData(x) => {
                self.last_data = Instant::now();
                self.received = self.received.max(x.start);
                track_open(&mut self.open, &mut self.in_txn, x.payload);
                let ready = self
                    .asm
                    .push(x.start, x.payload)
                    .with_context(|| format!("message at LSN {}", x.start))?;
                match ready {
                    None => {}
                    Some(Ready::Txn(t)) => self.on_txn(t)?,
                    Some(Ready::NonTransactional(p)) => self.on_message(&p)?,
                }
            }
            CopyMessage::Keepalive(k) => {
                self.keepalive_end = self.keepalive_end.max(k.wal_end);
                self.received = self.received.max(k.wal_end);
                if k.reply_requested {
                    self.send_status(false)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_txn(&mut self, mut t: CommittedTxn) -> Result<()> {
        let info = TxnInfo {
            xid: t.xid,
            commit_lsn: t.commit_lsn,
            end_lsn: t.end_lsn,
            commit_time: t.commit_time,
        };
        // Written before a crash or a reconnect: replay only what names relations and types.
        let skip = t.commit_lsn <= self.sink.last_lsn();
        let mut payload = Vec::new();
        let mut out = Vec::new();
        let mut replayed = 0u64;
        if !skip {
            self.json.begin(&info, &mut out);
        }
        while t
            .next_payload(&mut payload)
            .with_context(|| format!("transaction {} committed at {}", t.xid, t.commit_lsn))?
        {
            replayed += 1;
            if replayed % 256 == 0 {
                // Replaying a transaction of gigabytes takes longer than wal_sender_timeout:
                // keep telling the server we are alive (the flush LSN does not move meanwhile).
                self.status_if_due()?;
            }
            let msg = t.decode(&mut self.decoder, &payload).with_context(|| {
                format!("transaction {} committed at {}", info.xid, info.commit_lsn)
            })?;
            if skip {
                self.json.learn(&msg);
                continue;
            }
            self.changes += self.json.change(&info, &msg, &mut out).with_context(|| {
                format!("transaction {} committed at {}", info.xid, info.commit_lsn)
            })? as u64;
            if out.len() >= CHUNK {
                self.sink.write(&out)?;
                out.clear();
            }
        }
        if skip {
            self.skipped += 1;
            self.skipped_end = self.skipped_end.max(t.end_lsn);
            return Ok(());
        }
        self.json.commit(&info, &mut out);
        self.sink.write(&out)?;
        self.sink.end_txn(t.commit_lsn, t.end_lsn);
        self.txns += 1;
        drop(t);
        if self.args.fsync_interval <= 0.0 {
            self.sync()?;
        }
        Ok(())
    }

    fn on_message(&mut self, payload: &[u8]) -> Result<()> {
        let mut dec = Decoder::new(self.options)?;
        let msg = dec.decode(payload).context("non-transactional message")?;
        if let Message::Message(m) = msg {
            if m.lsn <= self.sink.last_lsn() {
                return Ok(());
            }
            let mut out = Vec::new();
            self.json.non_transactional(&m, &mut out);
            self.sink.write(&out)?;
            self.sink.end_txn(m.lsn, m.lsn);
            self.changes += 1;
            if self.args.fsync_interval <= 0.0 {
                self.sync()?;
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.sink.sync()?;
        self.last_sync = Instant::now();
        self.send_status(false)
    }

    fn flush_lsn(&self) -> Lsn {
        confirmable(
            self.sink.durable().end_lsn.max(self.skipped_end),
            self.keepalive_end,
            self.sink.has_pending(),
            self.quiet(),
        )
    }

    /// During a replay: sends a status update if a second (or `--status-interval`, if
    /// shorter) has passed since the last one. The socket is not read meanwhile, so the
    /// server's keepalive requests go unanswered; these updates stand in for the answers.
    fn status_if_due(&mut self) -> Result<()> {
        let every = self.args.status_interval.clamp(0.1, REPLAY_STATUS_SECS);
        if self.last_status.elapsed().as_secs_f64() >= every {
            self.send_status(false)?;
        }
        Ok(())
    }

    fn send_status(&mut self, reply: bool) -> Result<()> {
        let flushed = self.flush_lsn();
        self.conn.send_status(&StandbyStatus {
            written: self.received.max(flushed),
            flushed,
            applied: flushed,
            client_time: now_pg_us(),
            reply_requested: reply,
        })?;
        self.reported = flushed;
        self.last_status = Instant::now();
        Ok(())
    }

    fn show_progress(&mut self) {
        let s = self.asm.stats();
        let lag = self.received.0.saturating_sub(self.reported.0);
        eprint!(
            "\rLSN {}  lag {}  txns {}  spilled raw {} on disk {}   ",
            self.reported,
            bytes(lag),
            self.txns,
            bytes(s.raw_bytes),
            bytes(s.disk_written_bytes),
        );
        let _ = std::io::stderr().flush();
        self.last_progress = Instant::now();
    }

    fn finish(mut self, reason: &str) -> Result<ExitCode> {
        self.sink.sync()?;
        let _ = self.send_status(false);
        let flushed = self.reported;
        let s = self.asm.stats();
        if self.args.json {
            let summary = serde_json::json!({
                "reason": reason,
                "transactions": self.txns,
                "skipped_transactions": self.skipped,
                "changes": self.changes,
                "output_bytes": self.sink.durable().offset,
                "last_commit_lsn": self.sink.durable().lsn.to_string(),
                "flushed_lsn": flushed.to_string(),
                "received_bytes": s.received_bytes,
                "spilled_transactions": s.spilled_txns,
                "spill_raw_bytes": s.raw_bytes,
                "spill_disk_bytes": s.disk_written_bytes,
                "seconds": self.started.elapsed().as_secs_f64(),
            });
            if self.args.output == "-" {
                eprintln!("{summary}");
            } else {
                println!("{summary}");
            }
        }
        self.conn.close();
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_confirms_past_durable_output_while_busy() {
        let (durable, keepalive) = (Lsn(100), Lsn(500));
        assert_eq!(confirmable(durable, keepalive, false, true), keepalive);
        assert_eq!(confirmable(durable, keepalive, true, true), durable);
        assert_eq!(confirmable(durable, keepalive, false, false), durable);
        assert_eq!(confirmable(durable, Lsn(50), false, true), durable);
    }

    #[test]
    fn open_transactions_are_tracked() {
        let mut open = HashSet::new();
        let mut in_txn = false;
        track_open(&mut open, &mut in_txn, &[b'S', 0, 0, 0, 9, 1]);
        track_open(&mut open, &mut in_txn, b"B");
        assert!(open.contains(&9) && in_txn);
        // A subtransaction abort keeps the transaction open.
        track_open(&mut open, &mut in_txn, &[b'A', 0, 0, 0, 9, 0, 0, 0, 10]);
        assert!(open.contains(&9));
        track_open(&mut open, &mut in_txn, &[b'A', 0, 0, 0, 9, 0, 0, 0, 9]);
        track_open(&mut open, &mut in_txn, b"C");
        assert!(open.is_empty() && !in_txn);
    }
}
