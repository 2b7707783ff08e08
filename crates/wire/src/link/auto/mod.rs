//! `--method auto`: the sending side of one direction picks its method from what it observes,
//! and switches at message boundaries with a Method frame (the peer's decoder follows).
//!
//! Sans-IO: [`AutoPolicy::observe`] takes what the pump measured since its last call and
//! answers with the method to switch to, if any. The policy spends CPU on compression only
//! where the link is the limit, and keeps a step only when it pays in throughput: the
//! compressible bytes taken from the source per second. The rules (docs/TUNNEL.md, "--method
//! auto"):
//!
//! - **Idle or interactive**: until the compressible traffic of a direction reaches
//!   [`ACTIVE_RATE`] over an interval, or [`BURST`] bytes within one, it is sent at the idle
//!   rung: none, or zstd:1 in the tunnel ([`AutoPolicy::interactive`]; the handshake starts at
//!   none and the first look switches), where OLTP's repeated short messages cost fewer link
//!   bytes than verbatim. Bulk traffic starts at the level the half's bulk connections last
//!   settled on ([`Settled`]; [`FIRST_BULK`], zstd:1, on a fresh half: it costs little even
//!   where the link is fast, and a transfer of a few seconds on a slow link gains from its
//!   first interval instead of climbing from none), so the connections of one transfer over one
//!   link (`pg_restore -j`, one psql after another) climb once, not each. After
//!   [`QUIET_INTERVALS`] quiet intervals a bulk direction goes back to the idle rung (its
//!   context is dropped if that is another method or level).
//! - **Link bound** (the pump waited on link writes for at least half the interval, and
//!   [`BASE_INTERVALS`] were measured at the level): a trial one step up the [`LADDER`]. A
//!   trial ignores [`TRIAL_SKIP`] intervals (the socket still holds the old level's bytes),
//!   then measures [`TRIAL_INTERVALS`], and keeps the step only if throughput rose to
//!   [`UP_GAIN`] hundredths of the level below's (over its last [`BASE_INTERVALS`]) while the
//!   link carried [`LINK_HELD`] hundredths of its bytes, or rose to [`UP_CLEAR`]. A trial that
//!   neither pays nor loses clearly (under [`LOST`]) goes on measuring, up to [`TRIAL_MAX`]
//!   intervals. One that fails steps back and closes the levels above for
//!   [`CEILING_INTERVALS`] intervals, twice as long after each failed trial in a row (up to
//!   [`BACKOFF_MAX`] times). On cores shared with PostgreSQL and its client, compressing can
//!   slow a transfer even while it waits on the link.
//!   While the link keeps the pump waiting for at least [`SATURATED`] hundredths of an interval
//!   and the encoder's share, times what the next rung costs ([`NEXT_COST`]), stays under
//!   [`FAST_ROOM`], a compressing direction climbs one rung per interval without a trial, up to
//!   zstd:6 ([`FAST_TOP`]): from there trials take over.
//! - **Throughput** is compressible bytes per second. An interval in which the source paused
//!   (psql between two tables, a commit), and the one after, measure no level: they count
//!   neither in a trial nor in its base.
//! - **Link idle** (writes waited under a fifth of each of [`DOWN_INTERVALS`] intervals in a
//!   row), or link bound with the way up closed: a trial one step down, kept if throughput
//!   holds to [`DOWN_KEEP`] hundredths; one that loses throughput steps back and closes the
//!   levels below the same way.
//! - **CPU bound** (the encoder took at least half the interval while the link and the source
//!   both waited little): a trial one step down (to none from zstd:1), kept if throughput
//!   holds to [`DOWN_KEEP`] hundredths, and then the level above becomes a ceiling; one that
//!   loses throughput steps back (the encoder's share counts time the scheduler gave
//!   PostgreSQL, and a busy encoder can still move more than the level below).
//! - **Incompressible**: once [`RATIO_WINDOW`] bytes were compressed at a ratio worse than
//!   [`INCOMPRESSIBLE`], the direction falls back to none; after [`PROBE_FIRST`] more bytes it
//!   probes the level it left (zstd:1 if that was lz4) with one more window, and each failed
//!   probe doubles the wait (up to [`PROBE_MAX`]), so incompressible data costs at most one
//!   window per wait.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use codec::{Method, Spec};

/// The methods `auto` moves among, cheapest first. On a slow link the top rungs pay: zstd:9
/// and zstd:12 still compress text faster than such a link drains it on one core, and the
/// trials keep them only where the link, not the CPU, is the limit (docs/TUNNEL.md).
pub const LADDER: [Level; 7] = [
    Level::None,
    Level::Lz4,
    Level::Zstd(1),
    Level::Zstd(3),
    Level::Zstd(6),
    Level::Zstd(9),
    Level::Zstd(12),
];
/// Lowest zstd level on the ladder that compresses with a [`WIDE_WINDOW_LOG`] window.
pub const WIDE_FROM: i32 = 9;
/// Window log of the rungs from [`WIDE_FROM`] (1 MiB): their extra CPU buys little in the
/// link's default 128 KiB window and more in a wider one (docs/TUNNEL.md, `--method auto`).
/// A connection only reaches them on a slow link, and the decoder's window stays under the
/// link's maximum.
pub const WIDE_WINDOW_LOG: u32 = 20;
/// Shortest interval the policy judges pressure over.
pub const INTERVAL: Duration = Duration::from_millis(200);
/// Compressible bytes within one interval at which an idle direction counts as bulk at once,
/// without waiting for the interval to end.
pub const BURST: u64 = 256 * 1024;
/// Compressible bytes per second above which a direction counts as bulk.
pub const ACTIVE_RATE: u64 = 512 * 1024;
/// Quiet intervals in a row after which a bulk direction goes back to none.
pub const QUIET_INTERVALS: u32 = 10;
/// Intervals at a level whose throughput is a trial's base.
pub const BASE_INTERVALS: usize = 3;
/// Intervals after a switch that a trial does not measure.
pub const TRIAL_SKIP: u32 = 1;
/// Intervals over which a trial measures the throughput of the level it tries.
pub const TRIAL_INTERVALS: u32 = 2;
/// Most intervals a trial measures while its outcome is unclear.
pub const TRIAL_MAX: u32 = 5;
/// Throughput under which a trial has clearly lost, in hundredths of the base's: it ends
/// without measuring longer.
pub const LOST: u64 = 90;
/// Throughput a step up must reach, in hundredths of the level below's (103: 3 % more).
pub const UP_GAIN: u64 = 103;
/// Link bytes per second a step up must keep, in hundredths of the level below's, to count a
/// gain under [`UP_CLEAR`].
pub const LINK_HELD: u64 = 85;
/// Throughput gain a step up is kept on however the link's bytes fell (115: 15 % more).
pub const UP_CLEAR: u64 = 115;
/// Throughput a step down must keep, in hundredths of the level above's.
pub const DOWN_KEEP: u64 = 97;
/// Intervals in a row with the link idle before a step down is tried.
pub const DOWN_INTERVALS: u32 = 3;
/// Intervals a failed trial or a CPU-bound step down keeps the way it went closed.
pub const CEILING_INTERVALS: u32 = 25;
/// Most times [`CEILING_INTERVALS`] a way stays closed after failed trials in a row.
pub const BACKOFF_MAX: u32 = 8;
/// Compressed bytes over which the ratio is judged.
pub const RATIO_WINDOW: u64 = 1024 * 1024;
/// Link bytes per PostgreSQL byte above which a window counts as incompressible (in
/// hundredths: 95 = the chunks saved less than 5%).
pub const INCOMPRESSIBLE: u64 = 95;
/// Compressible bytes sent verbatim after a fallback before the first probe.
pub const PROBE_FIRST: u64 = 8 * 1024 * 1024;
/// Longest wait between probes, in compressible bytes.
pub const PROBE_MAX: u64 = 256 * 1024 * 1024;
/// Index in [`LADDER`] of the lowest level a probe tries (zstd:1).
pub const PROBE_LEVEL: usize = 2;
/// Index in [`LADDER`] where a fresh half's first bulk traffic starts (zstd:1).
pub const FIRST_BULK: usize = 2;
/// The level the bulk connections of one half and direction last settled on, shared among
/// their policies ([`AutoPolicy::sharing`]): where the next one starts. [`FIRST_BULK`] at
/// first.
#[derive(Debug)]
pub struct Settled(AtomicUsize);

impl Default for Settled {
    fn default() -> Self {
        Settled::new()
    }
}

impl Settled {
    /// Nothing settled yet: bulk traffic starts at [`FIRST_BULK`].
    pub fn new() -> Self {
        Settled(AtomicUsize::new(FIRST_BULK))
    }

    /// The level last settled on.
    pub fn level(&self) -> Level {
        LADDER[self.rung()]
    }

    fn rung(&self) -> usize {
        self.0.load(Ordering::Relaxed).min(TOP)
    }
}

/// Fraction (in hundredths) of an interval spent on an activity that makes it the bottleneck.
const BUSY: u32 = 50;
/// Fraction (in hundredths) of an interval the link must make the pump wait for a step up
/// without a trial ([`FAST_TOP`]).
const SATURATED: u32 = 70;
/// Encoder share (in hundredths) a step up without a trial may lead to, by the cost of the
/// next rung ([`NEXT_COST`]): well under [`BUSY`], so the compressor does not become the limit.
const FAST_ROOM: u32 = 40;
/// Index in [`LADDER`] of the highest level reached without a trial (zstd:6): the rungs
/// above cost more memory and CPU, and are tried as before.
const FAST_TOP: usize = 4;
/// CPU per byte of the rung above each rung below [`FAST_TOP`], in tenths of this rung's
/// (TPC-H CSV and pgbench rows: zstd:3 about 2.5 times zstd:1's, zstd:6 about 4 times
/// zstd:3's); rungs below [`FIRST_BULK`] never climb without a trial.
const NEXT_COST: [u32; FAST_TOP] = [0, 0, 25, 40];

/// Whether an interval at `level` in which writes waited `write` and the encoder took
/// `encode` hundredths of the time lets the direction climb a rung without a trial.
fn climbs_at_once(level: usize, write: u32, encode: u32) -> bool {
    (FIRST_BULK..FAST_TOP).contains(&level)
        && write >= SATURATED
        && encode * NEXT_COST[level] <= FAST_ROOM * 10
}
/// Fraction (in hundredths) below which an activity counts as idle.
const IDLE: u32 = 20;

/// One rung of [`LADDER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Verbatim.
    None,
    /// LZ4 at its default level.
    Lz4,
    /// zstd at this level.
    Zstd(i32),
}

impl Level {
    /// The method specification sent in the Method frame.
    pub fn spec(self) -> Spec {
        let (method, level) = match self {
            Level::None => (Method::None, None),
            Level::Lz4 => (Method::Lz4, None),
            Level::Zstd(l) => (Method::Zstd, Some(l)),
        };
        Spec {
            method,
            level,
            long: match self {
                Level::Zstd(l) if l >= WIDE_FROM => Some(WIDE_WINDOW_LOG),
                _ => None,
            },
            workers: None,
        }
    }
}

/// What the pump measured for one direction since its previous call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// Wall time covered.
    pub elapsed: Duration,
    /// Bytes of messages of a compressible type after the session became ready, whatever the
    /// method (the traffic `auto` could compress).
    pub eligible: u64,
    /// PostgreSQL bytes that went into compressed chunks.
    pub chunk_raw: u64,
    /// Link bytes of those chunks.
    pub chunk_link: u64,
    /// Time spent framing and compressing.
    pub encode: Duration,
    /// Time the link socket made the pump wait (writes that would block).
    pub write_wait: Duration,
    /// Time the pump waited for its source (nothing ready to read).
    pub read_wait: Duration,
}

impl Observation {
    fn add(&mut self, o: &Observation) {
        self.elapsed += o.elapsed;
        self.eligible += o.eligible;
        self.chunk_raw += o.chunk_raw;
        self.chunk_link += o.chunk_link;
        self.encode += o.encode;
        self.write_wait += o.write_wait;
        self.read_wait += o.read_wait;
    }
}

/// Hundredths of `part` in `whole`.
fn percent(part: Duration, whole: Duration) -> u32 {
    if whole.is_zero() {
        return 0;
    }
    (part.as_micros().saturating_mul(100) / whole.as_micros().max(1)).min(100) as u32
}

/// Why the direction is where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Too little traffic to call bulk: the idle rung.
    Idle,
    /// Bulk traffic; `quiet` intervals in a row without it.
    Bulk { quiet: u32 },
    /// Fell back to none on incompressible data: probe `resume` after `left` more bytes.
    Holding { resume: usize, left: u64 },
}

/// Compressible bytes taken from the source over some time, and what they took on the link: a
/// throughput.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Rate {
    bytes: u64,
    link: u64,
    time: Duration,
}

impl Rate {
    fn of(o: &Observation) -> Rate {
        Rate {
            bytes: o.eligible,
            // Verbatim bytes cross as they are, chunks as compressed.
            link: o.eligible.saturating_sub(o.chunk_raw) + o.chunk_link,
            time: o.elapsed,
        }
    }

    fn add(&mut self, r: Rate) {
        self.bytes += r.bytes;
        self.link += r.link;
        self.time += r.time;
    }

    /// Whether this rate of source bytes is at least `hundredths` of `base`'s.
    fn at_least(&self, base: &Rate, hundredths: u64) -> bool {
        ratio_at_least(self.bytes, self.time, base.bytes, base.time, hundredths)
    }

    /// Whether this rate of link bytes is at least `hundredths` of `base`'s.
    fn link_at_least(&self, base: &Rate, hundredths: u64) -> bool {
        ratio_at_least(self.link, self.time, base.link, base.time, hundredths)
    }
}

/// Whether a / at >= b / bt * hundredths / 100, without division.
fn ratio_at_least(a: u64, at: Duration, b: u64, bt: Duration, hundredths: u64) -> bool {
    u128::from(a) * bt.as_micros() * 100 >= u128::from(b) * at.as_micros() * u128::from(hundredths)
}

/// The throughput of the last [`BASE_INTERVALS`] intervals at the current level, outside trials:
/// the base a trial compares with.
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    rates: [Rate; BASE_INTERVALS],
    at: usize,
    /// Intervals measured at this level since it was reached.
    intervals: u32,
}

impl Recent {
    /// Starts from what `intervals` intervals moved (a trial's measure, or its base).
    fn from(r: Rate, intervals: u32) -> Recent {
        let mut recent = Recent::default();
        recent.push(r);
        recent.intervals = intervals;
        recent
    }

    fn push(&mut self, r: Rate) {
        self.rates[self.at] = r;
        self.at = (self.at + 1) % BASE_INTERVALS;
        self.intervals += 1;
    }

    /// Whether enough was measured to judge a trial against: a level's first intervals also
    /// carry the bytes that fill the socket buffers and a shaper's burst.
    fn ready(&self) -> bool {
        self.intervals >= BASE_INTERVALS as u32
    }

    fn sum(&self) -> Rate {
        let mut total = Rate::default();
        for r in &self.rates {
            total.add(*r);
        }
        total
    }
}

/// A step on trial: kept or undone once the new level's throughput is measured.
#[derive(Clone, Copy, Debug)]
struct Trial {
    /// The level stepped from.
    from: usize,
    /// Its throughput just before the step, and over how many intervals.
    base: Rate,
    base_intervals: u32,
    /// Intervals still to ignore.
    skip: u32,
    /// What the new level moved, and over how many measured intervals.
    got: Rate,
    intervals: u32,
    /// Intervals since the skipped ones, measured or not.
    seen: u32,
    /// The gain is measured again: the first measure paid only by a gain the link's bytes did
    /// not follow.
    confirming: bool,
    /// A step down taken because the encoder looked like the limit: kept, it closes the way
    /// up.
    cpu: bool,
}

/// A way (up or down the ladder) closed for a while, and how long the next closing lasts.
#[derive(Clone, Copy, Debug)]
struct Gate {
    /// The last level open in this direction of travel.
    limit: usize,
    /// Intervals until it opens again (0: open).
    left: u32,
    /// Intervals the next closing lasts.
    next: u32,
}

impl Gate {
    fn open(limit: usize) -> Gate {
        Gate {
            limit,
            left: 0,
            next: CEILING_INTERVALS,
        }
    }

    /// Closes the way beyond `at` for the current backoff, and doubles it.
    fn close(&mut self, at: usize) {
        self.limit = at;
        self.left = self.next;
        self.next = (self.next * 2).min(CEILING_INTERVALS * BACKOFF_MAX);
    }

    /// Closes the way beyond `at` for [`CEILING_INTERVALS`], leaving the backoff as it is.
    fn hold(&mut self, at: usize) {
        self.limit = at;
        self.left = CEILING_INTERVALS;
    }

    /// One interval passed; `end` is the limit when open.
    fn tick(&mut self, end: usize) {
        if self.left > 0 {
            self.left -= 1;
            if self.left == 0 {
                self.limit = end;
            }
        }
    }
}

/// The decision state of one direction of one connection.
#[derive(Clone, Debug)]
pub struct AutoPolicy {
    level: usize,
    /// Rung of idle and interactive traffic (none unless [`AutoPolicy::interactive`] says).
    idle: usize,
    /// Where bulk traffic starts, and where it settles, shared with the half's other
    /// connections in this direction.
    start: Option<Arc<Settled>>,
    mode: Mode,
    /// Highest level allowed: lowered by failed steps up and CPU-bound steps down.
    up: Gate,
    /// Lowest level allowed: raised by failed steps down.
    down: Gate,
    /// Wait before the next probe if the current window proves incompressible again.
    next_wait: u64,
    /// The pressure interval being filled.
    pressure: Observation,
    /// Throughput at the current level over its last intervals, outside trials.
    recent: Recent,
    trial: Option<Trial>,
    /// Intervals in a row the link was idle.
    link_idle: u32,
    /// The last bulk interval kept the pump waiting on the link (see [`AutoPolicy::link_full`]).
    link_full: bool,
    /// The source paused in the last interval.
    paused: bool,
    /// The ratio window being filled.
    ratio_raw: u64,
    ratio_link: u64,
    switches: u64,
}

impl Default for AutoPolicy {
    fn default() -> Self {
        AutoPolicy::new()
    }
}

const TOP: usize = LADDER.len() - 1;

impl AutoPolicy {
    /// A direction that starts idle, at none.
    pub fn new() -> Self {
        AutoPolicy {
            level: 0,
            idle: 0,
            start: None,
            mode: Mode::Idle,
            up: Gate::open(TOP),
            down: Gate::open(0),
            next_wait: PROBE_FIRST,
            pressure: Observation::default(),
            recent: Recent::default(),
            trial: None,
            link_idle: 0,
            link_full: false,
            paused: false,
            ratio_raw: 0,
            ratio_link: 0,
            switches: 0,
        }
    }

    /// The level in use.
    pub fn level(&self) -> Level {
        LADDER[self.level]
    }

    /// A direction that starts idle, its bulk traffic starting where `settled` says and
    /// recording there where it settles.
    pub fn sharing(settled: Arc<Settled>) -> Self {
        AutoPolicy {
            start: Some(settled),
            ..AutoPolicy::new()
        }
    }

    /// Idle and interactive traffic at `rung` of [`LADDER`] instead of none: the first
    /// [`AutoPolicy::observe`] switches to it, and a bulk direction that goes quiet comes back
    /// to it. The tunnel uses [`FIRST_BULK`] (zstd:1): OLTP's short statements and answers
    /// repeat what a warm context holds, so they cost fewer link bytes compressed than
    /// verbatim, at zstd:1's CPU per byte.
    pub fn interactive(mut self, rung: usize) -> Self {
        self.idle = rung.min(TOP);
        self
    }

    /// The level bulk traffic holds outside any trial; `None` while idle, on trial or held at
    /// none on incompressible data.
    pub fn settled(&self) -> Option<Level> {
        match self.mode {
            Mode::Bulk { quiet: 0 } if self.trial.is_none() => Some(LADDER[self.level]),
            _ => None,
        }
    }

    /// The last bulk interval kept the pump waiting on the link most of the time: the link,
    /// not the CPU, is the limit, and chunks are worth column coding at any zstd level (the
    /// encoder codes them from [`super::COLUMNS_FROM_LEVEL`] up in any case). True from the
    /// start of bulk traffic until a whole interval has been measured; false while idle.
    pub fn link_full(&self) -> bool {
        self.link_full && matches!(self.mode, Mode::Bulk { .. })
    }

    /// Switches decided so far.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Takes what was measured since the previous call; returns the method to switch to at
    /// the next message boundary, if it changes.
    pub fn observe(&mut self, o: &Observation) -> Option<Spec> {
        let before = self.level;
        if let Mode::Holding { resume, left } = self.mode {
            let left = left.saturating_sub(o.eligible);
            self.mode = Mode::Holding { resume, left };
            if left == 0 {
                // Probe: one ratio window at the level that was left.
                self.mode = Mode::Bulk { quiet: 0 };
                self.set(resume);
                self.ratio_raw = 0;
                self.ratio_link = 0;
                self.pressure = Observation::default();
                return self.decided(before);
            }
        }
        if self.mode == Mode::Idle && self.level != self.idle {
            self.set(self.idle);
        }
        self.ratio_raw += o.chunk_raw;
        self.ratio_link += o.chunk_link;
        if self.level > 0 && self.ratio_raw >= RATIO_WINDOW {
            let bad = self.ratio_link * 100 > self.ratio_raw * INCOMPRESSIBLE;
            self.ratio_raw = 0;
            self.ratio_link = 0;
            if bad {
                // Probes go back to the level left, but never to lz4: it has no entropy stage, and
                // text of few symbols (hex digests, digits, base64) it cannot shrink zstd does.
                self.mode = Mode::Holding {
                    resume: self.level.max(PROBE_LEVEL),
                    left: self.next_wait,
                };
                self.next_wait = (self.next_wait * 2).min(PROBE_MAX);
                self.set(0);
                self.pressure = Observation::default();
                return self.decided(before);
            }
            // Compressible again: the next fallback waits the shortest time.
            self.next_wait = PROBE_FIRST;
        }
        self.pressure.add(o);
        if self.mode == Mode::Idle && self.pressure.eligible >= BURST {
            // A burst this large is a bulk transfer whatever the rest of the interval holds:
            // it starts compressing now rather than after an interval sent verbatim (at
            // 50 Mbit/s an interval and the socket's queue are megabytes).
            self.pressure = Observation::default();
            self.mode = Mode::Bulk { quiet: 0 };
            // Until a whole interval says otherwise, the link is taken to be the limit: a
            // short transfer on a slow link is column-coded from its first chunk, and on a
            // fast one the first interval shows the link not full.
            self.link_full = true;
            let start = self.start.as_ref().map_or(0, |s| s.rung());
            self.set(start.min(self.up.limit));
            return self.decided(before);
        }
        if self.pressure.elapsed < INTERVAL {
            return self.decided(before);
        }
        let p = std::mem::take(&mut self.pressure);
        self.interval(&p);
        if let (Some(shared), Some(_)) = (&self.start, self.settled()) {
            shared.0.store(self.level, Ordering::Relaxed);
        }
        self.decided(before)
    }

    fn decided(&mut self, before: usize) -> Option<Spec> {
        if self.level == before {
            return None;
        }
        self.switches += 1;
        Some(LADDER[self.level].spec())
    }

    /// Moves to `level` outside any trial, forgetting the throughput measured at the old one.
    fn set(&mut self, level: usize) {
        self.level = level;
        self.trial = None;
        self.recent = Recent::default();
        self.link_idle = 0;
    }

    /// Steps to `to` on trial, with the throughput measured here as the base; `cpu` when the
    /// encoder looked like the limit.
    fn try_step(&mut self, to: usize, cpu: bool) {
        self.trial = Some(Trial {
            from: self.level,
            base: self.recent.sum(),
            base_intervals: self.recent.intervals.min(BASE_INTERVALS as u32),
            skip: TRIAL_SKIP,
            got: Rate::default(),
            intervals: 0,
            seen: 0,
            confirming: false,
            cpu,
        });
        self.level = to;
        self.recent = Recent::default();
        self.link_idle = 0;
    }

    /// Judges one whole pressure interval.
    fn interval(&mut self, p: &Observation) {
        self.up.tick(TOP);
        self.down.tick(0);
        let bulk =
            u128::from(p.eligible) * 1_000_000 >= u128::from(ACTIVE_RATE) * p.elapsed.as_micros();
        match self.mode {
            Mode::Holding { .. } => return,
            Mode::Idle if !bulk => return,
            Mode::Idle => {
                // This interval was idle in part, at the idle level: it measures nothing.
                self.mode = Mode::Bulk { quiet: 0 };
                self.link_full = true;
                let start = self.start.as_ref().map_or(0, |s| s.rung());
                self.set(start.min(self.up.limit));
                return;
            }
            Mode::Bulk { quiet } if !bulk => {
                // A quiet interval says nothing of a level's throughput.
                self.trial = None;
                if quiet + 1 >= QUIET_INTERVALS {
                    self.mode = Mode::Idle;
                    self.set(self.idle);
                } else {
                    self.mode = Mode::Bulk { quiet: quiet + 1 };
                }
                return;
            }
            Mode::Bulk { .. } => self.mode = Mode::Bulk { quiet: 0 },
        }
        let write = percent(p.write_wait, p.elapsed);
        let encode = percent(p.encode, p.elapsed);
        let read = percent(p.read_wait, p.elapsed);
        self.link_full = write >= BUSY;
        // An interval in which the source paused (psql between two tables, a commit) measures
        // no level, and neither does the next: the link drained its queue meanwhile, and the
        // next writes go at once.
        let measured = read < IDLE && !self.paused;
        self.paused = read >= IDLE;
        if self.judge_trial(p, measured, read >= IDLE) {
            return;
        }
        if measured {
            self.recent.push(Rate::of(p));
        }
        if write >= BUSY {
            self.link_idle = 0;
            if climbs_at_once(self.level, write, encode) && self.level < self.up.limit {
                // The link is full and the encoder nearly idle: a denser level can only move
                // more, so it is taken now, without a base and a trial. A transfer of a few
                // seconds on a slow link is over before trials climb a rung every half second.
                self.set(self.level + 1);
            } else if !self.recent.ready() {
                // Too early to have a base.
            } else if self.level < self.up.limit {
                self.try_step(self.level + 1, false);
            } else if self.level > self.down.limit {
                // The way up is closed or there is none: check that this level still pays. Writes
                // also wait when the far end is the limit (PostgreSQL taking rows no faster), and
                // there a step kept by chance would otherwise stay for good.
                self.try_step(self.level - 1, false);
            }
        } else if encode >= BUSY && write < IDLE && read < IDLE && self.level > 0 {
            if !self.recent.ready() {
                // A level's first intervals fill the socket buffers and the shaper's queue:
                // writes do not wait yet even where the link will be the limit, so they do not
                // show the encoder to be one.
                return;
            }
            // The encoder looks like the limit. A trial down tells: the encoder's share also
            // counts time the scheduler gave PostgreSQL on shared cores, and a level that keeps
            // the encoder busy can still move more than the one below it (a 1 Gbit/s link:
            // zstd:1 took 65% of an interval and moved 1.2 times what none moved). From zstd:1
            // or lz4 the trial goes to none: framing and copying leave lz4 about as costly per
            // byte as zstd:1 on TPC-H rows, so only verbatim is much cheaper.
            if self.level > self.down.limit {
                let to = if self.level <= FIRST_BULK {
                    self.down.limit
                } else {
                    self.level - 1
                };
                self.try_step(to, true);
            }
        } else if write < IDLE {
            self.link_idle += 1;
            if self.link_idle >= DOWN_INTERVALS && self.level > self.down.limit {
                self.try_step(self.level - 1, false);
            }
        } else {
            self.link_idle = 0;
        }
    }

    /// Counts a bulk interval towards the trial under way, if any; at its end keeps the step
    /// or undoes it. True while a trial took the interval. An interval in which the source
    /// kept the pump waiting (`source_waited`) still counts when it moved more than the base:
    /// a pause only lowers what an interval moves, and a level that leaves the source the limit
    /// (verbatim on a fast link) would otherwise never be measured.
    fn judge_trial(&mut self, p: &Observation, measured: bool, source_waited: bool) -> bool {
        let Some(t) = self.trial.as_mut() else {
            return false;
        };
        if t.skip > 0 {
            t.skip -= 1;
            return true;
        }
        t.seen += 1;
        let rate = Rate::of(p);
        if measured || (source_waited && rate.at_least(&t.base, 100)) {
            t.got.add(rate);
            t.intervals += 1;
        }
        // A source that keeps pausing leaves the trial to be judged on what it measured.
        let out_of_time = t.seen >= 2 * TRIAL_MAX;
        if t.intervals < TRIAL_INTERVALS && !out_of_time {
            return true;
        }
        let t = *t;
        let up = self.level > t.from;
        // A step up pays when the source moves faster and the link stays as busy (a link that is
        // the limit carries as much as before), or when the gain is large (the compressor, not
        // the link, now sets the pace).
        let held = t.got.link_at_least(&t.base, LINK_HELD);
        let pays = t.intervals > 0
            && if up {
                t.got.at_least(&t.base, UP_GAIN) && (held || t.got.at_least(&t.base, UP_CLEAR))
            } else {
                t.got.at_least(&t.base, DOWN_KEEP)
            };
        if pays && up && !held && !t.confirming && !out_of_time {
            // The first bytes of a denser level fill the queues between the halves and into
            // PostgreSQL, and the source runs ahead for a while even where the far end is the
            // limit: a large gain without the link's bytes must last past them.
            if let Some(t) = self.trial.as_mut() {
                t.confirming = true;
                t.got = Rate::default();
                t.intervals = 0;
            }
            return true;
        }
        if !pays && t.got.at_least(&t.base, LOST) && t.intervals < TRIAL_MAX && !out_of_time {
            // Neither a gain nor a clear loss: intervals vary by more than a step's worth on a
            // shared link, and a longer measure costs less than a wrong verdict.
            return true;
        }
        self.trial = None;
        if pays {
            // The way just taken opens fully again.
            if up {
                self.up.next = CEILING_INTERVALS;
                // A step up just proved itself: checking at once that the level below would not
                // do as well stakes the gain on a few noisy intervals.
                self.down.hold(self.level);
            } else {
                self.down.next = CEILING_INTERVALS;
                if t.cpu {
                    // The encoder was the limit: the level left stays closed for a while, as a
                    // failed step up would close it.
                    self.up.close(self.level);
                }
            }
            // The next base is measured afresh: a trial's intervals still carry what the queues
            // took in.
            self.recent = Recent::default();
        } else {
            if up {
                self.up.close(t.from);
            } else {
                self.down.close(t.from);
            }
            self.level = t.from;
            self.recent = Recent::from(t.base, t.base_intervals);
        }
        true
    }
}

#[cfg(test)]
mod tests;
