//! Stepping up: the link makes writes wait, each step a trial kept only if it moves more.

use super::*;

#[test]
fn every_rung_is_a_method_the_link_accepts() {
    let texts: Vec<String> = LADDER.iter().map(|l| l.spec().to_string()).collect();
    assert_eq!(
        texts,
        [
            "none",
            "lz4",
            "zstd:1",
            "zstd:3",
            "zstd:6",
            "zstd:level=9,long=20",
            "zstd:level=12,long=20"
        ]
    );
    for l in LADDER {
        crate::link::check_spec(&l.spec()).expect("accepted");
    }
}

#[test]
fn interactive_traffic_stays_verbatim() {
    let mut p = verbatim();
    // pgbench -S on a slow link: a 62-byte Query per transaction, thousands per second, for a
    // minute, the writes waiting most of the time.
    for _ in 0..6000 {
        let mut o = obs(&p, 10, 62 * 20, 0);
        o.write_wait = MS * 8;
        assert_eq!(p.observe(&o), None);
    }
    assert_eq!(p.level(), Level::None);
    assert_eq!(p.switches(), 0);
}

#[test]
fn bulk_traffic_a_fast_link_keeps_up_with_stays_verbatim() {
    let mut p = verbatim();
    for _ in 0..500 {
        assert_eq!(p.observe(&pressure(&p, 10, 5, 40)), None);
    }
    assert_eq!(p.level(), Level::None);
}

#[test]
fn bulk_traffic_climbs_when_the_link_makes_it_wait() {
    // Just below the bulk rate over a whole interval, on a link that waits: stays idle.
    let mut q = verbatim();
    let at = (T.active_rate * 200).div_ceil(1000);
    assert_eq!(switch(&mut q, |q| interval(q, at - 1, 90, 0, 0)), None);
    assert_eq!(q.settled(), None, "idle");
    // At the bulk rate: bulk, and once T.base_intervals more are measured, a trial of lz4. The
    // first bulk interval was partly idle and measures nothing.
    assert_eq!(switch(&mut q, |q| interval(q, at, 90, 0, 0)), None);
    assert_eq!(q.settled(), Some(Level::None), "bulk");
    for _ in 1..T.base_intervals {
        assert_eq!(switch(&mut q, |q| interval(q, at, 90, 0, 0)), None);
    }
    assert_eq!(
        switch(&mut q, |q| interval(q, at, 90, 0, 0)).as_deref(),
        Some("lz4")
    );
    // Exactly half the interval waiting on the link is enough; less is not.
    let mut p = verbatim();
    for _ in 0..=T.base_intervals {
        assert_eq!(switch(&mut p, |p| pressure(p, 49, 10, 0)), None);
    }
    assert_eq!(
        switch(&mut p, |p| pressure(p, 50, 10, 0)).as_deref(),
        Some("lz4")
    );
}

#[test]
fn a_slow_link_climbs_to_the_top_one_trial_per_step() {
    let mut p = verbatim();
    let seen = switches(&mut p, slow_link, 40);
    assert_eq!(seen, names(&LADDER[1..]));
    // The first bulk interval, a base of T.base_intervals, then per trial a skipped interval,
    // T.trial_intervals measured and a fresh base: at the top after TOP trials. The first, from
    // verbatim, measures T.trial_intervals more: in this model the link carries the compressed
    // bytes at 4:1 whatever the level, so its bytes fall by half and the gain must last.
    let mut q = verbatim();
    let levels = run(&mut q, slow_link, 2000);
    let first_top = levels.iter().position(|l| *l == LADDER[TOP]);
    let trial = (T.trial_skip + T.trial_intervals) as usize;
    assert_eq!(
        first_top,
        Some(
            1 + T.base_intervals
                + T.trial_intervals as usize
                + (TOP - 1) * (trial + T.base_intervals)
        )
    );
    // At the top the link still waits: trials of the level below check that the top still pays,
    // ever more rarely. Each loses 7.5%, short of a clear loss, so it measures T.trial_max intervals.
    assert_mostly(&levels[first_top.unwrap_or(0)..], LADDER[TOP], 95);
}

#[test]
fn a_full_link_and_an_idle_encoder_climb_a_rung_per_interval_to_zstd_6() {
    // A fresh half's first bulk transfer on a slow link: the link makes the pump wait most of
    // each interval and the encoder takes 8%. Each interval climbs a rung without a
    // trial, so a transfer of a second or two gets a dense level (it was over before trials,
    // a rung every half second, left zstd:1).
    let mut p = fresh();
    let full = |p: &AutoPolicy| interval(p, 4 << 20, 90, 8, 0);
    assert_eq!(
        switch(&mut p, full).as_deref(),
        Some("zstd:1"),
        "bulk starts"
    );
    assert_eq!(switch(&mut p, full).as_deref(), Some("zstd:3"));
    assert_eq!(switch(&mut p, full).as_deref(), Some("zstd:6"));
    // The rungs above cost more memory and CPU: trials, after a base, as before.
    for _ in 0..T.base_intervals - 1 {
        assert_eq!(switch(&mut p, full), None, "measuring a base");
    }
    assert_eq!(
        switch(&mut p, full).as_deref(),
        Some(LADDER[T.fast_top + 1].spec().to_string().as_str())
    );
    assert!(p.trial.is_some());
}

#[test]
fn a_climb_without_trial_needs_a_full_link_and_a_light_encoder() {
    // From zstd:1 with no base yet, an interval climbs only when the link is full and the
    // encoder's share, times the next rung's cost, leaves room; otherwise the policy waits for
    // a base and tries, as before.
    // From zstd:1 the next rung costs about 2.5 times the CPU: an encoder at 16% may climb.
    let light = T.fast_room * 10 / T.next_cost[T.first_bulk];
    for (write, encode, climbs) in [
        (T.saturated, light, true),
        (100, 0, true),
        (T.saturated - 1, light, false),
        (T.saturated, light + 1, false),
        (T.busy, 1, false),
    ] {
        let mut p = fresh();
        p.observe(&pressure(&p, 90, 5, 0));
        assert_eq!(p.level(), Level::Zstd(1));
        let got = switch(&mut p, |p| pressure(p, write, encode, 0));
        let want = climbs.then(|| "zstd:3".to_string());
        assert_eq!(got, want, "write {write}%, encode {encode}%");
    }
    // Verbatim (after steps down), a full link may be the far end, not the link: the step to
    // lz4 is tried as before, never taken on trust.
    let mut q = verbatim();
    q.observe(&pressure(&q, 90, 0, 0));
    assert_eq!(q.level(), Level::None);
    assert_eq!(switch(&mut q, |p| pressure(p, 90, 0, 0)), None);
    // A way up closed by a failed trial stays closed.
    let mut r = compressing();
    r.up.close(r.level);
    switch(&mut r, |p| pressure(p, 90, 0, 0));
    assert!(r.level() != Level::Zstd(3), "climbed through a closed way");
}

#[test]
fn a_step_kept_by_chance_is_undone_when_the_far_end_is_the_limit() {
    // PostgreSQL takes rows at one pace whatever the level, and the link's writes wait on it.
    fn far_end(_: Level) -> (u64, u32) {
        (30, 80)
    }
    let mut p = at_top();
    // Steps down keep the throughput, steps up do not gain: down to none within 150 intervals.
    let seen = switches(&mut p, far_end, 150);
    assert!(seen.iter().any(|s| s == "none"), "{seen:?}");
    // A trial of lz4 neither gains nor loses here: it measures T.trial_max intervals, and comes
    // back ever later.
    let levels = run(&mut p, far_end, 2000);
    assert_mostly(&levels, Level::None, 85);
}

#[test]
fn a_step_up_that_does_not_pay_is_undone_and_retried_ever_later() {
    let mut p = verbatim();
    let levels = run(&mut p, contended, 5000);
    // Every trial of lz4 lost throughput: back to none each time.
    assert!(levels.iter().all(|l| matches!(l, Level::None | Level::Lz4)));
    let trials: Vec<usize> = levels
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] == Level::None && w[1] == Level::Lz4)
        .map(|(i, _)| i + 1)
        .collect();
    // The waits between trials double up to the cap.
    let waits: Vec<usize> = trials.windows(2).map(|w| w[1] - w[0]).collect();
    let trial = (T.trial_skip + T.trial_intervals) as usize;
    let c = T.ceiling_intervals as usize;
    assert_eq!(
        waits[..4],
        [trial + c, trial + 2 * c, trial + 4 * c, trial + 8 * c]
    );
    assert!(waits[4..].iter().all(|&w| w == trial + 8 * c), "{waits:?}");
    // What the trials cost: a small share of the intervals at the slower level.
    let at_lz4 = count(&levels, Level::Lz4);
    assert!(at_lz4 * 50 < levels.len(), "{at_lz4} of {}", levels.len());
}

#[test]
fn a_step_that_pays_resets_the_backoff() {
    let mut p = verbatim();
    // Two failed trials of lz4 in a row.
    let trial = (T.trial_skip + T.trial_intervals) as usize;
    run(
        &mut p,
        contended,
        1 + T.base_intervals + 2 * trial + T.ceiling_intervals as usize,
    );
    assert_eq!(p.up.next, T.ceiling_intervals * 4);
    // Then the link slows down: once the ceiling opens, lz4 pays and the backoff resets.
    let levels = run(&mut p, slow_link, 200);
    assert!(levels.contains(&LADDER[TOP]));
    assert_eq!(p.up.next, T.ceiling_intervals);
}

#[test]
fn a_gain_the_socket_buffers_explain_is_not_kept() {
    // PostgreSQL is the limit, but each compressed level's trial shows 8% more taken from the
    // source (the queue between the halves filling with denser bytes) while the link carries a
    // quarter of the bytes.
    fn transient(l: Level) -> (u64, u32) {
        match l {
            Level::None => (50, 80),
            _ => (54, 80),
        }
    }
    let mut p = verbatim();
    let levels = run(&mut p, transient, 2000);
    assert_mostly(&levels, Level::None, 85);
    // The same gain with the link as busy as before (a slow link) is kept.
    fn slow_and_dense(l: Level) -> (u64, u32) {
        match l {
            Level::None => (10, 80),
            Level::Lz4 => (40, 80),
            _ => (44, 80),
        }
    }
    let mut q = verbatim();
    let seen = switches(&mut q, slow_and_dense, 4 + trial_and_base());
    assert_eq!(seen, ["lz4", "zstd:1"]);
}

#[test]
fn a_step_up_just_kept_is_not_doubted_at_once() {
    // At the top of a slow link the writes still wait, and the way up is closed: a trial of the
    // level below checks now and then that the top still pays, but not in the intervals right
    // after the top was kept.
    let mut p = at_top();
    let quiet = switches(&mut p, slow_link, T.ceiling_intervals as usize - 1);
    assert!(quiet.is_empty(), "{quiet:?}");
    let seen = switches(&mut p, slow_link, 2);
    assert_eq!(seen, names(&LADDER[TOP - 1..TOP]));
}

#[test]
fn a_large_gain_without_the_link_must_last() {
    // Verbatim, the link (the far end) takes 5 MiB per interval. lz4's first two intervals
    // take 20% more while the queues fill with denser bytes, then as much as before: the
    // confirming measure finds no gain.
    let start = || {
        let mut p = verbatim();
        // The first bulk interval, then a base.
        for _ in 0..T.base_intervals {
            p.observe(&interval(&p, 5 << 20, 80, 0, 0));
        }
        assert_eq!(p.level(), Level::None);
        p.observe(&interval(&p, 5 << 20, 80, 0, 0));
        assert_eq!(p.level(), Level::Lz4, "on trial");
        p.observe(&interval(&p, 6 << 20, 80, 10, 0)); // skipped
        p
    };
    let mut p = start();
    for mib in [6, 6, 5, 5, 5, 5, 5] {
        p.observe(&interval(&p, mib << 20, 80, 10, 0));
    }
    assert!(p.trial.is_none(), "judged");
    assert_eq!(p.level(), Level::None, "a transient is not kept");
    // The same start, and the gain lasts: the compressor sets the pace now, the link is not
    // full, and the step is kept after the second measure.
    let mut q = start();
    for mib in [6, 6, 6, 6] {
        q.observe(&interval(&q, mib << 20, 40, 50, 0));
    }
    assert!(q.trial.is_none(), "judged");
    assert_eq!(q.level(), Level::Lz4, "a lasting gain is kept");
}
