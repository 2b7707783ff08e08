//! Times the stages of packing segments: `cargo run --release --example packtime FILE...`.
use std::time::Instant;
fn main() {
    let spec: codec::Spec = std::env::var("SPEC")
        .unwrap_or("zstd:level=5".into())
        .parse()
        .expect("spec");
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path).expect("read");
        let t = Instant::now();
        let layout = archive::pack::wal_layout(&data);
        let t_layout = t.elapsed();
        let t = Instant::now();
        let p = archive::pack(
            std::path::Path::new(&path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("x"),
            &data,
            &spec,
        )
        .expect("pack");
        let t_pack = t.elapsed();
        let t = Instant::now();
        let _ = archive::decode(&p.bytes).expect("decode");
        let t_dec = t.elapsed();
        println!(
            "{path}: layout {:?} {:?}; pack {:?}; decode {:?}; {} -> {}",
            layout.map(|l| l.1),
            t_layout,
            t_pack,
            t_dec,
            data.len(),
            p.bytes.len()
        );
    }
}
