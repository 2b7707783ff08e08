//! Where traffic starts: interactive traffic, a fresh half, the rung a half last settled on.

use super::*;

#[test]
fn bulk_traffic_starts_where_the_half_last_settled() {
    // The I/O layer's cell for one half and direction: nothing settled yet.
    let mut half: Option<usize> = None;
    assert_eq!(
        LADDER[AutoPolicy::new(VERBATIM, half).start],
        Level::Zstd(1),
        "a fresh half starts bulk at zstd:1"
    );
    // A first connection climbs a slow link and settles at the top; the half records it.
    let mut first = climb_to_top(AutoPolicy::new(VERBATIM, half));
    assert_eq!(first.settled(), Some(LADDER[TOP]));
    half = first.poll_settled().or(half);
    assert_eq!(half.map(|r| LADDER[r]), Some(LADDER[TOP]));
    // A policy handed none starts at none whatever another settled on.
    let mut alone = verbatim();
    alone.observe(&pressure(&alone, 80, 10, 0));
    assert_eq!(alone.settled(), Some(Level::None));
    // The next one starts idle at none, and its first bulk interval takes it to the top.
    let mut next = AutoPolicy::new(VERBATIM, half);
    assert_eq!(
        next.observe(&obs(&next, 200, 100, 100)),
        None,
        "interactive"
    );
    assert_eq!(next.settled(), None, "idle");
    assert_eq!(
        switch(&mut next, |p| pressure(p, 80, 10, 0)).as_deref(),
        Some(LADDER[TOP].spec().to_string().as_str())
    );
    assert_eq!(next.switches(), 1);
    // From there the policy is the same: a source-bound transfer steps down.
    fn source_bound(_: Level) -> (u64, u32) {
        (20, 5)
    }
    let seen = switches(&mut next, source_bound, 200);
    assert_eq!(seen, down_from_top());
    assert_eq!(next.settled(), Some(Level::None));
    half = next.poll_settled().or(half);
    assert_eq!(
        half.map(|r| LADDER[r]),
        Some(Level::None),
        "the half follows"
    );
    // A trial is not a settled level, and reports none.
    let mut q = compressing();
    q.poll_settled();
    q.observe(&pressure(&q, 80, ENCODE, 0));
    assert!(q.trial.is_some());
    assert_eq!(q.settled(), None);
    assert_eq!(q.poll_settled(), None);
}

#[test]
fn a_fresh_half_compresses_its_first_bulk_transfer_at_once() {
    // Nothing settled yet: the first bulk interval switches straight to zstd:1 rather than
    // sending a short transfer verbatim while the policy climbs.
    let mut p = fresh();
    assert_eq!(p.observe(&obs(&p, 200, 100, 100)), None, "interactive");
    assert_eq!(
        switch(&mut p, |p| pressure(p, 80, 10, 0)).as_deref(),
        Some("zstd:1")
    );
    assert_eq!(p.switches(), 1);
}

#[test]
fn a_burst_starts_bulk_before_the_interval_ends() {
    // 300 KiB in the first 10 ms: bulk at once, at the fresh half's start level.
    let mut p = fresh();
    let o = Observation {
        elapsed: Duration::from_millis(10),
        eligible: 300 * 1024,
        ..Observation::default()
    };
    assert_eq!(
        p.observe(&o).map(|s| s.to_string()).as_deref(),
        Some("zstd:1")
    );
    // Small queries within an interval stay verbatim.
    let mut q = fresh();
    let small = Observation {
        elapsed: Duration::from_millis(10),
        eligible: 4 * 1024,
        ..Observation::default()
    };
    assert_eq!(q.observe(&small), None);
    assert_eq!(q.level(), Level::None);
}

#[test]
fn interactive_traffic_can_start_at_zstd_1_and_goes_back_to_it_after_bulk() {
    let mut p = AutoPolicy::new(T, None);
    // The first look switches to the interactive rung, once.
    let first = obs(&p, 10, 62 * 20, 20 * 20);
    assert_eq!(
        p.observe(&first).map(|s| s.to_string()).as_deref(),
        Some("zstd:1")
    );
    // pgbench -S on a slow link stays there: no further switch, and not bulk.
    for _ in 0..6000 {
        let mut o = obs(&p, 10, 62 * 20, 20 * 20);
        o.write_wait = MS * 8;
        assert_eq!(p.observe(&o), None);
    }
    assert_eq!(p.level(), Level::Zstd(1));
    assert_eq!(p.mode, Mode::Idle);
    assert_eq!(p.switches(), 1);
    // Bulk starts where the half settled (zstd:1 on a fresh half): no switch; after the quiet
    // intervals the direction is idle again at zstd:1, not at none.
    for _ in 0..10 {
        p.observe(&pressure(&p, 10, 5, 40));
    }
    assert!(matches!(p.mode, Mode::Bulk { .. }), "bulk");
    for _ in 0..T.quiet_intervals + 1 {
        p.observe(&obs(&p, 200, 0, 0));
    }
    assert_eq!(p.mode, Mode::Idle, "idle again");
    assert_eq!(p.level(), Level::Zstd(1));
}

#[test]
fn policies_built_from_one_settled_rung_do_not_share_state() {
    // Two connections of a fresh half, built from the same value the half handed them.
    let half = None;
    let mut second = AutoPolicy::new(T, half);
    // The first climbs a slow link to the top and settles there...
    let mut first = climb_to_top(AutoPolicy::new(T, half));
    assert_eq!(first.poll_settled(), Some(TOP));
    // ...which reaches the second only if the I/O layer hands it over: built before, the
    // second starts its bulk traffic at zstd:1 as it was told.
    assert_eq!(
        switch(&mut second, |p| obs(p, 200, 100, 100)).as_deref(),
        Some("zstd:1"),
        "interactive"
    );
    assert_eq!(switch(&mut second, |p| pressure(p, 80, 10, 0)), None);
    assert_eq!(second.settled(), Some(Level::Zstd(1)));
}

#[test]
fn a_copy_of_a_policy_mid_trial_decides_as_the_original() {
    let mut p = fresh();
    while p.trial.is_none() {
        run(&mut p, slow_link, 1);
        assert!(p.switches() < 10, "never tried a step");
    }
    let mut q = p.clone();
    let mut settled = (vec![], vec![]);
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..100 {
        a.extend(step(&mut p, slow_link));
        b.extend(step(&mut q, slow_link));
        settled.0.extend(p.poll_settled());
        settled.1.extend(q.poll_settled());
    }
    // The same switches, up to the top, and the same rungs reported settled.
    assert_eq!(a, b);
    assert!(a.iter().any(|s| s == "zstd:level=12,long=20"), "{a:?}");
    assert_eq!(settled.0, settled.1);
    assert!(settled.0.contains(&TOP), "{:?}", settled.0);
}
