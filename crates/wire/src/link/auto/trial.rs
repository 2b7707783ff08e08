//! A step on trial ([`Trial`]) and the ways up and down the ladder that failed trials close
//! for a while ([`Gate`]).

use super::measure::Rate;

/// A step on trial: kept or undone once the new level's throughput is measured.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trial {
    /// The level stepped from.
    pub(super) from: usize,
    /// Its throughput just before the step, and over how many intervals.
    pub(super) base: Rate,
    pub(super) base_intervals: u32,
    /// Intervals still to ignore.
    pub(super) skip: u32,
    /// What the new level moved, and over how many measured intervals.
    pub(super) got: Rate,
    pub(super) intervals: u32,
    /// Intervals since the skipped ones, measured or not.
    pub(super) seen: u32,
    /// The gain is measured again: the first measure paid only by a gain the link's bytes did
    /// not follow.
    pub(super) confirming: bool,
    /// A step down taken because the encoder looked like the limit: kept, it closes the way
    /// up.
    pub(super) cpu: bool,
}

/// A way (up or down the ladder) closed for a while, and how long the next closing lasts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Gate {
    /// The last level open in this direction of travel.
    pub(super) limit: usize,
    /// Intervals until it opens again (0: open).
    left: u32,
    /// Intervals the next closing lasts.
    pub(super) next: u32,
    /// The first closing's length ([`super::Tuning::ceiling_intervals`]).
    first: u32,
    /// The longest closing.
    longest: u32,
}

impl Gate {
    /// Open up to `limit`; closings last `first` intervals, doubling after failed trials in a
    /// row up to `backoff_max` times that.
    pub(super) fn open(limit: usize, first: u32, backoff_max: u32) -> Gate {
        Gate {
            limit,
            left: 0,
            next: first,
            first,
            longest: first.saturating_mul(backoff_max),
        }
    }

    /// Closes the way beyond `at` for the current backoff, and doubles it.
    pub(super) fn close(&mut self, at: usize) {
        self.limit = at;
        self.left = self.next;
        self.next = self.next.saturating_mul(2).min(self.longest);
    }

    /// Closes the way beyond `at` for the first closing's length, leaving the backoff as it
    /// is.
    pub(super) fn hold(&mut self, at: usize) {
        self.limit = at;
        self.left = self.first;
    }

    /// The way just taken paid: the next closing lasts the first's length again.
    pub(super) fn reset(&mut self) {
        self.next = self.first;
    }

    /// One interval passed; `end` is the limit when open.
    pub(super) fn tick(&mut self, end: usize) {
        if self.left > 0 {
            self.left -= 1;
            if self.left == 0 {
                self.limit = end;
            }
        }
    }
}
