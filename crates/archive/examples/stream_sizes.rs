//! Where the bytes of the WAL records transform go: splits segments, checks that each joins
//! back byte for byte, and prints every stream's size raw and compressed with a method.
//!
//! ```text
//! cargo run --release -p archive --example stream_sizes -- zstd:3 /path/to/pg_wal/0000*
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use archive::walsplit::{join, split, Stream, STREAMS};
use codec::{BlockCompressor, Spec};
use wal::page::PageHeader;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: stream_sizes METHOD SEGMENT...";
    let spec: Spec = args.next().ok_or(usage)?.parse()?;
    let paths: Vec<String> = args.collect();
    if paths.is_empty() {
        return Err(usage.into());
    }
    let mut comp = BlockCompressor::new(&spec)?;
    let (mut raw, mut stored) = ([0usize; STREAMS], [0usize; STREAMS]);
    let (mut total_in, mut total_out) = (0usize, 0usize);
    let (mut t_split, mut t_join) = (Duration::ZERO, Duration::ZERO);
    let mut block = Vec::new();
    for path in &paths {
        let data = std::fs::read(path)?;
        let first = PageHeader::parse(&data).ok_or_else(|| format!("{path}: not WAL"))?;
        let t = Instant::now();
        let s = split(&data, first.pageaddr.0).ok_or_else(|| format!("{path}: does not split"))?;
        t_split += t.elapsed();
        let t = Instant::now();
        let back = join(first.pageaddr.0, data.len() as u64, &s.info, &s.streams)?;
        t_join += t.elapsed();
        if back != data {
            return Err(format!("{path}: join gave different bytes").into());
        }
        // STREAM_SIZES_DUMP=DIR writes each segment's streams there, for other compressors.
        if let Ok(dir) = std::env::var("STREAM_SIZES_DUMP") {
            let base = std::path::Path::new(path)
                .file_name()
                .ok_or("no file name")?;
            for (st, bytes) in Stream::ALL.iter().zip(&s.streams) {
                let name = format!("{}.{}", base.to_string_lossy(), *st as usize);
                std::fs::write(std::path::Path::new(&dir).join(name), bytes)?;
            }
        }
        for (i, bytes) in s.streams.iter().enumerate() {
            comp.compress(bytes, &mut block)?;
            raw[i] += bytes.len();
            stored[i] += block.len();
            total_out += block.len();
        }
        total_in += data.len();
    }
    for s in Stream::ALL {
        let i = s as usize;
        println!("{:>16} {:>12} -> {:>10}", s.name(), raw[i], stored[i]);
    }
    println!(
        "{} segment(s), {total_in} -> {total_out} bytes ({:.2}x) with {spec}; split {t_split:?}, join {t_join:?}",
        paths.len(),
        total_in as f64 / total_out.max(1) as f64
    );
    Ok(())
}
