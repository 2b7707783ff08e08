//! How fast the column coding runs: a file of delimited rows (TPC-H CSV) coded and decoded
//! in the link's 128 KiB chunks, each chunk checked to come back.
//!
//! ```text
//! cargo run --release -p codec --example columns_timing -- lineitem.csv
//! ```

use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let data = std::fs::read(path).expect("read");
    let data = &data[..data.len().min(64 << 20)];
    let t = Instant::now();
    let mut coded = Vec::new();
    for c in data.chunks(128 << 10) {
        coded.push(codec::columns::encode(c).expect("coded"));
    }
    let e = t.elapsed();
    let t = Instant::now();
    for (c, k) in data.chunks(128 << 10).zip(&coded) {
        let back = codec::columns::decode(k, c.len()).expect("decoded");
        assert!(back == c);
    }
    let d = t.elapsed();
    let mb = data.len() as f64 / 1e6;
    println!(
        "encode {:.0} MB/s, decode {:.0} MB/s",
        mb / e.as_secs_f64(),
        mb / d.as_secs_f64()
    );
}
