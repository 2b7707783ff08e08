//! The replication connection: a thin, blocking adapter between a socket (TCP, TLS over TCP,
//! or Unix) and the sans-IO pieces (message framing here, message building and SCRAM from
//! `postgres-protocol`, pgoutput in [`crate::Decoder`], TLS from rustls). One connection, one
//! thread; reads wait at most the time the caller gives, so a caller can keep its own timers
//! (status updates, signals).
//!
//! Before streaming, every wait has an end ([`Connection::connect_until`]): connecting and
//! logging in take at most `connect_timeout` per address tried (as libpq), the commands that
//! answer at once ([`COMMAND_TIMEOUT`]) too, and a raised stop flag ends any of them, the
//! slot creation that waits for open transactions included (it is cancelled on the server).

mod auth;
mod config;
mod error;
pub mod frame;
mod replication;
pub mod tls;
mod verify;
mod wait;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;

pub use config::{
    ChannelBindingMode, ConnConfig, Env, Host, RootCert, SslMode, TlsConfig, DEFAULT_PORT,
    DEFAULT_SOCKET_DIR, MIN_CONNECT_TIMEOUT,
};
pub use error::ConnError;
pub use replication::{
    proto_version_for, quote_ident, quote_literal, CopyEvent, IdentifySystem, SlotCreated,
    SlotInfo, StartOptions,
};

/// Tag of CopyBothResponse, which `postgres-protocol` does not parse.
const COPY_BOTH_RESPONSE: u8 = b'W';
/// Tag of CopyData.
const COPY_DATA: u8 = b'd';
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 256 * 1024;
/// The longest the commands that answer at once (IDENTIFY_SYSTEM, the slot lookup,
/// START_REPLICATION) may take, or `connect_timeout` when that is longer.
/// CREATE_REPLICATION_SLOT has none: it waits for the transactions open on the server.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a CancelRequest may take to deliver: it is a courtesy on the way out.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the server was reached, for a CancelRequest and for what an error says.
#[derive(Debug, Clone)]
enum Peer {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "{a}"),
            Peer::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            // rustls keeps a partial record across a timed-out read of the socket.
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            // A server that closes without close_notify has still closed: the framing above
            // tells a cut message from a whole one.
            Stream::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf),
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tls(s) => {
                s.write_all(buf)?;
                s.flush()
            }
        }
    }
}

/// How one connection attempt treats TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Plain TCP.
    No,
    /// Ask; go on without it when the server says no.
    IfOffered,
    /// Ask; fail when the server says no.
    Must,
}

/// A failed attempt, and whether libpq would try once more the other way: after a failed
/// TLS handshake, or an ErrorResponse before authentication succeeded.
struct Failed {
    error: ConnError,
    retry: bool,
    tls: bool,
}

impl Failed {
    fn no_retry(error: ConnError) -> Failed {
        Failed {
            error,
            retry: false,
            tls: false,
        }
    }
}

/// One frame from the server: its tag and the whole message (tag, length, body).
struct Frame {
    tag: u8,
    bytes: Vec<u8>,
}

impl Frame {
    fn parse(&self) -> Result<Message, ConnError> {
        let mut b = BytesMut::from(&self.bytes[..]);
        match Message::parse(&mut b) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(ConnError::Protocol(format!(
                "incomplete message '{}'",
                self.tag as char
            ))),
            Err(e) => Err(ConnError::Protocol(format!(
                "message '{}': {e}",
                self.tag as char
            ))),
        }
    }
}

/// An open connection to a walsender (`replication=database`).
pub struct Connection {
    stream: Stream,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: BytesMut,
    timeout: Option<Duration>,
    params: HashMap<String, String>,
    /// The server's certificate (DER) when the connection runs over TLS.
    server_cert: Option<Vec<u8>>,
    /// Whether the server sent AuthenticationOk.
    authenticated: bool,
    /// Whether the login was SCRAM-SHA-256-PLUS, bound to this TLS connection.
    channel_bound: bool,
    /// The stop flag, and the deadline of the exchange under way.
    waits: wait::Waits,
    /// `connect_timeout`, which also lengthens [`COMMAND_TIMEOUT`].
    connect_timeout: Option<Duration>,
    /// Where the server is, and its BackendKeyData (process id, secret key): what a
    /// CancelRequest needs.
    peer: Option<Peer>,
    backend_key: Option<(i32, i32)>,
}

impl Connection {
    /// Connects (over TLS as `sslmode` says, on TCP; Unix sockets never use TLS, as in
    /// libpq), logs in (trust, password, md5, SCRAM-SHA-256, or SCRAM-SHA-256-PLUS over TLS)
    /// and waits until the server is ready for commands.
    pub fn connect(config: &ConnConfig) -> Result<Self, ConnError> {
        Connection::connect_until(config, None)
    }

    /// As [`Connection::connect`], and once `stop` is raised every wait before streaming
    /// (connecting, logging in, a command) ends with [`ConnError::Stopped`]; a command under
    /// way is cancelled on the server first (a CancelRequest), so a slot being created is not
    /// left behind. Connecting and logging in take at most `connect_timeout` per address.
    pub fn connect_until(
        config: &ConnConfig,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<Self, ConnError> {
        let waits = wait::Waits::new(stop);
        let mut conn = match config.socket_path() {
            Some(path) => {
                let within = waits.within(config.connect_timeout, Some("connect_timeout"));
                let stream = UnixStream::connect(&path)
                    .map_err(ConnError::io(format!("connecting to {}", path.display())))?;
                let mut conn = Connection::over(Stream::Unix(stream));
                conn.waits = within;
                conn.peer = Some(Peer::Unix(path));
                auth::startup(&mut conn, config)?;
                conn
            }
            None => Connection::connect_tcp(config, &waits)?,
        };
        conn.waits = waits;
        conn.connect_timeout = config.connect_timeout;
        Ok(conn)
    }

    /// Each address of the host in turn (or `hostaddr`), as libpq: the next one when a
    /// connection cannot be made or times out.
    fn connect_tcp(config: &ConnConfig, waits: &wait::Waits) -> Result<Connection, ConnError> {
        let name = config.tls_name().unwrap_or_default();
        let addrs: Vec<SocketAddr> = match config.hostaddr {
            Some(ip) => vec![SocketAddr::new(ip, config.port)],
            None => (name, config.port)
                .to_socket_addrs()
                .map_err(ConnError::io(format!(
                    "looking up host \"{name}\" (port {})",
                    config.port
                )))?
                .collect(),
        };
        let mut last = None;
        for addr in addrs {
            match Connection::connect_addr(config, addr, waits) {
                Ok(conn) => return Ok(conn),
                Err(e @ (ConnError::Io { .. } | ConnError::Timeout { .. })) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| ConnError::Config(format!("host \"{name}\" has no address"))))
    }

    /// Connects to one address, TLS as `sslmode` says, within one `connect_timeout`.
    fn connect_addr(
        config: &ConnConfig,
        addr: SocketAddr,
        waits: &wait::Waits,
    ) -> Result<Connection, ConnError> {
        let waits = waits.within(config.connect_timeout, Some("connect_timeout"));
        let mode = config.tls.mode;
        let first = match mode {
            SslMode::Disable | SslMode::Allow => Want::No,
            SslMode::Prefer => Want::IfOffered,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Want::Must,
        };
        let failed = match Connection::attempt(config, addr, first, &waits) {
            Ok(conn) => return Ok(conn),
            Err(f) => f,
        };
        // libpq's second try (fe-connect.c): allow adds TLS after a refusal without it,
        // prefer drops it after a failure with it.
        let second = match mode {
            SslMode::Allow if failed.retry && !failed.tls => Want::IfOffered,
            SslMode::Prefer if failed.retry && failed.tls => Want::No,
            _ => return Err(failed.error),
        };
        Connection::attempt(config, addr, second, &waits).map_err(|f| ConnError::BothAttempts {
            first_tls: if failed.tls {
                "with TLS"
            } else {
                "without TLS"
            },
            first: Box::new(failed.error),
            second: Box::new(f.error),
        })
    }

    /// One TCP connection, TLS as `want` says, and the start-up exchange.
    fn attempt(
        config: &ConnConfig,
        addr: SocketAddr,
        want: Want,
        waits: &wait::Waits,
    ) -> Result<Connection, Failed> {
        let tcp = waits.connect(addr).map_err(Failed::no_retry)?;
        // Status updates are small and must not wait for Nagle.
        tcp.set_nodelay(true)
            .map_err(ConnError::io("setting TCP_NODELAY"))
            .map_err(Failed::no_retry)?;
        let mut conn = match want {
            Want::No => Connection::over(Stream::Tcp(tcp)),
            Want::IfOffered | Want::Must => {
                Connection::negotiate_tls(tcp, config, addr, want, waits)?
            }
        };
        conn.waits = waits.clone();
        conn.peer = Some(Peer::Tcp(addr));
        match auth::startup(&mut conn, config) {
            Ok(()) => Ok(conn),
            Err(error) => Err(Failed {
                retry: matches!(error, ConnError::Server { .. }) && !conn.authenticated,
                tls: conn.server_cert.is_some(),
                error,
            }),
        }
    }

    /// SSLRequest, the one-byte answer, and the handshake (`protocol.sgml` "SSL Session
    /// Encryption").
    fn negotiate_tls(
        mut tcp: TcpStream,
        config: &ConnConfig,
        addr: SocketAddr,
        want: Want,
        waits: &wait::Waits,
    ) -> Result<Connection, Failed> {
        let io = |what: &'static str| move |e| Failed::no_retry(ConnError::io(what)(e));
        // The name the certificate must carry: `host`, never `hostaddr` (as libpq).
        let named = config.tls_name();
        let host = named.map_or_else(|| addr.to_string(), str::to_owned);
        let host = host.as_str();
        tcp.write_all(&tls::ssl_request())
            .map_err(io("sending the TLS request"))?;
        // Exactly one byte: whatever follows it belongs to the TLS handshake.
        let what = format!("{addr}: waiting for the answer to the TLS request");
        let answer = loop {
            let slice = waits.slice(&what).map_err(Failed::no_retry)?;
            tcp.set_read_timeout(Some(slice))
                .map_err(io("setting the read timeout"))?;
            let mut answer = [0u8; 1];
            match tcp.read(&mut answer) {
                Ok(0) => return Err(Failed::no_retry(ConnError::Closed)),
                Ok(_) => break answer[0],
                Err(e) if is_wait(&e) => {}
                Err(e) => return Err(io("reading the answer to the TLS request")(e)),
            }
        };
        if !tls::parse_answer(answer).map_err(Failed::no_retry)? {
            if want == Want::Must {
                return Err(Failed::no_retry(ConnError::Tls(format!(
                    "the server does not support TLS (sslmode={}): turn ssl on in the \
                     server, or use sslmode=prefer or disable to connect without it",
                    config.tls.mode.as_str()
                ))));
            }
            return Ok(Connection::over(Stream::Tcp(tcp)));
        }
        // A server sends nothing between 'S' and its part of the handshake: bytes already
        // here were not sent by it under TLS and may be a man in the middle's (CVE-2021-23222).
        tcp.set_nonblocking(true)
            .map_err(io("setting the socket non-blocking"))?;
        let mut peek = [0u8; 1];
        let early = tcp.peek(&mut peek);
        tcp.set_nonblocking(false)
            .map_err(io("setting the socket blocking"))?;
        if matches!(early, Ok(n) if n > 0) {
            return Err(Failed::no_retry(ConnError::Tls(format!(
                "{host}:{} sent unencrypted bytes after agreeing to TLS and before the \
                 handshake (a man in the middle?); refusing the connection",
                config.port
            ))));
        }
        // From here on a failure is a failed TLS attempt, which sslmode=prefer retries
        // without TLS.
        let handshake_failed = |error| Failed {
            error,
            retry: true,
            tls: true,
        };
        let (client, roots) = tls::client_config(&config.tls).map_err(handshake_failed)?;
        let name = match named.map(tls::server_name) {
            Some(Ok(name)) => name,
            // Only verify-full checks the name; the others need one for rustls alone, and an
            // address sends no SNI.
            _ if config.tls.mode != SslMode::VerifyFull => {
                rustls_pki_types::ServerName::IpAddress(addr.ip().into())
            }
            None => {
                return Err(Failed::no_retry(ConnError::Tls(format!(
                    "sslmode=verify-full checks the certificate against host=, and only \
                     hostaddr={} was given: add host=NAME, the name the certificate carries",
                    addr.ip()
                ))))
            }
            Some(Err(e)) => return Err(handshake_failed(e)),
        };
        let mut session = rustls::ClientConnection::new(client, name)
            .map_err(|e| handshake_failed(ConnError::Tls(format!("starting TLS: {e}"))))?;
        let what = format!("{addr}: TLS handshake");
        while session.is_handshaking() {
            let slice = waits.slice(&what).map_err(Failed::no_retry)?;
            tcp.set_read_timeout(Some(slice))
                .map_err(io("setting the read timeout"))?;
            match session.complete_io(&mut tcp) {
                Ok(_) => {}
                Err(e) if is_wait(&e) => {}
                Err(e) => {
                    // Tell the server why (the alert rustls queued); it is hanging up anyway.
                    let _ = session.write_tls(&mut tcp);
                    return Err(handshake_failed(tls::handshake_error(
                        &e,
                        host,
                        config.tls.mode,
                        roots.as_ref(),
                    )));
                }
            }
        }
        // The connection keeps its own account of the socket's read timeout.
        tcp.set_read_timeout(None)
            .map_err(io("setting the read timeout"))?;
        let cert = session
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .ok_or_else(|| {
                handshake_failed(ConnError::Tls("the server sent no certificate".into()))
            })?;
        let mut conn = Connection::over(Stream::Tls(Box::new(rustls::StreamOwned::new(
            session, tcp,
        ))));
        conn.server_cert = Some(cert);
        Ok(conn)
    }

    /// Whether the connection runs over TLS.
    pub fn is_tls(&self) -> bool {
        self.server_cert.is_some()
    }

    /// The server's certificate (DER) when the connection runs over TLS.
    pub fn server_certificate(&self) -> Option<&[u8]> {
        self.server_cert.as_deref()
    }

    /// Whether the login used SCRAM channel binding (SCRAM-SHA-256-PLUS), which proves the
    /// server that checked the password is the one at the other end of this TLS session.
    pub fn is_channel_bound(&self) -> bool {
        self.channel_bound
    }

    /// A connection on `stream` before the startup exchange: empty buffers, no timeout.
    fn over(stream: Stream) -> Connection {
        Connection {
            stream,
            rbuf: vec![0; READ_CHUNK],
            rstart: 0,
            rend: 0,
            wbuf: BytesMut::new(),
            timeout: None,
            params: HashMap::new(),
            server_cert: None,
            authenticated: false,
            channel_bound: false,
            waits: wait::Waits::default(),
            connect_timeout: None,
            peer: None,
            backend_key: None,
        }
    }

    /// A parameter the server reported (`server_version`, `server_encoding`, …).
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// The server's major version (15 for "15.4 (Debian …)"), from `server_version`; a
    /// server that did not report one, or one that does not start with a number, is an error,
    /// never a guess.
    pub fn server_major(&self) -> Result<u32, ConnError> {
        server_major(self.parameter("server_version"))
    }

    fn flush(&mut self) -> Result<(), ConnError> {
        let out = self.wbuf.split();
        self.stream
            .write_all(&out)
            .map_err(ConnError::io("sending to the server"))
    }

    /// The next whole frame; `Ok(None)` when `wait` passed without one (`None` waits forever).
    /// Bytes are read into a buffer that is zeroed once and reused: `rbuf[rstart..rend]`
    /// holds what is not consumed yet.
    fn read_frame(&mut self, wait: Option<Duration>) -> Result<Option<Frame>, ConnError> {
        loop {
            let pending = &self.rbuf[self.rstart..self.rend];
            if let Some((tag, len)) = frame::split(pending, frame::MAX_MESSAGE_LEN)? {
                let bytes = pending[..len].to_vec();
                self.rstart += len;
                if self.rstart == self.rend {
                    (self.rstart, self.rend) = (0, 0);
                    if self.rbuf.len() > 4 * READ_CHUNK {
                        // A huge message passed; give its memory back.
                        self.rbuf = vec![0; READ_CHUNK];
                    }
                }
                return Ok(Some(Frame { tag, bytes }));
            }
            // Room for the rest of this frame (its length is checked against the cap by
            // `split`), or for a chunk when its header is not complete yet.
            let need = match pending.get(1..5) {
                Some(l) => 1 + u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize,
                None => 5,
            }
            .max(READ_CHUNK);
            if self.rstart > 0 && self.rstart + need > self.rbuf.len() {
                self.rbuf.copy_within(self.rstart..self.rend, 0);
                (self.rstart, self.rend) = (0, self.rend - self.rstart);
            }
            if self.rstart + need > self.rbuf.len() {
                self.rbuf.resize(self.rstart + need, 0);
            }
            if self.timeout != wait {
                self.stream
                    .set_read_timeout(wait)
                    .map_err(ConnError::io("setting the read timeout"))?;
                self.timeout = wait;
            }
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => self.rend += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(ConnError::io("reading from the server")(e)),
            }
        }
    }

    /// The next frame, waiting until the deadline of the exchange under way (if any) or
    /// until the stop flag is raised; a command under way is then cancelled on the server.
    fn read_frame_blocking(&mut self, what: &str) -> Result<Frame, ConnError> {
        loop {
            let slice = match self.waits.slice(what) {
                Ok(s) => s,
                Err(e) => {
                    if matches!(e, ConnError::Stopped(_)) && self.authenticated {
                        self.cancel();
                    }
                    return Err(e);
                }
            };
            if let Some(f) = self.read_frame(Some(slice))? {
                return Ok(f);
            }
        }
    }

    /// Gives the next exchange `limit` (none for `None`) to be answered in.
    fn answer_within(&mut self, limit: Option<Duration>) {
        let limit = limit.map(|l| l.max(self.connect_timeout.unwrap_or_default()));
        self.waits = self.waits.within(limit, None);
    }

    /// Asks the server to cancel the command under way (protocol.sgml "Canceling Requests in
    /// Progress"), on a connection of its own, as libpq's PQcancel; waits for the server to
    /// close it, at most [`CANCEL_TIMEOUT`]. Failures are ignored: this connection is being
    /// closed anyway, which ends the session once the command looks at its socket.
    fn cancel(&self) {
        let (Some(peer), Some((pid, key))) = (&self.peer, self.backend_key) else {
            return;
        };
        let mut request = BytesMut::new();
        frontend::cancel_request(pid, key, &mut request);
        fn send(mut s: impl Read + Write, request: &[u8]) -> std::io::Result<()> {
            s.write_all(request)?;
            let _ = s.read(&mut [0u8; 1]);
            Ok(())
        }
        let _ = match peer {
            Peer::Tcp(addr) => TcpStream::connect_timeout(addr, CANCEL_TIMEOUT).and_then(|s| {
                s.set_read_timeout(Some(CANCEL_TIMEOUT))?;
                s.set_write_timeout(Some(CANCEL_TIMEOUT))?;
                send(s, &request)
            }),
            Peer::Unix(path) => UnixStream::connect(path).and_then(|s| {
                s.set_read_timeout(Some(CANCEL_TIMEOUT))?;
                s.set_write_timeout(Some(CANCEL_TIMEOUT))?;
                send(s, &request)
            }),
        };
    }

    /// Runs one simple-protocol command that the server answers at once and returns its rows
    /// as text (NULL as `None`); no answer within [`COMMAND_TIMEOUT`] (or `connect_timeout`,
    /// when longer) is an error.
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, ConnError> {
        self.query_within(sql, Some(COMMAND_TIMEOUT))
    }

    /// Runs one simple-protocol command, answered within `limit` (`None`: as long as it
    /// takes, until the stop flag is raised).
    fn query_within(
        &mut self,
        sql: &str,
        limit: Option<Duration>,
    ) -> Result<Vec<Vec<Option<String>>>, ConnError> {
        self.answer_within(limit);
        frontend::query(sql, &mut self.wbuf).map_err(ConnError::io("building a query"))?;
        self.flush()?;
        let what = format!(
            "waiting for the answer to {}",
            sql.split_whitespace().next().unwrap_or_default()
        );
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            let f = self.read_frame_blocking(&what)?;
            match f.parse()? {
                Message::DataRow(row) => {
                    let buf = row.buffer();
                    let mut cells = Vec::new();
                    let mut ranges = row.ranges();
                    while let Some(r) = ranges
                        .next()
                        .map_err(|e| ConnError::Protocol(format!("DataRow: {e}")))?
                    {
                        cells.push(r.map(|r| String::from_utf8_lossy(&buf[r]).into_owned()));
                    }
                    rows.push(cells);
                }
                Message::ErrorResponse(body) => failure = Some(server_error(&body)),
                Message::ReadyForQuery(_) => {
                    return match failure {
                        Some(e) => Err(e),
                        None => Ok(rows),
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether a socket error only says that a read timeout passed (or a signal came).
fn is_wait(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// The major version in a `server_version` ("15.4 (Debian …)", "16beta1", "9.6.24").
fn server_major(version: Option<&str>) -> Result<u32, ConnError> {
    let v = version.ok_or_else(|| {
        ConnError::Protocol("the server did not report its server_version at login".into())
    })?;
    let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().map_err(|_| {
        ConnError::Protocol(format!(
            "server_version \"{v}\" does not start with a major version number"
        ))
    })
}

/// An ErrorResponse as a [`ConnError::Server`].
fn server_error(body: &ErrorResponseBody) -> ConnError {
    let (mut severity, mut code, mut message, mut detail) =
        (String::new(), String::new(), String::new(), None);
    let mut fields = body.fields();
    while let Ok(Some(f)) = fields.next() {
        let v = String::from_utf8_lossy(f.value_bytes()).into_owned();
        match f.type_() {
            b'S' => severity = v,
            b'C' => code = v,
            b'M' => message = v,
            b'D' => detail = Some(v),
            _ => {}
        }
    }
    ConnError::Server {
        severity,
        code,
        message,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(stream: UnixStream) -> Connection {
        Connection::over(Stream::Unix(stream))
    }

    fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut f = vec![tag];
        f.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    /// Frames arrive whole, split at every byte, and larger than the read buffer; each comes
    /// out once, intact, in order.
    #[test]
    fn frames_survive_any_split() {
        let big: Vec<u8> = (0..(3 * READ_CHUNK + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        let frames = vec![
            frame(b'd', b"small"),
            frame(b'd', &big),
            frame(b'd', b""),
            frame(b'd', &big[..1000]),
        ];
        let all: Vec<u8> = frames.concat();
        for piece in [all.len(), 7, 1] {
            let (mine, mut theirs) = UnixStream::pair().unwrap();
            let mut conn = over(mine);
            let bytes = all.clone();
            let writer = std::thread::spawn(move || {
                for chunk in bytes.chunks(piece) {
                    theirs.write_all(chunk).unwrap();
                }
            });
            for want in &frames {
                let got = loop {
                    if let Some(f) = conn.read_frame(Some(Duration::from_secs(5))).unwrap() {
                        break f;
                    }
                };
                assert_eq!((got.tag, &got.bytes), (b'd', want), "piece {piece}");
            }
            writer.join().unwrap();
            assert!(matches!(
                conn.read_frame(Some(Duration::from_millis(50))),
                Err(ConnError::Closed)
            ));
        }
    }

    /// A server on 127.0.0.1 that reads the SSLRequest and answers `answer` in one write;
    /// then, if `replies` is not empty, reads the StartupMessage and sends the first reply,
    /// and for each further reply reads one client message first.
    fn fake_server(
        answer: &'static [u8],
        replies: Vec<Vec<u8>>,
    ) -> (u16, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = [0u8; 8];
            s.read_exact(&mut request).unwrap();
            assert_eq!(request, tls::ssl_request());
            s.write_all(answer).unwrap();
            for (i, reply) in replies.iter().enumerate() {
                // The StartupMessage has no tag; every later client message has one.
                let mut head = vec![0u8; if i == 0 { 4 } else { 5 }];
                s.read_exact(&mut head).unwrap();
                let len = &head[head.len() - 4..];
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                s.read_exact(&mut vec![0u8; len - 4]).unwrap();
                s.write_all(reply).unwrap();
            }
            // Wait for the client to hang up.
            let _ = s.read(&mut [0u8; 64]);
        });
        (port, server)
    }

    /// AuthenticationOk and ReadyForQuery.
    fn let_in() -> Vec<u8> {
        [frame(b'R', &0u32.to_be_bytes()), frame(b'Z', b"I")].concat()
    }

    fn connect_to(port: u16, tls: &str) -> Result<Connection, ConnError> {
        let config = ConnConfig::parse(
            &format!("host=127.0.0.1 port={port} user=u dbname=d {tls}"),
            &Env::default(),
        )
        .unwrap();
        Connection::connect(&config)
    }

    #[test]
    fn what_the_server_answers_to_the_tls_request() {
        // Bytes after 'S' before the handshake: refused, not handed to TLS or the protocol.
        let (port, server) = fake_server(b"SR\0\0\0\x08\0\0\0\0", vec![]);
        let e = connect_to(port, "sslmode=require")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unencrypted bytes"), "{e}");
        server.join().unwrap();
        // Not 'S' or 'N'.
        let (port, server) = fake_server(b"E", vec![]);
        let e = connect_to(port, "sslmode=prefer")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("0x45"), "{e}");
        server.join().unwrap();
        // 'N' where TLS is required.
        let (port, server) = fake_server(b"N", vec![]);
        let e = connect_to(port, "sslmode=verify-full sslrootcert=/nonexistent")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("does not support TLS (sslmode=verify-full)"),
            "{e}"
        );
        server.join().unwrap();
        // 'N' under prefer: on without TLS, on the same connection.
        let (port, server) = fake_server(b"N", vec![let_in()]);
        let conn = connect_to(port, "sslmode=prefer").unwrap();
        assert!(!conn.is_tls() && !conn.is_channel_bound());
        drop(conn);
        server.join().unwrap();
        // ... unless channel binding is required: a login without it is refused.
        let (port, server) = fake_server(b"N", vec![let_in()]);
        let e = connect_to(port, "channel_binding=require")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("without channel binding"), "{e}");
        server.join().unwrap();
        // A server that starts SCRAM and lets the client in without SASLFinal, the message
        // that proves it knows the password.
        let sasl = frame(
            b'R',
            &[&10u32.to_be_bytes()[..], b"SCRAM-SHA-256\0\0"].concat(),
        );
        let (port, server) = fake_server(b"N", vec![sasl, let_in()]);
        let e = connect_to(port, "password=pw").err().unwrap().to_string();
        assert!(e.contains("without its final message"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn a_missing_or_unparsable_server_version_is_an_error() {
        assert_eq!(server_major(Some("15.4 (Debian 15.4-1)")).unwrap(), 15);
        assert_eq!(server_major(Some("16beta1")).unwrap(), 16);
        for v in [None, Some(""), Some("beta"), Some("99999999999.1")] {
            assert!(
                matches!(server_major(v), Err(ConnError::Protocol(_))),
                "{v:?}"
            );
        }
    }

    #[test]
    fn a_quiet_socket_times_out_and_a_huge_length_is_refused() {
        let (mine, mut theirs) = UnixStream::pair().unwrap();
        let mut conn = over(mine);
        assert!(conn
            .read_frame(Some(Duration::from_millis(20)))
            .unwrap()
            .is_none());
        theirs.write_all(&[b'd', 0x7f, 0xff, 0xff, 0xff]).unwrap();
        assert!(matches!(
            conn.read_frame(Some(Duration::from_secs(1))),
            Err(ConnError::TooLarge { .. })
        ));
    }
}
