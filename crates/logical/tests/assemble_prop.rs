//! Random interleavings of streamed transactions, savepoint rollbacks, top-level aborts,
//! restarts and plain transactions: the assembler must replay exactly the surviving changes,
//! in order, whatever the memory limit and compression, against a model that keeps everything
//! in one list per transaction.

mod common;

use common::*;
use logical::{Assembler, AssemblerConfig, Ready};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A change of transaction `slot` in subtransaction `sub` (0 = top level).
    Change {
        slot: usize,
        sub: u32,
        len: usize,
        large: bool,
    },
    /// Rollback to the savepoint of `sub` in `slot`.
    SubAbort {
        slot: usize,
        sub: u32,
    },
    Commit {
        slot: usize,
    },
    Abort {
        slot: usize,
    },
    /// The server decodes `slot` again from its start (after a reconnect).
    Restart {
        slot: usize,
    },
    /// A whole non-streamed transaction of `n` changes.
    Plain {
        n: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..3usize, 0..4u32, 1..400usize, prop::bool::weighted(0.05))
            .prop_map(|(slot, sub, len, large)| Op::Change { slot, sub, len, large }),
        2 => (0..3usize, 1..4u32).prop_map(|(slot, sub)| Op::SubAbort { slot, sub }),
        1 => (0..3usize).prop_map(|slot| Op::Commit { slot }),
        1 => (0..3usize).prop_map(|slot| Op::Abort { slot }),
        1 => (0..3usize).prop_map(|slot| Op::Restart { slot }),
        1 => (0..20usize).prop_map(|n| Op::Plain { n }),
    ]
}

#[derive(Default)]
struct Slot {
    xid: u32,
    started: bool,
    /// (subxid, payload) of the surviving changes.
    model: Vec<(u32, Vec<u8>)>,
}

struct Session {
    a: Assembler,
    work_mem: u64,
    slots: Vec<Slot>,
    open: Option<usize>,
    next_xid: u32,
    counter: u64,
    lsn: u64,
}

impl Session {
    fn push(&mut self, msg: &[u8]) -> Option<(u32, Vec<Vec<u8>>)> {
        self.lsn += 1;
        let r = self.a.push(lsn(self.lsn), msg).expect("push");
        assert!(self.a.stats().memory_bytes <= self.work_mem);
        match r {
            Some(Ready::Txn(mut t)) => {
                let mut out = Vec::new();
                let mut buf = Vec::new();
                while t.next_payload(&mut buf).expect("replay") {
                    out.push(buf.clone());
                }
                Some((t.xid, out))
            }
            Some(Ready::NonTransactional(m)) => panic!("no such message was sent: {m:?}"),
            None => None,
        }
    }

    fn stop(&mut self) {
        if self.open.take().is_some() {
            assert!(self.push(&stream_stop()).is_none());
        }
    }

    fn fresh(&mut self, slot: usize) {
        self.next_xid += 1;
        self.slots[slot] = Slot {
            xid: self.next_xid * 100,
            ..Slot::default()
        };
    }

    fn commit(&mut self, slot: usize) {
        self.stop();
        let xid = self.slots[slot].xid;
        let want: Vec<_> = self.slots[slot]
            .model
            .iter()
            .map(|(_, p)| p.clone())
            .collect();
        let got = self.push(&stream_commit(xid, 1, 2, 3));
        assert_eq!(got, Some((xid, want)));
        self.fresh(slot);
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Change {
                slot,
                sub,
                len,
                large,
            } => {
                if self.open != Some(slot) {
                    self.stop();
                    let s = &mut self.slots[slot];
                    let first = !s.started;
                    s.started = true;
                    let xid = s.xid;
                    assert!(self.push(&stream_start(xid, first)).is_none());
                    self.open = Some(slot);
                }
                let xid = self.slots[slot].xid;
                let subxid = if sub == 0 { xid } else { xid + sub };
                self.counter += 1;
                let text = if large {
                    noise(self.counter, 9000 + len * 40)
                } else {
                    row_text(self.counter, len)
                };
                let m = insert(Some(subxid), self.counter as u32, &text);
                assert!(self.push(&m).is_none());
                self.slots[slot].model.push((subxid, m));
            }
            Op::SubAbort { slot, sub } => {
                self.stop();
                let xid = self.slots[slot].xid;
                assert!(self.push(&stream_abort(xid, xid + sub)).is_none());
                let model = &mut self.slots[slot].model;
                if let Some(i) = model.iter().position(|(x, _)| *x == xid + sub) {
                    model.truncate(i);
                }
            }
            Op::Commit { slot } => self.commit(slot),
            Op::Abort { slot } => {
                self.stop();
                let xid = self.slots[slot].xid;
                assert!(self.push(&stream_abort(xid, xid)).is_none());
                self.fresh(slot);
            }
            Op::Restart { slot } => {
                if self.slots[slot].started {
                    self.stop();
                    let xid = self.slots[slot].xid;
                    assert!(self.push(&stream_start(xid, true)).is_none());
                    self.open = Some(slot);
                    self.slots[slot].model.clear();
                }
            }
            Op::Plain { n } => {
                self.stop();
                self.next_xid += 1;
                let xid = self.next_xid * 100;
                assert!(self.push(&begin(1, 2, xid)).is_none());
                let mut want = Vec::new();
                for _ in 0..n {
                    self.counter += 1;
                    let m = insert(None, self.counter as u32, &row_text(self.counter, 70));
                    assert!(self.push(&m).is_none());
                    want.push(m);
                }
                assert_eq!(self.push(&commit(1, 2, 3)), Some((xid, want)));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn replay_is_exactly_the_surviving_changes(
        ops in prop::collection::vec(op(), 1..160),
        work_mem in prop_oneof![Just(0usize), Just(700), Just(20_000), Just(1 << 20)],
        spec in prop_oneof![Just("none"), Just("pglz"), Just("lz4"), Just("zstd:1")],
    ) {
        let dir = private_tempdir().expect("tempdir");
        let mut config = AssemblerConfig::new(dir.path());
        config.work_mem = work_mem;
        config.spec = spec.parse().expect("spec");
        let mut s = Session {
            a: Assembler::open(config, V2).expect("new"),
            work_mem: work_mem as u64,
            slots: Vec::new(),
            open: None,
            next_xid: 0,
            counter: 0,
            lsn: 0,
        };
        for slot in 0..3 {
            s.slots.push(Slot::default());
            s.fresh(slot);
        }
        for op in &ops {
            s.apply(op);
        }
        for slot in 0..3 {
            s.commit(slot);
        }
        let st = s.a.stats();
        prop_assert_eq!(st.open_txns, 0);
        prop_assert_eq!(st.memory_bytes, 0);
        prop_assert_eq!(st.files, 0);
        prop_assert_eq!(st.disk_bytes, 0);
        // Nothing left but the directory's lock.
        let left = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter(|e| !e.as_ref().expect("entry").path().ends_with("pgcompress-spill.lock"))
            .count();
        prop_assert_eq!(left, 0);
    }
}

/// A temporary directory closed to group and others, as a spill directory must be.
fn private_tempdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}
