//! The self-describing container every archived file is stored in (format version 6; versions
//! 1, which lacks the WAL records transform, 2, which stores each stream in one part, 3,
//! which has no SHA-256 checkpoint, 4, which has no BLAKE3 digest, and 5, which has a BLAKE3
//! digest instead of an XXH3-128 one, are still read).
//!
//! All integers are little-endian. A container is a header followed by a payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `PGCZARC` + `\n` ([`MAGIC`]) |
//! | 8 | 2 | format version, 6 ([`FORMAT_VERSION`]; 1 to 5 are read too) |
//! | 10 | 2 | flags: [`FLAG_CHECKPOINT`] (version 4 and later), [`FLAG_BLAKE3`] (version 5 and later), [`FLAG_XXH3`] (version 6 and later); readers reject unknown bits |
//! | 12 | 4 | header length `H`: bytes from offset 0 to the end of the header checksum |
//! | 16 | 8 | original size |
//! | 24 | 32 | SHA-256 of the original |
//! | 56 | 1 | transform: 0 plain, 1 WAL, 2 WAL records (version 2 and later) ([`Transform`]) |
//! | 57 | 1 | part count `n` (0..=16) |
//! | 58 | 2 | name length (1..=1024) |
//! | 60 | 2 | method spec length (1..=256) |
//! | 62 | 2 | reserved, 0 |
//! | 64 | | original file name, UTF-8 |
//! | | | method specification, PostgreSQL syntax (`zstd:level=5`) |
//! | | 24 | WAL transforms only: `xlp_magic` u16, reserved u16, `xlp_tli` u32, `xlp_pageaddr` u64, valid length u64 |
//! | | 24 | WAL records transform only: first `xl_prev` u64, records u64, lead length u64 ([`SplitInfo`]) |
//! | | 40 | [`FLAG_CHECKPOINT`] only: offset u64, SHA-256 state after that many bytes of the original ([`crate::sha::Checkpoint`]) |
//! | | 32 | [`FLAG_BLAKE3`] only: BLAKE3 (256-bit) of the original |
//! | | 16 | [`FLAG_XXH3`] only: XXH3-128 of the original, big-endian (the canonical form `xxhsum -H2` prints) |
//! | | 24 × n | parts: kind u8, role u8, filter u8 (0 none, 1 word-coded, streams of version 2 and later only), reserved u8, CRC-32C of the stored bytes u32, raw length u64, stored length u64 |
//! | H − 4 | 4 | CRC-32C of bytes 0..H−4 |
//!
//! The payload is the parts' stored bytes, in order, and nothing else: a container is exactly
//! `H + Σ stored length` bytes. Part kinds: 1 compressed with the container's method (one
//! block of that method), 2 zeros (nothing stored).
//!
//! Plain and WAL transforms: concatenating the parts' raw bytes gives the original file;
//! roles (0 whole file, 1 valid WAL, 2 stale bytes after the end of WAL, 3 zero tail) are
//! informational. WAL records transform: parts with roles 4 to 12 are the streams of
//! [`crate::walsplit`] (role 4 + the stream's index, in stream order, an absent one empty),
//! which [`crate::walsplit::join`] turns back into the first `valid length` bytes. From
//! version 3 a stream may be stored in several consecutive parts, each compressed (and
//! word-coded) on its own, whose raw bytes concatenate to the stream, so that two threads
//! can compress and decompress one large stream; version 2 stores each stream at most once.
//! Optional stale bytes (role 2) and an optional zero tail (role 3) follow.
//!
//! Version 6 writers record the XXH3-128 digest of the original beside its SHA-256 (version 5
//! writers recorded a BLAKE3 digest instead, version 4 writers a SHA-256 checkpoint). `get`
//! checks the XXH3-128 digest of what it rebuilt, at about 15 GB/s against BLAKE3's 4 and
//! SHA-256's 1.1 on one core here; `verify` and [`decode`] check every digest the header
//! records, the SHA-256 always. XXH3 is not a cryptographic hash: it is there to catch a
//! rebuild that went wrong or bytes damaged past the per-part CRC-32C, for which 128 bits
//! leave a chance of 2^-128 of a miss. Against someone who can write to the repository no
//! digest in the header helps, since they can rewrite the header too; the SHA-256 remains
//! the file's identity.
//!
//! Parsing is sans-IO ([`Header::parse`], [`decode`]): every length is checked against the bytes
//! present and a hard cap before anything is allocated, and decompression is capped at the
//! declared raw length.

use std::str::FromStr;

use codec::Spec;

use crate::error::ContainerError;
use crate::sha::Checkpoint;
use crate::walsplit::{Piece, Source, SplitInfo, Stream, STREAMS};

/// The first eight bytes of every container.
pub const MAGIC: [u8; 8] = *b"PGCZARC\n";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 6;
/// The oldest format version this build reads.
pub const OLDEST_READABLE_VERSION: u16 = 1;
/// Size of the fixed part of the header.
pub const FIXED_LEN: usize = 64;
/// Size of one part entry.
pub const PART_LEN: usize = 24;
/// Size of the WAL description of the WAL transform.
pub const WAL_INFO_LEN: usize = 24;
/// Size of the extra description of the WAL records transform.
pub const SPLIT_INFO_LEN: usize = 24;
/// Flag (version 4 and later): the header holds a SHA-256 checkpoint ([`Checkpoint`]).
pub const FLAG_CHECKPOINT: u16 = 1;
/// Size of a SHA-256 checkpoint: offset u64, state 32 bytes.
pub const CHECKPOINT_LEN: usize = 40;
/// Flag (version 5 and later): the header holds the BLAKE3 digest of the original.
pub const FLAG_BLAKE3: u16 = 2;
/// Size of a BLAKE3 digest.
pub const BLAKE3_LEN: usize = 32;
/// Flag (version 6 and later): the header holds the XXH3-128 digest of the original.
pub const FLAG_XXH3: u16 = 4;
/// Size of an XXH3-128 digest.
pub const XXH3_LEN: usize = 16;
/// Largest header accepted.
pub const MAX_HEADER_LEN: usize = 64 * 1024;
/// Longest original file name.
pub const MAX_NAME_LEN: usize = 1024;
/// Longest method specification.
pub const MAX_SPEC_LEN: usize = 256;
/// Most parts in one container.
pub const MAX_PARTS: usize = 16;
/// Largest original file (the largest WAL segment PostgreSQL allows, and the codec's output cap).
pub const MAX_ORIGINAL_SIZE: u64 = codec::MAX_DECOMPRESSED_SIZE as u64;

const KIND_COMPRESSED: u8 = 1;
const KIND_ZEROS: u8 = 2;

/// How a part's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartKind {
    /// One block of the container's method.
    Compressed,
    /// `raw_len` zero bytes; nothing stored.
    Zeros,
}

/// What a part of the original is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The whole file (plain transform).
    Whole,
    /// A WAL segment from its start to the end of valid WAL.
    WalValid,
    /// Non-zero bytes after the end of valid WAL (a recycled segment's old content).
    WalStale,
    /// Zeros up to the end of the segment (after a switch, or past the insert point).
    ZeroTail,
    /// One stream of the WAL records transform.
    WalStream(Stream),
}

impl Role {
    fn code(self) -> u8 {
        match self {
            Role::Whole => 0,
            Role::WalValid => 1,
            Role::WalStale => 2,
            Role::ZeroTail => 3,
            Role::WalStream(s) => 4 + s as u8,
        }
    }

    fn from_code(c: u8) -> Option<Role> {
        Some(match c {
            0 => Role::Whole,
            1 => Role::WalValid,
            2 => Role::WalStale,
            3 => Role::ZeroTail,
            c @ 4..=12 => Role::WalStream(Stream::ALL[usize::from(c - 4)]),
            _ => return None,
        })
    }

    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            Role::Whole => "whole",
            Role::WalValid => "wal",
            Role::WalStale => "stale",
            Role::ZeroTail => "zeros",
            Role::WalStream(s) => s.name(),
        }
    }
}

/// One part of the original, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// How it is stored.
    pub kind: PartKind,
    /// What it is.
    pub role: Role,
    /// CRC-32C of the stored bytes (0 for zeros).
    pub crc32c: u32,
    /// Bytes of the original it stands for.
    pub raw_len: u64,
    /// Bytes it occupies in the payload.
    pub stored_len: u64,
    /// The decompressed bytes are word-coded ([`crate::words`]): `raw_len` is the coded
    /// length, the stream is what [`crate::words::decode`] makes of them.
    pub words: bool,
}

/// What a WAL transform recorded about the segment (from its first page header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalInfo {
    /// `xlp_magic`: the PostgreSQL major version's WAL magic.
    pub magic: u16,
    /// `xlp_tli` of the first page.
    pub tli: u32,
    /// `xlp_pageaddr` of the first page: the segment's start LSN.
    pub pageaddr: u64,
    /// Bytes from the segment start to the end of valid WAL.
    pub valid_len: u64,
}

/// How the original was split into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transform {
    /// The whole file compressed (anything that is not a parseable WAL segment).
    Plain,
    /// A WAL segment: valid prefix, stale bytes, zero tail.
    Wal(WalInfo),
    /// A WAL segment taken apart into streams ([`crate::walsplit`]), then a zero tail.
    /// `valid_len` is the length of the prefix the streams rebuild.
    WalRecords(WalInfo, SplitInfo),
}

impl Transform {
    /// A short name for listings: `plain`, `wal` or `wal-records`.
    pub fn name(&self) -> &'static str {
        match self {
            Transform::Plain => "plain",
            Transform::Wal(_) => "wal",
            Transform::WalRecords(..) => "wal-records",
        }
    }

    /// The WAL description of a WAL transform.
    pub fn wal_info(&self) -> Option<&WalInfo> {
        match self {
            Transform::Plain => None,
            Transform::Wal(w) | Transform::WalRecords(w, _) => Some(w),
        }
    }

    fn code(&self) -> u8 {
        match self {
            Transform::Plain => 0,
            Transform::Wal(_) => 1,
            Transform::WalRecords(..) => 2,
        }
    }

    fn info_len(&self) -> usize {
        match self {
            Transform::Plain => 0,
            Transform::Wal(_) => WAL_INFO_LEN,
            Transform::WalRecords(..) => WAL_INFO_LEN + SPLIT_INFO_LEN,
        }
    }
}

/// A parsed container header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The original file name (`%f`).
    pub name: String,
    /// The original size in bytes.
    pub original_size: u64,
    /// SHA-256 of the original.
    pub sha256: [u8; 32],
    /// The method the compressed parts use.
    pub spec: Spec,
    /// The split into parts.
    pub transform: Transform,
    /// The parts, in order.
    pub parts: Vec<Part>,
    /// The SHA-256 state partway through the original, so that its hash can be checked on
    /// two threads (version 4 and later, files of [`crate::sha::CHECKPOINT_MIN_SIZE`] bytes
    /// and more).
    pub checkpoint: Option<Checkpoint>,
    /// BLAKE3 of the original (what version 5 writers record), what `get` checks when
    /// there is no XXH3-128 digest.
    pub blake3: Option<[u8; 32]>,
    /// XXH3-128 of the original, big-endian (what version 6 writers record), what `get`
    /// checks.
    pub xxh3: Option<[u8; 16]>,
}

impl Header {
    /// Bytes the header occupies once encoded.
    pub fn encoded_len(&self) -> usize {
        let wal = self.transform.info_len();
        FIXED_LEN
            + self.name.len()
            + self.spec.to_string().len()
            + wal
            + self.checkpoint.map_or(0, |_| CHECKPOINT_LEN)
            + self.blake3.map_or(0, |_| BLAKE3_LEN)
            + self.xxh3.map_or(0, |_| XXH3_LEN)
            + PART_LEN * self.parts.len()
            + 4
    }

    /// Bytes of the payload (the sum of the parts' stored lengths).
    pub fn payload_len(&self) -> u64 {
        self.parts.iter().map(|p| p.stored_len).sum()
    }

    /// Bytes of the whole container.
    pub fn container_len(&self) -> u64 {
        self.encoded_len() as u64 + self.payload_len()
    }

    /// Hex SHA-256 of the original.
    pub fn sha256_hex(&self) -> String {
        hex(&self.sha256)
    }

    /// Encodes the header (the caller appends the payload).
    pub fn encode(&self) -> Vec<u8> {
        let spec = self.spec.to_string();
        let len = self.encoded_len();
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let flags = if self.checkpoint.is_some() {
            FLAG_CHECKPOINT
        } else {
            0
        } | if self.blake3.is_some() {
            FLAG_BLAKE3
        } else {
            0
        } | if self.xxh3.is_some() { FLAG_XXH3 } else { 0 };
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&(len as u32).to_le_bytes());
        b.extend_from_slice(&self.original_size.to_le_bytes());
        b.extend_from_slice(&self.sha256);
        b.push(self.transform.code());
        b.push(self.parts.len() as u8);
        b.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        b.extend_from_slice(&(spec.len() as u16).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(self.name.as_bytes());
        b.extend_from_slice(spec.as_bytes());
        if let Some(w) = self.transform.wal_info() {
            b.extend_from_slice(&w.magic.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&w.tli.to_le_bytes());
            b.extend_from_slice(&w.pageaddr.to_le_bytes());
            b.extend_from_slice(&w.valid_len.to_le_bytes());
        }
        if let Transform::WalRecords(_, s) = self.transform {
            b.extend_from_slice(&s.first_prev.to_le_bytes());
            b.extend_from_slice(&s.records.to_le_bytes());
            b.extend_from_slice(&s.lead_len.to_le_bytes());
        }
        if let Some(c) = &self.checkpoint {
            b.extend_from_slice(&c.offset.to_le_bytes());
            b.extend_from_slice(&c.state);
        }
        if let Some(d) = &self.blake3 {
            b.extend_from_slice(d);
        }
        if let Some(d) = &self.xxh3 {
            b.extend_from_slice(d);
        }
        for p in &self.parts {
            b.push(match p.kind {
                PartKind::Compressed => KIND_COMPRESSED,
                PartKind::Zeros => KIND_ZEROS,
            });
            b.push(p.role.code());
            b.push(u8::from(p.words));
            b.push(0);
            b.extend_from_slice(&p.crc32c.to_le_bytes());
            b.extend_from_slice(&p.raw_len.to_le_bytes());
            b.extend_from_slice(&p.stored_len.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a header from the start of `buf`: `Ok(None)` if more bytes are needed,
    /// `Ok(Some((header, header_len)))`, or an error. Never allocates more than the caps allow.
    pub fn parse(buf: &[u8]) -> Result<Option<(Header, usize)>, ContainerError> {
        if buf.len() < 16 {
            if !MAGIC.starts_with(&buf[..buf.len().min(8)]) {
                return Err(ContainerError::BadMagic);
            }
            return Ok(None);
        }
        if buf[..8] != MAGIC {
            return Err(ContainerError::BadMagic);
        }
        let version = u16_at(buf, 8);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(ContainerError::UnsupportedVersion(version));
        }
        let flags = u16_at(buf, 10);
        let known = match version {
            6.. => FLAG_CHECKPOINT | FLAG_BLAKE3 | FLAG_XXH3,
            5 => FLAG_CHECKPOINT | FLAG_BLAKE3,
            4 => FLAG_CHECKPOINT,
            _ => 0,
        };
        if flags & !known != 0 {
            return Err(ContainerError::UnknownFlags(flags));
        }
        let hlen = u32_at(buf, 12);
        let min = (FIXED_LEN + 4) as u32;
        if hlen < min || hlen as usize > MAX_HEADER_LEN {
            return Err(ContainerError::HeaderLength {
                found: hlen,
                min,
                max: MAX_HEADER_LEN as u32,
            });
        }
        let hlen = hlen as usize;
        if buf.len() < hlen {
            return Ok(None);
        }
        let h = &buf[..hlen];
        let stored = u32_at(h, hlen - 4);
        let computed = crc32c::crc32c(&h[..hlen - 4]);
        if stored != computed {
            return Err(ContainerError::HeaderChecksum { stored, computed });
        }
        Header::parse_checked(h, version, flags).map(|hd| Some((hd, hlen)))
    }

    /// Interprets a header whose checksum is correct.
    fn parse_checked(h: &[u8], version: u16, flags: u16) -> Result<Header, ContainerError> {
        let field = |field: &'static str, detail: String| ContainerError::Field { field, detail };
        let original_size = u64_at(h, 16);
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(field(
                "original size",
                format!("{original_size} is above the {MAX_ORIGINAL_SIZE}-byte limit"),
            ));
        }
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&h[24..56]);
        let transform_code = h[56];
        let nparts = h[57] as usize;
        let name_len = u16_at(h, 58) as usize;
        let spec_len = u16_at(h, 60) as usize;
        if u16_at(h, 62) != 0 {
            return Err(field("reserved", "not zero".into()));
        }
        if nparts > MAX_PARTS {
            return Err(field(
                "part count",
                format!("{nparts} is above {MAX_PARTS}"),
            ));
        }
        if name_len == 0 || name_len > MAX_NAME_LEN {
            return Err(field(
                "name length",
                format!("{name_len} is not in 1..={MAX_NAME_LEN}"),
            ));
        }
        if spec_len == 0 || spec_len > MAX_SPEC_LEN {
            return Err(field(
                "spec length",
                format!("{spec_len} is not in 1..={MAX_SPEC_LEN}"),
            ));
        }
        let wal_len = match (transform_code, version) {
            (0, _) => 0,
            (1, _) => WAL_INFO_LEN,
            (2, 2..) => WAL_INFO_LEN + SPLIT_INFO_LEN,
            (t, _) => return Err(field("transform", format!("unknown code {t}"))),
        };
        let checkpoint_len = if flags & FLAG_CHECKPOINT != 0 {
            CHECKPOINT_LEN
        } else {
            0
        };
        let blake3_len = if flags & FLAG_BLAKE3 != 0 {
            BLAKE3_LEN
        } else {
            0
        };
        let xxh3_len = if flags & FLAG_XXH3 != 0 { XXH3_LEN } else { 0 };
        let expect = FIXED_LEN
            + name_len
            + spec_len
            + wal_len
            + checkpoint_len
            + blake3_len
            + xxh3_len
            + PART_LEN * nparts
            + 4;
        if expect != h.len() {
            return Err(field(
                "header length",
                format!("{} does not match the fields ({expect})", h.len()),
            ));
        }
        let mut at = FIXED_LEN;
        let name = std::str::from_utf8(&h[at..at + name_len])
            .map_err(|_| field("name", "not UTF-8".into()))?
            .to_owned();
        check_name(&name).map_err(|reason| field("name", format!("{name:?}: {reason}")))?;
        at += name_len;
        let spec_text = std::str::from_utf8(&h[at..at + spec_len])
            .map_err(|_| field("method", "not UTF-8".into()))?;
        let spec = Spec::from_str(spec_text).map_err(|e| field("method", e.to_string()))?;
        at += spec_len;
        let transform = if wal_len > 0 {
            let w = WalInfo {
                magic: u16_at(h, at),
                tli: u32_at(h, at + 4),
                pageaddr: u64_at(h, at + 8),
                valid_len: u64_at(h, at + 16),
            };
            if w.valid_len > original_size {
                return Err(field(
                    "WAL valid length",
                    format!("{} is above the size", w.valid_len),
                ));
            }
            at += WAL_INFO_LEN;
            if transform_code == 2 {
                let s = SplitInfo {
                    first_prev: u64_at(h, at),
                    records: u64_at(h, at + 8),
                    lead_len: u64_at(h, at + 16),
                };
                at += SPLIT_INFO_LEN;
                Transform::WalRecords(w, s)
            } else {
                Transform::Wal(w)
            }
        } else {
            Transform::Plain
        };
        let checkpoint = if checkpoint_len > 0 {
            let offset = u64_at(h, at);
            if offset % 64 != 0 || offset > original_size {
                return Err(field(
                    "SHA-256 checkpoint",
                    format!("offset {offset} is not a multiple of 64 within the size"),
                ));
            }
            let mut state = [0u8; 32];
            state.copy_from_slice(&h[at + 8..at + CHECKPOINT_LEN]);
            at += CHECKPOINT_LEN;
            Some(Checkpoint { offset, state })
        } else {
            None
        };
        let blake3 = if blake3_len > 0 {
            let mut d = [0u8; 32];
            d.copy_from_slice(&h[at..at + BLAKE3_LEN]);
            at += BLAKE3_LEN;
            Some(d)
        } else {
            None
        };
        let xxh3 = if xxh3_len > 0 {
            let mut d = [0u8; XXH3_LEN];
            d.copy_from_slice(&h[at..at + XXH3_LEN]);
            at += XXH3_LEN;
            Some(d)
        } else {
            None
        };
        let mut parts = Vec::with_capacity(nparts);
        let mut total: u64 = 0;
        for i in 0..nparts {
            let e = &h[at..at + PART_LEN];
            let kind = match e[0] {
                KIND_COMPRESSED => PartKind::Compressed,
                KIND_ZEROS => PartKind::Zeros,
                k => return Err(field("part kind", format!("part {i}: unknown kind {k}"))),
            };
            let role = Role::from_code(e[1])
                .ok_or_else(|| field("part role", format!("part {i}: unknown role {}", e[1])))?;
            let words = match (e[2], role) {
                (0, _) => false,
                (1, Role::WalStream(_)) if kind == PartKind::Compressed => true,
                (f, _) => {
                    return Err(field(
                        "part filter",
                        format!("part {i}: filter {f} not valid for a {} part", role.name()),
                    ))
                }
            };
            if e[3] != 0 {
                return Err(field("part", format!("part {i}: reserved byte not zero")));
            }
            let p = Part {
                kind,
                role,
                crc32c: u32_at(e, 4),
                raw_len: u64_at(e, 8),
                stored_len: u64_at(e, 16),
                words,
            };
            let bound = match kind {
                PartKind::Zeros => 0,
                PartKind::Compressed => codec::block::max_compressed_size(
                    spec.method,
                    p.raw_len.min(MAX_ORIGINAL_SIZE) as usize,
                ) as u64,
            };
            if p.stored_len > bound {
                return Err(field(
                    "part length",
                    format!(
                        "part {i}: {} stored bytes for {} raw bytes",
                        p.stored_len, p.raw_len
                    ),
                ));
            }
            total = total.saturating_add(p.raw_len);
            parts.push(p);
            at += PART_LEN;
        }
        check_roles(&transform, &parts, total, original_size, version)?;
        Ok(Header {
            name,
            original_size,
            sha256,
            spec,
            transform,
            parts,
            checkpoint,
            blake3,
            xxh3,
        })
    }
}

/// Checks that the parts fit the transform: for plain and WAL, raw lengths that add up to the
/// original size; for WAL records, streams in order (each in one part before version 3,
/// in consecutive parts from version 3), no more stream bytes than the prefix they rebuild,
/// then stale bytes and a zero tail that make up the rest.
fn check_roles(
    transform: &Transform,
    parts: &[Part],
    total: u64,
    original_size: u64,
    version: u16,
) -> Result<(), ContainerError> {
    let field = |detail: String| ContainerError::Field {
        field: "parts",
        detail,
    };
    let Transform::WalRecords(w, _) = transform else {
        if let Some(p) = parts.iter().find(|p| matches!(p.role, Role::WalStream(_))) {
            return Err(field(format!(
                "a {} part in a {} container",
                p.role.name(),
                transform.name()
            )));
        }
        if total != original_size {
            return Err(field(format!(
                "raw lengths add up to {total}, original size is {original_size}"
            )));
        }
        return Ok(());
    };
    // Streams in order, then at most one stale part, then at most one zero tail.
    let repeats = version >= 3;
    let mut next_stream = 0usize;
    let mut stream_bytes = 0u64;
    let mut stage = 0;
    let mut tail = 0u64;
    for (i, p) in parts.iter().enumerate() {
        match (p.role, p.kind) {
            (Role::WalStream(s), PartKind::Compressed)
                if stage == 0
                    && (s as usize >= next_stream
                        || (repeats && s as usize + 1 == next_stream)) =>
            {
                next_stream = s as usize + 1;
                stream_bytes = stream_bytes.saturating_add(p.raw_len);
            }
            (Role::WalStale, PartKind::Compressed) if stage < 1 => {
                stage = 1;
                tail = tail.saturating_add(p.raw_len);
            }
            (Role::ZeroTail, PartKind::Zeros) if stage < 2 => {
                stage = 2;
                tail = tail.saturating_add(p.raw_len);
            }
            (r, _) => {
                return Err(field(format!(
                    "part {i}: {} out of place in a WAL records container",
                    r.name()
                )))
            }
        }
    }
    if stream_bytes > w.valid_len {
        return Err(field(format!(
            "streams hold {stream_bytes} bytes for a {}-byte prefix",
            w.valid_len
        )));
    }
    if w.valid_len.saturating_add(tail) != original_size {
        return Err(field(format!(
            "prefix of {} bytes and {tail} bytes after it do not make {original_size}",
            w.valid_len
        )));
    }
    Ok(())
}

/// Checks that `name` can be an archived file name: what PostgreSQL passes as `%f`
/// (segment, `.partial`, `.history`, `.backup` names), never a path.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("too long");
    }
    if name.starts_with('.') {
        return Err("starts with a dot");
    }
    if name.contains('/') {
        return Err("contains a slash (give a file name, not a path)");
    }
    if name.chars().any(|c| c.is_control()) {
        return Err("contains control characters");
    }
    Ok(())
}

/// Most bytes [`decode`] reserves before any part has been decoded.
const RESERVE_CAP: usize = 64 << 20;

/// Decodes a whole container: checks the header, every part's checksum and length, and the
/// SHA-256 of the result. Output is capped at the header's original size (at most
/// [`MAX_ORIGINAL_SIZE`]).
pub fn decode(bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    let (header, out) = decode_unhashed(bytes)?;
    check_hash(&header, &out)?;
    Ok((header, out))
}

/// Checks the SHA-256 of `out` against the header's, the checkpoint if there is one, and the
/// BLAKE3 and XXH3-128 digests if there are.
fn check_hash(header: &Header, out: &[u8]) -> Result<(), ContainerError> {
    if let Some(expected) = &header.xxh3 {
        check_digest("XXH3-128", expected, &xxh3(out))?;
    }
    if let Some(expected) = &header.blake3 {
        check_digest("BLAKE3", expected, blake3::hash(out).as_bytes())?;
    }
    let mut chain = crate::sha::Chain::new();
    if let Some(cp) = &header.checkpoint {
        let first = &out[..(cp.offset as usize).min(out.len())];
        chain.update(first);
        let reached = chain.checkpoint();
        if reached.as_ref().map(|c| c.state) != Some(cp.state) || first.len() as u64 != cp.offset {
            return Err(ContainerError::HashMismatch {
                expected: format!("checkpoint {} at byte {}", hex(&cp.state), cp.offset),
                actual: reached.map_or_else(|| "no checkpoint".into(), |c| hex(&c.state)),
            });
        }
        chain.update(&out[first.len()..]);
    } else {
        chain.update(out);
    }
    let actual = chain.finalize();
    if actual != header.sha256 {
        return Err(ContainerError::HashMismatch {
            expected: hex(&header.sha256),
            actual: hex(&actual),
        });
    }
    Ok(())
}

/// An error unless `actual`, the `digest` (XXH3-128 or BLAKE3) of the rebuilt file, is
/// `expected`.
pub(crate) fn check_digest(
    digest: &'static str,
    expected: &[u8],
    actual: &[u8],
) -> Result<(), ContainerError> {
    if expected != actual {
        return Err(ContainerError::DigestMismatch {
            digest,
            expected: hex(expected),
            actual: hex(actual),
        });
    }
    Ok(())
}

/// The XXH3-128 digest of `data`, big-endian (the canonical form).
pub fn xxh3(data: &[u8]) -> [u8; XXH3_LEN] {
    twox_hash::XxHash3_128::oneshot(data).to_be_bytes()
}

/// [`decode`] without the final SHA-256 check, for a caller that compares the result with
/// the original bytes instead (the push-time self-check, which hashed those bytes itself).
pub(crate) fn decode_unhashed(bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    decode_with(bytes, &mut [], true)
}

/// A consumer of a container's output, piece by piece in order, on a thread of its own.
pub(crate) type Sink<'s> = &'s mut (dyn FnMut(&[u8]) + Send);

/// Decodes a container without checking the SHA-256 of the result, and hands the output,
/// in order and in pieces, to each of `sinks`, each on a thread of its own; the output is
/// also returned when `keep` is set (else the returned vector may be empty). For a WAL
/// records container the pieces go out while the rest of the segment is still being
/// rebuilt, so that hashing and writing it overlap the rebuilding, and their memory is used
/// again once every sink is done with them. When an error is returned, the sinks may have
/// seen part of the output.
pub(crate) fn decode_with(
    bytes: &[u8],
    sinks: &mut [Sink<'_>],
    keep: bool,
) -> Result<(Header, Vec<u8>), ContainerError> {
    let Decompressed {
        header,
        parts: mut decoded,
        whole,
        feeds,
    } = decompress_parts(bytes)?;
    if let Transform::WalRecords(w, s) = &header.transform {
        let mut streams = whole;
        for (p, raw) in header.parts.iter().zip(decoded.iter_mut()) {
            if let Role::WalStream(st) = p.role {
                let stream = &mut streams[st as usize];
                if stream.is_empty() {
                    *stream = std::mem::take(raw);
                } else {
                    stream.extend_from_slice(raw);
                }
            }
        }
        let after: Vec<(&Part, Vec<u8>)> = header
            .parts
            .iter()
            .zip(decoded)
            .filter(|(p, _)| !matches!(p.role, Role::WalStream(_)))
            .collect();
        let mut out = if keep {
            Vec::with_capacity((header.original_size as usize).min(RESERVE_CAP))
        } else {
            Vec::new()
        };
        std::thread::scope(|scope| {
            // Each sink's thread says when it is done with a piece, so that the joiner can
            // use that memory again.
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let mut senders = Vec::with_capacity(sinks.len());
            for sink in sinks.iter_mut() {
                let (tx, rx) = std::sync::mpsc::channel::<Piece>();
                senders.push(tx);
                let done = done_tx.clone();
                scope.spawn(move || {
                    for piece in rx {
                        sink(&piece);
                        drop(piece);
                        let _ = done.send(());
                    }
                });
            }
            drop(done_tx);
            let mut send = |piece: Piece| {
                if keep {
                    out.extend_from_slice(&piece);
                }
                for tx in &senders {
                    let _ = tx.send(piece.clone());
                }
            };
            // The largest fed stream (a segment of pgbench WAL is mostly page images) is
            // decompressed on a thread of its own, into buffers handed over as they fill;
            // the other fed streams on this thread as they are read.
            let method = header.spec.method;
            let sizes: Vec<usize> = feeds
                .iter()
                .map(|p| p.iter().map(|p| p.len).sum())
                .collect();
            let helped = (0..STREAMS)
                .filter(|&st| sizes[st] >= HELPED_MIN)
                .max_by_key(|&st| sizes[st]);
            let mut feeds = feeds.into_iter();
            let sources = std::array::from_fn(|st| {
                let parts = feeds.next().unwrap_or_default();
                if parts.is_empty() {
                    Source::Bytes(&streams[st])
                } else if helped == Some(st) {
                    Source::Feed(Box::new(helped_stream(scope, method, parts)), sizes[st])
                } else {
                    Source::Feed(Box::new(FedStream::new(method, parts)), sizes[st])
                }
            });
            crate::walsplit::join_sources(w.pageaddr, w.valid_len, s, sources, &mut send, || {
                done_rx.recv().is_ok()
            })
            .map_err(|detail| ContainerError::Rebuild { detail })?;
            drop(streams);
            // Stale bytes and zeros after the prefix; their lengths add up to the original
            // size (checked with the header).
            let mut zeros: Option<Piece> = None;
            for (p, raw) in after {
                match p.kind {
                    PartKind::Compressed => send(Piece::from_vec(raw)),
                    PartKind::Zeros => {
                        let zeros =
                            zeros.get_or_insert_with(|| Piece::from_vec(vec![0; ZEROS_PIECE]));
                        let mut left = p.raw_len as usize;
                        while left > 0 {
                            let piece = zeros.prefix(left);
                            left -= piece.len();
                            send(piece);
                        }
                    }
                }
            }
            Ok::<_, ContainerError>(())
        })?;
        return Ok((header, out));
    }
    let out = if let ([p], [raw]) = (header.parts.as_slice(), decoded.as_mut_slice()) {
        if p.kind == PartKind::Compressed {
            std::mem::take(raw)
        } else {
            vec![0; p.raw_len as usize]
        }
    } else {
        // The claimed size is checked against the parts' lengths (with the header); reserve
        // only a bounded amount up front all the same.
        let mut out = Vec::with_capacity((header.original_size as usize).min(RESERVE_CAP));
        for (p, raw) in header.parts.iter().zip(&decoded) {
            match p.kind {
                PartKind::Zeros => out.resize(out.len() + p.raw_len as usize, 0),
                PartKind::Compressed => out.extend_from_slice(raw),
            }
        }
        out
    };
    for sink in sinks.iter_mut() {
        sink(&out);
    }
    Ok((header, out))
}

/// Fed streams of at least this many bytes may be decompressed on a thread of their own.
const HELPED_MIN: usize = 1 << 20;

/// Bytes a helper thread decompresses into one buffer before handing it over.
const HELPED_PIECE: usize = 256 << 10;

/// Buffers a helper thread may fill ahead of the reader.
const HELPED_AHEAD: usize = 4;

/// The error for a fed stream whose `n`-th part (counted from 1) failed.
fn fed_error(parts: &[FedPart<'_>], n: usize, source: codec::CodecError) -> String {
    let part = parts[n.clamp(1, parts.len()) - 1];
    ContainerError::Decompress {
        index: part.index,
        offset: part.offset as u64,
        source,
    }
    .to_string()
}

/// Room left in front of the bytes of each buffer of a fed stream, for the unread end of
/// the buffer before (a page image at most, for the page image stream).
const HEADROOM: usize = 64 << 10;

/// A buffer of a fed stream: `HEADROOM` bytes of room, then up to `len` bytes from `feed`
/// (fewer only at its end); `None` once `feed` has no more.
fn fill_buffer(
    feed: &mut codec::PartFeed<'_>,
    spare: Option<Vec<u8>>,
    len: usize,
) -> Result<Option<Vec<u8>>, codec::CodecError> {
    let mut buf = spare.unwrap_or_default();
    buf.resize(HEADROOM + len, 0);
    let n = feed.read(&mut buf[HEADROOM..])?;
    if n == 0 {
        return Ok(None);
    }
    buf.truncate(HEADROOM + n);
    Ok(Some(buf))
}

/// A fed stream decompressed on the reading thread as it is read.
struct FedStream<'b> {
    feed: codec::PartFeed<'b>,
    parts: Vec<FedPart<'b>>,
    spare: Option<Vec<u8>>,
    /// Bytes not decompressed yet.
    left: usize,
}

impl<'b> FedStream<'b> {
    fn new(method: codec::Method, parts: Vec<FedPart<'b>>) -> FedStream<'b> {
        FedStream {
            feed: codec::PartFeed::new(method, parts.iter().map(|p| (p.stored, p.len)).collect()),
            left: parts.iter().map(|p| p.len).sum(),
            parts,
            spare: None,
        }
    }
}

impl crate::walsplit::Feed for FedStream<'_> {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, String> {
        let len = HELPED_PIECE.min(self.left).max(1);
        let buf = fill_buffer(&mut self.feed, self.spare.take(), len)
            .map_err(|source| fed_error(&self.parts, self.feed.parts_started(), source))?;
        if let Some(b) = &buf {
            self.left = self.left.saturating_sub(b.len() - HEADROOM);
        }
        Ok(buf.map(|b| (b, HEADROOM)))
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        self.spare = Some(buf);
    }
}

/// A fed stream decompressed on a thread of its own: buffers come full over one channel, at
/// most [`HELPED_AHEAD`] ahead of the reader, and go back empty over another.
struct HelpedStream {
    full: std::sync::mpsc::Receiver<Result<Vec<u8>, String>>,
    empty: std::sync::mpsc::Sender<Vec<u8>>,
}

impl crate::walsplit::Feed for HelpedStream {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, String> {
        match self.full.recv() {
            Ok(buf) => Ok(Some((buf?, HEADROOM))),
            Err(_) => Ok(None),
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        let _ = self.empty.send(buf);
    }
}

/// The reading end of a fed stream decompressed on a thread of its own (spawned in `scope`).
fn helped_stream<'scope, 'b: 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    method: codec::Method,
    parts: Vec<FedPart<'b>>,
) -> HelpedStream {
    let (full_tx, full) = std::sync::mpsc::sync_channel::<Result<Vec<u8>, String>>(HELPED_AHEAD);
    let (empty, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    scope.spawn(move || {
        let mut feed =
            codec::PartFeed::new(method, parts.iter().map(|p| (p.stored, p.len)).collect());
        loop {
            match fill_buffer(&mut feed, empty_rx.try_recv().ok(), HELPED_PIECE) {
                Ok(None) => return,
                Ok(Some(buf)) => {
                    if full_tx.send(Ok(buf)).is_err() {
                        return;
                    }
                }
                Err(source) => {
                    let _ = full_tx.send(Err(fed_error(&parts, feed.parts_started(), source)));
                    return;
                }
            }
        }
    });
    HelpedStream { full, empty }
}

/// Bytes of zeros handed to sinks at a time for a zero tail.
const ZEROS_PIECE: usize = 64 << 10;

/// Parses the header, checks the length and every part's checksum, then decompresses (and
/// word-decodes) the parts on two threads.
fn decompress_parts(bytes: &[u8]) -> Result<Decompressed<'_>, ContainerError> {
    let Some((header, hlen)) = Header::parse(bytes)? else {
        let need = if bytes.len() >= 16 {
            u64::from(u32_at(bytes, 12))
        } else {
            16
        };
        return Err(ContainerError::Truncated {
            need,
            have: bytes.len() as u64,
        });
    };
    let expected = hlen as u64 + header.payload_len();
    if expected != bytes.len() as u64 {
        return Err(ContainerError::Length {
            expected,
            actual: bytes.len() as u64,
        });
    }
    // Every part's checksum is checked before anything is decompressed.
    let mut jobs: Vec<(usize, usize, &Part, &[u8])> = Vec::with_capacity(header.parts.len());
    let mut off = hlen;
    for (index, p) in header.parts.iter().enumerate() {
        let stored = &bytes[off..off + p.stored_len as usize];
        let computed = crc32c::crc32c(stored);
        if computed != p.crc32c {
            return Err(ContainerError::PartChecksum {
                index,
                offset: off as u64,
                stored: p.crc32c,
                computed,
            });
        }
        jobs.push((index, off, p, stored));
        off += p.stored_len as usize;
    }
    let method = header.spec.method;
    let word_cap = match &header.transform {
        Transform::WalRecords(w, _) => w.valid_len as usize,
        _ => 0,
    };
    // Parts decompress on two threads; each output is capped at the part's declared raw
    // length (and a word-coded stream at the prefix it belongs to).
    // A stream stored in several parts, none word-coded, is decompressed straight into
    // its place in one buffer (a fresh zeroed allocation costs nothing until written), so
    // that the pieces are never copied together afterwards.
    let mut whole: [Vec<u8>; STREAMS] = Default::default();
    let mut pieces = [0usize; STREAMS];
    let mut coded = [false; STREAMS];
    let mut total = [0usize; STREAMS];
    for p in &header.parts {
        if let Role::WalStream(st) = p.role {
            pieces[st as usize] += 1;
            coded[st as usize] |= p.words;
            total[st as usize] += p.raw_len as usize;
        }
    }
    // Streams compressed with zstd and not word-coded are instead decompressed as the
    // segment is rebuilt, a window at a time: the rebuilt start of the segment goes to the
    // sinks (the hash) while the rest is still compressed, and no buffer for the whole
    // stream is needed.
    let fed: [bool; STREAMS] =
        std::array::from_fn(|st| pieces[st] > 0 && !coded[st] && method == codec::Method::Zstd);
    let mut feeds: [Vec<FedPart<'_>>; STREAMS] = Default::default();
    for st in 0..STREAMS {
        if pieces[st] > 1 && !coded[st] && !fed[st] {
            whole[st] = vec![0u8; total[st]];
        }
    }
    let mut free: Vec<&mut [u8]> = whole.iter_mut().map(|w| w.as_mut_slice()).collect();
    let jobs: Vec<_> = jobs
        .into_iter()
        .map(|(index, off, p, stored)| {
            let dest = match p.role {
                Role::WalStream(st) if fed[st as usize] => {
                    feeds[st as usize].push(FedPart {
                        index,
                        offset: off,
                        stored,
                        len: p.raw_len as usize,
                    });
                    Dest::Fed
                }
                Role::WalStream(st) if pieces[st as usize] > 1 && !coded[st as usize] => {
                    let rest = std::mem::take(&mut free[st as usize]);
                    let (dest, rest) = rest.split_at_mut(p.raw_len as usize);
                    free[st as usize] = rest;
                    Dest::Slice(dest)
                }
                _ => Dest::Own,
            };
            (index, off, p, stored, dest)
        })
        .collect();
    let decoded = crate::lanes::two_lanes(
        jobs,
        |&(_, _, p, _, ref dest)| match (p.kind, dest) {
            (PartKind::Compressed, Dest::Slice(_) | Dest::Own) => p.raw_len as usize,
            _ => 0,
        },
        || {
            codec::BlockDecompressor::new().map_err(|source| ContainerError::Decompress {
                index: 0,
                offset: hlen as u64,
                source,
            })
        },
        |dec, (index, off, p, stored, dest)| {
            let failed = |source| ContainerError::Decompress {
                index,
                offset: off as u64,
                source,
            };
            if p.kind == PartKind::Zeros {
                return Ok(Vec::new());
            }
            match dest {
                Dest::Fed => return Ok(Vec::new()),
                Dest::Slice(dest) => {
                    dec.decompress_into(method, stored, dest).map_err(failed)?;
                    return Ok(Vec::new());
                }
                Dest::Own => {}
            }
            let mut raw = Vec::new();
            dec.decompress(method, stored, p.raw_len as usize, &mut raw)
                .map_err(failed)?;
            if p.words {
                raw = crate::words::decode(&raw, word_cap).map_err(|detail| {
                    ContainerError::Rebuild {
                        detail: format!("part {index}: {detail}"),
                    }
                })?;
            }
            Ok(raw)
        },
    )?;
    drop(free);
    Ok(Decompressed {
        header,
        parts: decoded,
        whole,
        feeds,
    })
}

/// Where a part's decompressed bytes go.
enum Dest<'a> {
    /// A vector of its own.
    Own,
    /// Its place in the buffer of its stream.
    Slice(&'a mut [u8]),
    /// Nowhere yet: its stream is decompressed as it is read.
    Fed,
}

/// What [`decompress_parts`] returns.
struct Decompressed<'b> {
    header: Header,
    /// One output per part: empty for zeros and for the pieces of a stream in `whole`.
    parts: Vec<Vec<u8>>,
    /// Streams stored in several parts and decompressed into one buffer (else empty).
    whole: [Vec<u8>; STREAMS],
    /// Streams decompressed as they are read: their parts, still compressed.
    feeds: [Vec<FedPart<'b>>; STREAMS],
}

/// A part of a stream that is decompressed as it is read.
#[derive(Clone, Copy)]
struct FedPart<'b> {
    index: usize,
    offset: usize,
    stored: &'b [u8],
    len: usize,
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
