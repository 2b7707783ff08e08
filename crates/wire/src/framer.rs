//! Splits one direction's PostgreSQL byte stream into messages, sans-IO.
//!
//! The caller keeps the bytes; [`Framer::poll`] looks at the front of them and returns the
//! first complete message as a slice of them (nothing is copied or allocated). The caller
//! then drops `msg.bytes.len()` bytes from the front and polls again. Lengths are checked
//! against PostgreSQL's limits as soon as the 5-byte header (8 for a first packet) is there,
//! so [`Framer::peek_len`] tells a reader how much to buffer before the body has arrived.
//!
//! A proxy should not hold a 300 MB DataRow whole: [`Framer::poll_piece`] returns messages up
//! to [`Framer::whole_max`] whole and longer typed messages as successive [`Piece`]s of whatever
//! bytes are buffered, so the caller's buffer stays bounded by that limit.

use codec::Cursor;

use crate::error::{FrameError, FrameErrorKind};
use crate::startup::*;
use crate::{backend, frontend, Direction};

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// StartupMessage of protocol major 3 with any minor (3.0, 3.2, a 3.9999 "grease" probe):
    /// the server negotiates, the tunnel passes it on.
    Startup {
        /// The minor version asked for.
        minor: u16,
    },
    /// SSLRequest: the proxy answers, then calls [`Framer::resume_after_answer`].
    SslRequest,
    /// GSSENCRequest: as SSLRequest.
    GssEncRequest,
    /// CancelRequest: the last packet of its connection.
    CancelRequest {
        /// The backend's process id.
        pid: i32,
        /// The secret key, 4 to 256 bytes.
        key: &'a [u8],
    },
    /// A typed message after startup.
    Typed(u8),
}

/// One complete message, borrowed from the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// What the message is.
    pub kind: Kind<'a>,
    /// The whole message: type byte (if any), length word and body.
    pub bytes: &'a [u8],
}

impl Message<'_> {
    /// The message type byte; `None` for a first packet.
    pub fn tag(&self) -> Option<u8> {
        match self.kind {
            Kind::Typed(t) => Some(t),
            _ => None,
        }
    }

    /// The message body, after the type byte and length word.
    pub fn body(&self) -> &[u8] {
        let header = if self.tag().is_some() { 5 } else { 4 };
        self.bytes.get(header..).unwrap_or_default()
    }
}

/// A whole message or part of one, borrowed from the caller's buffer (see
/// [`Framer::poll_piece`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    /// What the message this piece belongs to is.
    pub kind: Kind<'a>,
    /// The message's bytes in this piece: the first piece starts with the type byte and
    /// length word.
    pub bytes: &'a [u8],
    /// Length of the whole message, type byte and length word included.
    pub total: usize,
    /// This piece starts the message.
    pub first: bool,
    /// This piece ends the message.
    pub last: bool,
}

impl<'a> Piece<'a> {
    /// A whole message as a single piece.
    pub fn whole(msg: Message<'a>) -> Self {
        Piece {
            kind: msg.kind,
            total: msg.bytes.len(),
            bytes: msg.bytes,
            first: true,
            last: true,
        }
    }

    /// The message type byte; `None` for a first packet.
    pub fn tag(&self) -> Option<u8> {
        match self.kind {
            Kind::Typed(t) => Some(t),
            _ => None,
        }
    }
}

/// Default [`Framer::whole_max`]: typed messages up to 256 KiB are returned whole.
pub const DEFAULT_WHOLE_MAX: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The next bytes are a first packet (no type byte).
    First,
    /// An SSLRequest or GSSENCRequest was returned; nothing may follow until it is answered.
    AwaitingAnswer,
    /// Typed messages.
    Typed,
    /// A CancelRequest was returned; the connection carries nothing more.
    Done,
}

/// Frames one direction of a PostgreSQL connection.
#[derive(Debug, Clone)]
pub struct Framer {
    direction: Direction,
    state: State,
    offset: u64,
    whole_max: usize,
    /// Type byte and bytes still to come of a message being returned in pieces.
    partial: Option<(u8, usize)>,
}

/// The bytes a message's header occupies before its length is known.
const FIRST_HEADER: usize = 8;
const TYPED_HEADER: usize = 5;

impl Framer {
    /// A framer for `direction`: frontend->backend starts with a first packet, backend->frontend
    /// with typed messages.
    pub fn new(direction: Direction) -> Self {
        let state = match direction {
            Direction::FrontendToBackend => State::First,
            Direction::BackendToFrontend => State::Typed,
        };
        Framer {
            direction,
            state,
            offset: 0,
            whole_max: DEFAULT_WHOLE_MAX,
            partial: None,
        }
    }

    /// Sets the longest typed message [`Framer::poll_piece`] returns whole (at least the
    /// longest first packet, 10000 bytes, so first packets are always whole).
    pub fn with_whole_max(mut self, whole_max: usize) -> Self {
        self.whole_max = whole_max.max(MAX_STARTUP_PACKET_LENGTH as usize + 4);
        self
    }

    /// The longest typed message [`Framer::poll_piece`] returns whole; a reader that buffers
    /// this many bytes always makes progress.
    pub fn whole_max(&self) -> usize {
        self.whole_max
    }

    /// True while a message returned in pieces has bytes still to come.
    pub fn in_message(&self) -> bool {
        self.partial.is_some()
    }

    /// The stream this framer reads.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// Offset from the start of the stream of the next message (the bytes returned so far).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True after a StartupMessage: typed messages follow.
    pub fn started(&self) -> bool {
        self.state == State::Typed
    }

    /// True after an SSLRequest or GSSENCRequest until [`Framer::resume_after_answer`].
    pub fn awaiting_answer(&self) -> bool {
        self.state == State::AwaitingAnswer
    }

    /// The proxy has answered an SSLRequest or GSSENCRequest ('N', or 'S' and a finished TLS
    /// handshake whose plaintext it now feeds): the next packet is again a first packet.
    pub fn resume_after_answer(&mut self) {
        if self.state == State::AwaitingAnswer {
            self.state = State::First;
        }
    }

    fn err(&self, tag: Option<u8>, kind: FrameErrorKind) -> FrameError {
        FrameError {
            direction: self.direction,
            tag,
            offset: self.offset,
            kind,
        }
    }

    /// The total length of the message at the front of `buf` once its header is there, checked
    /// against the caps; `Ok(None)` while the header is incomplete.
    pub fn peek_len(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        match self.state {
            State::First => self.first_len(buf).map(|o| o.map(|(len, _)| len)),
            State::Typed => self.typed_len(buf).map(|o| o.map(|(len, _)| len)),
            State::AwaitingAnswer | State::Done => self.check_idle(buf).map(|()| None),
        }
    }

    /// The first complete message at the front of `buf`, `Ok(None)` if more bytes are needed.
    ///
    /// The caller must drop `msg.bytes.len()` bytes from the front of its buffer before the
    /// next call: the framer counts them as read.
    /// While a message returned by [`Framer::poll_piece`] is unfinished this returns
    /// `Ok(None)`: its remaining bytes are not a header.
    pub fn poll<'a>(&mut self, buf: &'a [u8]) -> Result<Option<Message<'a>>, FrameError> {
        if self.partial.is_some() {
            return Ok(None);
        }
        let msg = match self.state {
            State::First => self.poll_first(buf)?,
            State::Typed => self.poll_typed(buf)?,
            State::AwaitingAnswer | State::Done => {
                self.check_idle(buf)?;
                None
            }
        };
        if let Some(m) = &msg {
            self.offset += m.bytes.len() as u64;
        }
        Ok(msg)
    }

    /// The next piece at the front of `buf`, `Ok(None)` if more bytes are needed.
    ///
    /// Messages up to [`Framer::whole_max`] bytes come whole, as [`Framer::poll`] returns
    /// them. A longer typed message comes as a first piece once its header is there, then as
    /// pieces of whatever follows, up to its end; its length was checked against the caps
    /// from the header. The caller drops `piece.bytes.len()` bytes from the front of its buffer
    /// before the next call.
    pub fn poll_piece<'a>(&mut self, buf: &'a [u8]) -> Result<Option<Piece<'a>>, FrameError> {
        if let Some((tag, remaining)) = self.partial {
            if buf.is_empty() {
                return Ok(None);
            }
            let n = remaining.min(buf.len());
            let left = remaining - n;
            self.partial = (left > 0).then_some((tag, left));
            self.offset += n as u64;
            return Ok(Some(Piece {
                kind: Kind::Typed(tag),
                bytes: &buf[..n],
                total: 0,
                first: false,
                last: left == 0,
            }));
        }
        if self.state == State::Typed {
            if let Some((len, tag)) = self.typed_len(buf)? {
                if len > self.whole_max {
                    let n = len.min(buf.len());
                    self.partial = (n < len).then_some((tag, len - n));
                    self.offset += n as u64;
                    return Ok(Some(Piece {
                        kind: Kind::Typed(tag),
                        bytes: &buf[..n],
                        total: len,
                        first: true,
                        last: n == len,
                    }));
                }
            }
        }
        Ok(self.poll(buf)?.map(Piece::whole))
    }

    /// Call when the stream has ended with `rest` unread: an error if a message was cut off.
    pub fn finish(&self, rest: &[u8]) -> Result<(), FrameError> {
        if let Some((tag, remaining)) = self.partial {
            return Err(self.err(
                Some(tag),
                FrameErrorKind::Truncated {
                    have: rest.len(),
                    need: remaining,
                },
            ));
        }
        if rest.is_empty() {
            return Ok(());
        }
        let (tag, header) = match self.state {
            State::First => (None, FIRST_HEADER),
            State::Typed => (rest.first().copied(), TYPED_HEADER),
            State::AwaitingAnswer | State::Done => return self.check_idle(rest),
        };
        let need = self.peek_len(rest)?.unwrap_or(header);
        Err(self.err(
            tag,
            FrameErrorKind::Truncated {
                have: rest.len(),
                need,
            },
        ))
    }

    fn check_idle(&self, buf: &[u8]) -> Result<(), FrameError> {
        if buf.is_empty() {
            return Ok(());
        }
        let kind = match self.state {
            State::Done => FrameErrorKind::AfterCancel { len: buf.len() },
            _ => FrameErrorKind::BytesBeforeAnswer { len: buf.len() },
        };
        Err(self.err(None, kind))
    }

    /// Length and code of the first packet, validated.
    fn first_len(&self, buf: &[u8]) -> Result<Option<(usize, u32)>, FrameError> {
        if buf.first() == Some(&TLS_HANDSHAKE_RECORD) {
            return Err(self.err(None, FrameErrorKind::DirectTls));
        }
        let mut c = Cursor::new(buf);
        let (Ok(len), Ok(code)) = (c.u32_be(), c.u32_be()) else {
            // The length alone already tells a too-short or too-long packet.
            if let Ok(len) = Cursor::new(buf).u32_be() {
                self.check_first_len(len)?;
            }
            return Ok(None);
        };
        self.check_first_len(len)?;
        let request = |request: &'static str, ok: bool, expected: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(self.err(
                    None,
                    FrameErrorKind::RequestLength {
                        request,
                        len,
                        expected,
                    },
                ))
            }
        };
        match code {
            NEGOTIATE_SSL_CODE => request("SSLRequest", len == ENCRYPTION_REQUEST_LENGTH, "8")?,
            NEGOTIATE_GSS_CODE => request("GSSENCRequest", len == ENCRYPTION_REQUEST_LENGTH, "8")?,
            CANCEL_REQUEST_CODE => request(
                "CancelRequest",
                (CANCEL_HEADER_LENGTH + MIN_CANCEL_KEY_LENGTH
                    ..=CANCEL_HEADER_LENGTH + MAX_CANCEL_KEY_LENGTH)
                    .contains(&len),
                "16 to 268 (12 + a 4 to 256 byte key)",
            )?,
            c if protocol_major(c) == 3 => {}
            _ => return Err(self.err(None, FrameErrorKind::UnknownCode { code })),
        }
        Ok(Some((len as usize, code)))
    }

    fn check_first_len(&self, len: u32) -> Result<(), FrameError> {
        // ProcessStartupPacket subtracts the length word before comparing.
        let body = len.wrapping_sub(4);
        if len < 4 + MIN_STARTUP_PACKET_LENGTH {
            Err(self.err(
                None,
                FrameErrorKind::LengthTooShort {
                    len,
                    min: 4 + MIN_STARTUP_PACKET_LENGTH,
                },
            ))
        } else if body > MAX_STARTUP_PACKET_LENGTH {
            Err(self.err(
                None,
                FrameErrorKind::LengthTooLong {
                    len,
                    max: 4 + MAX_STARTUP_PACKET_LENGTH,
                },
            ))
        } else {
            Ok(())
        }
    }

    fn poll_first<'a>(&mut self, buf: &'a [u8]) -> Result<Option<Message<'a>>, FrameError> {
        let Some((len, code)) = self.first_len(buf)? else {
            return Ok(None);
        };
        let Some(bytes) = buf.get(..len) else {
            return Ok(None);
        };
        let kind = match code {
            NEGOTIATE_SSL_CODE => Kind::SslRequest,
            NEGOTIATE_GSS_CODE => Kind::GssEncRequest,
            CANCEL_REQUEST_CODE => {
                let mut c = Cursor::at(bytes, FIRST_HEADER);
                let pid = c.i32_be().map_err(|_| self.short(None, len))?;
                Kind::CancelRequest { pid, key: c.rest() }
            }
            _ => Kind::Startup {
                minor: protocol_minor(code),
            },
        };
        self.state = match kind {
            Kind::SslRequest | Kind::GssEncRequest => State::AwaitingAnswer,
            Kind::CancelRequest { .. } => State::Done,
            _ => State::Typed,
        };
        Ok(Some(Message { kind, bytes }))
    }

    fn short(&self, tag: Option<u8>, need: usize) -> FrameError {
        self.err(tag, FrameErrorKind::Truncated { have: 0, need })
    }

    fn typed_len(&self, buf: &[u8]) -> Result<Option<(usize, u8)>, FrameError> {
        let mut c = Cursor::new(buf);
        let (Ok(tag), Ok(len)) = (c.u8(), c.u32_be()) else {
            return Ok(None);
        };
        let max = match self.direction {
            Direction::FrontendToBackend => frontend::max_len(tag),
            Direction::BackendToFrontend => backend::max_len(tag),
        };
        if len < 4 {
            return Err(self.err(Some(tag), FrameErrorKind::LengthTooShort { len, min: 4 }));
        }
        if len > max {
            return Err(self.err(Some(tag), FrameErrorKind::LengthTooLong { len, max }));
        }
        // The type byte is not counted in the length word.
        Ok(Some((len as usize + 1, tag)))
    }

    fn poll_typed<'a>(&mut self, buf: &'a [u8]) -> Result<Option<Message<'a>>, FrameError> {
        let Some((len, tag)) = self.typed_len(buf)? else {
            return Ok(None);
        };
        Ok(buf.get(..len).map(|bytes| Message {
            kind: Kind::Typed(tag),
            bytes,
        }))
    }
}
