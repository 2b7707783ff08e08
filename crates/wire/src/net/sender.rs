//! One direction's PostgreSQL bytes in, link bytes out: the framer feeding the link encoder.
//!
//! Kept in one place so the way a direction is framed and encoded can change (a streaming
//! mode for huge messages) without touching the sockets around it.

use crate::framer::Framer;
use crate::link::{Counters, LinkEncoder};

use super::error::NetError;

/// Frames a PostgreSQL byte stream and encodes its messages into link frames.
pub(crate) struct Sender {
    framer: Framer,
    encoder: LinkEncoder,
    /// Bytes read from the source that do not yet make a whole message.
    buf: Vec<u8>,
}

impl Sender {
    /// A sender continuing `framer` (which may already have returned a first packet).
    pub(crate) fn new(framer: Framer, encoder: LinkEncoder) -> Self {
        Sender {
            framer,
            encoder,
            buf: Vec::new(),
        }
    }

    /// Pushes one whole message the caller framed itself (the client half's first packet).
    pub(crate) fn push_message(&mut self, tag: Option<u8>, bytes: &[u8]) -> Result<(), NetError> {
        self.encoder.push_bytes(tag, bytes)?;
        Ok(())
    }

    /// Adds bytes read from the source; every whole message among them is encoded.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), NetError> {
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        while let Some(msg) = self.framer.poll(&self.buf[at..])? {
            self.encoder.push(&msg)?;
            at += msg.bytes.len();
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
