//! Moves one connection's bytes: an encoding direction (PostgreSQL bytes to link frames) and
//! a decoding direction (link frames to PostgreSQL bytes), with bounded buffers.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::error::NetError;
use super::sender::{Sender, Timings};
use super::stats::DirectionCounters;
use super::tap::{FrameTap, TapEvent};
use crate::link::frame::{self, parse_header, HEADER_LEN};
use crate::link::{Counters, Event, LinkDecoder};
use crate::Direction;

/// Stop reading a source while this many link bytes wait to be written.
pub(crate) const HIGH_WATER: usize = 256 * 1024;
/// Bytes asked for per read.
const READ_SIZE: usize = 64 * 1024;

/// What one direction of one connection shares with the rest.
pub(crate) struct DirectionCtx {
    /// The direction.
    pub(crate) direction: Direction,
    /// The connection's "session ready" flag: set by the server half's backend->frontend
    /// encoder after the first ReadyForQuery, or by the client half's backend->frontend
    /// decoder on the Ready frame; read by the other direction.
    pub(crate) ready: Arc<AtomicBool>,
    /// The connection's "session over" flag: set when either direction's PostgreSQL side
    /// ends (the application or the backend closed) or a Terminate message passes. A link
    /// peer that goes away without TLS close_notify after that is not an error.
    pub(crate) session_over: Arc<AtomicBool>,
    /// The connection's and the half's counters of this direction.
    pub(crate) counters: [Arc<DirectionCounters>; 2],
    /// The test tap, if any.
    pub(crate) tap: Option<FrameTap>,
}

impl DirectionCtx {
    fn add(&self, before: &Counters, now: &Counters) {
        for c in &self.counters {
            c.add_delta(before, now);
        }
    }
}

/// Reads what is ready now without waiting: `None` if a read would block.
async fn read_now<R: AsyncRead + Unpin>(
    src: &mut R,
    buf: &mut [u8],
) -> Option<std::io::Result<usize>> {
    poll_fn(|cx| {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *src).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(rb.filled().len()))),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Ready(None),
        }
    })
    .await
}

/// Finds the frames in an encoder's output as it is written, whatever pieces it comes in.
#[derive(Default)]
struct TapWalker {
    /// Bytes of the current frame's payload still to skip.
    skip: usize,
    /// The start of a frame header split across writes.
    header: Vec<u8>,
    /// The Ready frame has passed.
    seen_ready: bool,
}

impl TapWalker {
    fn walk(&mut self, tap: &FrameTap, direction: Direction, mut bytes: &[u8]) {
        loop {
            let n = self.skip.min(bytes.len());
            self.skip -= n;
            bytes = &bytes[n..];
            if bytes.is_empty() {
                return;
            }
            let need = HEADER_LEN - self.header.len();
            let take = need.min(bytes.len());
            self.header.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.header.len() < HEADER_LEN {
                return;
            }
            let Ok(Some(h)) = parse_header(direction, 0, &self.header) else {
                // The encoder wrote a frame this crate does not know: stop tapping.
                self.skip = usize::MAX;
                return;
            };
            self.header.clear();
            self.skip = h.payload_len;
            tap(TapEvent {
                direction,
                frame_type: h.frame_type,
                payload_len: h.payload_len,
                before_ready: !self.seen_ready,
            });
            if h.frame_type == frame::READY {
                self.seen_ready = true;
            }
        }
    }
}

/// Reads PostgreSQL bytes from `src` and writes link frames to `dst` until `src` ends, then
/// shuts down `dst`'s write side. Reads what is ready without waiting while fewer than
/// [`HIGH_WATER`] link bytes wait; writes the whole frames ready; and flushes the chunk in
/// progress only before a read that may wait (nothing more ready on `src`). A burst that
/// stopped on [`HIGH_WATER`] is written out with its chunk still open, so bulk traffic fills
/// whole chunks; the chunk is closed before the pump can block on a source that may itself
/// wait for those bytes (an application waiting for PostgreSQL's answer).
pub(crate) async fn encode<R, W>(
    mut src: R,
    dst: W,
    mut sender: Sender,
    ctx: &DirectionCtx,
) -> Result<(), NetError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let what = |w: &str| format!("{} {w}", ctx.direction);
    let mut dst = WaitMeter::new(dst);
    let mut buf = vec![0u8; READ_SIZE];
    let mut walker = TapWalker::default();
    let mut eof = false;
    // From zero: a first packet pushed before this loop is counted too.
    let mut counted = Counters::default();
    let mut timings = Timings::default();
    let mut last = Instant::now();
    loop {
        // What is ready now, without waiting.
        let mut drained = false;
        while !eof && sender.pending() < HIGH_WATER {
            match read_now(&mut src, &mut buf).await {
                None => {
                    drained = true;
                    break;
                }
                Some(Ok(0)) => {
                    eof = true;
                    ctx.session_over.store(true, Ordering::Release);
                }
                Some(Ok(n)) => {
                    let t = Instant::now();
                    feed(&mut sender, &buf[..n], ctx)?;
                    timings.encode += t.elapsed();
                }
                Some(Err(e)) => return Err(NetError::io(what("read"), e)),
            }
        }
        let t = Instant::now();
        if eof {
            sender.finish()?;
        } else if drained {
            // The next read may wait: everything pushed so far goes out now. The context is
            // flushed, not reset.
            sender.flush()?;
        }
        timings.encode += t.elapsed();
        if ctx.direction == Direction::BackendToFrontend && sender.is_ready() {
            // Set before the Ready frame is written: the peer may compress once it sees it,
            // and this half's frontend->backend decoder must accept those chunks.
            ctx.ready.store(true, Ordering::Release);
        }
        let out = sender.output();
        if !out.is_empty() || eof {
            if let Some(tap) = &ctx.tap {
                walker.walk(tap, ctx.direction, out);
            }
            let n = out.len();
            write_flushed(&mut dst, out, ctx.direction).await?;
            sender.consume(n);
            let now = sender.counters();
            ctx.add(&counted, &now);
            counted = now;
        }
        timings.write_wait += dst.take_waited();
        if eof {
            break;
        }
        if drained {
            let t = Instant::now();
            let n = src
                .read(&mut buf)
                .await
                .map_err(|e| NetError::io(what("read"), e))?;
            timings.read_wait += t.elapsed();
            if n == 0 {
                eof = true;
                ctx.session_over.store(true, Ordering::Release);
            } else {
                let t = Instant::now();
                feed(&mut sender, &buf[..n], ctx)?;
                timings.encode += t.elapsed();
            }
        }
        let now = Instant::now();
        timings.elapsed = now - last;
        last = now;
        if sender.observe(&std::mem::take(&mut timings))?.is_some() {
            for c in &ctx.counters {
                c.add_switch();
            }
        }
    }
    // Best effort: the peer may already have closed its side, which ends nothing more.
    let _ = dst.into_inner().shutdown().await;
    Ok(())
}

/// A writer that adds up the time its writes were pending (the socket would block): the
/// link's share of a pass, for `--method auto`.
struct WaitMeter<W> {
    inner: W,
    since: Option<Instant>,
    waited: Duration,
}

impl<W> WaitMeter<W> {
    fn new(inner: W) -> Self {
        WaitMeter {
            inner,
            since: None,
            waited: Duration::ZERO,
        }
    }

    fn note<T>(&mut self, r: &Poll<T>) {
        match (r.is_pending(), self.since) {
            (true, None) => self.since = Some(Instant::now()),
            (false, Some(since)) => {
                self.waited += since.elapsed();
                self.since = None;
            }
            _ => {}
        }
    }

    /// The time waited since the previous call.
    fn take_waited(&mut self) -> Duration {
        std::mem::take(&mut self.waited)
    }

    fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for WaitMeter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(&r);
        r
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.note(&r);
        r
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Writes all of `bytes` to `dst` and flushes it, so that what is ready reaches the peer now.
async fn write_flushed<W: AsyncWrite + Unpin>(
    dst: &mut W,
    bytes: &[u8],
    direction: Direction,
) -> Result<(), NetError> {
    let what = || format!("{direction} write");
    dst.write_all(bytes)
        .await
        .map_err(|e| NetError::io(what(), e))?;
    dst.flush().await.map_err(|e| NetError::io(what(), e))
}

fn feed(sender: &mut Sender, bytes: &[u8], ctx: &DirectionCtx) -> Result<(), NetError> {
    if ctx.direction == Direction::FrontendToBackend && ctx.ready.load(Ordering::Acquire) {
        sender.session_ready();
    }
    sender.feed(bytes)
}

/// The frontend's Terminate message, whole: what a session's last frontend bytes are.
const TERMINATE: &[u8] = &[b'X', 0, 0, 0, 4];

/// Errors by which a read learns that the peer dropped the connection without closing it
/// properly (TLS without close_notify, a reset).
fn is_dropped(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted
    )
}

/// What a failed write of the decode pump means. The side it writes to (PostgreSQL on the
/// server half, the application on the client half) may close first: a backend that ended
/// the session (a FATAL error, pg_terminate_backend) before the client's Terminate arrived,
/// or an application that exits without reading the rest. Once the session is over, a write
/// refused with a broken pipe or a reset reaches no one who could still read it, so the
/// pump ends quietly, as a direct connection would; before that it is an error.
fn write_refused(e: std::io::Error, ctx: &DirectionCtx) -> Result<(), NetError> {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    let gone = matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted);
    if gone && ctx.session_over.load(Ordering::Acquire) {
        return Ok(());
    }
    Err(NetError::io(format!("{} write", ctx.direction), e))
}

/// Time a link gets to take its TLS close_notify when a connection ends.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Ends the link's write side properly whatever ended the connection: TLS close_notify,
/// then the socket's write side. A second call after the encoder's own is harmless.
pub(crate) async fn close_link<W: AsyncWrite + Unpin>(link: &mut W) {
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, link.shutdown()).await;
}

/// Reads link frames from `src` and writes the PostgreSQL bytes they carry to `dst` until
/// `src` ends, then shuts down `dst`'s write side.
pub(crate) async fn decode<R, W>(
    mut src: R,
    mut dst: W,
    mut decoder: LinkDecoder,
    initial: Vec<u8>,
    ctx: &DirectionCtx,
) -> Result<(), NetError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let what = |w: &str| format!("{} {w}", ctx.direction);
    let mut buf = vec![0u8; READ_SIZE];
    let mut input: Vec<u8> = initial;
    let mut out: Vec<u8> = Vec::new();
    let mut told_ready = false;
    let mut counted = decoder.counters();
    // Link bytes that arrived with the handshake are decoded before the first read.
    let mut read_first = input.is_empty();
    loop {
        if read_first {
            let n = match src.read(&mut buf).await {
                Ok(n) => n,
                // The peer went away without close_notify: the end of the stream when the
                // session was over and no frame is cut off, a cut link otherwise.
                Err(e) if is_dropped(&e) => {
                    if input.is_empty() && ctx.session_over.load(Ordering::Acquire) {
                        0
                    } else {
                        return Err(NetError::Cut {
                            what: what("read"),
                            source: e,
                        });
                    }
                }
                Err(e) => return Err(NetError::io(what("read"), e)),
            };
            if n == 0 {
                decoder.finish(&input)?;
                break;
            }
            input.extend_from_slice(&buf[..n]);
        }
        read_first = true;
        let mut at = 0;
        loop {
            if ctx.direction == Direction::FrontendToBackend
                && !told_ready
                && ctx.ready.load(Ordering::Acquire)
            {
                decoder.session_ready();
                told_ready = true;
            }
            let rest = &input[at..];
            let Some(d) = decoder.decode(rest, &mut out)? else {
                break;
            };
            if let Some(tap) = &ctx.tap {
                tap(TapEvent {
                    direction: ctx.direction,
                    frame_type: rest[0],
                    payload_len: d.consumed - HEADER_LEN,
                    before_ready: !told_ready,
                });
            }
            at += d.consumed;
            match d.event {
                Some(Event::SessionReady) => {
                    ctx.ready.store(true, Ordering::Release);
                    told_ready = true;
                }
                // Counted where the Method frame arrives as where it was sent, so both halves
                // report the same switches for the same direction of a connection.
                Some(Event::MethodSwitched(_)) => {
                    for c in &ctx.counters {
                        c.add_switch();
                    }
                }
                _ => {}
            }
            if out.len() >= HIGH_WATER {
                if let Err(e) = dst.write_all(&out).await {
                    return write_refused(e, ctx);
                }
                out.clear();
            }
        }
        input.drain(..at);
        if ctx.direction == Direction::FrontendToBackend && out.ends_with(TERMINATE) {
            ctx.session_over.store(true, Ordering::Release);
        }
        if let Err(e) = write_flushed(&mut dst, &out, ctx.direction).await {
            return match e {
                NetError::Io { source, .. } => write_refused(source, ctx),
                e => Err(e),
            };
        }
        out.clear();
        let now = decoder.counters();
        ctx.add(&counted, &now);
        counted = now;
    }
    // Best effort: the peer may already have closed its side, which ends nothing more.
    let _ = dst.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests;
