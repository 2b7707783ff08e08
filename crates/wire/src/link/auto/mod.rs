//! `--method auto`: the sending side of one direction picks its method from what it observes,
//! and switches at message boundaries with a Method frame (the peer's decoder follows).
//!
//! Sans-IO: [`AutoPolicy::observe`] takes what the pump measured since its last call and
//! answers with the method to switch to, if any. The policy is a value: it holds no handle to
//! anything outside it, and what it shares with the half's other connections passes through
//! the I/O layer (the half's settled rung, below). The policy spends CPU on compression only
//! where the link is the limit, and keeps a step only when it pays in throughput: the
//! compressible bytes taken from the source per second. Every number below is a field of
//! [`Tuning`] (docs/TUNNEL.md lists the tunnel's values); the rules (docs/TUNNEL.md, "--method
//! auto"):
//!
//! - **Idle or interactive**: until the compressible traffic of a direction reaches
//!   [`Tuning::active_rate`] over an [`Tuning::interval`], or [`Tuning::burst`] bytes within
//!   one, it is sent at the [`Tuning::interactive`] rung (the handshake starts at none and the
//!   first look switches), where OLTP's repeated short messages cost fewer link bytes than
//!   verbatim. Bulk traffic starts at the rung the I/O layer hands [`AutoPolicy::new`]: where
//!   the half's bulk connections in this direction last settled, as each reports through
//!   [`AutoPolicy::poll_settled`], or [`Tuning::first_bulk`] on a fresh half (it costs little
//!   even where the link is fast, and a transfer of a few seconds on a slow link gains from its
//!   first interval instead of climbing from none). So the connections of one transfer over one
//!   link (`pg_restore -j`, one psql after another) climb once, not each. After
//!   [`Tuning::quiet_intervals`] quiet intervals a bulk direction goes back to the interactive
//!   rung (its context is dropped if that is another method or level).
//! - **Link bound** (the pump waited on link writes for at least [`Tuning::busy`] of the
//!   interval, and [`Tuning::base_intervals`] were measured at the level): a trial one step up
//!   the [`LADDER`]. A trial ignores [`Tuning::trial_skip`] intervals (the socket still holds
//!   the old level's bytes), then measures [`Tuning::trial_intervals`], and keeps the step only
//!   if throughput rose to [`Tuning::up_gain`] of the level below's (over its last
//!   [`Tuning::base_intervals`]) while the link carried [`Tuning::link_held`] of its bytes, or
//!   rose to [`Tuning::up_clear`]. A trial that neither pays nor loses clearly (under
//!   [`Tuning::lost`]) goes on measuring, up to [`Tuning::trial_max`] intervals. One that fails
//!   steps back and closes the levels above for [`Tuning::ceiling_intervals`] intervals, twice
//!   as long after each failed trial in a row (up to [`Tuning::backoff_max`] times). On cores
//!   shared with PostgreSQL and its client, compressing can slow a transfer even while it waits
//!   on the link. While the link keeps the pump waiting for at least [`Tuning::saturated`] of
//!   an interval and the encoder's share, times what the next rung costs
//!   ([`Tuning::next_cost`]), stays under [`Tuning::fast_room`], a compressing direction climbs
//!   one rung per interval without a trial, up to [`Tuning::fast_top`]: from there trials take
//!   over.
//! - **Throughput** is compressible bytes per second. An interval in which the source paused
//!   (psql between two tables, a commit), and the one after, measure no level: they count
//!   neither in a trial nor in its base.
//! - **Link idle** (writes waited under [`Tuning::idle`] of each of [`Tuning::down_intervals`]
//!   intervals in a row, and, at [`Tuning::first_bulk`] or below, the encoder took at least
//!   [`Tuning::idle`] of the interval: a nearly idle encoder there keeps its bytes), or link
//!   bound with the way up closed: a trial one step down, kept if
//!   throughput holds to [`Tuning::down_keep`]; one that loses throughput steps back and closes
//!   the levels below the same way.
//! - **CPU bound** (the encoder took at least [`Tuning::busy`] of the interval while the link
//!   and the source both waited little): a trial one step down (to none from
//!   [`Tuning::first_bulk`] or below), kept if throughput holds to [`Tuning::down_keep`], and
//!   then the level above becomes a ceiling; one that loses throughput steps back (the
//!   encoder's share counts time the scheduler gave PostgreSQL, and a busy encoder can still
//!   move more than the level below).
//! - **Incompressible**: once [`Tuning::ratio_window`] bytes were compressed at a ratio worse
//!   than [`Tuning::incompressible`], the direction falls back to none; after
//!   [`Tuning::probe_first`] more bytes it probes the level it left (at least
//!   [`Tuning::probe_level`]) with one more window, and each failed probe doubles the wait (up
//!   to [`Tuning::probe_max`]), so incompressible data costs at most one window per wait.

mod measure;
mod trial;
mod tuning;

use codec::Spec;

pub use measure::Observation;
pub use tuning::{Level, Tuning, LADDER, WIDE_FROM, WIDE_WINDOW_LOG};

use measure::{percent, Rate, Recent};
use trial::{Gate, Trial};
use tuning::TOP;

/// Why the direction is where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Too little traffic to call bulk: the interactive rung.
    Idle,
    /// Bulk traffic; `quiet` intervals in a row without it.
    Bulk { quiet: u32 },
    /// Fell back to none on incompressible data: probe `resume` after `left` more bytes.
    Holding { resume: usize, left: u64 },
}

/// The decision state of one direction of one connection: a plain value, which the I/O layer
/// feeds observations and asks for decisions.
#[derive(Clone, Debug)]
pub struct AutoPolicy {
    tuning: Tuning,
    level: usize,
    /// Rung of idle and interactive traffic ([`Tuning::interactive`]).
    idle: usize,
    /// Rung where bulk traffic starts: where the half settled, as handed in.
    start: usize,
    /// Rung bulk traffic settled on at the end of the last interval, not yet polled.
    settled_out: Option<usize>,
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

impl AutoPolicy {
    /// A direction that starts idle at none (the handshake's method; the first
    /// [`AutoPolicy::observe`] switches to [`Tuning::interactive`]), its bulk traffic starting
    /// at `settled`, the rung of [`LADDER`] the half's bulk connections in this direction last
    /// settled on ([`AutoPolicy::poll_settled`]), or at [`Tuning::first_bulk`] if none did yet.
    pub fn new(tuning: Tuning, settled: Option<usize>) -> Self {
        let ceiling = tuning.ceiling_intervals;
        AutoPolicy {
            level: 0,
            idle: tuning.interactive.min(TOP),
            start: settled.unwrap_or(tuning.first_bulk).min(TOP),
            settled_out: None,
            mode: Mode::Idle,
            up: Gate::open(TOP, ceiling, tuning.backoff_max),
            down: Gate::open(0, ceiling, tuning.backoff_max),
            next_wait: tuning.probe_first,
            pressure: Observation::default(),
            recent: Recent::new(tuning.base_intervals),
            trial: None,
            link_idle: 0,
            link_full: false,
            paused: false,
            ratio_raw: 0,
            ratio_link: 0,
            switches: 0,
            tuning,
        }
    }

    /// The level in use.
    pub fn level(&self) -> Level {
        LADDER[self.level]
    }

    /// The level bulk traffic holds outside any trial; `None` while idle, on trial or held at
    /// none on incompressible data.
    pub fn settled(&self) -> Option<Level> {
        match self.mode {
            Mode::Bulk { quiet: 0 } if self.trial.is_none() => Some(LADDER[self.level]),
            _ => None,
        }
    }

    /// Hands in where the half's bulk connections in this direction settled by now, as
    /// [`AutoPolicy::new`]'s `settled`: bulk traffic that begins later (on a connection opened
    /// before, or after a quiet spell) starts there.
    pub fn hand_settled(&mut self, settled: Option<usize>) {
        if let Some(rung) = settled {
            self.start = rung.min(TOP);
        }
    }

    /// The rung of [`LADDER`] bulk traffic settled on at the end of the last whole interval
    /// [`AutoPolicy::observe`] judged, once: the I/O layer keeps it for the half's next policy
    /// in this direction ([`AutoPolicy::new`]). `None` if no interval ended settled since the
    /// last call.
    pub fn poll_settled(&mut self) -> Option<usize> {
        self.settled_out.take()
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
        let t = self.tuning;
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
        if self.level > 0 && self.ratio_raw >= t.ratio_window {
            let bad = self.ratio_link * 100 > self.ratio_raw * t.incompressible;
            self.ratio_raw = 0;
            self.ratio_link = 0;
            if bad {
                // Probes go back to the level left, but never under probe_level (lz4 has no
                // entropy stage, and text of few symbols it cannot shrink zstd does).
                self.mode = Mode::Holding {
                    resume: self.level.max(t.probe_level).min(TOP),
                    left: self.next_wait,
                };
                self.next_wait = (self.next_wait * 2).min(t.probe_max);
                self.set(0);
                self.pressure = Observation::default();
                return self.decided(before);
            }
            // Compressible again: the next fallback waits the shortest time.
            self.next_wait = t.probe_first;
        }
        self.pressure.add(o);
        if self.mode == Mode::Idle && self.pressure.eligible >= t.burst {
            // A burst this large is a bulk transfer whatever the rest of the interval holds:
            // it starts compressing now rather than after an interval sent verbatim (at
            // 50 Mbit/s an interval and the socket's queue are megabytes).
            self.pressure = Observation::default();
            self.start_bulk();
            return self.decided(before);
        }
        if self.pressure.elapsed < t.interval {
            return self.decided(before);
        }
        let p = std::mem::take(&mut self.pressure);
        self.interval(&p);
        if self.settled().is_some() {
            self.settled_out = Some(self.level);
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

    /// Bulk traffic begins: at the rung handed in, as far up as the way is open.
    fn start_bulk(&mut self) {
        self.mode = Mode::Bulk { quiet: 0 };
        // Until a whole interval says otherwise, the link is taken to be the limit: a short
        // transfer on a slow link is column-coded from its first chunk, and on a fast one the
        // first interval shows the link not full.
        self.link_full = true;
        self.set(self.start.min(self.up.limit));
    }

    /// Moves to `level` outside any trial, forgetting the throughput measured at the old one.
    fn set(&mut self, level: usize) {
        self.level = level;
        self.trial = None;
        self.recent = Recent::new(self.tuning.base_intervals);
        self.link_idle = 0;
    }

    /// Steps to `to` on trial, with the throughput measured here as the base; `cpu` when the
    /// encoder looked like the limit.
    fn try_step(&mut self, to: usize, cpu: bool) {
        let t = self.tuning;
        self.trial = Some(Trial {
            from: self.level,
            base: self.recent.sum(),
            base_intervals: self
                .recent
                .intervals
                .min(u32::try_from(t.base_intervals).unwrap_or(u32::MAX)),
            skip: t.trial_skip,
            got: Rate::default(),
            intervals: 0,
            seen: 0,
            confirming: false,
            cpu,
        });
        self.level = to;
        self.recent = Recent::new(t.base_intervals);
        self.link_idle = 0;
    }

    /// Judges one whole pressure interval.
    fn interval(&mut self, p: &Observation) {
        let t = self.tuning;
        self.up.tick(TOP);
        self.down.tick(0);
        let bulk =
            u128::from(p.eligible) * 1_000_000 >= u128::from(t.active_rate) * p.elapsed.as_micros();
        match self.mode {
            Mode::Holding { .. } => return,
            Mode::Idle if !bulk => return,
            Mode::Idle => {
                // This interval was idle in part, at the idle level: it measures nothing.
                self.start_bulk();
                return;
            }
            Mode::Bulk { quiet } if !bulk => {
                // A quiet interval says nothing of a level's throughput.
                self.trial = None;
                if quiet + 1 >= t.quiet_intervals {
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
        self.link_full = write >= t.busy;
        // An interval in which the source paused (psql between two tables, a commit) measures
        // no level, and neither does the next: the link drained its queue meanwhile, and the
        // next writes go at once.
        let measured = read < t.idle && !self.paused;
        self.paused = read >= t.idle;
        if self.judge_trial(p, measured, read >= t.idle) {
            return;
        }
        if measured {
            self.recent.push(Rate::of(p));
        }
        if write >= t.busy {
            self.link_idle = 0;
            if t.climbs_at_once(self.level, write, encode) && self.level < self.up.limit {
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
        } else if encode >= t.busy && write < t.idle && read < t.idle && self.level > 0 {
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
                let to = if self.level <= t.first_bulk {
                    self.down.limit
                } else {
                    self.level - 1
                };
                self.try_step(to, true);
            }
        } else if write < t.idle {
            self.link_idle += 1;
            // From zstd:1 or lz4 a step down saves CPU only where the encoder spends it: one
            // nearly idle there would trade bytes for nothing, and pauses in the source (rows
            // read in batches) keep a trial from seeing the loss.
            let saves_cpu = self.level > t.first_bulk || encode >= t.idle;
            if self.link_idle >= t.down_intervals && self.level > self.down.limit && saves_cpu {
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
        let tuning = self.tuning;
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
        let out_of_time = t.seen >= 2 * tuning.trial_max;
        if t.intervals < tuning.trial_intervals && !out_of_time {
            return true;
        }
        let t = *t;
        let up = self.level > t.from;
        // A step up pays when the source moves faster and the link stays as busy (a link that is
        // the limit carries as much as before), or when the gain is large (the compressor, not
        // the link, now sets the pace).
        let held = t.got.link_at_least(&t.base, tuning.link_held);
        let pays = t.intervals > 0
            && if up {
                t.got.at_least(&t.base, tuning.up_gain)
                    && (held || t.got.at_least(&t.base, tuning.up_clear))
            } else {
                t.got.at_least(&t.base, tuning.down_keep)
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
        if !pays
            && t.got.at_least(&t.base, tuning.lost)
            && t.intervals < tuning.trial_max
            && !out_of_time
        {
            // Neither a gain nor a clear loss: intervals vary by more than a step's worth on a
            // shared link, and a longer measure costs less than a wrong verdict.
            return true;
        }
        self.trial = None;
        if pays {
            // The way just taken opens fully again.
            if up {
                self.up.reset();
                // A step up just proved itself: checking at once that the level below would not
                // do as well stakes the gain on a few noisy intervals.
                self.down.hold(self.level);
            } else {
                self.down.reset();
                if t.cpu {
                    // The encoder was the limit: the level left stays closed for a while, as a
                    // failed step up would close it.
                    self.up.close(self.level);
                }
            }
            // The next base is measured afresh: a trial's intervals still carry what the queues
            // took in.
            self.recent = Recent::new(tuning.base_intervals);
        } else {
            if up {
                self.up.close(t.from);
            } else {
                self.down.close(t.from);
            }
            self.level = t.from;
            self.recent = Recent::from(tuning.base_intervals, t.base, t.base_intervals);
        }
        true
    }
}

#[cfg(test)]
mod tests;
