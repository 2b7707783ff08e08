//! Data that does not compress: falling back to none and probing again.

use super::*;

#[test]
fn incompressible_data_falls_back_within_one_window() {
    let mut p = compressing();
    // 64 KiB pieces that do not shrink (chunk framing makes them grow a little).
    let piece = 64 * 1024;
    let mut compressed = 0;
    while p.level() != Level::None {
        let o = obs(&p, 1, piece, piece + 20);
        compressed += o.chunk_raw;
        p.observe(&o);
        assert!(compressed <= T.ratio_window, "{compressed}");
    }
    assert_eq!(compressed, T.ratio_window);
}

#[test]
fn data_that_saves_five_percent_keeps_compressing() {
    let mut p = compressing();
    for _ in 0..1000 {
        let mut o = obs(&p, 1, 100 * 1024, 95 * 1024);
        o.write_wait = MS * 3 / 10; // the link neither the limit nor idle
        assert_eq!(p.observe(&o), None);
    }
    let mut q = compressing();
    let mut fell = false;
    for _ in 0..20 {
        let mut o = obs(&q, 1, 100 * 1024, 95 * 1024 + 1);
        o.write_wait = MS * 3 / 10;
        fell |= q.observe(&o).is_some();
    }
    assert!(fell);
}

/// Random bytes for a long time: the bytes compressed (the probes) stay a small bounded
/// share, the waits double up to their cap, and every probe goes back to the level left.
#[test]
fn probes_of_incompressible_data_cost_a_bounded_share() {
    let mut p = compressing();
    let piece = 64 * 1024u64;
    let total = 4u64 << 30;
    let (mut sent, mut compressed, mut probes) = (0u64, 0u64, 0u32);
    let mut since_fallback = 0u64;
    let mut waits = Vec::new();
    while sent < total {
        let o = obs(&p, 1, piece, piece + 20);
        sent += piece;
        compressed += o.chunk_raw;
        since_fallback += piece;
        match p.observe(&o).map(|s| s.to_string()).as_deref() {
            Some("none") => since_fallback = 0,
            Some(s) => {
                assert_eq!(s, "zstd:1");
                probes += 1;
                waits.push(since_fallback);
            }
            None => {}
        }
    }
    let mib = 1 << 20;
    assert_eq!(
        waits[..6],
        [8 * mib, 16 * mib, 32 * mib, 64 * mib, 128 * mib, 256 * mib]
    );
    assert!(waits[6..].iter().all(|&w| w == T.probe_max), "{waits:?}");
    // One window for the first fallback and one per probe.
    assert_eq!(compressed, T.ratio_window * (u64::from(probes) + 1));
    assert!(compressed * 100 < sent, "{compressed} of {sent}");
}

#[test]
fn a_probe_that_compresses_resets_the_wait() {
    let mut p = compressing();
    let piece = 64 * 1024u64;
    // Two fallbacks: the wait doubled.
    let mut fallbacks = 0;
    while fallbacks < 2 {
        let o = obs(&p, 1, piece, piece);
        if p.observe(&o).map(|s| s.to_string()).as_deref() == Some("none") {
            fallbacks += 1;
        }
    }
    // Wait out the hold (16 MiB) at none.
    let mut waited = 0;
    while p.level() == Level::None {
        p.observe(&obs(&p, 1, piece, 0));
        waited += piece;
    }
    assert_eq!(waited, 16 << 20);
    // The probe finds text: compressing goes on, and the next fallback waits 8 MiB again.
    for _ in 0..32 {
        assert_eq!(p.observe(&obs(&p, 1, piece, piece / 4)), None);
    }
    while p.level() != Level::None {
        p.observe(&obs(&p, 1, piece, piece));
    }
    let mut waited = 0;
    while p.level() == Level::None {
        p.observe(&obs(&p, 1, piece, 0));
        waited += piece;
    }
    assert_eq!(waited, T.probe_first);
}
