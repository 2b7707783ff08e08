//! Our side of `bench spill`: the streamed pgoutput of a workload, as captured from the server, pushed
//! through [`logical::Assembler`] with one spill compression, and every committed transaction replayed
//! from its spill file, decoded and written as JSON lines by `logical recv`'s writer
//! ([`logical::output::JsonLines`]) into a file (not synced: durability is not what is measured).

use super::copy::{Change, CopyReader};
use crate::error::{Error, IoContext, Result};
use codec::Spec;
use logical::output::{JsonLines, TxnInfo};
use logical::{Assembler, AssemblerConfig, Decoder, Lsn, Message, Options, Ready, Streaming};
use serde::Serialize;
use std::io::{BufReader, Write as _};
use std::path::Path;
use std::time::Instant;

/// What one spill compression did with one workload.
#[derive(Clone, Debug, Serialize)]
pub struct OursResult {
    /// The spill compression (`none`, `lz4`, `zstd:1`, ...).
    pub spec: String,
    /// pgoutput bytes of every message the assembler stored (changes, Relation, Type), spilled or not.
    pub received_bytes: u64,
    /// Of them, the bytes that went to spill files (above `--work-mem`), before compression: the raw change
    /// bytes the spill is set against.
    pub raw_bytes: u64,
    /// Bytes written to spill files, file and record headers included.
    pub disk_bytes: u64,
    /// `disk_bytes / raw_bytes`: below 1 the spill is smaller than the changes.
    pub ratio: f64,
    /// The most bytes in spill files at once.
    pub peak_disk_bytes: u64,
    /// Transactions that committed.
    pub txns: u64,
    /// Of them, those spilled to a file.
    pub spilled_txns: u64,
    /// The largest committed transaction's raw change bytes.
    pub largest_txn_raw_bytes: u64,
    /// JSON lines written: one per change (a Truncate one per table).
    pub changes: u64,
    /// Of them, inserts.
    pub inserts: u64,
    /// Bytes of JSON lines written.
    pub output_bytes: u64,
    /// Wall seconds from the first payload pushed to the last change replayed, decoded and written.
    pub decode_s: f64,
    /// CPU seconds (user and system) the decoding thread spent over the same span, when the system says
    /// (`/proc/thread-self/schedstat`): unlike `decode_s`, unmoved by other processes on a busy machine.
    pub decode_cpu_s: Option<f64>,
    /// The consumer's peak resident memory during this replay (`VmHWM` after resetting it), when the
    /// system lets us reset and read it.
    pub peak_rss_bytes: Option<u64>,
}

/// Pushes the captured stream in `capture` through an assembler with `spec` and `work_mem` (spilling into
/// `spill_dir`), replays, decodes and writes every committed transaction as JSON lines into `output`, and
/// counts what it saw.
pub fn assemble(
    capture: &Path,
    spec: Spec,
    work_mem: usize,
    spill_dir: &Path,
    output: &Path,
) -> Result<OursResult> {
    let options = Options {
        proto_version: super::server::PROTO_VERSION,
        streaming: Streaming::On,
    };
    let file = std::fs::File::open(capture).io(|| format!("opening {}", capture.display()))?;
    let rss_reset = reset_peak_rss();
    let cpu_began = thread_cpu_s();
    let began = Instant::now();
    let mut reader = CopyReader::new(BufReader::with_capacity(1 << 20, file))
        .io(|| format!("reading {}", capture.display()))?;
    let mut assembler = Assembler::open(
        AssemblerConfig {
            work_mem,
            spill_dir: spill_dir.to_path_buf(),
            spec,
        },
        options,
    )?;
    let mut decoder = Decoder::new(options)?;
    let mut change = Change {
        lsn: 0,
        payload: Vec::new(),
    };
    let mut buf = Vec::new();
    let mut json = JsonLines::new(false);
    let mut lines = Vec::with_capacity(1 << 16);
    let out_file = std::fs::File::create(output).io(|| format!("creating {}", output.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out_file);
    let mut r = OursResult {
        spec: spec.to_string(),
        received_bytes: 0,
        raw_bytes: 0,
        disk_bytes: 0,
        ratio: 0.0,
        peak_disk_bytes: 0,
        txns: 0,
        spilled_txns: 0,
        largest_txn_raw_bytes: 0,
        changes: 0,
        inserts: 0,
        output_bytes: 0,
        decode_s: 0.0,
        decode_cpu_s: None,
        peak_rss_bytes: None,
    };
    while reader
        .next_into(&mut change)
        .io(|| format!("reading {}", capture.display()))?
    {
        let ready = assembler.push(Lsn(change.lsn), &change.payload)?;
        r.peak_disk_bytes = r.peak_disk_bytes.max(assembler.stats().disk_bytes);
        let Some(Ready::Txn(mut txn)) = ready else {
            continue;
        };
        r.txns += 1;
        r.spilled_txns += u64::from(txn.stats.disk_bytes > 0);
        r.largest_txn_raw_bytes = r.largest_txn_raw_bytes.max(txn.stats.raw_bytes);
        let info = TxnInfo {
            xid: txn.xid,
            commit_lsn: txn.commit_lsn,
            end_lsn: txn.end_lsn,
            commit_time: txn.commit_time,
        };
        while txn.next_payload(&mut buf)? {
            let msg = txn.decode(&mut decoder, &buf)?;
            r.inserts += u64::from(matches!(msg, Message::Insert(_)));
            r.changes += json.change(&info, &msg, &mut lines)? as u64;
            if lines.len() >= 1 << 16 {
                r.output_bytes += lines.len() as u64;
                out.write_all(&lines)
                    .io(|| format!("writing {}", output.display()))?;
                lines.clear();
            }
        }
    }
    r.output_bytes += lines.len() as u64;
    out.write_all(&lines)
        .and_then(|()| out.flush())
        .io(|| format!("writing {}", output.display()))?;
    r.decode_s = began.elapsed().as_secs_f64();
    r.decode_cpu_s = cpu_began.zip(thread_cpu_s()).map(|(a, b)| b - a);
    let stats = assembler.stats();
    if stats.open_txns != 0 {
        return Err(Error::Internal(
            "transactions were still open at the end of the decoded stream",
        ));
    }
    r.received_bytes = stats.received_bytes;
    r.raw_bytes = stats.raw_bytes;
    r.disk_bytes = stats.disk_written_bytes;
    r.ratio = r.disk_bytes as f64 / r.raw_bytes.max(1) as f64;
    if rss_reset {
        r.peak_rss_bytes = peak_rss();
    }
    Ok(r)
}

/// CPU seconds the calling thread has run, user and system (the first field of
/// `/proc/thread-self/schedstat`, in nanoseconds; Linux 3.17+ with scheduler statistics).
pub fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Resets this process's `VmHWM` to its current resident size (`echo 5 > /proc/self/clear_refs`, Linux
/// 4.0+); false when the system does not allow it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// This process's peak resident memory (`VmHWM` in /proc/self/status), in bytes.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let Some(a) = thread_cpu_s() else {
            return; // no scheduler statistics on this system
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        let b = thread_cpu_s().expect("read once, readable again");
        let mut x = 0u64;
        let spin = Instant::now();
        while spin.elapsed().as_millis() < 200 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let c = thread_cpu_s().expect("readable");
        assert!(b - a < 0.1, "asleep for 0.2 s, {} s of CPU", b - a);
        assert!(c - b > 0.02, "spun for 0.2 s, {} s of CPU", c - b);
    }

    #[test]
    fn peak_rss_follows_what_is_touched() {
        let base = peak_rss().expect("VmHWM on Linux");
        let big = vec![1u8; 64 << 20];
        let high = peak_rss().expect("VmHWM on Linux");
        assert!(high >= base + (60 << 20), "{base} then {high}");
        assert_eq!(std::hint::black_box(&big)[12345], 1);
        drop(big);
        if reset_peak_rss() {
            let after = peak_rss().expect("VmHWM on Linux");
            assert!(
                after + (32 << 20) < high,
                "{high} then {after} after the reset"
            );
        }
    }
}
