//! The self-describing container every archived file is stored in (format version 1).
//!
//! All integers are little-endian. A container is a header followed by a payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `PGCZARC` + `\n` ([`MAGIC`]) |
//! | 8 | 2 | format version, 1 ([`FORMAT_VERSION`]); readers refuse any other |
//! | 10 | 2 | flags, 0; readers refuse any bit set |
//! | 12 | 4 | header length `H`: bytes from offset 0 to the end of the header checksum |
//! | 16 | 8 | original size |
//! | 24 | 32 | SHA-256 of the original |
//! | 56 | 1 | transform: 0 plain, 1 WAL, 2 WAL records ([`Transform`]) |
//! | 57 | 1 | part count `n` (0..=16) |
//! | 58 | 2 | name length (1..=1024) |
//! | 60 | 2 | method spec length (1..=256) |
//! | 62 | 2 | reserved, 0 |
//! | 64 | | original file name, UTF-8 |
//! | | | method specification, PostgreSQL syntax (`zstd:level=5`) |
//! | | 24 | WAL transforms only: `xlp_magic` u16, reserved u16, `xlp_tli` u32, `xlp_pageaddr` u64, valid length u64 |
//! | | 24 | WAL records transform only: first `xl_prev` u64, records u64, lead length u64 ([`SplitInfo`]) |
//! | | 16 | XXH3-128 of the original, big-endian (the canonical form `xxhsum -H2` prints) |
//! | | 24 × n | parts: kind u8, role u8, filter u8 (0 none, 1 word-coded, streams only), reserved u8, CRC-32C of the stored bytes u32, raw length u64, stored length u64 |
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
//! which [`crate::walsplit::join`] turns back into the first `valid length` bytes. A stream
//! may be stored in several consecutive parts, each compressed (and word-coded) on its own,
//! whose raw bytes concatenate to the stream, so that two threads can compress and
//! decompress one large stream. Optional stale bytes (role 2) and an optional zero tail
//! (role 3) follow.
//!
//! `get` checks the XXH3-128 digest of what it rebuilt, an order of magnitude cheaper than
//! SHA-256 (docs/ARCHIVE-FORMAT.md); `verify` and [`crate::pipeline::decode`] check both digests. XXH3 is not a
//! cryptographic hash: it is there to catch a rebuild that went wrong or bytes damaged past
//! the per-part CRC-32C, for which 128 bits leave a chance of 2^-128 of a miss. Against
//! someone who can write to the repository no digest in the header helps, since they can
//! rewrite the header too; the SHA-256 remains the file's identity.
//!
//! This module is the byte format only and sans-IO ([`Header::parse`], [`check_hashes`]): every
//! length is checked against the bytes present and a hard cap before anything is allocated,
//! and decompression is capped at the declared raw length. The threaded decoder that feeds
//! `get` is [`crate::pipeline`].

use std::str::FromStr;

use codec::{Cursor, ShortRead, Spec};
use sha2::{Digest, Sha256};

use crate::error::ContainerError;
use crate::walsplit::{SplitInfo, Stream};

/// The first eight bytes of every container.
pub const MAGIC: [u8; 8] = *b"PGCZARC\n";
/// The format version this build writes and reads, and the only one.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed part of the header.
pub const FIXED_LEN: usize = 64;
/// Size of one part entry.
pub const PART_LEN: usize = 24;
/// Size of the WAL description of the WAL transform.
pub const WAL_INFO_LEN: usize = 24;
/// Size of the extra description of the WAL records transform.
pub const SPLIT_INFO_LEN: usize = 24;
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
    /// SHA-256 of the original: its identity, checked by `verify` and [`crate::pipeline::decode`].
    pub sha256: [u8; 32],
    /// The method the compressed parts use.
    pub spec: Spec,
    /// The split into parts.
    pub transform: Transform,
    /// The parts, in order.
    pub parts: Vec<Part>,
    /// XXH3-128 of the original, big-endian: what `get` checks.
    pub xxh3: [u8; XXH3_LEN],
}

impl Header {
    /// Bytes the header occupies once encoded.
    pub fn encoded_len(&self) -> usize {
        FIXED_LEN
            + self.name.len()
            + self.spec.to_string().len()
            + self.transform.info_len()
            + XXH3_LEN
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
        hex::encode(self.sha256)
    }

    /// Hex XXH3-128 of the original, big-endian (as `xxhsum -H2` prints it).
    pub fn xxh3_hex(&self) -> String {
        hex::encode(self.xxh3)
    }

    /// Encodes the header (the caller appends the payload).
    pub fn encode(&self) -> Vec<u8> {
        let spec = self.spec.to_string();
        let len = self.encoded_len();
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
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
        b.extend_from_slice(&self.xxh3);
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
        let mut c = Cursor::new(buf);
        if c.array::<8>()? != MAGIC {
            return Err(ContainerError::BadMagic);
        }
        let version = c.u16_le()?;
        if version != FORMAT_VERSION {
            return Err(ContainerError::UnsupportedVersion(version));
        }
        let flags = c.u16_le()?;
        if flags != 0 {
            return Err(ContainerError::UnknownFlags(flags));
        }
        let hlen = c.u32_le()?;
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
        let (h, stored) = buf[..hlen].split_at(hlen - 4);
        let stored = Cursor::new(stored).u32_le()?;
        let computed = crc32c::crc32c(h);
        if stored != computed {
            return Err(ContainerError::HeaderChecksum { stored, computed });
        }
        Header::parse_checked(h).map(|hd| Some((hd, hlen)))
    }

    /// Interprets a header (without its checksum) whose checksum is correct and whose
    /// magic, version and flags were checked.
    fn parse_checked(h: &[u8]) -> Result<Header, ContainerError> {
        let field = |field: &'static str, detail: String| ContainerError::Field { field, detail };
        let mut c = Cursor::at(h, 16);
        let original_size = c.u64_le()?;
        if original_size > MAX_ORIGINAL_SIZE {
            return Err(field(
                "original size",
                format!("{original_size} is above the {MAX_ORIGINAL_SIZE}-byte limit"),
            ));
        }
        let sha256 = c.array::<32>()?;
        let transform_code = c.u8()?;
        let nparts = usize::from(c.u8()?);
        let name_len = usize::from(c.u16_le()?);
        let spec_len = usize::from(c.u16_le()?);
        if c.u16_le()? != 0 {
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
        let wal_len = match transform_code {
            0 => 0,
            1 => WAL_INFO_LEN,
            2 => WAL_INFO_LEN + SPLIT_INFO_LEN,
            t => return Err(field("transform", format!("unknown code {t}"))),
        };
        let expect = FIXED_LEN + name_len + spec_len + wal_len + XXH3_LEN + PART_LEN * nparts;
        if expect != h.len() {
            return Err(field(
                "header length",
                format!("{} does not match the fields ({})", h.len() + 4, expect + 4),
            ));
        }
        let name = std::str::from_utf8(c.take(name_len)?)
            .map_err(|_| field("name", "not UTF-8".into()))?
            .to_owned();
        check_name(&name).map_err(|reason| field("name", format!("{name:?}: {reason}")))?;
        let spec_text = std::str::from_utf8(c.take(spec_len)?)
            .map_err(|_| field("method", "not UTF-8".into()))?;
        let spec = Spec::from_str(spec_text).map_err(|source| ContainerError::Method { source })?;
        let transform = if wal_len > 0 {
            let magic = c.u16_le()?;
            c.skip(2)?;
            let w = WalInfo {
                magic,
                tli: c.u32_le()?,
                pageaddr: c.u64_le()?,
                valid_len: c.u64_le()?,
            };
            if w.valid_len > original_size {
                return Err(field(
                    "WAL valid length",
                    format!("{} is above the size", w.valid_len),
                ));
            }
            if transform_code == 2 {
                let s = SplitInfo {
                    first_prev: c.u64_le()?,
                    records: c.u64_le()?,
                    lead_len: c.u64_le()?,
                };
                Transform::WalRecords(w, s)
            } else {
                Transform::Wal(w)
            }
        } else {
            Transform::Plain
        };
        let xxh3 = c.array::<XXH3_LEN>()?;
        let mut parts = Vec::with_capacity(nparts);
        let mut total: u64 = 0;
        for i in 0..nparts {
            let kind = match c.u8()? {
                KIND_COMPRESSED => PartKind::Compressed,
                KIND_ZEROS => PartKind::Zeros,
                k => return Err(field("part kind", format!("part {i}: unknown kind {k}"))),
            };
            let role_code = c.u8()?;
            let role = Role::from_code(role_code)
                .ok_or_else(|| field("part role", format!("part {i}: unknown role {role_code}")))?;
            let words = match (c.u8()?, role) {
                (0, _) => false,
                (1, Role::WalStream(_)) if kind == PartKind::Compressed => true,
                (f, _) => {
                    return Err(field(
                        "part filter",
                        format!("part {i}: filter {f} not valid for a {} part", role.name()),
                    ))
                }
            };
            if c.u8()? != 0 {
                return Err(field("part", format!("part {i}: reserved byte not zero")));
            }
            let p = Part {
                kind,
                role,
                crc32c: c.u32_le()?,
                raw_len: c.u64_le()?,
                stored_len: c.u64_le()?,
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
        }
        check_roles(&transform, &parts, total, original_size)?;
        Ok(Header {
            name,
            original_size,
            sha256,
            spec,
            transform,
            parts,
            xxh3,
        })
    }
}

impl From<ShortRead> for ContainerError {
    fn from(source: ShortRead) -> Self {
        ContainerError::HeaderShort { source }
    }
}

/// Checks that the parts fit the transform: for plain and WAL, raw lengths that add up to the
/// original size; for WAL records, streams in order (each in one or more consecutive parts),
/// no more stream bytes than the prefix they rebuild, then stale bytes and a zero tail that
/// make up the rest.
fn check_roles(
    transform: &Transform,
    parts: &[Part],
    total: u64,
    original_size: u64,
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
    let mut next_stream = 0usize;
    let mut stream_bytes = 0u64;
    let mut stage = 0;
    let mut tail = 0u64;
    for (i, p) in parts.iter().enumerate() {
        match (p.role, p.kind) {
            (Role::WalStream(s), PartKind::Compressed)
                if stage == 0 && s as usize + 1 >= next_stream =>
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

/// Checks the digests of `out`, the bytes a container rebuilt, against its header's: the
/// XXH3-128 and the SHA-256.
pub fn check_hashes(header: &Header, out: &[u8]) -> Result<(), ContainerError> {
    check_digest("XXH3-128", &header.xxh3, &xxh3(out))?;
    let actual: [u8; 32] = Sha256::digest(out).into();
    if actual != header.sha256 {
        return Err(ContainerError::HashMismatch {
            expected: hex::encode(header.sha256),
            actual: hex::encode(actual),
        });
    }
    Ok(())
}

/// An error unless `actual`, the `digest` (XXH3-128) of the rebuilt file, is `expected`.
pub(crate) fn check_digest(
    digest: &'static str,
    expected: &[u8],
    actual: &[u8],
) -> Result<(), ContainerError> {
    if expected != actual {
        return Err(ContainerError::DigestMismatch {
            digest,
            expected: hex::encode(expected),
            actual: hex::encode(actual),
        });
    }
    Ok(())
}

/// The XXH3-128 digest of `data`, big-endian (the canonical form).
pub fn xxh3(data: &[u8]) -> [u8; XXH3_LEN] {
    twox_hash::XxHash3_128::oneshot(data).to_be_bytes()
}
