//! Speed and effect of word coding ([`codec::words`]) on the text-holding streams of WAL
//! segments: for each file, the BlockData, MainData and Images streams are word-coded and
//! decoded through a 256 KiB window as get decodes them (best of five runs each, or of
//! `WORDS_TIMING_RUNS`), and the coded and raw streams
//! compressed with zstd:3 (the coded ones as a push compresses them).
//!
//! ```text
//! cargo run --release -p archive --example words_timing -- SEGMENT...
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use archive::pack::records_split;
use archive::walsplit::Stream;
use codec::{BlockCompressor, Spec};

/// The shortest of some runs of `f`, and its last result.
fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let runs = std::env::var("WORDS_TIMING_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5usize)
        .max(1);
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = std::hint::black_box(f());
        best = best.min(t.elapsed());
        last = Some(r);
    }
    (best, last.expect("at least one run"))
}

fn mb_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn main() -> Result<(), Box<dyn Error>> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        return Err("usage: words_timing SEGMENT...".into());
    }
    let spec: Spec = "zstd:3".parse()?;
    let mut c = BlockCompressor::new(&spec)?;
    // Coded bytes are compressed as a push compresses them.
    let mut zsize = |bytes: &[u8], coded: bool| -> Result<usize, Box<dyn Error>> {
        let mut out = Vec::new();
        if coded {
            c.compress_coded(bytes, &mut out)?;
        } else {
            c.compress(bytes, &mut out)?;
        }
        Ok(out.len())
    };
    println!(
        "{:<26} {:<11} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "file", "stream", "raw", "coded", "enc MB/s", "dec MB/s", "zstd raw", "zstd cod"
    );
    for path in &paths {
        let data = std::fs::read(path)?;
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        let (_, split, _) = records_split(&data).ok_or("does not split")?;
        for s in [Stream::BlockData, Stream::MainData, Stream::Images] {
            let raw = &split.streams[s as usize];
            let (te, coded) = best(|| codec::words::encode(raw));
            let zraw = zsize(raw, false)?;
            match &coded {
                None => println!(
                    "{:<26} {:<11} {:>9} {:>9} {:>8.0} {:>8} {:>9} {:>9}  ({:.2} ms)",
                    name,
                    s.name(),
                    raw.len(),
                    "declined",
                    mb_s(raw.len(), te),
                    "-",
                    zraw,
                    "-",
                    te.as_secs_f64() * 1e3
                ),
                Some(coded) => {
                    // Decoded as get and the self-check decode it: through a window of
                    // 256 KiB used again and again, never into a buffer of the whole stream.
                    let mut window = vec![0u8; 256 << 10];
                    let (td, back) = best(|| -> Result<bool, codec::words::WordsError> {
                        let mut r = codec::words::Reader::new(coded, raw.len())?;
                        let mut at = 0;
                        let mut same = true;
                        loop {
                            let n = r.read(&mut window)?;
                            if n == 0 {
                                return Ok(same && at == raw.len());
                            }
                            same &= raw.get(at..at + n) == Some(&window[..n]);
                            at += n;
                        }
                    });
                    if !back? {
                        return Err(format!("{name} {}: decode(encode(x)) != x", s.name()).into());
                    }
                    println!(
                        "{:<26} {:<11} {:>9} {:>9} {:>8.0} {:>8.0} {:>9} {:>9}",
                        name,
                        s.name(),
                        raw.len(),
                        coded.len(),
                        mb_s(raw.len(), te),
                        mb_s(raw.len(), td),
                        zraw,
                        zsize(coded, true)?
                    );
                }
            }
        }
    }
    Ok(())
}
