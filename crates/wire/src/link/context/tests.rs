use super::*;

fn spec(text: &str) -> Spec {
    text.parse().expect("spec")
}

/// Text-like data that compresses, long enough to fill any window tried here.
fn sample(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut i: u64 = 0;
    while out.len() < len {
        i += 1;
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
        out.extend_from_slice(
            format!("{i}\trow {x}\t2024-01-{:02}\tsome text\n", i % 28 + 1).as_bytes(),
        );
    }
    out.truncate(len);
    out
}

/// Both contexts after `data` went through them in 128 KiB chunks; returns their sizes and
/// the compressed length.
fn run(spec: &Spec, data: &[u8]) -> (usize, usize, usize) {
    let mut c = Compressor::new(spec).expect("ctx").expect("zstd");
    let mut d = Decompressor::new(spec).expect("dctx").expect("zstd");
    let mut link = 0;
    let mut back = Vec::new();
    for piece in data.chunks(super::super::CHUNK_RAW_MAX) {
        let mut out = Vec::new();
        c.write(piece, &mut out).expect("write");
        c.flush(&mut out).expect("flush");
        link += out.len();
        d.chunk(&out, &mut back, piece.len()).expect("chunk");
    }
    assert_eq!(back, data);
    (c.memory(), d.memory(), link)
}

#[test]
fn zstd1_contexts_of_one_half_stay_under_1_75_mib() {
    let data = sample(8 << 20);
    let (c, d, link) = run(&spec("zstd:1"), &data);
    eprintln!(
        "zstd:1 window 2^{DEFAULT_WINDOW_LOG}: compressor {c} B, decompressor {d} B, ratio {:.2}",
        data.len() as f64 / link as f64
    );
    // One half holds one compressor and one decompressor per connection: together under
    // 1.75 MiB leaves room for the buffers of the pump within 2 MiB.
    assert!(c + d < 7 << 18, "compressor {c} + decompressor {d}");
    assert!(
        c < 1 << 20 && d < 1 << 20,
        "compressor {c}, decompressor {d}"
    );
}

#[test]
fn an_explicit_long_window_is_honoured_and_costs_its_memory() {
    let data = sample(12 << 20);
    let (c_default, _, _) = run(&spec("zstd:1"), &data);
    let (c_long, d_long, _) = run(&spec("zstd:1,long=23"), &data);
    assert!(c_long > c_default + (4 << 20), "{c_long} vs {c_default}");
    assert!(d_long > 8 << 20, "{d_long}");
}

#[test]
fn window_trade_off() {
    // Not an assertion on the ratio (data dependent): prints what each window costs and
    // gains, the figures docs/TUNNEL.md quotes.
    let data = sample(8 << 20);
    for log in 17..=23 {
        let (c, d, link) = run(&spec(&format!("zstd:1,long={log}")), &data);
        eprintln!(
            "window 2^{log}: compressor {c} B, decompressor {d} B, ratio {:.3}",
            data.len() as f64 / link as f64
        );
        assert!(c > 1 << log && d > 1 << log);
    }
}

#[test]
fn a_frame_asking_for_a_window_above_the_cap_is_refused() {
    // A hostile peer's frame declaring a 2^27 window: refused before any window is allocated.
    let mut enc = CCtx::create();
    enc.set_parameter(CParameter::WindowLog(27)).expect("wlog");
    enc.set_parameter(CParameter::CompressionLevel(1))
        .expect("level");
    let data = sample(1 << 16);
    let mut out = vec![0u8; 1 << 17];
    let mut outb = OutBuffer::around(&mut out[..]);
    let mut inb = InBuffer::around(&data);
    enc.compress_stream2(&mut outb, &mut inb, ZSTD_EndDirective::ZSTD_e_flush)
        .expect("compress");
    let frame = outb.as_slice().to_vec();
    let mut d = Decompressor::new(&spec("zstd:1"))
        .expect("dctx")
        .expect("zstd");
    let mut back = Vec::new();
    let err = d.chunk(&frame, &mut back, data.len()).expect_err("refused");
    assert!(err.contains("too much memory"), "{err}");
    assert!(d.memory() < 1 << 20, "{}", d.memory());
}

#[test]
fn the_top_of_the_auto_ladder_stays_under_8_mib_per_half() {
    // `auto` reaches its wide-window rungs only on a slow link; a connection there holds the
    // top rung's compressor and a decompressor of the same window on each half.
    let data = sample(8 << 20);
    let top = crate::link::auto::LADDER[crate::link::auto::LADDER.len() - 1].spec();
    let (c, d, link) = run(&top, &data);
    eprintln!(
        "{top}: compressor {c} B, decompressor {d} B, ratio {:.2}",
        data.len() as f64 / link as f64
    );
    assert!(d > 1 << crate::link::auto::WIDE_WINDOW_LOG, "{d}");
    assert!(c + d < 8 << 20, "compressor {c} + decompressor {d}");
}
