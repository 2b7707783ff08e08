use std::time::Duration;

use super::*;

const MS: Duration = Duration::from_millis(1);
/// The tunnel's tuning.
const T: Tuning = Tuning::DEFAULT;
/// The tunnel's tuning with idle and interactive traffic verbatim.
const VERBATIM: Tuning = Tuning {
    interactive: 0,
    ..Tuning::DEFAULT
};

/// A policy that sends idle traffic verbatim and starts bulk traffic at none (its half
/// settled there).
fn verbatim() -> AutoPolicy {
    AutoPolicy::new(VERBATIM, Some(0))
}

/// A policy that sends idle traffic verbatim, on a fresh half: bulk starts at first_bulk.
fn fresh() -> AutoPolicy {
    AutoPolicy::new(VERBATIM, None)
}

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

/// One 200 ms interval of bulk traffic compressing 4:1 that took `eligible` bytes from the
/// source, with the given shares of the interval (in percent) spent writing, encoding and
/// reading.
fn interval(policy: &AutoPolicy, eligible: u64, write: u32, encode: u32, read: u32) -> Observation {
    let mut o = obs(policy, 200, eligible, eligible / 4);
    o.write_wait = MS * 2 * write;
    o.encode = MS * 2 * encode;
    o.read_wait = MS * 2 * read;
    o
}

/// Bulk traffic (4 MiB per interval) with the given shares spent writing, encoding, reading.
fn pressure(policy: &AutoPolicy, write: u32, encode: u32, read: u32) -> Observation {
    interval(policy, 4 << 20, write, encode, read)
}

/// What a transfer does at each level: (MiB taken from the source per interval, percent of
/// the interval writes waited).
type Model = fn(Level) -> (u64, u32);

/// A link of 1 MiB per interval: the source moves as much as the level's ratio lets through
/// and the writes wait (the link is the limit at every level).
fn slow_link(l: Level) -> (u64, u32) {
    let tenths = match l {
        Level::None => 10,
        Level::Lz4 => 20,
        Level::Zstd(1) => 30,
        Level::Zstd(3) => 33,
        Level::Zstd(6) => 35,
        Level::Zstd(9) => 37,
        _ => 40,
    };
    (tenths, 80)
}

/// A fast link on two busy cores: verbatim the writes wait a little over half the interval,
/// but every level that compresses takes CPU from the source and moves less.
fn contended(l: Level) -> (u64, u32) {
    match l {
        Level::None => (100, 55),
        Level::Lz4 => (85, 10),
        _ => (60, 5),
    }
}

/// Runs `model` for `n` intervals; the level of each interval.
fn run(p: &mut AutoPolicy, model: Model, n: usize) -> Vec<Level> {
    levels(p, n, |p| {
        step(p, model);
    })
}

/// Observes what `make` builds for `n` intervals; the level of each interval.
fn observed(p: &mut AutoPolicy, make: fn(&AutoPolicy) -> Observation, n: usize) -> Vec<Level> {
    levels(p, n, |p| {
        switch(p, make);
    })
}

/// Runs `one` interval after interval, `n` times; the level each started at.
fn levels(p: &mut AutoPolicy, n: usize, mut one: impl FnMut(&mut AutoPolicy)) -> Vec<Level> {
    (0..n)
        .map(|_| {
            let at = p.level();
            one(p);
            at
        })
        .collect()
}

/// The switches `model` makes over `n` intervals, as text.
fn switches(p: &mut AutoPolicy, model: Model, n: usize) -> Vec<String> {
    (0..n).filter_map(|_| step(p, model)).collect()
}

/// The encoder's share of an interval in the models (percent): enough that no step up is
/// taken without a trial ([`Tuning::climbs_at_once`]).
const ENCODE: u32 = 30;

/// One interval of `model` at the policy's level; the switch it decided, as text.
fn step(p: &mut AutoPolicy, model: Model) -> Option<String> {
    let (tenths_mib, write) = model(p.level());
    let o = interval(p, (tenths_mib << 20) / 10, write, ENCODE, 0);
    p.observe(&o).map(|s| s.to_string())
}

/// How many of `levels` are `level`.
fn count(levels: &[Level], level: Level) -> usize {
    levels.iter().filter(|l| **l == level).count()
}

/// Asserts that more than `percent` of `levels` are `level`.
fn assert_mostly(levels: &[Level], level: Level, percent: usize) {
    let n = count(levels, level);
    assert!(
        n * 100 > levels.len() * percent,
        "{n} of {} at {level:?}",
        levels.len()
    );
}

/// A policy compressing at zstd:1, climbed to on a slow link, its trial there kept, with a
/// base measured.
fn compressing() -> AutoPolicy {
    let mut p = verbatim();
    while p.level() != Level::Zstd(1) {
        run(&mut p, slow_link, 1);
        assert!(p.switches() < 10, "never reached zstd:1");
    }
    // The link waits a third of each interval at zstd:1: neither the limit nor idle.
    while p.trial.is_some() || !p.recent.ready() {
        p.observe(&interval(&p, 3 << 20, 30, 10, 0));
    }
    assert_eq!(p.level(), Level::Zstd(1));
    p
}

/// Observes what `make` builds for the policy's current state; the switch, as text.
fn switch(policy: &mut AutoPolicy, make: impl Fn(&AutoPolicy) -> Observation) -> Option<String> {
    let o = make(policy);
    policy.observe(&o).map(|s| s.to_string())
}

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

/// The Method texts of `levels`, in order.
fn names(levels: &[Level]) -> Vec<String> {
    levels.iter().map(|l| l.spec().to_string()).collect()
}

/// The Method texts of a walk down the ladder from the top, one rung at a time, to none.
fn down_from_top() -> Vec<String> {
    let mut below = names(&LADDER[..TOP]);
    below.reverse();
    below
}

/// A policy settled at the top of the ladder on a slow link, outside any trial.
fn at_top() -> AutoPolicy {
    climb_to_top(verbatim())
}

/// `p` run on a slow link until settled at the top of the ladder, outside any trial.
fn climb_to_top(mut p: AutoPolicy) -> AutoPolicy {
    while !(p.level() == LADDER[TOP] && p.trial.is_none()) {
        run(&mut p, slow_link, 1);
        assert!(p.switches() < 20, "never settled at the top");
    }
    p
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

/// Intervals from a switch of a kept trial to the next trial's switch.
fn trial_and_base() -> usize {
    (T.trial_skip + T.trial_intervals) as usize + T.base_intervals
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
fn an_idle_link_steps_down_while_throughput_holds() {
    let mut p = at_top();
    // The source slows down (a client that reads slowly): the link waits no more, and every
    // level moves the same bytes. Down to none, one trial per step.
    fn source_bound(_: Level) -> (u64, u32) {
        (20, 5)
    }
    let seen = switches(&mut p, source_bound, 200);
    assert_eq!(seen, down_from_top());
}

#[test]
fn a_nearly_idle_encoder_keeps_zstd_1_on_an_idle_link() {
    // Narrow rows read in batches (psql's FETCH_COUNT) over a link that is not the limit:
    // zstd:1 costs the encoder a tenth of each interval, and lz4 or none would only add
    // bytes, which the pauses between batches keep the trials from seeing as a loss.
    let mut p = compressing();
    for _ in 0..10 * T.ceiling_intervals {
        assert_eq!(p.observe(&interval(&p, 3 << 20, 5, 10, 0)), None);
    }
    assert_eq!(p.level(), Level::Zstd(1));
    // An encoder that spends a fifth of the interval or more is worth a trial down.
    let mut seen = vec![];
    for _ in 0..T.down_intervals {
        seen.extend(switch(&mut p, |p| interval(p, 3 << 20, 5, T.idle, 0)));
    }
    assert_eq!(seen, ["lz4"]);
}

#[test]
fn a_step_down_that_loses_throughput_is_undone() {
    // zstd:1 just keeps up with the link; lz4 does not.
    fn just_enough(l: Level) -> (u64, u32) {
        match l {
            Level::None => (10, 90),
            Level::Lz4 => (20, 90),
            Level::Zstd(1) => (30, 10),
            _ => (30, 5),
        }
    }
    let mut p = verbatim();
    let levels = run(&mut p, just_enough, 2000);
    let settled = &levels[100..];
    assert_mostly(settled, Level::Zstd(1), 90);
    assert!(
        settled.iter().all(|l| *l != Level::None),
        "never back to none"
    );
}

/// Where the encoder is the limit at zstd:1 and lz4 (the link and the source wait little) and
/// none moves the most; `write` is the share of an interval writes wait at none.
fn encoder_bound(p: &AutoPolicy, write: u32) -> Observation {
    match p.level() {
        Level::Zstd(1) => interval(p, 3 << 20, 5, 90, 5),
        Level::Lz4 => interval(p, 4 << 20, 5, 60, 5),
        _ => interval(p, 5 << 20, write, 3, 5),
    }
}

#[test]
fn a_cpu_bottleneck_steps_down_on_trial_and_holds_a_ceiling() {
    let mut p = compressing();
    // The way down is held a while after the step up to zstd:1 proved itself.
    for _ in 0..T.ceiling_intervals {
        assert_eq!(p.observe(&interval(&p, 3 << 20, 30, 10, 0)), None);
    }
    // From zstd:1 the trial goes to none, and is kept at its end: it moves more.
    let mut seen = vec![];
    while p.level() != Level::None || p.trial.is_some() {
        seen.extend(switch(&mut p, |p| encoder_bound(p, 5)));
        assert!(seen.len() < 3, "{seen:?}");
    }
    assert_eq!(seen, ["none"]);
    // The link backs up at none, but lz4 was too slow a moment ago: the ceiling holds for a
    // while, then the climb resumes.
    let mut climbed = None;
    for i in 1..=T.ceiling_intervals * 4 {
        if let Some(s) = switch(&mut p, |p| encoder_bound(p, 70)) {
            climbed = Some((i, s));
            break;
        }
    }
    let (after, to) = climbed.expect("the climb resumes");
    assert_eq!(to, "lz4");
    assert!(
        after >= T.ceiling_intervals,
        "climbed after {after} intervals"
    );
}

#[test]
fn a_busy_encoder_that_moves_more_than_the_level_below_keeps_its_level() {
    // A 1 Gbit/s link, COPY TO from a server sharing two cores with PostgreSQL: zstd:1 keeps
    // the encoder busy 65% of each interval with the link idle, yet moves 1.2 times what
    // lz4 or none move (verbatim the link is the limit). A step down on the encoder's share
    // alone settled at none for the rest of the transfer, 1.1 times slower than zstd:1. Trials
    // of none, ever rarer, are all it costs.
    fn gigabit(p: &AutoPolicy) -> Observation {
        match p.level() {
            Level::Zstd(1) => interval(p, 6 << 20, 0, 65, 10),
            Level::Lz4 => interval(p, 5 << 20, 1, 50, 10),
            _ => interval(p, 5 << 20, 90, 3, 1),
        }
    }
    let mut p = compressing();
    let levels = observed(&mut p, gigabit, 500);
    assert_mostly(&levels, Level::Zstd(1), 95);
    assert_eq!(count(&levels, Level::Lz4), 0);
}

#[test]
fn a_step_down_to_where_the_source_is_the_limit_is_measured() {
    // Unshaped loopback, COPY TO: zstd:1 and lz4 keep the encoder busy, and verbatim the
    // tunnel waits for PostgreSQL most of each interval while moving the most. Intervals in
    // which the source waited measure nothing in general (a pause), but these moved more than
    // the base: they count, and the direction settles at none.
    fn loopback(p: &AutoPolicy) -> Observation {
        match p.level() {
            Level::Zstd(1) => interval(p, 5 << 20, 0, 60, 15),
            Level::Lz4 => interval(p, 6 << 20, 2, 55, 10),
            _ => interval(p, 8 << 20, 0, 4, 60),
        }
    }
    let mut p = compressing();
    let levels = observed(&mut p, loopback, 300);
    assert_mostly(&levels[100..], Level::None, 95);
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
        let mut p = compressing();
        // The step up to zstd:1 just proved itself: the way down stays closed for a while.
        for _ in 0..T.ceiling_intervals {
            assert_eq!(p.observe(&interval(&p, 3 << 20, 30, 10, 0)), None);
        }
        let got = switch(&mut p, |p| pressure(p, write, encode, read));
        assert_eq!(
            got.is_some(),
            moves,
            "write {write} encode {encode} read {read}"
        );
    }
}

#[test]
fn a_source_bound_transfer_on_a_busy_link_keeps_its_level() {
    let mut p = compressing();
    // The link waits a third of the time: neither idle nor the limit.
    for _ in 0..100 {
        assert_eq!(p.observe(&pressure(&p, 30, 20, 50)), None);
    }
    assert_eq!(p.level(), Level::Zstd(1));
}

#[test]
fn quiet_intervals_bring_a_bulk_direction_back_to_none() {
    let mut p = compressing();
    for _ in 1..T.quiet_intervals {
        assert_eq!(p.observe(&obs(&p, 200, 100, 25)), None);
    }
    // A bulk interval in between resets the count.
    p.observe(&pressure(&p, 30, 10, 10));
    for _ in 1..T.quiet_intervals {
        assert_eq!(p.observe(&obs(&p, 200, 100, 25)), None);
    }
    assert_eq!(
        switch(&mut p, |p| obs(p, 200, 100, 25)).as_deref(),
        Some("none")
    );
}

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

#[test]
fn a_held_direction_does_not_climb_on_link_pressure() {
    let mut p = compressing();
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

#[test]
fn a_pause_of_the_source_does_not_fail_a_trial() {
    // At lz4 on a slow link, settled: 2 MiB per interval.
    let mut p = verbatim();
    while !(p.level() == Level::Lz4 && p.trial.is_none()) {
        run(&mut p, slow_link, 1);
    }
    let mib = |p: &AutoPolicy, n: u64, write, read| interval(p, n << 20, write, 10, read);
    // The base after a kept step is measured afresh.
    for _ in 1..T.base_intervals {
        assert_eq!(switch(&mut p, |p| mib(p, 2, 80, 0)), None);
    }
    assert_eq!(
        switch(&mut p, |p| mib(p, 2, 80, 0)).as_deref(),
        Some("zstd:1")
    );
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None, "skipped");
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None);
    // psql between two tables: the source had bytes ready for a third of the interval, and a
    // third of the usual bytes went; in the next the link's queue, drained meanwhile, takes
    // more than the link carries. Neither is measured.
    assert_eq!(switch(&mut p, |p| mib(p, 1, 27, 66)), None);
    assert_eq!(switch(&mut p, |p| mib(p, 5, 60, 0)), None);
    assert!(p.trial.is_some(), "still measuring");
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None);
    assert!(p.trial.is_none(), "judged");
    assert_eq!(p.level(), Level::Zstd(1), "kept");
    // A source that pauses in every interval leaves a trial judged on what it measured.
    let mut q = compressing();
    run(&mut q, slow_link, 1);
    assert_eq!(q.level(), Level::Zstd(3), "on trial");
    for _ in 0..2 * T.trial_max + T.trial_skip {
        q.observe(&mib(&q, 1, 60, 30));
    }
    assert!(q.trial.is_none(), "judged");
    assert_eq!(q.level(), Level::Zstd(1), "nothing measured, nothing kept");
}

#[test]
fn a_trial_too_close_to_call_measures_longer() {
    // compressing() ends at zstd:1 moving 3 MiB per interval; a link-bound interval starts a
    // trial of zstd:3.
    let trial = |gains: &[u64]| {
        let mut p = compressing();
        let mib3 = |p: &AutoPolicy, hundredths: u64| {
            interval(p, (3 << 20) * hundredths / 100, 80, ENCODE, 0)
        };
        assert_eq!(switch(&mut p, |p| mib3(p, 100)).as_deref(), Some("zstd:3"));
        assert_eq!(switch(&mut p, |p| mib3(p, 100)), None, "skipped");
        let mut measured = 0;
        for &g in gains {
            let o = mib3(&p, g);
            p.observe(&o);
            measured += 1;
            if p.trial.is_none() {
                break;
            }
        }
        (measured, p.level())
    };
    // 1% more: neither a gain nor a loss, so it goes on; a third interval 10% up carries it.
    assert_eq!(trial(&[101, 101, 110]), (3, Level::Zstd(3)));
    // 1% more for as long as it may measure: undone after T.trial_max.
    assert_eq!(trial(&[101; 10]), (T.trial_max, Level::Zstd(1)));
    // A clear loss is undone after T.trial_intervals.
    assert_eq!(trial(&[80; 10]), (T.trial_intervals, Level::Zstd(1)));
}

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

/// The policy is a plain value: it holds no handle to state shared with other connections, so
/// it moves to any thread and copies cleanly.
const _: fn() = || {
    fn plain<P: Send + Sync + Clone + 'static>() {}
    plain::<AutoPolicy>();
};

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
