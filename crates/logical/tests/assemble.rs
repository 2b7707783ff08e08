//! The assembler on hand-built pgoutput sessions: streamed transactions interleaved, savepoint
//! rollbacks nested and sequential, top-level aborts, restarts after a reconnect, memory
//! overflow to disk with every compression spec, and damaged spill files.

mod common;

use common::*;
use logical::{
    AssembleError, Assembler, AssemblerConfig, CommittedTxn, Decoder, Message, Ready, Violation,
};

fn config(dir: &std::path::Path, work_mem: usize, spec: &str) -> AssemblerConfig {
    let mut c = AssemblerConfig::new(dir);
    c.work_mem = work_mem;
    c.spec = spec.parse().expect("spec");
    c
}

fn drain(t: &mut CommittedTxn) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while t.next_payload(&mut buf).expect("replay") {
        out.push(buf.clone());
    }
    out
}

/// Feeds `msgs`, returning every committed transaction's xid and payloads, in commit order.
fn run(a: &mut Assembler, msgs: &[Vec<u8>]) -> Replayed {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        match a.push(lsn(i as u64 + 1), m).expect("push") {
            Some(Ready::Txn(mut t)) => out.push((t.xid, drain(&mut t))),
            Some(Ready::NonTransactional(_)) | None => {}
        }
    }
    out
}

/// The files in a spill directory but its lock.
fn spill_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.ends_with("pgcompress-spill.lock"))
        .collect();
    v.sort();
    v
}

/// Two streamed transactions in alternating blocks, with savepoints rolled back nested and in
/// sequence, a top-level abort of a third, all under `work_mem` (0 = everything spills).
/// Committed transactions: xid and payloads, in commit order.
type Replayed = Vec<(u32, Vec<Vec<u8>>)>;

fn savepoint_session() -> (Vec<Vec<u8>>, Replayed) {
    let (a, b, c) = (700u32, 800u32, 900u32);
    let mut msgs = Vec::new();
    let mut keep_a = Vec::new();
    let mut keep_b = Vec::new();
    let mut n = 0u64;
    let mut ins = |x: u32, len: usize| {
        n += 1;
        insert(Some(x), 16384, &row_text(n * 1000, len))
    };
    // Block 1 of a: top-level rows, then subxact 701 (kept), subxact 702 (rolled back).
    msgs.push(stream_start(a, true));
    let r = relation(Some(a), 16384, "t");
    msgs.push(r.clone());
    keep_a.push(r);
    for _ in 0..50 {
        let m = ins(a, 60);
        msgs.push(m.clone());
        keep_a.push(m);
    }
    for _ in 0..30 {
        let m = ins(701, 80);
        msgs.push(m.clone());
        keep_a.push(m);
    }
    for _ in 0..40 {
        msgs.push(ins(702, 9000)); // large changes, one-shot records
    }
    msgs.push(stream_stop());
    // Block 1 of b, with a nested savepoint pair 802 ⊂ 801 both rolled back by 801's abort.
    msgs.push(stream_start(b, true));
    for _ in 0..20 {
        let m = ins(b, 100);
        msgs.push(m.clone());
        keep_b.push(m);
    }
    for _ in 0..25 {
        msgs.push(ins(801, 70));
    }
    for _ in 0..25 {
        msgs.push(ins(802, 70));
    }
    msgs.push(stream_stop());
    msgs.push(stream_abort(a, 702));
    // Block 2 of a: more of 701's parent (top level), then 703 rolled back sequentially.
    msgs.push(stream_start(a, false));
    for _ in 0..10 {
        let m = ins(a, 60);
        msgs.push(m.clone());
        keep_a.push(m);
    }
    for _ in 0..10 {
        msgs.push(ins(703, 60));
    }
    msgs.push(stream_stop());
    msgs.push(stream_abort(a, 703));
    msgs.push(stream_abort(b, 801));
    // A third transaction, aborted whole.
    msgs.push(stream_start(c, true));
    for _ in 0..100 {
        msgs.push(ins(c, 500));
    }
    msgs.push(stream_stop());
    msgs.push(stream_abort(c, c));
    // Block 2 of b: subxact 804 kept, then an abort for a subxid with no changes.
    msgs.push(stream_start(b, false));
    for _ in 0..5 {
        let m = ins(804, 50);
        msgs.push(m.clone());
        keep_b.push(m);
    }
    msgs.push(stream_stop());
    msgs.push(stream_abort(b, 899));
    msgs.push(stream_commit(b, 0x2000, 0x2100, 77));
    msgs.push(stream_commit(a, 0x3000, 0x3100, 78));
    (msgs, vec![(b, keep_b), (a, keep_a)])
}

#[test]
fn savepoints_and_aborts_in_memory_and_on_disk_with_every_spec() {
    let (msgs, want) = savepoint_session();
    for spec in [
        "none",
        "pglz",
        "lz4",
        "lz4:9",
        "zstd:1",
        "zstd:3",
        "zstd:-5",
        "zstd:long=20",
    ] {
        for work_mem in [0, 4096, 100_000, 64 << 20] {
            let dir = private_tempdir().expect("tempdir");
            let mut a = Assembler::open(config(dir.path(), work_mem, spec), V2).expect("new");
            let got = run(&mut a, &msgs);
            assert_eq!(got, want, "{spec} work_mem {work_mem}");
            let s = a.stats();
            assert_eq!(s.open_txns, 0);
            assert_eq!(s.memory_bytes, 0);
            assert_eq!(
                s.files, 0,
                "{spec}: committed and aborted files are deleted"
            );
            assert_eq!(s.disk_bytes, 0);
            assert!(spill_files(dir.path()).is_empty(), "{spec} {work_mem}");
            if work_mem < 100_000 {
                assert!(s.spilled_txns >= 2, "{spec} {work_mem}: {s:?}");
                assert!(s.raw_bytes > 0 && s.disk_written_bytes > 0);
            }
            if work_mem == 64 << 20 {
                assert_eq!(s.spilled_txns, 0);
            }
        }
    }
}

#[test]
fn memory_stays_within_work_mem_and_the_largest_spills() {
    let dir = private_tempdir().expect("tempdir");
    let work_mem = 50_000;
    let mut a = Assembler::open(config(dir.path(), work_mem, "lz4"), V2).expect("new");
    let mut msgs = vec![stream_start(1, true)];
    for i in 0..2000 {
        msgs.push(insert(Some(1), 1, &row_text(i, 100)));
    }
    msgs.push(stream_stop());
    msgs.push(stream_start(2, true));
    for i in 0..50 {
        msgs.push(insert(Some(2), 1, &row_text(i, 100)));
    }
    msgs.push(stream_stop());
    for (i, m) in msgs.iter().enumerate() {
        assert!(a.push(lsn(i as u64), m).expect("push").is_none());
        assert!(a.stats().memory_bytes <= work_mem as u64, "{:?}", a.stats());
    }
    let s = a.stats();
    assert_eq!(s.spilled_txns, 1, "only the large one spilled: {s:?}");
    assert_eq!(s.files, 1);
    assert_eq!(spill_files(dir.path()).len(), 1);
    assert!(s.disk_bytes < s.raw_bytes / 3, "lz4 on row text: {s:?}");
    // Commit the large one: its replay is exact, its stats say what it cost.
    match a
        .push(lsn(9999), &stream_commit(1, 10, 20, 30))
        .expect("push")
    {
        Some(Ready::Txn(mut t)) => {
            assert!(t.streamed);
            assert_eq!((t.commit_lsn.0, t.end_lsn.0, t.commit_time), (10, 20, 30));
            assert_eq!(t.stats.changes, 2000);
            assert!(t.stats.disk_bytes > 0 && t.stats.spilled_raw_bytes > 0);
            let got = drain(&mut t);
            let want: Vec<_> = (0..2000)
                .map(|i| insert(Some(1), 1, &row_text(i, 100)))
                .collect();
            assert_eq!(got, want);
            // Decoding a streamed payload knows about the subxid.
            let mut dec = Decoder::new(V2).expect("decoder");
            match t.decode(&mut dec, &got[0]).expect("decode") {
                Message::Insert(i) => assert_eq!(i.xid, Some(1)),
                m => panic!("{m:?}"),
            }
            assert_eq!(dec.stream_xid(), None, "the decoder's state is untouched");
            assert_eq!(
                a.stats().files,
                1,
                "the file lives as long as the transaction"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(a.stats().files, 0);
    assert!(spill_files(dir.path()).is_empty());
}

#[test]
fn first_segment_again_restarts_the_transaction() {
    for work_mem in [0, 1 << 20] {
        let dir = private_tempdir().expect("tempdir");
        let mut a = Assembler::open(config(dir.path(), work_mem, "zstd:1"), V2).expect("new");
        let mut msgs = vec![stream_start(5, true)];
        for i in 0..300 {
            msgs.push(insert(Some(5), 1, &row_text(i, 50)));
        }
        msgs.push(stream_stop());
        // Reconnect: the server decodes again from an earlier point.
        msgs.push(stream_start(5, true));
        let again: Vec<_> = (0..10)
            .map(|i| insert(Some(5), 1, &row_text(i + 7, 50)))
            .collect();
        msgs.extend(again.iter().cloned());
        msgs.push(stream_stop());
        msgs.push(stream_commit(5, 1, 2, 3));
        assert_eq!(run(&mut a, &msgs), vec![(5, again)], "work_mem {work_mem}");
        assert!(spill_files(dir.path()).is_empty());
    }
}

#[test]
fn non_streamed_transactions_and_messages() {
    let dir = private_tempdir().expect("tempdir");
    let mut a = Assembler::open(config(dir.path(), 0, "lz4"), V2).expect("new");
    let body = vec![
        relation(None, 1, "t"),
        insert(None, 1, b"x"),
        message(None, true, "p", b"in txn"),
        insert(None, 1, &row_text(1, 20_000)),
    ];
    assert!(a
        .push(lsn(1), &begin(0x50, 9, 42))
        .expect("begin")
        .is_none());
    for m in &body {
        assert!(a.push(lsn(2), m).expect("change").is_none());
    }
    match a.push(lsn(3), &commit(0x50, 0x60, 9)).expect("commit") {
        Some(Ready::Txn(mut t)) => {
            assert!(!t.streamed);
            assert_eq!(t.xid, 42);
            assert!(
                t.stats.disk_bytes > 0,
                "work_mem 0 spills even a plain transaction"
            );
            assert_eq!(drain(&mut t), body);
            let mut dec = Decoder::new(V2).expect("decoder");
            assert!(
                matches!(t.decode(&mut dec, &body[1]), Ok(Message::Insert(i)) if i.xid.is_none())
            );
        }
        other => panic!("{other:?}"),
    }
    let nt = message(None, false, "p", b"outside");
    match a.push(lsn(4), &nt).expect("message") {
        Some(Ready::NonTransactional(p)) => assert_eq!(p, nt),
        other => panic!("{other:?}"),
    }
    // A commit for a streamed xid that never sent a change is an empty transaction.
    match a.push(lsn(5), &stream_commit(77, 1, 2, 3)).expect("commit") {
        Some(Ready::Txn(mut t)) => assert!(drain(&mut t).is_empty()),
        other => panic!("{other:?}"),
    }
    // Aborts of unknown xids are tolerated.
    assert!(a
        .push(lsn(6), &stream_abort(78, 78))
        .expect("abort")
        .is_none());
    assert!(a
        .push(lsn(6), &stream_abort(78, 79))
        .expect("abort")
        .is_none());
}

#[test]
fn protocol_violations_name_the_lsn() {
    let dir = private_tempdir().expect("tempdir");
    let mut a = Assembler::open(config(dir.path(), 1 << 20, "lz4"), V2).expect("new");
    match a.push(lsn(0x1_0000_0010), &insert(None, 1, b"x")) {
        Err(
            e @ AssembleError::Protocol {
                lsn: l,
                violation: Violation::OutsideTransaction { tag: b'I' },
            },
        ) => {
            assert_eq!(l, lsn(0x1_0000_0010));
            assert!(e.to_string().contains("1/10"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    match a.push(lsn(0x20), &stream_stop()) {
        Err(AssembleError::Decode(e)) => assert_eq!(e.lsn, Some(lsn(0x20))),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        a.push(lsn(0x30), &commit(1, 2, 3)),
        Err(AssembleError::Protocol {
            violation: Violation::CommitWithoutBegin,
            ..
        })
    ));
    a.push(lsn(0x40), &begin(1, 2, 3)).expect("begin");
    assert!(matches!(
        a.push(lsn(0x50), &stream_start(4, true)),
        Err(AssembleError::Protocol {
            violation: Violation::StreamInsideTransaction { open: 3 },
            ..
        })
    ));
    // Each assembler in a directory of its own: one holds its directory while it lives.
    let mut c = Assembler::open(config(&dir.path().join("c"), 1 << 20, "lz4"), V2).expect("new");
    assert!(matches!(
        c.push(lsn(0x60), &stream_start(5, false)),
        Err(AssembleError::Protocol {
            violation: Violation::UnknownStream { xid: 5 },
            ..
        })
    ));
    let mut b = Assembler::open(config(&dir.path().join("b"), 1 << 20, "lz4"), V2).expect("new");
    b.push(lsn(1), &stream_start(4, true)).expect("start");
    assert!(matches!(
        b.push(lsn(2), &stream_commit(4, 1, 2, 3)),
        Err(AssembleError::Protocol {
            violation: Violation::EndInsideBlock { open: 4 },
            ..
        })
    ));
}

#[test]
fn unsupported_specs_are_refused() {
    let dir = private_tempdir().expect("tempdir");
    for spec in ["gzip", "xz", "snappy", "zstd:workers=2"] {
        assert!(
            matches!(
                Assembler::open(config(dir.path(), 0, spec), V2),
                Err(AssembleError::Spec { .. })
            ),
            "{spec}"
        );
    }
}

#[test]
fn leftover_files_of_this_store_are_removed_and_others_kept() {
    let dir = private_tempdir().expect("tempdir");
    std::fs::write(dir.path().join("pgcompress-spill-1-1.spill"), b"old").expect("write");
    std::fs::write(dir.path().join("notes.txt"), b"mine").expect("write");
    let _a = Assembler::open(config(dir.path(), 0, "lz4"), V2).expect("new");
    assert_eq!(spill_files(dir.path()), vec![dir.path().join("notes.txt")]);
}

/// A spilled transaction committed, its file damaged before the replay.
fn committed_on_disk(
    dir: &std::path::Path,
    spec: &str,
) -> (Assembler, CommittedTxn, std::path::PathBuf) {
    let mut a = Assembler::open(config(dir, 0, spec), V2).expect("new");
    let mut msgs = vec![stream_start(9, true)];
    for i in 0..5000 {
        msgs.push(insert(Some(9), 1, &row_text(i, 60)));
    }
    msgs.push(insert(Some(9), 1, &noise(3, 20_000)));
    msgs.push(stream_stop());
    for m in &msgs {
        a.push(lsn(1), m).expect("push");
    }
    let files = spill_files(dir);
    assert_eq!(files.len(), 1);
    match a.push(lsn(2), &stream_commit(9, 1, 2, 3)).expect("commit") {
        Some(Ready::Txn(t)) => (a, t, files[0].clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_flipped_byte_is_corrupt_with_path_and_offset() {
    for spec in ["none", "pglz", "lz4", "zstd:1"] {
        let len = {
            let dir = private_tempdir().expect("tempdir");
            let (_a, t, path) = committed_on_disk(dir.path(), spec);
            let len = std::fs::metadata(&path).expect("meta").len();
            drop(t);
            len
        };
        // Every position class: file header, record headers, record bodies.
        let step = (len / 40).max(1);
        let mut at = 0;
        while at < len {
            let dir = private_tempdir().expect("tempdir");
            let (_a, mut t, path) = committed_on_disk(dir.path(), spec);
            let mut bytes = std::fs::read(&path).expect("read");
            bytes[at as usize] ^= 0x10;
            std::fs::write(&path, &bytes).expect("write");
            let mut buf = Vec::new();
            let err = loop {
                match t.next_payload(&mut buf) {
                    Ok(true) => {}
                    Ok(false) => panic!("{spec}: flipped byte at {at} went unnoticed"),
                    Err(e) => break e,
                }
            };
            match &err {
                AssembleError::Corrupt {
                    path: p, offset, ..
                } => {
                    assert_eq!(p, &path);
                    assert!(
                        *offset <= at,
                        "{spec}: error at {offset}, flip at {at}: {err}"
                    );
                }
                other => panic!("{spec}: {other}"),
            }
            assert!(err.to_string().contains(&path.display().to_string()));
            // The replay stays stopped: nothing after a bad record comes out.
            assert!(matches!(
                t.next_payload(&mut buf),
                Err(AssembleError::Corrupt { .. })
            ));
            at += step;
        }
    }
}

#[test]
fn a_truncated_file_is_corrupt() {
    for spec in ["none", "lz4", "zstd:1"] {
        for cut in [10u64, 24, 37, 5000, 1] {
            let dir = private_tempdir().expect("tempdir");
            let (_a, mut t, path) = committed_on_disk(dir.path(), spec);
            let len = std::fs::metadata(&path).expect("meta").len();
            let keep = if cut == 1 { len - 1 } else { cut.min(len - 1) };
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(keep))
                .expect("truncate");
            let mut buf = Vec::new();
            let err = loop {
                match t.next_payload(&mut buf) {
                    Ok(true) => {}
                    Ok(false) => panic!("{spec}: cut at {keep} went unnoticed"),
                    Err(e) => break e,
                }
            };
            assert!(
                matches!(&err, AssembleError::Corrupt { path: p, .. } if *p == path),
                "{err}"
            );
        }
    }
}

/// The file is read back through the descriptor it was written with, not opened again by
/// name: removing the name does not lose the transaction.
#[test]
fn a_file_removed_by_name_is_still_replayed() {
    let dir = private_tempdir().expect("tempdir");
    let (_a, mut t, path) = committed_on_disk(dir.path(), "lz4");
    std::fs::remove_file(&path).expect("remove");
    assert_eq!(drain(&mut t).len(), 5001);
}

#[test]
fn incompressible_changes_are_stored_raw() {
    let dir = private_tempdir().expect("tempdir");
    let mut a = Assembler::open(config(dir.path(), 0, "lz4"), V2).expect("new");
    a.push(lsn(1), &stream_start(3, true)).expect("start");
    let mut raw = 0;
    for i in 0..200 {
        let m = insert(
            Some(3),
            1,
            &noise(i, if i % 10 == 0 { 30_000 } else { 300 }),
        );
        raw += m.len() as u64;
        a.push(lsn(1), &m).expect("push");
    }
    let s = a.stats();
    assert_eq!(s.raw_bytes, raw);
    // Headers only: 13 bytes a record, 2 a change, the file header.
    assert!(s.disk_bytes <= raw + raw / 100, "{s:?}");
}

#[test]
fn assembler_and_transactions_can_move_to_another_thread() {
    fn send<T: Send>() {}
    send::<Assembler>();
    send::<CommittedTxn>();
    send::<Ready>();
    send::<AssembleError>();
}

#[test]
fn many_spilled_transactions_at_once_share_the_stream_contexts() {
    // More open spilled transactions than live frames: the oldest give their encoder up and
    // start a new frame at their next record; every replay stays exact.
    for spec in ["lz4", "zstd:3"] {
        let dir = private_tempdir().expect("tempdir");
        let mut a = Assembler::open(config(dir.path(), 2000, spec), V2).expect("new");
        let xids: Vec<u32> = (1..=12).map(|i| i * 10).collect();
        let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); xids.len()];
        let mut first = vec![true; xids.len()];
        let mut msgs = Vec::new();
        for round in 0..40u64 {
            for (k, &x) in xids.iter().enumerate() {
                msgs.push(stream_start(x, std::mem::take(&mut first[k])));
                for j in 0..(5 + k as u64) {
                    let m = insert(Some(x), 1, &row_text(round * 1000 + j, 80));
                    want[k].push(m.clone());
                    msgs.push(m);
                }
                msgs.push(stream_stop());
            }
        }
        for &x in &xids {
            msgs.push(stream_commit(x, 1, 2, 3));
        }
        let got = run(&mut a, &msgs);
        let want: Replayed = xids.iter().copied().zip(want).collect();
        assert_eq!(got, want, "{spec}");
        let s = a.stats();
        assert_eq!(s.spilled_txns, 12, "{spec}: {s:?}");
        assert!(s.disk_written_bytes < s.raw_bytes / 2, "{spec}: {s:?}");
    }
}

/// A temporary directory closed to group and others, as a spill directory must be.
fn private_tempdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}
