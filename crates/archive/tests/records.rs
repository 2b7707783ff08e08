//! The WAL records transform on real WAL: the 35 PostgreSQL 18 segments of
//! `crates/wal/testdata` (pgbench with wal_compression off, pglz, lz4 and zstd in turn).

use archive::container::{Role, Transform};
use archive::decode;
use archive::pack::pack;
use archive::walsplit::{join, join_into, split, Stream};
use archive::Identity;
use codec::{BlockCompressor, Spec};

mod fixture;
use fixture::segments;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn every_segment_takes_the_records_transform_and_comes_back() {
    let spec: Spec = "zstd:3".parse().expect("spec");
    let mut whole = BlockCompressor::new(&spec).expect("compressor");
    let (mut records_total, mut whole_total, mut records_taken) = (0usize, 0usize, 0u64);
    let mut cut_streams = 0;
    let mut block = Vec::new();
    for (name, data) in segments() {
        let packed = pack(&name, &data, &spec).expect("pack");
        let Transform::WalRecords(w, s) = packed.header.transform else {
            panic!("{name}: {:?}", packed.header.transform);
        };
        assert!(s.records > 0, "{name}: no record taken apart");
        assert!(w.valid_len <= data.len() as u64);
        let (_, back) = decode(&packed.bytes).expect("decode");
        assert!(back == data, "{name}: bytes differ");
        // A large stream may be cut into consecutive parts (two compression lanes).
        let roles: Vec<Role> = packed.header.parts.iter().map(|p| p.role).collect();
        let cut = roles
            .windows(2)
            .any(|w| w[0] == w[1] && matches!(w[0], Role::WalStream(_)));
        cut_streams += usize::from(cut);
        assert_eq!(packed.header.xxh3, archive::container::xxh3(&data));
        records_total += packed.bytes.len();
        records_taken += s.records;
        whole.compress(&data, &mut block).expect("compress");
        whole_total += block.len();
    }
    let gain = whole_total as f64 / records_total as f64;
    eprintln!("{cut_streams} of 35 containers store a stream in two or more parts");
    eprintln!(
        "35 segments, {records_taken} records: zstd:3 on whole segments {whole_total} B, \
         records transform {records_total} B ({gain:.2}x smaller)"
    );
    // The fixture holds WAL compressed by PostgreSQL too, where there is less to win than
    // with wal_compression=off; the transform must still be clearly ahead.
    assert!(gain > 1.15, "records transform only {gain:.2}x smaller");
}

#[test]
fn joined_pieces_come_out_in_order_and_whole_pages() {
    let mut pieces_total = 0;
    for (name, data) in segments() {
        let (info, sp, _) = archive::pack::records_split(&data).expect("a segment splits");
        let (start, data) = (info.pageaddr, &data[..info.valid_len as usize]);
        // Twice: once holding every piece (the joiner must never write into memory still
        // held), once letting each go at once (the joiner then writes every byte of the
        // memory it uses again).
        for hold in [true, false] {
            let mut pieces: Vec<(usize, usize)> = Vec::new();
            let mut held = Vec::new();
            let mut at = 0;
            join_into(start, data.len() as u64, &sp.info, &sp.streams, |p| {
                pieces.push((at, p.len()));
                assert_eq!(&p[..], &data[at..at + p.len()], "{name}: piece at {at}");
                at += p.len();
                if hold {
                    held.push(p);
                }
            })
            .expect("join");
            assert_eq!(at, data.len(), "{name}: the pieces make the whole prefix");
            for (p, &(start, len)) in held.iter().zip(&pieces) {
                assert_eq!(
                    &p[..],
                    &data[start..start + len],
                    "{name}: held piece at {start}"
                );
            }
            pieces_total += pieces.len();
            assert!(
                pieces.iter().all(|&(start, _)| start % 8192 == 0),
                "{name}: pieces start on page boundaries: {pieces:?}"
            );
        }
    }
    assert!(
        pieces_total > 35 * 2 * 2,
        "{pieces_total} pieces for 35 segments, twice"
    );
}

#[test]
fn every_prefix_splits_and_joins_exactly() {
    let segs = segments();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut joined = 0;
    for _ in 0..300 {
        let (name, data) = &segs[rng.below(segs.len())];
        let len = 1 + rng.below(data.len());
        let prefix = &data[..len];
        let start = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        // A prefix that ends inside a page header is refused; any other must come back.
        if let Some(s) = split(prefix, start) {
            let back = join(start, len as u64, &s.info, &s.streams)
                .unwrap_or_else(|e| panic!("{name}[..{len}]: {e}"));
            assert!(back == prefix, "{name}[..{len}]: bytes differ");
            joined += 1;
        }
    }
    assert!(joined > 250, "only {joined} of 300 prefixes split");
}

#[test]
fn damaged_streams_never_panic_and_never_pass_as_the_original() {
    let segs = segments();
    let (name, data) = &segs[3];
    let start = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
    let s = split(data, start).expect("split");
    let mut rng = Rng(42);
    let mut rejected = 0;
    for round in 0..400 {
        let mut streams = s.streams.clone();
        let idx = Stream::ALL[round % Stream::ALL.len()] as usize;
        if streams[idx].is_empty() {
            continue;
        }
        match round % 3 {
            0 => {
                let at = rng.below(streams[idx].len());
                streams[idx][at] ^= 1 << rng.below(8);
            }
            1 => {
                let cut = rng.below(streams[idx].len());
                streams[idx].truncate(cut);
            }
            _ => streams[idx].push(rng.below(256) as u8),
        }
        match join(start, data.len() as u64, &s.info, &streams) {
            Err(_) => rejected += 1,
            // Some flips only change bytes (a data byte, an xid): join cannot know, the
            // SHA-256 in the container does. The length is always the one asked for.
            Ok(out) => {
                assert_eq!(out.len(), data.len(), "{name} round {round}");
                assert!(
                    out != *data,
                    "{name} round {round}: damaged streams gave the original"
                );
            }
        }
    }
    assert!(
        rejected > 100,
        "only {rejected} damaged stream sets refused"
    );
}

#[test]
fn recycled_segment_keeps_its_stale_pages() {
    let segs = segments();
    // A segment whose second half is an older segment's pages, as a recycled file looks
    // past the insert point.
    let (name, fresh) = &segs[10];
    let (_, old) = &segs[2];
    let mut data = fresh.clone();
    let half = data.len() / 2;
    data[half..].copy_from_slice(&old[half..]);
    let packed = pack(name, &data, &"zstd:3".parse().expect("spec")).expect("pack");
    assert!(matches!(packed.header.transform, Transform::WalRecords(..)));
    assert!(
        packed.header.parts.iter().any(|p| p.role == Role::WalStale),
        "{:?}",
        packed.header.parts
    );
    let (_, back) = decode(&packed.bytes).expect("decode");
    assert!(back == data);
}

#[test]
fn a_segment_start_at_the_top_of_the_address_space_does_not_overflow() {
    // Page addresses are the segment start plus page offsets; a start near u64::MAX (only
    // in hostile input) must wrap the same way in split and join, never panic.
    let (_, mut data) = segments().remove(0);
    let start = u64::MAX - 8191;
    let blcksz = 8192;
    for p in 0..data.len() / blcksz {
        let addr = start.wrapping_add((p * blcksz) as u64);
        data[p * blcksz + 8..p * blcksz + 16].copy_from_slice(&addr.to_le_bytes());
    }
    let prefix = &data[..data.len() / 2];
    let s = split(prefix, start).expect("splits");
    let back = join(start, prefix.len() as u64, &s.info, &s.streams).expect("joins");
    assert!(back == prefix, "bytes differ");
}

/// A stream handed out in buffers of awkward sizes, some with room in front, some without.
struct Drip<'a> {
    bytes: &'a [u8],
    at: usize,
    turn: usize,
}

impl archive::walsplit::Feed for Drip<'_> {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, archive::walsplit::FeedError> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        self.turn += 1;
        let n = [1, 7, 4096, 70_000, 3][self.turn % 5].min(self.bytes.len() - self.at);
        let room = [0, 3, 9000, 64 << 10][self.turn % 4];
        let mut buf = vec![0xAA; room];
        buf.extend_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(Some((buf, room)))
    }

    fn recycle(&mut self, _buf: Vec<u8>) {}
}

#[test]
fn streams_fed_in_buffers_of_any_size_join_the_same() {
    use archive::walsplit::{join_sources, Source};
    for ((name, data), parity) in segments().into_iter().step_by(3).zip([0, 1].iter().cycle()) {
        let (info, sp, _) = archive::pack::records_split(&data).expect("a segment splits");
        let data = &data[..info.valid_len as usize];
        // Every other stream fed, the even ones for one segment, the odd ones for the next.
        let sources = std::array::from_fn(|st| {
            let bytes = sp.streams[st].as_slice();
            if st % 2 == *parity {
                Source::Feed(
                    Box::new(Drip {
                        bytes,
                        at: 0,
                        turn: st,
                    }),
                    bytes.len(),
                )
            } else {
                Source::Bytes(bytes)
            }
        });
        let mut out = Vec::new();
        join_sources(info.pageaddr, data.len() as u64, &sp.info, sources, |p| {
            out.extend_from_slice(&p)
        })
        .expect("join");
        assert!(out == data, "{name}");
    }
}

/// A feed whose decompression fails after some bytes, or that ends before its length.
struct Failing<'a> {
    bytes: &'a [u8],
    fail: bool,
    given: bool,
}

impl archive::walsplit::Feed for Failing<'_> {
    fn next(&mut self) -> Result<Option<(Vec<u8>, usize)>, archive::walsplit::FeedError> {
        if !self.given {
            self.given = true;
            return Ok(Some((self.bytes[..self.bytes.len() / 2].to_vec(), 0)));
        }
        if self.fail {
            return Err(archive::walsplit::FeedError {
                part: 7,
                offset: 1234,
                source: codec::CodecError::TrailingData {
                    method: codec::Method::Zstd,
                    trailing: 1,
                },
            });
        }
        Ok(None)
    }

    fn recycle(&mut self, _buf: Vec<u8>) {}
}

#[test]
fn join_errors_name_the_stream_and_keep_their_source() {
    use archive::walsplit::{join_sources, Source, SplitError};
    use std::error::Error;
    let (_, data) = segments().into_iter().next().expect("a segment");
    let (info, sp, _) = archive::pack::records_split(&data).expect("a segment splits");
    let len = info.valid_len;
    let images = Stream::Images as usize;
    assert!(sp.streams[images].len() > 2, "the segment has page images");
    for fail in [true, false] {
        let sources = std::array::from_fn(|st| {
            let bytes = sp.streams[st].as_slice();
            if st == images {
                let feed = Failing {
                    bytes,
                    fail,
                    given: false,
                };
                Source::Feed(Box::new(feed), bytes.len())
            } else {
                Source::Bytes(bytes)
            }
        });
        let e = join_sources(info.pageaddr, len, &sp.info, sources, |_| {})
            .expect_err("a stream that cannot be read does not join");
        let half = sp.streams[images].len() / 2;
        match (&e, fail) {
            (
                SplitError::Feed {
                    stream: Stream::Images,
                    offset,
                    source,
                },
                true,
            ) => {
                assert_eq!(*offset, half);
                assert_eq!((source.part, source.offset), (7, 1234));
                let inner = e
                    .source()
                    .and_then(|s| s.source())
                    .expect("codec error kept");
                assert!(inner.downcast_ref::<codec::CodecError>().is_some());
            }
            (
                SplitError::FeedShort {
                    stream: Stream::Images,
                    offset,
                    total,
                },
                false,
            ) => assert_eq!((*offset, *total), (half, sp.streams[images].len())),
            _ => panic!("unexpected error {e:?} (fail = {fail})"),
        }
    }
    // A stream cut short when whole: the record info stream, which every record reads.
    let mut streams = sp.streams.clone();
    streams[Stream::RecInfo as usize].truncate(8);
    match join(info.pageaddr, len, &sp.info, &streams).expect_err("short stream") {
        SplitError::StreamShort {
            stream: Stream::RecInfo,
            source,
        } => assert_eq!((source.offset, source.needed, source.remaining), (8, 4, 0)),
        e => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn a_push_that_reads_the_file_through_windows_stores_what_packing_it_in_memory_gives() {
    // A push never holds the segment whole: it hashes it, finds its end and takes it apart
    // reading the file a window at a time. Every fixture segment, one with a recycled
    // file's stale pages, one ending in zeros (a switch) and one whose records stop halfway
    // (the rest kept as it is) must give the container of the in-memory path, byte for byte.
    let spec: Spec = "zstd:3".parse().expect("spec");
    let segs = segments();
    let mut cases: Vec<(String, Vec<u8>)> = segs.clone();
    let (name, fresh) = &segs[10];
    let mut stale = fresh.clone();
    let half = stale.len() / 2;
    stale[half..].copy_from_slice(&segs[2].1[half..]);
    let mut zeros = fresh.clone();
    zeros[half + 123..].fill(0);
    let mut damaged = fresh.clone();
    damaged[half + 4567] ^= 0x40;
    for (tag, data) in [("stale", stale), ("zeros", zeros), ("damaged", damaged)] {
        cases.push((format!("{name}:{tag}"), data));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (label, data)) in cases.iter().enumerate() {
        let name = label.split(':').next().expect("name");
        let src = dir.path().join(format!("case{i}"));
        std::fs::create_dir_all(&src).expect("mkdir");
        let path = src.join(name);
        std::fs::write(&path, data).expect("write");
        // A fresh repository directory per case: the same name is pushed with other bytes.
        let repo_dir = dir.path().join(format!("repo{i}"));
        let repo = archive::repo::Repository::local(&repo_dir);
        repo.init(&Identity::of_segment(data).expect("identity"))
            .expect("init");
        repo.push(&path, name, &spec).expect("push");
        let stored = std::fs::read(repo_dir.join(archive::repo::key_of(name))).expect("stored");
        let packed = pack(name, data, &spec).expect("pack");
        assert!(
            stored == packed.bytes,
            "{label}: the pushed container differs"
        );
        let (_, back) = decode(&stored).expect("decode");
        assert!(back == *data, "{label}: bytes differ");
    }
}

#[test]
fn a_segment_of_another_system_is_refused_and_the_repository_unchanged() {
    // The same segment with another system identifier in its first page's long header
    // (xlp_sysid, bytes 24..32), as another cluster's archive_command would push it.
    let (name, data) = segments().swap_remove(3);
    let id = Identity::of_segment(&data).expect("identity");
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_dir = dir.path().join("repo");
    let repo = archive::repo::Repository::local(&repo_dir);
    repo.init(&id).expect("init");
    let mut foreign = data.clone();
    foreign[24..32].copy_from_slice(&(id.system_identifier ^ 1).to_le_bytes());
    let src = dir.path().join(&name);
    std::fs::write(&src, &foreign).expect("write");
    let listing = |d: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let before = listing(&repo_dir);
    let err = repo
        .push(&src, &name, &"zstd:3".parse().expect("spec"))
        .expect_err("a foreign segment");
    assert!(
        matches!(err, archive::ArchiveError::ForeignFile { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("belongs to system"), "{err}");
    assert_eq!(listing(&repo_dir), before);
    // Its own segment goes in, and init is refused for the other system: the repository
    // already holds WAL of this one.
    std::fs::write(&src, &data).expect("write");
    repo.push(&src, &name, &"zstd:3".parse().expect("spec"))
        .expect("push");
    let other = archive::repo::Repository::local(&repo_dir);
    let foreign_id = Identity::of_segment(&foreign).expect("identity");
    assert!(matches!(
        other.init(&foreign_id),
        Err(archive::ArchiveError::OtherCluster { .. })
    ));
}

#[test]
fn init_reads_the_newest_written_segment_of_a_data_directory() {
    // A server creates segments ahead of need, zero-filled until used: the newest name in
    // pg_wal then has no header, and init takes the newest segment that has one.
    let (name, data) = segments().swap_remove(3);
    let id = Identity::of_segment(&data).expect("identity");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("global")).expect("mkdir");
    let mut control = id.system_identifier.to_le_bytes().to_vec();
    control.resize(8192, 0);
    std::fs::write(dir.path().join("global/pg_control"), control).expect("write");
    let wal = dir.path().join("pg_wal");
    std::fs::create_dir_all(&wal).expect("mkdir");
    std::fs::write(wal.join(&name), &data).expect("write");
    std::fs::write(wal.join("00000001000000FF000000FF"), vec![0u8; data.len()]).expect("write");
    assert_eq!(
        archive::repo::data_directory_identity(dir.path()).expect("identity"),
        id
    );
    // pg_control of another system is refused.
    let mut control = (id.system_identifier ^ 1).to_le_bytes().to_vec();
    control.resize(8192, 0);
    std::fs::write(dir.path().join("global/pg_control"), control).expect("write");
    assert!(archive::repo::data_directory_identity(dir.path()).is_err());
}

#[test]
fn a_long_lived_handle_stops_when_the_repository_goes() {
    // `archive serve` keeps one handle for its life: when the backup volume is unmounted
    // under it, the bare mount point is not a repository, and nothing is written there.
    let segs = segments();
    let id = Identity::of_segment(&segs[3].1).expect("identity");
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = dir.path().join("mnt");
    let repo = archive::repo::Repository::local(&mount);
    repo.init(&id).expect("init");
    let spec = "zstd:3".parse().expect("spec");
    for (name, data) in &segs[3..5] {
        let src = dir.path().join(name);
        std::fs::write(&src, data).expect("write");
        if name == &segs[3].0 {
            repo.push(&src, name, &spec).expect("push while mounted");
            std::fs::rename(&mount, dir.path().join("volume")).expect("unmount");
            std::fs::create_dir(&mount).expect("bare mount point");
        } else {
            let err = repo
                .push(&src, name, &spec)
                .expect_err("push after the unmount");
            assert!(
                matches!(err, archive::ArchiveError::NotInitialized { .. }),
                "{err}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&mount).expect("ls").count(), 0);
}
