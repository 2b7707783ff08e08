//! `--method auto`: the sending side of one direction picks its method from what it observes,
//! and switches at message boundaries with a Method frame (the peer's decoder follows).
//!
//! Sans-IO: [`AutoPolicy::observe`] takes what the pump measured since its last call and
//! answers with the method to switch to, if any. The rules (docs/TUNNEL.md, "--method auto"):
//!
//! - **Idle or interactive**: until the compressible traffic of a direction reaches
//!   [`ACTIVE_RATE`] over an interval, or [`BULK_BURST`] bytes within one, it is sent
//!   verbatim (method none): small queries and rows cost nothing. Bulk traffic starts at
//!   [`START`] (zstd:1); after [`QUIET_INTERVALS`] quiet intervals the direction goes back to
//!   none and its context is dropped.
//! - **Link bound** (the pump waited on link writes for at least half the interval): one step
//!   up the [`LADDER`], up to its top or to the ceiling a CPU-bound interval left.
//! - **CPU bound** (the encoder took at least half the interval while the link and the source
//!   both waited little): one step down, and the level above becomes a ceiling for
//!   [`CEILING_INTERVALS`] intervals so the policy does not climb straight back.
//! - **Incompressible**: once [`RATIO_WINDOW`] bytes were compressed at a ratio worse than
//!   [`INCOMPRESSIBLE`], the direction falls back to none; after [`PROBE_FIRST`] more bytes it
//!   probes the level it left with one more window, and each failed probe doubles the wait (up
//!   to [`PROBE_MAX`]), so incompressible data costs at most one window per wait.

use std::time::Duration;

use codec::{Method, Spec};

/// The methods `auto` moves among, cheapest first.
pub const LADDER: [Level; 5] = [
    Level::None,
    Level::Lz4,
    Level::Zstd(1),
    Level::Zstd(3),
    Level::Zstd(6),
];
/// Index in [`LADDER`] where bulk traffic starts (zstd:1).
pub const START: usize = 2;
/// Shortest interval the policy judges pressure over.
pub const INTERVAL: Duration = Duration::from_millis(200);
/// Compressible bytes per second above which a direction counts as bulk.
pub const ACTIVE_RATE: u64 = 512 * 1024;
/// Compressible bytes that make an idle direction bulk at once, without waiting for the end of
/// the interval (on a fast link a whole interval of bulk traffic would go verbatim).
pub const BULK_BURST: u64 = 256 * 1024;
/// Quiet intervals in a row after which a bulk direction goes back to none.
pub const QUIET_INTERVALS: u32 = 10;
/// Intervals a CPU-bound step down keeps the level above it closed.
pub const CEILING_INTERVALS: u32 = 25;
/// Compressed bytes over which the ratio is judged.
pub const RATIO_WINDOW: u64 = 1024 * 1024;
/// Link bytes per PostgreSQL byte above which a window counts as incompressible (in
/// hundredths: 95 = the chunks saved less than 5%).
pub const INCOMPRESSIBLE: u64 = 95;
/// Compressible bytes sent verbatim after a fallback before the first probe.
pub const PROBE_FIRST: u64 = 8 * 1024 * 1024;
/// Longest wait between probes, in compressible bytes.
pub const PROBE_MAX: u64 = 256 * 1024 * 1024;
/// Fraction (in hundredths) of an interval spent on an activity that makes it the bottleneck.
const BUSY: u32 = 50;
/// Fraction (in hundredths) below which the other activities count as idle in a CPU-bound
/// interval.
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
            long: None,
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
    /// Too little traffic to compress: none.
    Idle,
    /// Bulk traffic; `quiet` intervals in a row without it.
    Bulk { quiet: u32 },
    /// Fell back to none on incompressible data: probe `resume` after `left` more bytes.
    Holding { resume: usize, left: u64 },
}

/// The decision state of one direction of one connection.
#[derive(Clone, Debug)]
pub struct AutoPolicy {
    level: usize,
    mode: Mode,
    /// Highest level allowed, and for how many more intervals.
    ceiling: usize,
    ceiling_left: u32,
    /// Wait before the next probe if the current window proves incompressible again.
    next_wait: u64,
    /// The pressure interval being filled.
    pressure: Observation,
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

impl AutoPolicy {
    /// A direction that starts idle, at none.
    pub fn new() -> Self {
        AutoPolicy {
            level: 0,
            mode: Mode::Idle,
            ceiling: LADDER.len() - 1,
            ceiling_left: 0,
            next_wait: PROBE_FIRST,
            pressure: Observation::default(),
            ratio_raw: 0,
            ratio_link: 0,
            switches: 0,
        }
    }

    /// The level in use.
    pub fn level(&self) -> Level {
        LADDER[self.level]
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
                self.level = resume;
                self.ratio_raw = 0;
                self.ratio_link = 0;
                self.pressure = Observation::default();
                return self.decided(before);
            }
        }
        self.ratio_raw += o.chunk_raw;
        self.ratio_link += o.chunk_link;
        if self.level > 0 && self.ratio_raw >= RATIO_WINDOW {
            let bad = self.ratio_link * 100 > self.ratio_raw * INCOMPRESSIBLE;
            self.ratio_raw = 0;
            self.ratio_link = 0;
            if bad {
                self.mode = Mode::Holding {
                    resume: self.level,
                    left: self.next_wait,
                };
                self.next_wait = (self.next_wait * 2).min(PROBE_MAX);
                self.level = 0;
                self.pressure = Observation::default();
                return self.decided(before);
            }
            // Compressible again: the next fallback waits the shortest time.
            self.next_wait = PROBE_FIRST;
        }
        self.pressure.add(o);
        if self.mode == Mode::Idle && self.pressure.eligible >= BULK_BURST {
            self.mode = Mode::Bulk { quiet: 0 };
            self.level = START.min(self.ceiling);
            self.pressure = Observation::default();
            return self.decided(before);
        }
        if self.pressure.elapsed < INTERVAL {
            return None;
        }
        let p = std::mem::take(&mut self.pressure);
        self.interval(&p);
        self.decided(before)
    }

    fn decided(&mut self, before: usize) -> Option<Spec> {
        if self.level == before {
            return None;
        }
        self.switches += 1;
        Some(LADDER[self.level].spec())
    }

    /// Judges one whole pressure interval.
    fn interval(&mut self, p: &Observation) {
        if self.ceiling_left > 0 {
            self.ceiling_left -= 1;
            if self.ceiling_left == 0 {
                self.ceiling = LADDER.len() - 1;
            }
        }
        let bulk =
            u128::from(p.eligible) * 1_000_000 >= u128::from(ACTIVE_RATE) * p.elapsed.as_micros();
        match self.mode {
            Mode::Holding { .. } => {}
            Mode::Idle => {
                if bulk {
                    self.mode = Mode::Bulk { quiet: 0 };
                    self.level = START.min(self.ceiling);
                }
            }
            Mode::Bulk { quiet } => {
                if !bulk {
                    let quiet = quiet + 1;
                    if quiet >= QUIET_INTERVALS {
                        self.mode = Mode::Idle;
                        self.level = 0;
                    } else {
                        self.mode = Mode::Bulk { quiet };
                    }
                    return;
                }
                self.mode = Mode::Bulk { quiet: 0 };
                let write = percent(p.write_wait, p.elapsed);
                let encode = percent(p.encode, p.elapsed);
                let read = percent(p.read_wait, p.elapsed);
                if write >= BUSY {
                    if self.level < self.ceiling {
                        self.level += 1;
                    }
                } else if encode >= BUSY && write < IDLE && read < IDLE && self.level > 0 {
                    self.level -= 1;
                    self.ceiling = self.level;
                    self.ceiling_left = CEILING_INTERVALS;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
