//! The link handshake: the client half sends Hello, the server half answers Accept or Refuse.
//!
//! Hello payload: `MAGIC`, `min version: u8`, `max version: u8`, then two method
//! specifications (`len: u8`, UTF-8), frontend->backend first; the backend->frontend one may be
//! `auto` ([`AUTO`]: the server half adapts its method, starting at none). Accept payload:
//! `MAGIC`, `version: u8` and the two specifications both halves start with. Refuse payload: a
//! UTF-8 reason.

use codec::{Cursor, Spec};

use super::frame::{self, parse_header, put_frame, HEADER_LEN};
use super::{parse_spec, MAGIC, MAX_SPEC_LEN, MIN_VERSION, VERSION};
use crate::error::LinkError;
use crate::Direction;

/// The backend->frontend specification of a Hello asking the server half to run
/// `--method auto` on its sending direction. A server half older than `auto` cannot parse it
/// and closes the link during the handshake; fixed methods are unchanged.
pub const AUTO: &str = "auto";

/// The client half's opening frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Oldest link version the client half speaks.
    pub min_version: u8,
    /// Newest link version the client half speaks.
    pub max_version: u8,
    /// Method asked for frontend->backend (the client half compresses).
    pub frontend_spec: Spec,
    /// Method asked for backend->frontend (the server half compresses); with
    /// `backend_auto`, the method it starts with (none).
    pub backend_spec: Spec,
    /// The server half adapts its backend->frontend method (`--method auto`).
    pub backend_auto: bool,
}

/// The server half's acceptance: the version and methods both halves now use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accept {
    /// The link version chosen.
    pub version: u8,
    /// Method frontend->backend.
    pub frontend_spec: Spec,
    /// Method backend->frontend.
    pub backend_spec: Spec,
}

/// The server half's answer to a Hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Go ahead.
    Accept(Accept),
    /// Refused, with the reason; the server half closes the link after sending it.
    Refuse(String),
}

fn put_spec(payload: &mut Vec<u8>, spec: &Spec) -> Result<(), LinkError> {
    let text = spec.to_string();
    if text.len() > MAX_SPEC_LEN {
        return Err(LinkError::Handshake(format!("method \"{text}\" too long")));
    }
    payload.push(text.len() as u8);
    payload.extend_from_slice(text.as_bytes());
    Ok(())
}

fn get_text<'a>(c: &mut Cursor<'a>) -> Result<&'a str, LinkError> {
    let short = |e: codec::ShortRead| LinkError::Handshake(format!("truncated: {e}"));
    let len = c.u8().map_err(short)?;
    let bytes = c.take(usize::from(len)).map_err(short)?;
    std::str::from_utf8(bytes)
        .map_err(|_| LinkError::Handshake("a method that is not UTF-8".to_owned()))
}

fn get_spec(c: &mut Cursor<'_>) -> Result<Spec, LinkError> {
    parse_spec(get_text(c)?)
}

/// What `auto` starts with: none, until a direction carries bulk traffic.
fn auto_start() -> Spec {
    super::auto::LADDER[0].spec()
}

fn magic(c: &mut Cursor<'_>) -> Result<(), LinkError> {
    match c.array::<8>() {
        Ok(m) if &m == MAGIC => Ok(()),
        _ => Err(LinkError::Handshake(
            "the peer is not a pgcompress tunnel (bad magic)".to_owned(),
        )),
    }
}

/// A handshake frame: its type, its payload and the bytes it took.
type RawFrame<'a> = (u8, &'a [u8], usize);

/// Reads one whole handshake frame of `expected` types from the front of `buf`.
fn frame_of<'a>(
    direction: Direction,
    buf: &'a [u8],
    expected: &[u8],
) -> Result<Option<RawFrame<'a>>, LinkError> {
    let Some(h) = parse_header(direction, 0, buf)? else {
        return Ok(None);
    };
    if !expected.contains(&h.frame_type) {
        return Err(LinkError::Handshake(format!(
            "expected a handshake frame, got type 0x{:02x}",
            h.frame_type
        )));
    }
    Ok(buf
        .get(HEADER_LEN..h.frame_len())
        .map(|p| (h.frame_type, p, h.frame_len())))
}

impl Hello {
    /// A Hello for the versions this crate speaks.
    pub fn new(frontend_spec: Spec, backend_spec: Spec) -> Self {
        Hello {
            min_version: MIN_VERSION,
            max_version: VERSION,
            frontend_spec,
            backend_spec,
            backend_auto: false,
        }
    }

    /// A Hello of a client half running `--method auto`: its own direction starts at none,
    /// and it asks the server half to adapt backend->frontend.
    pub fn auto() -> Self {
        Hello {
            backend_auto: true,
            ..Hello::new(auto_start(), auto_start())
        }
    }

    /// Appends the Hello frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), LinkError> {
        let mut p = MAGIC.to_vec();
        p.push(self.min_version);
        p.push(self.max_version);
        put_spec(&mut p, &self.frontend_spec)?;
        if self.backend_auto {
            p.push(AUTO.len() as u8);
            p.extend_from_slice(AUTO.as_bytes());
        } else {
            put_spec(&mut p, &self.backend_spec)?;
        }
        put_frame(out, frame::HELLO, &p);
        Ok(())
    }

    /// Reads a Hello frame from the front of `buf`: the Hello and the bytes it took, or
    /// `Ok(None)` if incomplete.
    pub fn decode(buf: &[u8]) -> Result<Option<(Hello, usize)>, LinkError> {
        let Some((_, payload, used)) =
            frame_of(Direction::FrontendToBackend, buf, &[frame::HELLO])?
        else {
            return Ok(None);
        };
        let mut c = Cursor::new(payload);
        magic(&mut c)?;
        let short = |e: codec::ShortRead| LinkError::Handshake(format!("truncated: {e}"));
        let min_version = c.u8().map_err(short)?;
        let max_version = c.u8().map_err(short)?;
        let frontend_spec = get_spec(&mut c)?;
        let backend = get_text(&mut c)?;
        let backend_auto = backend == AUTO;
        let backend_spec = if backend_auto {
            auto_start()
        } else {
            parse_spec(backend)?
        };
        if !c.is_empty() {
            return Err(LinkError::Handshake("trailing bytes in Hello".to_owned()));
        }
        Ok(Some((
            Hello {
                min_version,
                max_version,
                frontend_spec,
                backend_spec,
                backend_auto,
            },
            used,
        )))
    }

    /// The server half's answer: the newest common version, and the methods asked for if
    /// `allowed` accepts both; otherwise a refusal saying why.
    pub fn answer(&self, allowed: impl Fn(&Spec) -> bool) -> Reply {
        let Some(version) = self.common_version() else {
            return Reply::Refuse(format!(
                "no common link version: client speaks {}..={}, server {MIN_VERSION}..={VERSION}",
                self.min_version, self.max_version
            ));
        };
        for spec in [&self.frontend_spec, &self.backend_spec] {
            if !allowed(spec) {
                return Reply::Refuse(format!(
                    "method \"{spec}\" is not allowed by the server half"
                ));
            }
        }
        Reply::Accept(Accept {
            version,
            frontend_spec: self.frontend_spec,
            backend_spec: self.backend_spec,
        })
    }
}

impl Hello {
    /// The newest version both this crate and the Hello's sender speak.
    pub fn common_version(&self) -> Option<u8> {
        let v = self.max_version.min(VERSION);
        (v >= self.min_version.max(MIN_VERSION)).then_some(v)
    }
}

impl Reply {
    /// Appends the Accept or Refuse frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), LinkError> {
        match self {
            Reply::Accept(a) => {
                let mut p = MAGIC.to_vec();
                p.push(a.version);
                put_spec(&mut p, &a.frontend_spec)?;
                put_spec(&mut p, &a.backend_spec)?;
                put_frame(out, frame::ACCEPT, &p);
            }
            Reply::Refuse(reason) => {
                let mut end = reason.len().min(frame::MAX_HANDSHAKE_PAYLOAD as usize);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                put_frame(out, frame::REFUSE, &reason.as_bytes()[..end]);
            }
        }
        Ok(())
    }

    /// Reads an Accept or Refuse frame from the front of `buf`, or `Ok(None)` if incomplete.
    pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, LinkError> {
        let Some((t, payload, used)) = frame_of(
            Direction::BackendToFrontend,
            buf,
            &[frame::ACCEPT, frame::REFUSE],
        )?
        else {
            return Ok(None);
        };
        if t == frame::REFUSE {
            return Ok(Some((
                Reply::Refuse(String::from_utf8_lossy(payload).into_owned()),
                used,
            )));
        }
        let mut c = Cursor::new(payload);
        magic(&mut c)?;
        let version = c
            .u8()
            .map_err(|e| LinkError::Handshake(format!("truncated: {e}")))?;
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(LinkError::Handshake(format!(
                "server half chose link version {version}, this client speaks {MIN_VERSION}..={VERSION}"
            )));
        }
        let frontend_spec = get_spec(&mut c)?;
        let backend_spec = get_spec(&mut c)?;
        if !c.is_empty() {
            return Err(LinkError::Handshake("trailing bytes in Accept".to_owned()));
        }
        Ok(Some((
            Reply::Accept(Accept {
                version,
                frontend_spec,
                backend_spec,
            }),
            used,
        )))
    }
}
