//! Where `archive push` spends its time on one segment: each stage of packing timed apart.
//!
//! ```text
//! cargo run --release -p archive --example pack_timing -- zstd:3 SEGMENT
//! ```

use std::error::Error;
use std::time::Instant;

use archive::pack::records_split;
use archive::walsplit::Stream;
use codec::{BlockCompressor, Spec};
use sha2::{Digest, Sha256};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: pack_timing METHOD SEGMENT";
    let spec: Spec = args.next().ok_or(usage)?.parse()?;
    let path = args.next().ok_or(usage)?;
    let data = std::fs::read(&path)?;
    let name = std::path::Path::new(&path)
        .file_name()
        .ok_or(usage)?
        .to_string_lossy()
        .into_owned();
    let t = Instant::now();
    let _ = Sha256::digest(&data);
    println!(
        "sha256            {:>8.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let (_, split, _) = records_split(&data).ok_or("does not split")?;
    println!(
        "split             {:>8.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut c = BlockCompressor::new(&spec)?;
    let mut out = Vec::new();
    for s in [Stream::BlockData, Stream::Images, Stream::BlockHeaders] {
        let raw = &split.streams[s as usize];
        let t = Instant::now();
        let coded = codec::words::encode(raw);
        let te = t.elapsed();
        let t = Instant::now();
        c.compress(coded.as_deref().unwrap_or(raw), &mut out)?;
        let tc = t.elapsed();
        let t = Instant::now();
        if let Some(coded) = &coded {
            codec::words::decode(coded, raw.len())?;
        }
        println!(
            "{:<16} words {:>6.1} ms ({}), compress {:>6.1} ms, words decode {:>6.1} ms",
            s.name(),
            te.as_secs_f64() * 1e3,
            coded.as_ref().map_or("declined".to_string(), |c| format!(
                "{} -> {}",
                raw.len(),
                c.len()
            )),
            tc.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let t = Instant::now();
    let packed = archive::pack(&name, &data, &spec)?;
    println!(
        "whole pack        {:>8.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    archive::decode(&packed.bytes)?;
    println!(
        "whole decode      {:>8.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
