//! A socket wrapper that counts the bytes crossing it, so link bytes include TLS records.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stats::DirectionCounters;

/// Where the bytes read and written are added.
#[derive(Clone)]
pub(crate) struct MeterTargets {
    /// Counters bytes read from the socket are added to (connection and half totals).
    pub(crate) read: [Arc<DirectionCounters>; 2],
    /// Counters bytes written to the socket are added to.
    pub(crate) written: [Arc<DirectionCounters>; 2],
}

/// `S` with every byte read or written counted.
pub(crate) struct Metered<S> {
    inner: S,
    targets: MeterTargets,
}

impl<S> Metered<S> {
    pub(crate) fn new(inner: S, targets: MeterTargets) -> Self {
        Metered { inner, targets }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        for c in &self.targets.read {
            c.add_link(n);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            for c in &self.targets.written {
                c.add_link(n as u64);
            }
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
