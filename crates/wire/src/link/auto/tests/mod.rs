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

/// Intervals from a switch of a kept trial to the next trial's switch.
fn trial_and_base() -> usize {
    (T.trial_skip + T.trial_intervals) as usize + T.base_intervals
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

/// The policy is a plain value: it holds no handle to state shared with other connections, so
/// it moves to any thread and copies cleanly.
const _: fn() = || {
    fn plain<P: Send + Sync + Clone + 'static>() {}
    plain::<AutoPolicy>();
};

mod climb;
mod descend;
mod incompressible;
mod start;
mod trials;
