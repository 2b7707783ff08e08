//! The threaded decoder of a container: parts decompressed on two lanes, a WAL records
//! container's segment rebuilt while its largest word-coded stream is still being decoded, and
//! the output handed to a sink (a file and a hash) piece by piece as it is rebuilt.
//!
//! The byte format and its checks are [`crate::container`]; this module only adds threads
//! and memory reuse on top of it, and every output stays capped at the lengths the checked
//! header declares.

use codec::cursor::le_u32_at;

use crate::container::{check_hashes, Header, Part, PartKind, Role, Transform};
use crate::error::ContainerError;
use crate::walsplit::{FeedError, Piece, Source, STREAMS};

/// Most bytes [`decode`] reserves before any part has been decoded.
const RESERVE_CAP: usize = 64 << 20;

/// Decodes a whole container: checks the header, every part's checksum and length, and the
/// XXH3-128 and SHA-256 of the result. Output is capped at the header's original size (at
/// most [`crate::container::MAX_ORIGINAL_SIZE`]).
pub fn decode(bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    let (header, out) = decode_unhashed(bytes)?;
    check_hashes(&header, &out)?;
    Ok((header, out))
}

/// [`decode`] without the final digest checks, which [`decode`] makes on what this returns.
pub(crate) fn decode_unhashed(bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    decode_with(bytes, &mut |_| {}, true)
}

/// Decodes a container without checking the digests of the result, and hands the output,
/// in order and in pieces, to `sink`; the output is also returned when `keep` is set (else
/// the returned vector may be empty). For a WAL records container the pieces go out as the
/// segment is rebuilt, and the memory of each is used again for the next one, so that the
/// segment is never held whole. When an error is returned, the sink may have seen part of
/// the output.
///
/// The sink runs on the thread that rebuilds the segment. On a thread of its own (one for
/// the hash, one for the file, as get did until 2026-11-27) it overlapped the rebuilding,
/// but each piece then woke it and crossed to the other core's cache: a get, and a push,
/// whose self-check decodes the same way, took more CPU (docs/BENCHMARKS.md, `bench archive`).
pub(crate) fn decode_with(
    bytes: &[u8],
    sink: &mut dyn FnMut(&[u8]),
    keep: bool,
) -> Result<(Header, Vec<u8>), ContainerError> {
    let Decompressed {
        header,
        parts: mut decoded,
        whole,
        feeds,
        word_fed,
        offsets,
    } = decompress_parts(bytes)?;
    if let Transform::WalRecords(w, s) = &header.transform {
        let mut streams = whole;
        // Streams with a word-coded part are word-decoded as the segment is rebuilt, a
        // window at a time, from their parts as decompressed (coded, or plain where the
        // coding was declined): never a buffer of the whole decoded stream.
        let mut worded: [Vec<WordPart>; STREAMS] = Default::default();
        let mut after: Vec<(&Part, Vec<u8>)> = Vec::new();
        for (index, (p, raw)) in header.parts.iter().zip(decoded.iter_mut()).enumerate() {
            match p.role {
                Role::WalStream(st) if word_fed[st as usize] => {
                    worded[st as usize].push(WordPart {
                        index,
                        offset: offsets[index],
                        bytes: std::mem::take(raw),
                        coded: p.words,
                    });
                }
                Role::WalStream(st) => {
                    let stream = &mut streams[st as usize];
                    if stream.is_empty() {
                        *stream = std::mem::take(raw);
                    } else {
                        stream.extend_from_slice(raw);
                    }
                }
                _ => after.push((p, std::mem::take(raw))),
            }
        }
        let word_cap = w.valid_len as usize;
        let mut word_feeds: [Option<WordFeed<'_>>; STREAMS] = Default::default();
        for (st, parts) in worded.iter().enumerate() {
            if !parts.is_empty() {
                word_feeds[st] = Some(WordFeed::new(parts, word_cap)?);
            }
        }
        let mut out = if keep {
            Vec::with_capacity((header.original_size as usize).min(RESERVE_CAP))
        } else {
            Vec::new()
        };
        std::thread::scope(|scope| {
            // Each piece is done with once `send` returns, so the joiner reuses its memory.
            let mut send = |piece: Piece| {
                if keep {
                    out.extend_from_slice(&piece);
                }
                sink(&piece);
            };
            // The largest word-coded stream (a segment of text WAL is mostly block data) is
            // word-decoded on a thread of its own, into buffers handed over as they fill;
            // the other streams on this thread as they are read. A stream that is only
            // zstd-compressed (a pgbench segment's page images) is not worth a thread: its
            // buffers would cross to the other core's cache and wake this thread for each
            // one. Measured in pairs (docs/BENCHMARKS.md, `bench archive`): on pgbench
            // such a thread cost a get more CPU than the wall time it saved; on text the
            // word decoding's thread saves more wall time than it costs CPU.
            let method = header.spec.method;
            let sizes: Vec<usize> = (0..STREAMS)
                .map(|st| match &word_feeds[st] {
                    Some(f) => f.len,
                    None => feeds[st].iter().map(|p| p.len).sum(),
                })
                .collect();
            let helped = (0..STREAMS)
                .filter(|&st| word_feeds[st].is_some() && sizes[st] >= HELPED_MIN)
                .max_by_key(|&st| sizes[st]);
            let mut feeds = feeds.into_iter();
            let mut word_feeds = word_feeds.into_iter();
            let sources = std::array::from_fn(|st| {
                let parts = feeds.next().unwrap_or_default();
                let feed: Box<dyn crate::walsplit::Feed + Send + '_> =
                    match word_feeds.next().flatten() {
                        Some(words) => Box::new(words),
                        None if parts.is_empty() => return Source::Bytes(&streams[st]),
                        None => Box::new(FedStream::new(method, parts)),
                    };
                if helped == Some(st) {
                    Source::Feed(Box::new(helped_stream(scope, feed)), sizes[st])
                } else {
                    Source::Feed(feed, sizes[st])
                }
            });
            crate::walsplit::join_sources(w.pageaddr, w.valid_len, s, sources, &mut send)?;
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
    sink(&out);
    Ok((header, out))
}

/// Word-coded streams of at least this many bytes may be decoded on a thread of their own.
const HELPED_MIN: usize = 1 << 20;

/// Bytes a helper thread decompresses into one buffer before handing it over.
const HELPED_PIECE: usize = 256 << 10;

/// Buffers a helper thread may fill ahead of the reader.
const HELPED_AHEAD: usize = 4;

/// The error for a fed stream whose `n`-th part (counted from 1) failed.
fn fed_error(parts: &[FedPart<'_>], n: usize, source: codec::CodecError) -> FeedError {
    let (part, offset) = match parts.get(n.clamp(1, parts.len().max(1)) - 1) {
        Some(part) => (part.index, part.offset as u64),
        None => (0, 0),
    };
    FeedError {
        part,
        offset,
        source,
    }
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
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, FeedError> {
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

/// A fed stream read on a thread of its own: buffers come full over one channel, at most
/// [`HELPED_AHEAD`] ahead of the reader, and go back empty over another.
struct HelpedStream {
    full: std::sync::mpsc::Receiver<Result<(Vec<u8>, usize), FeedError>>,
    empty: std::sync::mpsc::Sender<Vec<u8>>,
}

impl crate::walsplit::Feed for HelpedStream {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, FeedError> {
        match self.full.recv() {
            Ok(buf) => Ok(Some(buf?)),
            Err(_) => Ok(None),
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        let _ = self.empty.send(buf);
    }
}

/// The reading end of `feed` read on a thread of its own (spawned in `scope`).
fn helped_stream<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    mut feed: Box<dyn crate::walsplit::Feed + Send + 'scope>,
) -> HelpedStream {
    let (full_tx, full) = std::sync::mpsc::sync_channel(HELPED_AHEAD);
    let (empty, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    scope.spawn(move || loop {
        if let Ok(buf) = empty_rx.try_recv() {
            feed.recycle(buf);
        }
        match feed.next() {
            Ok(None) => return,
            Ok(Some(buf)) => {
                if full_tx.send(Ok(buf)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = full_tx.send(Err(e));
                return;
            }
        }
    });
    HelpedStream { full, empty }
}

/// A part of a stream that is word-decoded as it is read: its bytes as decompressed.
struct WordPart {
    index: usize,
    offset: usize,
    bytes: Vec<u8>,
    /// Word-coded (else the coding was declined for this part and `bytes` are the stream's).
    coded: bool,
}

/// A stream with word-coded parts, decoded as it is read, [`HELPED_PIECE`] bytes at a time.
struct WordFeed<'b> {
    parts: std::vec::IntoIter<WordRead<'b>>,
    current: Option<WordRead<'b>>,
    spare: Option<Vec<u8>>,
    /// The stream's decoded length.
    len: usize,
}

/// Where a [`WordFeed`] is in one of its parts.
struct WordRead<'b> {
    index: usize,
    offset: usize,
    src: WordSrc<'b>,
}

enum WordSrc<'b> {
    Coded(Box<codec::words::Reader<'b>>),
    Plain(&'b [u8]),
}

impl<'b> WordFeed<'b> {
    /// Checks every coded part's header (each decoded length capped at `cap`).
    fn new(parts: &'b [WordPart], cap: usize) -> Result<WordFeed<'b>, ContainerError> {
        let mut reads = Vec::with_capacity(parts.len());
        let mut len = 0usize;
        for p in parts {
            let src = if p.coded {
                let r = codec::words::Reader::new(&p.bytes, cap).map_err(|source| {
                    ContainerError::Words {
                        index: p.index,
                        offset: p.offset as u64,
                        source,
                    }
                })?;
                WordSrc::Coded(Box::new(r))
            } else {
                WordSrc::Plain(&p.bytes)
            };
            len = len.saturating_add(match &src {
                WordSrc::Coded(r) => r.len(),
                WordSrc::Plain(b) => b.len(),
            });
            reads.push(WordRead {
                index: p.index,
                offset: p.offset,
                src,
            });
        }
        Ok(WordFeed {
            parts: reads.into_iter(),
            current: None,
            spare: None,
            len,
        })
    }
}

impl crate::walsplit::Feed for WordFeed<'_> {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, FeedError> {
        let mut buf = self.spare.take().unwrap_or_default();
        buf.resize(HEADROOM + HELPED_PIECE, 0);
        let mut n = 0;
        while n < HELPED_PIECE {
            let Some(cur) = self.current.as_mut() else {
                match self.parts.next() {
                    Some(next) => {
                        self.current = Some(next);
                        continue;
                    }
                    None => break,
                }
            };
            let dst = &mut buf[HEADROOM + n..];
            let got = match &mut cur.src {
                WordSrc::Coded(r) => r.read(dst).map_err(|e| FeedError {
                    part: cur.index,
                    offset: cur.offset as u64,
                    source: e.into(),
                })?,
                WordSrc::Plain(bytes) => {
                    let k = bytes.len().min(dst.len());
                    dst[..k].copy_from_slice(&bytes[..k]);
                    *bytes = &bytes[k..];
                    k
                }
            };
            if got == 0 {
                self.current = None;
            }
            n += got;
        }
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(HEADROOM + n);
        Ok(Some((buf, HEADROOM)))
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        self.spare = Some(buf);
    }
}

/// Bytes of zeros handed to the sink at a time for a zero tail.
const ZEROS_PIECE: usize = 64 << 10;

/// Parses the header, checks the length and every part's checksum, then decompresses (and
/// word-decodes) the parts on two threads.
fn decompress_parts(bytes: &[u8]) -> Result<Decompressed<'_>, ContainerError> {
    let Some((header, hlen)) = Header::parse(bytes)? else {
        let need = if bytes.len() >= 16 {
            le_u32_at(bytes, 12).map_or(16, u64::from)
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
    let (word_cap, records) = match &header.transform {
        Transform::WalRecords(w, _) => (w.valid_len as usize, true),
        _ => (0, false),
    };
    let offsets: Vec<usize> = jobs.iter().map(|&(_, off, _, _)| off).collect();
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
    // sink (the hash) while the rest is still compressed, and no buffer for the whole
    // stream is needed.
    let fed: [bool; STREAMS] =
        std::array::from_fn(|st| pieces[st] > 0 && !coded[st] && method == codec::Method::Zstd);
    // Streams with a word-coded part are decompressed here and word-decoded as they are
    // read (see `decode_with`).
    let word_fed: [bool; STREAMS] = std::array::from_fn(|st| records && coded[st]);
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
            let deferred = matches!(p.role, Role::WalStream(st) if word_fed[st as usize]);
            if p.words && !deferred {
                raw = crate::words::decode(&raw, word_cap).map_err(|source| {
                    ContainerError::Words {
                        index,
                        offset: off as u64,
                        source,
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
        word_fed,
        offsets,
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
    /// Streams with a word-coded part: their parts are in `parts` decompressed but still
    /// word-coded, to be decoded as they are read.
    word_fed: [bool; STREAMS],
    /// Where each part's bytes are in the container.
    offsets: Vec<usize>,
}

/// A part of a stream that is decompressed as it is read.
#[derive(Clone, Copy)]
struct FedPart<'b> {
    index: usize,
    offset: usize,
    stored: &'b [u8],
    len: usize,
}
