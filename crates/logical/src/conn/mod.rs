//! The replication connection: a thin, blocking adapter between a socket (TCP, TLS over TCP,
//! or Unix) and the sans-IO pieces (message framing here, message building and SCRAM from
//! `postgres-protocol`, pgoutput in [`crate::Decoder`], TLS from rustls). One connection, one
//! thread; reads wait at most the time the caller gives, so a caller can keep its own timers
//! (status updates, signals).

mod auth;
mod config;
mod error;
pub mod frame;
mod replication;
pub mod tls;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;

pub use config::{
    ChannelBindingMode, ConnConfig, Env, Host, RootCert, SslMode, TlsConfig, DEFAULT_PORT,
    DEFAULT_SOCKET_DIR,
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
}

impl Connection {
    /// Connects (over TLS as `sslmode` says, on TCP; Unix sockets never use TLS, as in
    /// libpq), logs in (trust, password, md5, SCRAM-SHA-256, or SCRAM-SHA-256-PLUS over TLS)
    /// and waits until the server is ready for commands.
    pub fn connect(config: &ConnConfig) -> Result<Self, ConnError> {
        let host = match &config.host {
            Host::Unix(_) => {
                let path = config.socket_path().unwrap_or_default();
                let stream = UnixStream::connect(&path)
                    .map_err(ConnError::io(format!("connecting to {}", path.display())))?;
                let mut conn = Connection::over(Stream::Unix(stream));
                auth::startup(&mut conn, config)?;
                return Ok(conn);
            }
            Host::Tcp(h) => h.as_str(),
        };
        let mode = config.tls.mode;
        let first = match mode {
            SslMode::Disable | SslMode::Allow => Want::No,
            SslMode::Prefer => Want::IfOffered,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Want::Must,
        };
        let failed = match Connection::attempt(config, host, first) {
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
        Connection::attempt(config, host, second).map_err(|f| ConnError::BothAttempts {
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
    fn attempt(config: &ConnConfig, host: &str, want: Want) -> Result<Connection, Failed> {
        let tcp = TcpStream::connect((host, config.port))
            .map_err(ConnError::io(format!(
                "connecting to {host}:{}",
                config.port
            )))
            .map_err(Failed::no_retry)?;
        // Status updates are small and must not wait for Nagle.
        tcp.set_nodelay(true)
            .map_err(ConnError::io("setting TCP_NODELAY"))
            .map_err(Failed::no_retry)?;
        let mut conn = match want {
            Want::No => Connection::over(Stream::Tcp(tcp)),
            Want::IfOffered | Want::Must => Connection::negotiate_tls(tcp, config, host, want)?,
        };
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
        host: &str,
        want: Want,
    ) -> Result<Connection, Failed> {
        let io = |what: &'static str| move |e| Failed::no_retry(ConnError::io(what)(e));
        tcp.write_all(&tls::ssl_request())
            .map_err(io("sending the TLS request"))?;
        // Exactly one byte: whatever follows it belongs to the TLS handshake.
        let mut answer = [0u8; 1];
        tcp.read_exact(&mut answer)
            .map_err(io("reading the answer to the TLS request"))?;
        if !tls::parse_answer(answer[0]).map_err(Failed::no_retry)? {
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
        let name = match tls::server_name(host) {
            Ok(name) => name,
            // Only verify-full checks the name; the others need one for rustls alone, and an
            // address sends no SNI.
            Err(_) if config.tls.mode != SslMode::VerifyFull => match tcp.peer_addr() {
                Ok(peer) => rustls_pki_types::ServerName::IpAddress(peer.ip().into()),
                Err(e) => {
                    return Err(handshake_failed(ConnError::io("reading the peer address")(
                        e,
                    )))
                }
            },
            Err(e) => return Err(handshake_failed(e)),
        };
        let mut session = rustls::ClientConnection::new(client, name)
            .map_err(|e| handshake_failed(ConnError::Tls(format!("starting TLS: {e}"))))?;
        while session.is_handshaking() {
            if let Err(e) = session.complete_io(&mut tcp) {
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
        }
    }

    /// A parameter the server reported (`server_version`, `server_encoding`, …).
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// The server's major version (15 for "15.4 (Debian …)"), from `server_version`.
    pub fn server_major(&self) -> Option<u32> {
        let v = self.parameter("server_version")?;
        let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
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

    /// The next frame, waiting as long as it takes.
    fn read_frame_blocking(&mut self) -> Result<Frame, ConnError> {
        loop {
            if let Some(f) = self.read_frame(None)? {
                return Ok(f);
            }
        }
    }

    /// Runs one simple-protocol command and returns its rows as text (NULL as `None`).
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, ConnError> {
        frontend::query(sql, &mut self.wbuf).map_err(ConnError::io("building a query"))?;
        self.flush()?;
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            let f = self.read_frame_blocking()?;
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
