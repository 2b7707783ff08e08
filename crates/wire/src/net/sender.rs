//! One direction's PostgreSQL bytes in, link bytes out: the framer feeding the link encoder.
//!
//! Messages pass in pieces ([`Framer::poll_piece`]): one longer than the framer's whole-message
//! limit (256 KiB) is encoded as its bytes arrive, so a 300 MB DataRow never sits in memory and
//! the buffer here stays under that limit plus one read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use codec::Spec;

use crate::framer::Framer;
use crate::link::{AutoPolicy, Compressible, Counters, LinkEncoder, Observation, Tuning};

use super::error::NetError;

/// Frames a PostgreSQL byte stream and encodes its messages into link frames.
pub(crate) struct Sender {
    framer: Framer,
    encoder: LinkEncoder,
    /// Bytes read from the source that do not yet make a whole message or piece.
    buf: Vec<u8>,
    /// `--method auto`: the policy, what the encoder had counted at its last look, and where
    /// the half keeps the rung the policy settles on.
    auto: Option<(AutoPolicy, Compressible, Arc<Settled>)>,
}

/// Where `--method auto`'s bulk connections of one half and direction last settled (a rung of
/// [`crate::link::auto::LADDER`]), kept for the next: each policy is handed it when built and
/// reports where it settles ([`AutoPolicy::poll_settled`]). The policies share nothing else.
#[derive(Debug)]
pub(crate) struct Settled(AtomicUsize);

/// [`Settled`]'s value while no connection settled yet.
const NOTHING_SETTLED: usize = usize::MAX;

impl Settled {
    /// Nothing settled yet: the policy decides where a fresh half's bulk traffic starts.
    pub(crate) fn new() -> Self {
        Settled(AtomicUsize::new(NOTHING_SETTLED))
    }

    fn get(&self) -> Option<usize> {
        match self.0.load(Ordering::Relaxed) {
            NOTHING_SETTLED => None,
            rung => Some(rung),
        }
    }

    fn set(&self, rung: usize) {
        self.0.store(rung, Ordering::Relaxed);
    }
}

/// Times one pass of the encoding pump measured, for `--method auto`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timings {
    /// Wall time since the previous pass.
    pub(crate) elapsed: Duration,
    /// Framing and compressing.
    pub(crate) encode: Duration,
    /// Waiting for the link socket to take bytes.
    pub(crate) write_wait: Duration,
    /// Waiting for the source.
    pub(crate) read_wait: Duration,
}

impl Sender {
    /// A sender continuing `framer` (which may already have returned a first packet).
    pub(crate) fn new(framer: Framer, encoder: LinkEncoder) -> Self {
        Sender {
            framer,
            encoder,
            buf: Vec::new(),
            auto: None,
        }
    }

    /// Lets [`AutoPolicy`] choose this direction's method from now on (`--method auto`), its
    /// bulk traffic starting where the half's others last settled (`settled`, which this sender
    /// updates as its policy settles).
    pub(crate) fn adapt(mut self, settled: Arc<Settled>) -> Self {
        let policy = AutoPolicy::new(Tuning::DEFAULT, settled.get());
        self.auto = Some((policy, self.encoder.compressible(), settled));
        self
    }

    /// Hands one pass's timings to the policy, if any, and switches the method when it
    /// says so; returns the new method.
    pub(crate) fn observe(&mut self, t: &Timings) -> Result<Option<Spec>, NetError> {
        let Some((policy, seen, settled)) = self.auto.as_mut() else {
            return Ok(None);
        };
        let now = self.encoder.compressible();
        let o = Observation {
            elapsed: t.elapsed,
            eligible: now.eligible - seen.eligible,
            chunk_raw: now.chunk_raw - seen.chunk_raw,
            chunk_link: now.chunk_link - seen.chunk_link,
            encode: t.encode,
            write_wait: t.write_wait,
            read_wait: t.read_wait,
        };
        *seen = now;
        policy.hand_settled(settled.get());
        let switch = policy.observe(&o);
        if let Some(rung) = policy.poll_settled() {
            settled.set(rung);
        }
        if let Some(spec) = switch {
            self.encoder.switch_method(spec)?;
        }
        self.encoder.set_link_bound(policy.link_full())?;
        Ok(switch)
    }

    /// Pushes one whole message the caller framed itself (the client half's first packet).
    pub(crate) fn push_message(&mut self, tag: Option<u8>, bytes: &[u8]) -> Result<(), NetError> {
        self.encoder.push_bytes(tag, bytes)?;
        Ok(())
    }

    /// Adds bytes read from the source; every whole message, and every piece of a long one,
    /// among them is encoded.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), NetError> {
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        while let Some(piece) = self.framer.poll_piece(&self.buf[at..])? {
            self.encoder.push_piece(&piece)?;
            at += piece.bytes.len();
        }
        self.buf.drain(..at);
        Ok(())
    }

    /// The source has nothing more ready: close the chunk in progress.
    pub(crate) fn flush(&mut self) -> Result<(), NetError> {
        self.encoder.flush()?;
        Ok(())
    }

    /// The source ended: an error if it stopped inside a message; otherwise flushes.
    pub(crate) fn finish(&mut self) -> Result<(), NetError> {
        self.framer.finish(&self.buf)?;
        self.flush()
    }

    /// Link bytes ready to be written.
    pub(crate) fn output(&mut self) -> &[u8] {
        self.encoder.output()
    }

    /// Drops `n` written bytes from the front of [`Sender::output`].
    pub(crate) fn consume(&mut self, n: usize) {
        self.encoder.consume(n);
    }

    /// Link bytes waiting to be written.
    pub(crate) fn pending(&self) -> usize {
        self.encoder.pending()
    }

    /// The frontend->backend encoder may compress from now on.
    pub(crate) fn session_ready(&mut self) {
        self.encoder.session_ready();
    }

    /// True once the encoder compresses (see [`LinkEncoder::is_ready`]).
    pub(crate) fn is_ready(&self) -> bool {
        self.encoder.is_ready()
    }

    /// The encoder's counters.
    pub(crate) fn counters(&self) -> Counters {
        self.encoder.counters()
    }
}
