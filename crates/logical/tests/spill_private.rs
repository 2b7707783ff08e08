//! The spill store keeps its files to the account that runs it: the directory 0700 and its
//! files 0600, a directory that is not private refused, one store per directory, a link under
//! a spill file's name never followed, and a file swapped by name never read.

mod common;

use common::*;
use logical::{AssembleError, Assembler, AssemblerConfig, CommittedTxn, Ready};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn private_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("tempdir")
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).expect("stat").mode() & 0o7777
}

/// An assembler that spills everything (work_mem 0), lz4.
fn store(dir: &Path) -> Result<Assembler, AssembleError> {
    let mut c = AssemblerConfig::new(dir);
    c.work_mem = 0;
    Assembler::open(c, V2)
}

/// The messages of streamed transaction `xid` up to its Stream Stop: 2,000 rows.
fn open_txn(xid: u32) -> Vec<Vec<u8>> {
    let mut msgs = vec![stream_start(xid, true)];
    for i in 0..2000 {
        msgs.push(insert(Some(xid), 1, &row_text(i, 60)));
    }
    msgs.push(stream_stop());
    msgs
}

fn push_all(a: &mut Assembler, msgs: &[Vec<u8>]) {
    for m in msgs {
        assert!(a.push(lsn(1), m).expect("push").is_none());
    }
}

fn commit(a: &mut Assembler, xid: u32) -> CommittedTxn {
    match a
        .push(lsn(2), &stream_commit(xid, 1, 2, 3))
        .expect("commit")
    {
        Some(Ready::Txn(t)) => t,
        other => panic!("{other:?}"),
    }
}

fn drain(t: &mut CommittedTxn) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while t.next_payload(&mut buf).expect("replay") {
        out.push(buf.clone());
    }
    out
}

/// The payloads of `open_txn(xid)` as replayed.
fn expected(xid: u32) -> Vec<Vec<u8>> {
    open_txn(xid)[1..2001].to_vec()
}

fn spill_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "spill"))
        .collect();
    v.sort();
    v
}

fn refused(r: Result<Assembler, AssembleError>, path: &Path, what: &str) -> String {
    match r {
        Err(e @ AssembleError::UnsafeDir { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{what}: {text}");
            text
        }
        Err(e) => panic!("{what}: {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn the_directory_is_created_0700_and_files_0600() {
    let root = private_tempdir();
    // Missing parents are created 0700 too.
    let dir = root.path().join("a").join("spill");
    let mut a = store(&dir).expect("store");
    push_all(&mut a, &open_txn(9));
    let files = spill_files(&dir);
    assert_eq!(files.len(), 1);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&root.path().join("a")), 0o700);
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(&dir.join("pgcompress-spill.lock")), 0o600);
    let mut t = commit(&mut a, 9);
    assert_eq!(drain(&mut t), expected(9));
}

#[test]
fn a_directory_not_private_to_this_account_is_refused() {
    let root = private_tempdir();
    let dir = root.path().join("spill");
    std::fs::create_dir(&dir).expect("mkdir");
    for m in [0o755, 0o750, 0o701, 0o777] {
        chmod(&dir, m);
        let text = refused(store(&dir), &dir, &format!("mode {m:o}"));
        assert!(text.contains(&format!("mode {m:04o}")), "{text}");
    }
    chmod(&dir, 0o700);
    let _ok = store(&dir).expect("a private directory is used");
    drop(_ok);

    // A link to a private directory, and a file.
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).expect("symlink");
    let text = refused(store(&link), &link, "a link");
    assert!(text.contains("symbolic link"), "{text}");
    let file = root.path().join("file");
    std::fs::write(&file, b"").expect("write");
    let text = refused(store(&file), &file, "a file");
    assert!(text.contains("not a directory"), "{text}");

    // Below a directory anyone may change: refused; below a sticky one (/tmp): used.
    let open = root.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    chmod(&open, 0o777);
    let inner = open.join("spill");
    let text = refused(store(&inner), &inner, "below a 0777 directory");
    assert!(text.contains("lies in"), "{text}");
    chmod(&open, 0o1777);
    let _ok = store(&inner).expect("below a sticky directory");

    // Another account's, when this test can make one (as root).
    if nix::unistd::geteuid().is_root() {
        let theirs = root.path().join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        chmod(&theirs, 0o700);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let text = refused(store(&theirs), &theirs, "another account's");
        assert!(text.contains("uid 65534"), "{text}");
    }
}

#[test]
fn one_store_per_directory() {
    let root = private_tempdir();
    let dir = root.path().join("spill");
    let mut a = store(&dir).expect("first");
    push_all(&mut a, &open_txn(9));
    match store(&dir) {
        Err(e @ AssembleError::DirInUse { .. }) => {
            assert!(e.to_string().contains(&dir.display().to_string()), "{e}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a second store on the same directory"),
    }
    // The first store's file is still there, and replays.
    assert_eq!(spill_files(&dir).len(), 1);
    let mut t = commit(&mut a, 9);
    assert_eq!(drain(&mut t), expected(9));
    drop(t);
    drop(a);
    let _b = store(&dir).expect("free again");
}

#[test]
fn a_link_under_the_next_file_name_is_not_followed() {
    let root = private_tempdir();
    let dir = root.path().join("spill");
    let mut a = store(&dir).expect("store");
    let target = root.path().join("target");
    std::fs::write(&target, b"keep").expect("write");
    std::os::unix::fs::symlink(&target, dir.join("pgcompress-spill-9-1.spill")).expect("link");
    push_all(&mut a, &open_txn(9));
    assert_eq!(std::fs::read(&target).expect("read"), b"keep");
    let mut t = commit(&mut a, 9);
    assert_eq!(drain(&mut t), expected(9));
    drop(t);
    assert_eq!(std::fs::read(&target).expect("read"), b"keep");
}

#[test]
fn a_file_swapped_by_name_is_not_read() {
    let root = private_tempdir();
    let dir = root.path().join("spill");
    let mut a = store(&dir).expect("store");
    push_all(&mut a, &open_txn(9));
    let files = spill_files(&dir);
    assert_eq!(files.len(), 1);
    // A valid spill file of other rows, renamed over ours before the replay.
    let other = root.path().join("other");
    let mut b = store(&other).expect("other store");
    push_all(&mut b, &open_txn(7));
    let forged = spill_files(&other).remove(0);
    std::fs::copy(&forged, root.path().join("forged")).expect("copy");
    std::fs::rename(root.path().join("forged"), &files[0]).expect("swap");
    let mut t = commit(&mut a, 9);
    assert_eq!(drain(&mut t), expected(9));
}
