//! Unit tests without a server: container format, caps, corruption, repository semantics.
//! WAL written by a real PostgreSQL is exercised by `crates/cli/tests/archive_*.rs`.

use std::path::PathBuf;
use std::str::FromStr;

use codec::Spec;

use crate::container::{Header, MAGIC};
use crate::pipeline::decode;
use crate::{pack, ArchiveError, PushOutcome, Repository, Transform};

fn spec() -> Spec {
    Spec::from_str("zstd:level=3").expect("spec")
}

/// Deterministic pseudo-random bytes (xorshift), some compressible.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 {
                b'a'
            } else {
                x as u8
            }
        })
        .collect()
}

#[test]
fn plain_round_trips() {
    for (name, data) in [
        ("empty", Vec::new()),
        (
            "00000002.history",
            b"1\t0/3000000\tno recovery target specified\n".to_vec(),
        ),
        ("junk.bin", noise(100_000, 7)),
        ("zeros", vec![0u8; 1 << 20]),
    ] {
        for s in [
            "zstd:level=3",
            "lz4",
            "gzip:6",
            "none",
            "xz:1",
            "zstd:level=19,long",
        ] {
            let spec = Spec::from_str(s).expect("spec");
            let p = pack(name, &data, &spec).expect("pack");
            assert_eq!(p.header.transform, Transform::Plain, "{name}");
            let (h, back) = decode(&p.bytes).expect("decode");
            assert_eq!(back, data, "{name} {s}");
            assert_eq!(h, p.header);
            assert_eq!(p.bytes.len() as u64, h.container_len());
        }
    }
}

#[test]
fn header_parse_is_incremental() {
    let p = pack("x", b"hello", &spec()).expect("pack");
    let (_, hlen) = Header::parse(&p.bytes).expect("ok").expect("complete");
    for n in 0..hlen {
        assert!(
            Header::parse(&p.bytes[..n]).expect("no error").is_none(),
            "{n}"
        );
    }
}

#[test]
fn every_flipped_byte_is_detected() {
    let data = noise(20_000, 3);
    let p = pack("000000010000000000000001.partial", &data, &spec()).expect("pack");
    for at in 0..p.bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = p.bytes.clone();
            b[at] ^= bit;
            let err = decode(&b).expect_err("flip must be detected");
            let msg = err.to_string();
            assert!(!msg.contains('\n') && !msg.is_empty(), "{at}: {msg}");
        }
    }
}

#[test]
fn truncation_and_extension_are_detected() {
    let p = pack("f", &noise(5000, 9), &spec()).expect("pack");
    for n in 0..p.bytes.len() {
        assert!(decode(&p.bytes[..n]).is_err(), "{n}");
    }
    let mut longer = p.bytes.clone();
    longer.push(0);
    assert!(decode(&longer).is_err());
}

#[test]
fn hostile_headers_are_refused_before_allocation() {
    // A header claiming a gigantic length, and one claiming a huge original size.
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&b).is_err());
    assert!(Header::parse(&b).is_err());
    assert!(matches!(
        Header::parse(b"GARBAGE!xxxxxxxxxxxx"),
        Err(crate::ContainerError::BadMagic)
    ));
}

#[test]
fn names_must_be_file_names() {
    for bad in ["", "../x", "a/b", ".hidden", "x\ny"] {
        assert!(pack(bad, b"x", &spec()).is_err(), "{bad:?}");
    }
}

/// The identity the repositories of these tests are initialized with.
const IDENTITY: crate::Identity = crate::Identity {
    system_identifier: 7_000_000_000_000_000_001,
    wal_segment_size: 16 << 20,
    pg_major: 15,
};

/// `repo`, initialized for [`IDENTITY`].
fn initialized(repo: Repository) -> Repository {
    repo.init(&IDENTITY).expect("init");
    repo
}

#[test]
fn repository_semantics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_dir = dir.path().join("repo");
    let repo = initialized(Repository::local(&repo_dir));
    let path_of = |name: &str| repo_dir.join(crate::repo::key_of(name));
    // Not a WAL segment's name: these bytes are no WAL, and a segment's first page is
    // checked against the repository's system.
    let name = "00000003.history";
    let src = dir.path().join(name);
    let data = noise(300_000, 5);
    std::fs::write(&src, &data).expect("write");

    assert!(matches!(
        repo.push(&src, name, &spec()),
        Ok(PushOutcome::Stored(_))
    ));
    // Same name, same content: success, nothing rewritten.
    let before = std::fs::read(path_of(name)).expect("read");
    assert!(matches!(
        repo.push(&src, name, &Spec::from_str("lz4").expect("spec")),
        Ok(PushOutcome::AlreadyArchived(_))
    ));
    // Same name, different content: error, archived copy untouched.
    std::fs::write(&src, noise(300_000, 6)).expect("write");
    assert!(matches!(
        repo.push(&src, name, &spec()),
        Err(ArchiveError::Conflict { .. })
    ));
    assert_eq!(std::fs::read(path_of(name)).expect("read"), before);

    let dest = dir.path().join("RECOVERYXLOG");
    repo.get(name, &dest).expect("get");
    assert_eq!(std::fs::read(&dest).expect("read"), data);

    let missing = dir.path().join("missing");
    assert!(matches!(
        repo.get("00000002.history", &missing),
        Err(ArchiveError::NotFound { .. })
    ));
    assert!(!missing.exists());

    // A damaged archived copy: get fails and leaves no destination; push refuses to replace it.
    let mut bad = before.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x10;
    std::fs::write(path_of(name), &bad).expect("write");
    let dest2 = dir.path().join("p2");
    assert!(matches!(
        repo.get(name, &dest2),
        Err(ArchiveError::Corrupt { .. })
    ));
    assert!(!dest2.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("pgcompress"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::write(&src, &data).expect("write");
    assert!(matches!(
        repo.push(&src, name, &spec()),
        Err(ArchiveError::ExistingCorrupt { .. })
    ));

    let list = repo.list().expect("list");
    assert_eq!(list.len(), 1);
    assert!(
        list[0].header.is_ok(),
        "a flipped payload byte keeps the header readable"
    );
    assert!(repo.verify_one(name).is_err());
}

#[test]
fn renamed_container_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = initialized(Repository::local(dir.path()));
    let path_of = |name: &str| dir.path().join(crate::repo::key_of(name));
    let src = dir.path().join("a");
    std::fs::write(&src, b"content of a").expect("write");
    repo.push(&src, "a", &spec()).expect("push");
    std::fs::rename(path_of("a"), path_of("b")).expect("rename");
    let dest = dir.path().join("out");
    assert!(matches!(
        repo.get("b", &dest),
        Err(ArchiveError::Corrupt { .. })
    ));
    assert!(!dest.exists());
}

#[test]
fn a_missing_repository_is_not_a_missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = Repository::local(dir.path().join("nowhere"));
    let dest = dir.path().join("RECOVERYHISTORY");
    assert!(matches!(
        repo.get("00000002.history", &dest),
        Err(ArchiveError::NotInitialized { .. })
    ));
    assert!(!dest.exists());
}

#[test]
fn push_and_get_need_an_initialized_repository_and_create_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("00000002.history");
    std::fs::write(&src, b"1\t0/3000000\tno recovery target specified\n").expect("write");
    let dest = dir.path().join("RECOVERYHISTORY");
    // A directory that does not exist (a volume not mounted) stays absent.
    let nowhere = dir.path().join("mnt").join("backup");
    let repo = Repository::local(&nowhere);
    let err = repo
        .push(&src, "00000002.history", &spec())
        .expect_err("push to a location that does not exist");
    assert!(matches!(err, ArchiveError::NotInitialized { .. }), "{err}");
    assert!(!dir.path().join("mnt").exists());
    // An empty directory is not a repository either: nothing is written into it.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let repo = Repository::local(&empty);
    let err = repo
        .push(&src, "00000002.history", &spec())
        .expect_err("push to an uninitialized directory");
    assert!(err.to_string().contains("archive init"), "{err}");
    assert!(matches!(
        repo.get("00000002.history", &dest),
        Err(ArchiveError::NotInitialized { .. })
    ));
    assert_eq!(std::fs::read_dir(&empty).expect("ls").count(), 0);
    // Once initialized, it works; init again with the same identity changes nothing, with
    // another it is refused.
    assert!(matches!(
        repo.init(&IDENTITY),
        Ok(crate::repo::Initialized::Created { adopted: 0 })
    ));
    assert!(matches!(
        repo.init(&IDENTITY),
        Ok(crate::repo::Initialized::Already)
    ));
    let other = crate::Identity {
        system_identifier: 1,
        ..IDENTITY
    };
    assert!(matches!(
        repo.init(&other),
        Err(ArchiveError::OtherCluster { .. })
    ));
    let repo = Repository::local(&empty);
    assert!(matches!(
        repo.push(&src, "00000002.history", &spec()),
        Ok(PushOutcome::Stored(_))
    ));
    repo.get("00000002.history", &dest).expect("get");
}

#[test]
fn a_segment_name_must_hold_wal_of_the_repositorys_system() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = initialized(Repository::local(dir.path().join("repo")));
    let name = "000000010000000000000001";
    let src = dir.path().join(name);
    std::fs::write(&src, noise(100_000, 9)).expect("write");
    assert!(matches!(
        repo.push(&src, name, &spec()),
        Err(ArchiveError::Identity { .. })
    ));
    std::fs::write(&src, b"short").expect("write");
    assert!(matches!(
        repo.push(&src, name, &spec()),
        Err(ArchiveError::Identity { .. })
    ));
    assert!(repo.files().expect("files").is_empty());
}

#[test]
fn locations() {
    use crate::Location;
    assert_eq!(
        Location::parse("s3://wal-bucket/prod/main/").expect("s3"),
        Location::S3 {
            bucket: "wal-bucket".into(),
            prefix: "prod/main".into()
        }
    );
    assert_eq!(Location::parse("S3://b").expect("s3").to_string(), "s3://b");
    assert_eq!(
        Location::parse("/backup/wal").expect("dir"),
        Location::Dir("/backup/wal".into())
    );
    for bad in [
        "",
        "s3://",
        "s3:/b",
        "s3://b/a//c",
        "s3://b/../c",
        "s3://a b/c",
    ] {
        assert!(
            matches!(Location::parse(bad), Err(ArchiveError::Config(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_failed_check_publishes_nothing() {
    use crate::repo::{LocalStore, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::new(dir.path());
    let refuse = |_: &[u8]| -> Result<(), ArchiveError> { Err(ArchiveError::Config("no".into())) };
    assert!(matches!(
        store.create_checked("k.pgcz", b"bytes", &refuse),
        Err(ArchiveError::Config(_))
    ));
    assert!(!dir.path().join("k.pgcz").exists());
    let left: Vec<_> = std::fs::read_dir(dir.path().join(crate::repo::local::TMP_DIR))
        .expect("tmp dir")
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let accept = |_: &[u8]| -> Result<(), ArchiveError> { Ok(()) };
    assert!(store
        .create_checked("k.pgcz", b"bytes", &accept)
        .expect("create"));
    assert_eq!(
        std::fs::read(dir.path().join("k.pgcz")).expect("read"),
        b"bytes"
    );
    // The name is taken now: nothing is overwritten.
    assert!(!store
        .create_checked("k.pgcz", b"other", &accept)
        .expect("second"));
    assert_eq!(
        std::fs::read(dir.path().join("k.pgcz")).expect("read"),
        b"bytes"
    );
}

/// Checks that `get` restores "big" to `dest` byte for byte, then removes `dest`.
fn restores(repo: &Repository, dest: &std::path::Path, data: &[u8]) {
    repo.get("big", dest).expect("get");
    assert!(std::fs::read(dest).expect("read") == data);
    std::fs::remove_file(dest).expect("rm");
}

/// `c` with one bit flipped in the `field` of its header (found by its bytes), and the header checksum
/// made right again.
fn flip_in_header(c: &[u8], field: &[u8]) -> Vec<u8> {
    let mut c = c.to_vec();
    let hlen = u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")) as usize;
    let at = c[..hlen]
        .windows(field.len())
        .position(|w| w == field)
        .expect("field in the header");
    c[at] ^= 0x40;
    let crc = crc32c::crc32c(&c[..hlen - 4]);
    c[hlen - 4..hlen].copy_from_slice(&crc.to_le_bytes());
    c
}

/// A repository in a temporary directory holding `big`, 6 MB of noise from `seed`: the
/// directory, the repository, the bytes, the header push wrote and the container's path.
fn pushed_big(seed: u64) -> (tempfile::TempDir, Repository, Vec<u8>, Header, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = initialized(Repository::local(dir.path().join("repo")));
    let data = noise(6 << 20, seed);
    let src = dir.path().join("big");
    std::fs::write(&src, &data).expect("write");
    let PushOutcome::Stored(header) = repo.push(&src, "big", &spec()).expect("push") else {
        panic!("not stored");
    };
    let path = dir.path().join("repo").join(crate::repo::key_of("big"));
    (dir, repo, data, header, path)
}

#[test]
fn xxh3_128_is_the_reference_function() {
    // Test vectors of XXH3-128 (seed 0), from the reference implementation's canonical
    // output (`xxhsum -H2`): the empty input, and one byte.
    assert_eq!(
        hex::encode(crate::container::xxh3(b"")),
        "99aa06d3014798d86001c324468d497f"
    );
    assert_eq!(
        hex::encode(crate::container::xxh3(b"a")),
        "a96faf705af16834e6c632b61e964e1f"
    );
}

#[test]
fn get_checks_the_xxh3_digest_and_verify_checks_both() {
    let (dir, repo, data, header, path) = pushed_big(5);
    assert_eq!(header.xxh3, crate::container::xxh3(&data));
    let dest = dir.path().join("out");
    restores(&repo, &dest, &data);
    // A container whose XXH3-128 digest does not belong to the file (its header checksum
    // made right again) restores nothing, and verify says so too.
    let good = std::fs::read(&path).expect("read container");
    let bad = flip_in_header(&good, &header.xxh3);
    std::fs::write(&path, &bad).expect("write container");
    let err = repo.get("big", &dest).expect_err("a wrong digest fails");
    assert!(err.to_string().contains("XXH3-128"), "{err}");
    assert!(!dest.exists());
    assert!(repo.verify_one("big").is_err());
    assert!(decode(&bad).is_err());
    // A wrong SHA-256 is not what get checks, but verify and decode catch it.
    let bad = flip_in_header(&good, &header.sha256);
    std::fs::write(&path, &bad).expect("write container");
    let err = repo.verify_one("big").expect_err("verify fails");
    assert!(err.to_string().contains("SHA-256"), "{err}");
    assert!(decode(&bad).is_err());
}

#[test]
fn only_format_1_is_read() {
    let (_dir, _, data, _, path) = pushed_big(6);
    let good = std::fs::read(&path).expect("read container");
    assert_eq!(&good[8..10], &1u16.to_le_bytes());
    assert!(decode(&good).expect("decode").1 == data);
    // Any other version, with the header checksum made right, is refused by name.
    for version in [0u16, 2, 6, u16::MAX] {
        let mut c = good.clone();
        c[8..10].copy_from_slice(&version.to_le_bytes());
        let hlen = u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")) as usize;
        let crc = crc32c::crc32c(&c[..hlen - 4]);
        c[hlen - 4..hlen].copy_from_slice(&crc.to_le_bytes());
        let err = decode(&c).expect_err("another version");
        assert!(
            matches!(err, crate::ContainerError::UnsupportedVersion(v) if v == version),
            "{err}"
        );
        assert!(err.to_string().contains("reads version 1"), "{err}");
    }
    // No flag is defined: any bit set is refused.
    let mut c = good.clone();
    c[10] = 1;
    assert!(matches!(
        decode(&c),
        Err(crate::ContainerError::UnknownFlags(1))
    ));
}

#[test]
fn the_self_check_holds_the_rebuilt_bytes_to_the_originals_digests() {
    use crate::pack::{self_check, Hash};
    let data = noise(5 << 20, 11);
    let packed = pack("f", &data, &spec()).expect("pack");
    assert!(self_check(&packed.bytes, &Hash::of(&data)).is_ok());
    // One bit, one byte less, one byte more: other digests, and the check fails.
    let mut other = data.clone();
    other[4 << 20] ^= 1;
    assert!(self_check(&packed.bytes, &Hash::of(&other)).is_err());
    assert!(self_check(&packed.bytes, &Hash::of(&data[..data.len() - 1])).is_err());
    other = data.clone();
    other.push(0);
    assert!(self_check(&packed.bytes, &Hash::of(&other)).is_err());
    // A container of other bytes fails against the original's digests.
    let packed_other = pack("f", &other, &spec()).expect("pack");
    assert!(self_check(&packed_other.bytes, &Hash::of(&data)).is_err());
}
