//! Spill files of format version 1, one per method, kept in `crates/logical/testdata`: this
//! build must read them back to the changes they were written from (a format change that
//! breaks them must bump the version). They also seed the `spill_read` fuzz target.
//!
//! Regenerate them only after a deliberate format change, with
//! `PGCOMPRESS_BLESS=1 cargo test -p logical --test spill_golden`, and bump
//! `logical::spill::VERSION` if older files no longer read.

mod common;

use std::io::Cursor;
use std::path::PathBuf;

use common::*;
use logical::spill::{SpillReader, VERSION};
use logical::{Assembler, AssemblerConfig};

const SPECS: [(&str, &str); 4] = [
    ("none", "none"),
    ("pglz", "pglz"),
    ("lz4", "lz4"),
    ("zstd", "zstd:1"),
];

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(format!("spill-v{VERSION}-{name}.spill"))
}

/// A streamed transaction with a rolled-back savepoint, small rows (stream records), a large
/// compressible change (one-shot) and a large random one (raw), then small rows again; and
/// what survives of it.
fn session() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let xid = 500;
    let mut msgs = vec![stream_start(xid, true)];
    let mut keep = Vec::new();
    let mut add = |msgs: &mut Vec<Vec<u8>>, m: Vec<u8>, kept: bool| {
        if kept {
            keep.push(m.clone());
        }
        msgs.push(m);
    };
    add(&mut msgs, relation(Some(xid), 16384, "t"), true);
    for i in 0..1200 {
        add(&mut msgs, insert(Some(xid), 16384, &row_text(i, 40)), true);
    }
    for i in 0..200 {
        add(
            &mut msgs,
            insert(Some(xid + 1), 16384, &row_text(i, 40)),
            false,
        );
    }
    msgs.push(stream_stop());
    msgs.push(stream_abort(xid, xid + 1));
    msgs.push(stream_start(xid, false));
    for i in 1200..1500 {
        add(
            &mut msgs,
            insert(Some(xid + 2), 16384, &row_text(i, 40)),
            true,
        );
    }
    add(
        &mut msgs,
        insert(Some(xid), 16384, &row_text(7, 20_000)),
        true,
    );
    add(&mut msgs, insert(Some(xid), 16384, &noise(7, 10_000)), true);
    for i in 1500..1800 {
        add(&mut msgs, insert(Some(xid), 16384, &row_text(i, 40)), true);
    }
    add(&mut msgs, message(Some(xid), true, "p", b"done"), true);
    msgs.push(stream_stop());
    (msgs, keep)
}

fn bless(name: &str, spec: &str, msgs: &[Vec<u8>]) {
    let dir = private_tempdir().expect("tempdir");
    let mut config = AssemblerConfig::new(dir.path());
    config.work_mem = 8 * 1024;
    config.spec = spec.parse().expect("spec");
    let mut a = Assembler::open(config, V2).expect("new");
    for m in msgs {
        a.push(lsn(1), m).expect("push");
    }
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "spill"))
        .collect();
    assert_eq!(files.len(), 1);
    std::fs::copy(&files[0], golden_path(name)).expect("copy");
    println!("blessed {}", golden_path(name).display());
}

#[test]
fn golden_spill_files_read_back() {
    let (msgs, want) = session();
    for (name, spec) in SPECS {
        if std::env::var_os("PGCOMPRESS_BLESS").is_some() {
            bless(name, spec, &msgs);
        }
        let path = golden_path(name);
        let bytes = std::fs::read(&path).expect("golden file (PGCOMPRESS_BLESS=1 makes it)");
        let len = bytes.len() as u64;
        let mut r = SpillReader::new(Cursor::new(bytes), &path).expect("header");
        assert_eq!(r.header().xid, 500);
        assert_eq!(
            r.header().method.name(),
            spec.split(':').next().expect("method")
        );
        let mut got = Vec::new();
        let mut buf = Vec::new();
        while r.next_change(&mut buf).unwrap_or_else(|e| panic!("{e}")) {
            got.push(buf.clone());
        }
        assert_eq!(r.offset(), len);
        // The last changes may still have been in memory when the file was copied.
        assert!(
            got.len() + 200 >= want.len(),
            "{name}: {} of {}",
            got.len(),
            want.len()
        );
        assert!(got[..] == want[..got.len()], "{name}: changes differ");
        let raw: usize = got.iter().map(Vec::len).sum();
        println!("{name}: {raw} raw bytes in {len} bytes");
    }
}

/// A temporary directory closed to group and others, as a spill directory must be.
fn private_tempdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}
