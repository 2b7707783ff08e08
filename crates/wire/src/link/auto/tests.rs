use super::*;

const MS: Duration = Duration::from_millis(1);

/// An interval of `ms` milliseconds carrying `eligible` compressible bytes, all compressed
/// to `link` bytes when the level compresses.
fn obs(policy: &AutoPolicy, ms: u64, eligible: u64, link: u64) -> Observation {
    let compressed = policy.level() != Level::None;
    Observation {
        elapsed: MS * ms as u32,
        eligible,
        chunk_raw: if compressed { eligible } else { 0 },
        chunk_link: if compressed { link } else { 0 },
        ..Observation::default()
    }
}

/// Bulk traffic (4 MiB per 200 ms interval) compressing 4:1, with the given shares of the
/// interval (in percent) spent writing, encoding and reading.
fn pressure(policy: &AutoPolicy, write: u32, encode: u32, read: u32) -> Observation {
    let mut o = obs(policy, 200, 4 << 20, 1 << 20);
    o.write_wait = MS * 2 * write;
    o.encode = MS * 2 * encode;
    o.read_wait = MS * 2 * read;
    o
}

/// Observes what `make` builds for the policy's current state; the switch, as text.
fn switch(policy: &mut AutoPolicy, make: impl Fn(&AutoPolicy) -> Observation) -> Option<String> {
    let o = make(policy);
    policy.observe(&o).map(|s| s.to_string())
}

#[test]
fn every_rung_is_a_method_the_link_accepts() {
    let texts: Vec<String> = LADDER.iter().map(|l| l.spec().to_string()).collect();
    assert_eq!(texts, ["none", "lz4", "zstd:1", "zstd:3", "zstd:6"]);
    for l in LADDER {
        crate::link::check_spec(&l.spec()).expect("accepted");
    }
    assert_eq!(LADDER[START], Level::Zstd(1));
}

#[test]
fn interactive_traffic_stays_verbatim() {
    let mut p = AutoPolicy::new();
    // pgbench -S: a 62-byte Query per transaction, thousands per second, for a minute.
    for _ in 0..6000 {
        let o = obs(&p, 10, 62 * 20, 0);
        assert_eq!(p.observe(&o), None);
    }
    assert_eq!(p.level(), Level::None);
    assert_eq!(p.switches(), 0);
}

#[test]
fn bulk_traffic_starts_at_zstd1_after_one_interval() {
    let mut p = AutoPolicy::new();
    // Half an interval at 1 MiB/s (less than a BULK_BURST): not judged yet.
    assert_eq!(switch(&mut p, |p| obs(p, 100, 100 << 10, 0)), None);
    assert_eq!(
        switch(&mut p, |p| obs(p, 100, 100 << 10, 0)).as_deref(),
        Some("zstd:1")
    );
    // Just below the rate over a whole interval: stays idle.
    let mut q = AutoPolicy::new();
    let at = (ACTIVE_RATE * 200).div_ceil(1000);
    assert_eq!(switch(&mut q, |q| obs(q, 200, at - 1, 0)), None);
    assert_eq!(
        switch(&mut q, |q| obs(q, 200, at, 0)).as_deref(),
        Some("zstd:1")
    );
}

#[test]
fn a_burst_of_bulk_starts_compressing_before_the_interval_ends() {
    let mut p = AutoPolicy::new();
    assert_eq!(switch(&mut p, |p| obs(p, 1, BULK_BURST - 1, 0)), None);
    assert_eq!(
        switch(&mut p, |p| obs(p, 1, 1, 0)).as_deref(),
        Some("zstd:1")
    );
}

#[test]
fn a_link_bottleneck_climbs_one_rung_per_interval_to_the_top() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    assert_eq!(p.level(), Level::Zstd(1));
    let mut seen = Vec::new();
    for _ in 0..10 {
        if let Some(s) = switch(&mut p, |p| pressure(p, 80, 10, 0)) {
            seen.push(s);
        }
    }
    assert_eq!(seen, ["zstd:3", "zstd:6"]);
    assert_eq!(p.level(), Level::Zstd(6));
    // Exactly half the interval waiting on the link is enough; less is not.
    let mut q = AutoPolicy::new();
    q.observe(&obs(&q, 200, 4 << 20, 0));
    assert_eq!(switch(&mut q, |q| pressure(q, 49, 10, 0)), None);
    assert_eq!(
        switch(&mut q, |q| pressure(q, 50, 10, 0)).as_deref(),
        Some("zstd:3")
    );
}

#[test]
fn a_cpu_bottleneck_steps_down_and_holds_a_ceiling() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    assert_eq!(
        switch(&mut p, |p| pressure(p, 5, 90, 5)).as_deref(),
        Some("lz4")
    );
    assert_eq!(
        switch(&mut p, |p| pressure(p, 5, 90, 5)).as_deref(),
        Some("none")
    );
    // At none nothing is lower.
    assert_eq!(switch(&mut p, |p| pressure(p, 5, 90, 5)), None);
    // The link backs up at none, but lz4 was too slow a moment ago: the ceiling holds for
    // CEILING_INTERVALS intervals counted from the step down, then the climb resumes.
    let mut climbed = None;
    for i in 2..=CEILING_INTERVALS * 2 {
        if let Some(s) = switch(&mut p, |p| pressure(p, 70, 5, 0)) {
            climbed = Some((i, s));
            break;
        }
    }
    assert_eq!(climbed, Some((CEILING_INTERVALS, "lz4".to_owned())));
    assert_eq!(
        switch(&mut p, |p| pressure(p, 70, 5, 0)).as_deref(),
        Some("zstd:1")
    );
}

#[test]
fn a_step_down_closes_only_the_levels_above() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    assert_eq!(
        switch(&mut p, |p| pressure(p, 80, 10, 0)).as_deref(),
        Some("zstd:3")
    );
    assert_eq!(
        switch(&mut p, |p| pressure(p, 5, 90, 5)).as_deref(),
        Some("zstd:1")
    );
    // zstd:1 stays allowed: a CPU-bound interval there steps down again.
    assert_eq!(
        switch(&mut p, |p| pressure(p, 5, 90, 5)).as_deref(),
        Some("lz4")
    );
}

#[test]
fn a_cpu_bound_interval_needs_the_link_and_the_source_idle() {
    for (write, encode, read, moves) in [
        (5, 90, 5, true),
        (5, 49, 5, false),
        (25, 60, 5, false),
        (5, 60, 25, false),
        (19, 50, 19, true),
    ] {
        let mut p = AutoPolicy::new();
        p.observe(&obs(&p, 200, 4 << 20, 0));
        let got = switch(&mut p, |p| pressure(p, write, encode, read));
        assert_eq!(
            got.is_some(),
            moves,
            "write {write} encode {encode} read {read}"
        );
    }
}

#[test]
fn a_source_bound_transfer_keeps_its_level() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    for _ in 0..100 {
        assert_eq!(p.observe(&pressure(&p, 10, 20, 70)), None);
    }
    assert_eq!(p.level(), Level::Zstd(1));
}

#[test]
fn quiet_intervals_bring_a_bulk_direction_back_to_none() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    for _ in 1..QUIET_INTERVALS {
        assert_eq!(p.observe(&obs(&p, 200, 100, 25)), None);
    }
    // A bulk interval in between resets the count.
    p.observe(&pressure(&p, 10, 10, 10));
    for _ in 1..QUIET_INTERVALS {
        assert_eq!(p.observe(&obs(&p, 200, 100, 25)), None);
    }
    assert_eq!(
        switch(&mut p, |p| obs(p, 200, 100, 25)).as_deref(),
        Some("none")
    );
    assert_eq!(
        switch(&mut p, |p| obs(p, 200, 4 << 20, 0)).as_deref(),
        Some("zstd:1")
    );
}

#[test]
fn incompressible_data_falls_back_within_one_window() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    // 64 KiB pieces that do not shrink (chunk framing makes them grow a little).
    let piece = 64 * 1024;
    let mut compressed = 0;
    while p.level() != Level::None {
        let o = obs(&p, 1, piece, piece + 20);
        compressed += o.chunk_raw;
        p.observe(&o);
        assert!(compressed <= RATIO_WINDOW, "{compressed}");
    }
    assert_eq!(compressed, RATIO_WINDOW);
}

#[test]
fn data_that_saves_five_percent_keeps_compressing() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    for _ in 0..1000 {
        let o = obs(&p, 1, 100 * 1024, 95 * 1024);
        assert_eq!(p.observe(&o), None);
    }
    let mut q = AutoPolicy::new();
    q.observe(&obs(&q, 200, 4 << 20, 0));
    let mut fell = false;
    for _ in 0..20 {
        let o = obs(&q, 1, 100 * 1024, 95 * 1024 + 1);
        fell |= q.observe(&o).is_some();
    }
    assert!(fell);
}

/// Random bytes for a long time: the bytes compressed (the probes) stay a small bounded
/// share, the waits double up to their cap, and every probe goes back to the level left.
#[test]
fn probes_of_incompressible_data_cost_a_bounded_share() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
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
    assert!(waits[6..].iter().all(|&w| w == PROBE_MAX), "{waits:?}");
    // One window for the first fallback and one per probe.
    assert_eq!(compressed, RATIO_WINDOW * (u64::from(probes) + 1));
    assert!(compressed * 100 < sent, "{compressed} of {sent}");
}

#[test]
fn a_probe_that_compresses_resets_the_wait() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
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
    assert_eq!(waited, PROBE_FIRST);
}

#[test]
fn a_held_direction_does_not_climb_on_link_pressure() {
    let mut p = AutoPolicy::new();
    p.observe(&obs(&p, 200, 4 << 20, 0));
    while p.level() != Level::None {
        p.observe(&obs(&p, 1, 64 * 1024, 64 * 1024));
    }
    // The link is slow, but the data does not compress: stay verbatim until the probe.
    for _ in 0..1 {
        let mut o = pressure(&p, 90, 1, 0);
        o.eligible = 1 << 20;
        assert_eq!(p.observe(&o), None);
    }
    assert_eq!(p.level(), Level::None);
}
