//! What the pump measured ([`Observation`]) and the throughputs `auto` compares ([`Rate`],
//! [`Recent`]).

use std::time::Duration;

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
    pub(super) fn add(&mut self, o: &Observation) {
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
pub(super) fn percent(part: Duration, whole: Duration) -> u32 {
    if whole.is_zero() {
        return 0;
    }
    (part.as_micros().saturating_mul(100) / whole.as_micros().max(1)).min(100) as u32
}

/// Compressible bytes taken from the source over some time, and what they took on the link: a
/// throughput.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Rate {
    bytes: u64,
    link: u64,
    time: Duration,
}

impl Rate {
    pub(super) fn of(o: &Observation) -> Rate {
        Rate {
            bytes: o.eligible,
            // Verbatim bytes cross as they are, chunks as compressed.
            link: o.eligible.saturating_sub(o.chunk_raw) + o.chunk_link,
            time: o.elapsed,
        }
    }

    pub(super) fn add(&mut self, r: Rate) {
        self.bytes += r.bytes;
        self.link += r.link;
        self.time += r.time;
    }

    /// Whether this rate of source bytes is at least `hundredths` of `base`'s.
    pub(super) fn at_least(&self, base: &Rate, hundredths: u64) -> bool {
        ratio_at_least(self.bytes, self.time, base.bytes, base.time, hundredths)
    }

    /// Whether this rate of link bytes is at least `hundredths` of `base`'s.
    pub(super) fn link_at_least(&self, base: &Rate, hundredths: u64) -> bool {
        ratio_at_least(self.link, self.time, base.link, base.time, hundredths)
    }
}

/// Whether a / at >= b / bt * hundredths / 100, without division.
fn ratio_at_least(a: u64, at: Duration, b: u64, bt: Duration, hundredths: u64) -> bool {
    u128::from(a) * bt.as_micros() * 100 >= u128::from(b) * at.as_micros() * u128::from(hundredths)
}

/// The throughput of the last [`super::Tuning::base_intervals`] intervals at the current level,
/// outside trials: the base a trial compares with.
#[derive(Clone, Debug)]
pub(super) struct Recent {
    /// At most `len` rates, the oldest overwritten first.
    rates: Vec<Rate>,
    len: usize,
    at: usize,
    /// Intervals measured at this level since it was reached.
    pub(super) intervals: u32,
}

impl Recent {
    /// Nothing measured yet; a base of `len` intervals.
    pub(super) fn new(len: usize) -> Recent {
        Recent {
            rates: Vec::new(),
            len: len.max(1),
            at: 0,
            intervals: 0,
        }
    }

    /// Starts from what `intervals` intervals moved (a trial's measure, or its base).
    pub(super) fn from(len: usize, r: Rate, intervals: u32) -> Recent {
        let mut recent = Recent::new(len);
        recent.push(r);
        recent.intervals = intervals;
        recent
    }

    pub(super) fn push(&mut self, r: Rate) {
        if self.rates.len() < self.len {
            self.rates.push(r);
        } else {
            self.rates[self.at] = r;
        }
        self.at = (self.at + 1) % self.len;
        self.intervals += 1;
    }

    /// Whether enough was measured to judge a trial against: a level's first intervals also
    /// carry the bytes that fill the socket buffers and a shaper's burst.
    pub(super) fn ready(&self) -> bool {
        self.intervals as usize >= self.len
    }

    pub(super) fn sum(&self) -> Rate {
        let mut total = Rate::default();
        for r in &self.rates {
            total.add(*r);
        }
        total
    }
}
