//! The loop of [`Recv::run`]: messages in, transactions out, fsyncs and status updates on their
//! timers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::open::confirmable;
use super::{Output, Progress, Recv, RecvError, StopReason};
use crate::conn::CopyEvent;
use crate::output::TxnInfo;
use crate::PG_EPOCH_UNIX_SECS;
use crate::{CommittedTxn, CopyMessage, Decoder, Lsn, Message, Ready, StandbyStatus};

/// How long one read waits, so the stop flag, timers and progress are looked at.
const POLL: Duration = Duration::from_millis(200);
/// Longest gap between status updates while a transaction is replayed: well inside any
/// sensible `wal_sender_timeout` (60 s by default; the tests run with 10 s).
const REPLAY_STATUS: Duration = Duration::from_secs(1);
/// Shortest time between status updates.
const MIN_STATUS: Duration = Duration::from_millis(100);
/// Output gathered before it is handed to the sink.
const CHUNK: usize = 1 << 20;
/// Changes replayed between looks at the status timer.
const REPLAY_CHECK_EVERY: u64 = 256;

/// Whether a transaction was written whole, or a stop came in its replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replay {
    Done,
    Stopped,
}

fn now_pg_us() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    d.as_micros() as i64 - PG_EPOCH_UNIX_SECS * 1_000_000
}

fn txn_context(info: &TxnInfo) -> String {
    format!("transaction {} committed at {}", info.xid, info.commit_lsn)
}

impl Recv {
    /// Receives until `stop` is raised, the server ends the stream, or a stop condition of
    /// the options holds; `on_progress` is called every [`super::RecvOptions::progress_interval`].
    ///
    /// On an error, the transaction being written is taken back out of the output and what is
    /// whole is made durable, so nothing wrong is left behind; its LSN was never confirmed.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<StopReason, RecvError> {
        let outcome = self.run_loop(stop, on_progress);
        if outcome.is_err() {
            // Keep what is whole, drop the transaction that failed; the error that stopped
            // the run is the one worth reporting.
            let _ = self.sink.discard_open_txn();
            let _ = self.sink.sync();
        }
        outcome
    }

    fn run_loop(
        &mut self,
        stop: &AtomicBool,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<StopReason, RecvError> {
        let fsync_every = self.opts.fsync_interval;
        let status_every = self.opts.status_interval.max(MIN_STATUS);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(StopReason::Signal);
            }
            match self
                .conn
                .recv_copy(POLL)
                .map_err(RecvError::conn("receiving from the server"))?
            {
                None => {}
                Some(CopyEvent::Done) => return Ok(StopReason::ServerEnded),
                Some(CopyEvent::Data(d)) => match self.on_copy(&d, stop)? {
                    Replay::Done => {}
                    Replay::Stopped => return Ok(StopReason::Signal),
                },
            }
            if self.sink.has_pending() && self.last_sync.elapsed() >= fsync_every {
                self.sync()?;
            }
            if self.last_status.elapsed() >= status_every {
                self.send_status(false)?;
            }
            if let Some(every) = self.opts.progress_interval {
                if self.last_progress.elapsed() >= every {
                    on_progress(&self.progress());
                    self.last_progress = Instant::now();
                }
            }
            if let Some(stop_at) = self.opts.stop_at_lsn {
                if self.received >= stop_at && self.open.quiet() {
                    return Ok(StopReason::StopAtLsn);
                }
            }
            if let Some(idle) = self.opts.idle_exit {
                if self.last_data.elapsed() >= idle {
                    return Ok(StopReason::Idle);
                }
            }
        }
    }

    fn on_copy(&mut self, data: &[u8], stop: &AtomicBool) -> Result<Replay, RecvError> {
        match CopyMessage::decode(data).map_err(RecvError::decode("replication message"))? {
            CopyMessage::XLogData(x) => {
                self.last_data = Instant::now();
                self.received = self.received.max(x.start);
                self.open.track(x.payload);
                let ready = self
                    .asm
                    .push(x.start, x.payload)
                    .map_err(RecvError::assemble(format!("message at LSN {}", x.start)))?;
                match ready {
                    None => {}
                    Some(Ready::Txn(t)) => return self.on_txn(t, stop),
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
        }
        Ok(Replay::Done)
    }

    /// Writes a committed transaction; a stop raised while a long one is replayed takes back
    /// what was written of it (a file can; standard output only before its first chunk went
    /// out) and leaves it unconfirmed, to be decoded again by the next run.
    fn on_txn(&mut self, mut t: CommittedTxn, stop: &AtomicBool) -> Result<Replay, RecvError> {
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
        let mut handed_out = false;
        if !skip {
            self.json.begin(&info, &mut out);
        }
        while t
            .next_payload(&mut payload)
            .map_err(RecvError::assemble(txn_context(&info)))?
        {
            replayed += 1;
            if replayed % REPLAY_CHECK_EVERY == 0 {
                // Replaying a transaction of gigabytes takes longer than wal_sender_timeout:
                // keep telling the server we are alive (the flush LSN does not move meanwhile).
                self.status_if_due()?;
                let can_take_back = matches!(self.opts.output, Output::File(_)) || !handed_out;
                if stop.load(Ordering::SeqCst) && can_take_back {
                    self.sink
                        .discard_open_txn()
                        .map_err(RecvError::output(txn_context(&info)))?;
                    return Ok(Replay::Stopped);
                }
            }
            let msg = t
                .decode(&mut self.decoder, &payload)
                .map_err(RecvError::decode(txn_context(&info)))?;
            if skip {
                self.json.learn(&msg);
                continue;
            }
            self.changes += self
                .json
                .change(&info, &msg, &mut out)
                .map_err(RecvError::output(txn_context(&info)))? as u64;
            if out.len() >= CHUNK {
                self.write(&out)?;
                out.clear();
                handed_out = true;
            }
        }
        if skip {
            self.skipped += 1;
            self.skipped_end = self.skipped_end.max(t.end_lsn);
            return Ok(Replay::Done);
        }
        self.json.commit(&info, &mut out);
        self.write(&out)?;
        self.sink.end_txn(t.commit_lsn, t.end_lsn);
        self.txns += 1;
        drop(t);
        if self.opts.fsync_interval.is_zero() {
            self.sync()?;
        }
        Ok(Replay::Done)
    }

    fn on_message(&mut self, payload: &[u8]) -> Result<(), RecvError> {
        let mut dec = Decoder::new(self.options).map_err(RecvError::decode("pgoutput options"))?;
        let msg = dec
            .decode(payload)
            .map_err(RecvError::decode("non-transactional message"))?;
        if let Message::Message(m) = msg {
            if m.lsn <= self.sink.last_lsn() {
                return Ok(());
            }
            let mut out = Vec::new();
            self.json.non_transactional(&m, &mut out);
            self.write(&out)?;
            self.sink.end_txn(m.lsn, m.lsn);
            self.changes += 1;
            if self.opts.fsync_interval.is_zero() {
                self.sync()?;
            }
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), RecvError> {
        self.sink
            .write(bytes)
            .map_err(RecvError::output("writing the output"))
    }

    fn sync(&mut self) -> Result<(), RecvError> {
        self.sink
            .sync()
            .map_err(RecvError::output("making the output durable"))?;
        self.last_sync = Instant::now();
        self.send_status(false)
    }

    fn flush_lsn(&self) -> Lsn {
        // What the state records as confirmed (by this run or the one before) stays
        // confirmable: a restart does not move the slot's confirmed_flush_lsn back.
        confirmable(
            self.sink
                .durable()
                .end_lsn
                .max(self.skipped_end)
                .max(self.sink.confirmed()),
            self.keepalive_end,
            self.sink.has_pending(),
            self.open.quiet(),
        )
    }

    /// During a replay: sends a status update if a second (or the status interval, if
    /// shorter) has passed since the last one. The socket is not read meanwhile, so the
    /// server's keepalive requests go unanswered; these updates stand in for the answers.
    fn status_if_due(&mut self) -> Result<(), RecvError> {
        let every = self.opts.status_interval.clamp(MIN_STATUS, REPLAY_STATUS);
        if self.last_status.elapsed() >= every {
            self.send_status(false)?;
        }
        Ok(())
    }

    /// Sends a status update; a flush LSN past what the state file allows is recorded there
    /// first, so the slot is never confirmed past the state.
    pub(super) fn send_status(&mut self, reply: bool) -> Result<(), RecvError> {
        let flushed = self.flush_lsn();
        self.sink
            .record_confirmed(flushed)
            .map_err(RecvError::output("recording the position to confirm"))?;
        self.conn
            .send_status(&StandbyStatus {
                written: self.received.max(flushed),
                flushed,
                applied: flushed,
                client_time: now_pg_us(),
                reply_requested: reply,
            })
            .map_err(RecvError::conn("sending a status update"))?;
        self.reported = flushed;
        self.last_status = Instant::now();
        Ok(())
    }
}
