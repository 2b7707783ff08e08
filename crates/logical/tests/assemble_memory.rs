//! Memory stays bounded while a large streamed transaction goes through the assembler and is
//! replayed: the process's peak resident size grows by about work_mem, not by the size of the
//! transaction. One test in its own binary, so that no other test moves the peak.

mod common;

use std::time::Instant;

use common::*;
use logical::{Assembler, AssemblerConfig, Ready};

/// `VmHWM` (peak resident set) of this process, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

#[test]
fn a_large_streamed_transaction_keeps_memory_bounded() {
    const ROWS: u64 = 1_500_000;
    let work_mem = 4 << 20;
    for spec in ["lz4", "zstd:1"] {
        let dir = private_tempdir().expect("tempdir");
        let mut config = AssemblerConfig::new(dir.path());
        config.work_mem = work_mem;
        config.spec = spec.parse().expect("spec");
        let mut a = Assembler::open(config, V2).expect("new");
        let row = |i: u64| insert(Some(1), 16384, format!("Hello number n°{i}").as_bytes());
        let before = peak_rss();
        let start = Instant::now();
        let mut raw = 0u64;
        for block in 0..ROWS / 10_000 {
            a.push(lsn(block), &stream_start(1, block == 0))
                .expect("start");
            for i in block * 10_000..(block + 1) * 10_000 {
                let m = row(i);
                raw += m.len() as u64;
                a.push(lsn(i), &m).expect("push");
            }
            a.push(lsn(block), &stream_stop()).expect("stop");
        }
        let pushed = start.elapsed();
        let s = a.stats();
        assert!(s.memory_bytes <= work_mem as u64);
        let Some(Ready::Txn(mut t)) = a.push(lsn(1), &stream_commit(1, 5, 6, 7)).expect("commit")
        else {
            panic!("no transaction");
        };
        let start = Instant::now();
        let mut buf = Vec::new();
        let mut n = 0;
        while t.next_payload(&mut buf).expect("replay") {
            assert_eq!(buf, row(n));
            n += 1;
        }
        let replayed = start.elapsed();
        assert_eq!(n, ROWS);
        let grew = peak_rss().saturating_sub(before);
        println!(
            "{spec}: {raw} raw bytes -> {} on disk ({:.3}x); push {:.0} MB/s, replay {:.0} MB/s; peak RSS grew {} KiB",
            t.stats.disk_bytes,
            t.stats.disk_bytes as f64 / raw as f64,
            raw as f64 / pushed.as_secs_f64() / 1e6,
            raw as f64 / replayed.as_secs_f64() / 1e6,
            grew / 1024
        );
        // The transaction is ~70 MB; memory may grow by work_mem plus codec contexts and
        // buffers, never by the transaction.
        assert!(
            grew < 32 << 20,
            "{spec}: peak RSS grew by {grew} bytes for {raw} raw"
        );
    }
}

/// A temporary directory closed to group and others, as a spill directory must be.
fn private_tempdir() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}
