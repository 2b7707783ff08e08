//! Where `archive push` spends its time on one segment: each stage of packing timed apart,
//! with the page faults it took (fresh memory that the kernel zeroes is a large share of the
//! CPU of a push).
//!
//! ```text
//! cargo run --release -p archive --example pack_timing -- zstd:3 SEGMENT
//! ```

use std::error::Error;
use std::time::Instant;

use archive::input::Input;
use archive::pack::records_split;
use archive::walsplit::Stream;
use codec::{BlockCompressor, Spec};
use sha2::{Digest, Sha256};

/// Minor page faults of this process so far (from `/proc/self/stat`; 0 where there is none).
fn faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // The fields after the command name (in parentheses): minflt is the eighth.
            let rest = s.rsplit_once(')')?.1;
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Runs `f`, then prints its time and page faults under `what`.
fn stage<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (t, pf) = (Instant::now(), faults());
    let out = f();
    println!(
        "{what:<44} {:>7.1} ms {:>7} faults",
        t.elapsed().as_secs_f64() * 1e3,
        faults() - pf
    );
    out
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: pack_timing METHOD SEGMENT";
    let spec: Spec = args.next().ok_or(usage)?.parse()?;
    let path = args.next().ok_or(usage)?;
    let name = std::path::Path::new(&path)
        .file_name()
        .ok_or(usage)?
        .to_string_lossy()
        .into_owned();
    // A push reads the file a window at a time, once for its digests and once for the split.
    let file = std::fs::File::open(&path)?;
    let input = Input::File(&file, usize::try_from(file.metadata()?.len())?);
    stage("read once through the window", || {
        input.for_each_window(|_| ())
    })?;
    let mut sha = Sha256::new();
    stage("sha256 through the window", || {
        input.for_each_window(|w| sha.update(w))
    })?;
    // The stages below work on the segment in memory; reading it whole is not what a push
    // does (its faults are shown for comparison).
    let data = stage("read whole (not done by a push)", || std::fs::read(&path))?;
    let (_, split, _) = stage("split", || records_split(&data)).ok_or("does not split")?;
    let mut c = BlockCompressor::new(&spec)?;
    let mut out = Vec::new();
    for s in [Stream::BlockData, Stream::Images, Stream::BlockHeaders] {
        let raw = &split.streams[s as usize];
        let coded = stage(&format!("{}: words", s.name()), || {
            codec::words::encode(raw)
        });
        if let Some(coded) = &coded {
            println!("  coded {} -> {} bytes", raw.len(), coded.len());
        }
        stage(&format!("{}: compress", s.name()), || match &coded {
            Some(coded) => c.compress_coded(coded, &mut out),
            None => c.compress(raw, &mut out),
        })?;
        if let Some(coded) = &coded {
            stage(&format!("{}: words decode", s.name()), || {
                codec::words::decode(coded, raw.len())
            })?;
        }
    }
    drop(split);
    let packed = stage("whole pack (split, compress, self-check)", || {
        archive::pack(&name, &data, &spec)
    })?;
    stage("whole decode", || archive::decode(&packed.bytes))?;
    let repo_dir = tempfile::tempdir()?;
    let repo = archive::repo::Repository::local(repo_dir.path());
    repo.init(&archive::Identity::of_segment(&data)?)?;
    stage("whole push to a local repository (fsync included)", || {
        repo.push(std::path::Path::new(&path), &name, &spec)
    })?;
    Ok(())
}
