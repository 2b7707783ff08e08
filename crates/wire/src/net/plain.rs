//! Tells a peer that does not speak TLS what the server half's port is: a PostgreSQL client
//! pointed at it by mistake (psql, or libpq's `sslmode=prefer` SSLRequest) gets a FATAL
//! ErrorResponse it displays, instead of a TLS alert it cannot read or a bare close.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::endpoint::Stream;
use super::error::NetError;
use super::HANDSHAKE_TIMEOUT;

/// First byte of every TLS ClientHello: a record of content type handshake (RFC 8446 §5.1).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// What a PostgreSQL client connecting to the server half is told.
pub(crate) const TLS_ONLY: &str = "pgcompress tunnel server: this port speaks TLS only (the \
tunnel's link); connect the application to the tunnel's client half (pgcompress tunnel \
client --listen), not to the server half";

/// A stream that yields `prefix` before the bytes of `inner`: the byte read to tell TLS from
/// PostgreSQL goes back in front of the TLS handshake.
struct Prefixed {
    prefix: Option<u8>,
    inner: Stream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if buf.remaining() > 0 {
            if let Some(b) = self.prefix.take() {
                buf.put_slice(&[b]);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads the peer's first byte: a TLS handshake gets the stream back whole; anything else is
/// taken for a PostgreSQL client, answered as PostgreSQL would answer a refusal (its
/// encryption request with 'N', then its startup packet with a FATAL ErrorResponse saying
/// [`TLS_ONLY`]) and refused.
pub(crate) async fn tls_only(mut stream: Stream) -> Result<Stream, NetError> {
    let mut first = [0u8; 1];
    let n = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.read(&mut first))
        .await
        .map_err(|_| NetError::Timeout("waiting for the TLS handshake".to_owned()))?
        .map_err(|e| NetError::io("reading the TLS handshake", e))?;
    if n == 0 {
        return Err(NetError::Refused("the peer closed before TLS".to_owned()));
    }
    let stream: Stream = Box::new(Prefixed {
        prefix: Some(first[0]),
        inner: stream,
    });
    if first[0] == TLS_HANDSHAKE_RECORD {
        return Ok(stream);
    }
    let told =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, super::client::first_packet(stream, None))
            .await
        {
            Ok(Ok(Some(mut first))) if first.framer.started() => {
                // 08P01: protocol_violation, as PostgreSQL names a client speaking the wrong
                // protocol (utils/errcodes.txt).
                let msg = super::error_response_code("08P01", TLS_ONLY);
                let _ = first.app.write_all(&msg).await;
                let _ = first.app.shutdown().await;
                "told it \"this port speaks TLS only\""
            }
            _ => "not TLS",
        };
    Err(NetError::Refused(format!(
        "a client without TLS (a PostgreSQL client pointed at the server half?): {told}"
    )))
}
