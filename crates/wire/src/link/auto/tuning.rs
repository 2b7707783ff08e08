//! The ladder `auto` climbs and every number its rules decide by, in one table: [`Tuning`].
//! docs/TUNNEL.md lists the same table ("--method auto", "Tuning"), and a unit test here checks
//! that the two agree.

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
/// Index in [`LADDER`] of its top rung.
pub(super) const TOP: usize = LADDER.len() - 1;

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

/// Every number `auto`'s rules decide by. The tunnel runs [`Tuning::DEFAULT`]; tests build
/// policies with others. Rungs are indexes in [`LADDER`]; shares are hundredths of an
/// interval; gains and losses are hundredths of the throughput compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Rung of idle and interactive traffic: the first look switches to it from the
    /// handshake's none, and a bulk direction that goes quiet comes back to it.
    pub interactive: usize,
    /// Rung where bulk traffic starts on a half none of whose bulk connections settled yet.
    /// Also the lowest rung that climbs without a trial, and the highest from which a CPU-bound
    /// step down goes straight to the lowest open rung.
    pub first_bulk: usize,
    /// Shortest interval the policy judges pressure over.
    pub interval: Duration,
    /// Compressible bytes within one interval at which an idle direction counts as bulk at
    /// once, without waiting for the interval to end.
    pub burst: u64,
    /// Compressible bytes per second above which a direction counts as bulk.
    pub active_rate: u64,
    /// Quiet intervals in a row after which a bulk direction goes back to
    /// [`Tuning::interactive`].
    pub quiet_intervals: u32,
    /// Share of an interval spent on an activity (waiting on the link, encoding) that makes
    /// it the bottleneck.
    pub busy: u32,
    /// Share of an interval under which an activity counts as idle.
    pub idle: u32,
    /// Intervals at a level whose throughput is a trial's base.
    pub base_intervals: usize,
    /// Intervals after a switch that a trial does not measure.
    pub trial_skip: u32,
    /// Intervals over which a trial measures the throughput of the level it tries.
    pub trial_intervals: u32,
    /// Most intervals a trial measures while its outcome is unclear.
    pub trial_max: u32,
    /// Throughput under which a trial has clearly lost: it ends without measuring longer.
    pub lost: u64,
    /// Throughput a step up must reach, against the level below's.
    pub up_gain: u64,
    /// Link bytes per second a step up must keep, against the level below's, to count a gain
    /// under [`Tuning::up_clear`].
    pub link_held: u64,
    /// Throughput gain a step up is kept on however the link's bytes fell.
    pub up_clear: u64,
    /// Throughput a step down must keep, against the level above's.
    pub down_keep: u64,
    /// Intervals in a row with the link idle before a step down is tried.
    pub down_intervals: u32,
    /// Intervals a failed trial or a CPU-bound step down keeps the way it went closed.
    pub ceiling_intervals: u32,
    /// Most times [`Tuning::ceiling_intervals`] a way stays closed after failed trials in a
    /// row.
    pub backoff_max: u32,
    /// Share of an interval the link must make the pump wait for a step up without a trial.
    pub saturated: u32,
    /// Encoder share a step up without a trial may lead to, by the cost of the next rung
    /// ([`Tuning::next_cost`]): well under [`Tuning::busy`], so the compressor does not become
    /// the limit.
    pub fast_room: u32,
    /// Highest rung reached without a trial: the rungs above cost more memory and CPU, and are
    /// tried as before.
    pub fast_top: usize,
    /// CPU per byte of the rung above each rung below [`Tuning::fast_top`], in tenths of this
    /// rung's; a rung without an entry never climbs without a trial.
    pub next_cost: &'static [u32],
    /// Compressed bytes over which the ratio is judged.
    pub ratio_window: u64,
    /// Link bytes per PostgreSQL byte (in hundredths) above which a window counts as
    /// incompressible.
    pub incompressible: u64,
    /// Compressible bytes sent verbatim after a fallback before the first probe.
    pub probe_first: u64,
    /// Longest wait between probes, in compressible bytes.
    pub probe_max: u64,
    /// Lowest rung a probe tries.
    pub probe_level: usize,
}

impl Tuning {
    /// The tunnel's tuning (the figures behind each value are in docs/TUNNEL.md).
    pub const DEFAULT: Tuning = Tuning {
        // zstd:1: OLTP's short statements and answers repeat what a warm context holds, so they
        // cost fewer link bytes compressed than verbatim, at zstd:1's CPU per byte.
        interactive: 2,
        // zstd:1: it costs little even where the link is fast, and a transfer of a few seconds
        // on a slow link gains from its first interval instead of climbing from none.
        first_bulk: 2,
        interval: Duration::from_millis(200),
        burst: 256 * 1024,
        active_rate: 512 * 1024,
        quiet_intervals: 10,
        busy: 50,
        idle: 20,
        base_intervals: 3,
        trial_skip: 1,
        trial_intervals: 2,
        trial_max: 5,
        lost: 90,
        up_gain: 103,
        link_held: 85,
        up_clear: 115,
        down_keep: 97,
        down_intervals: 3,
        ceiling_intervals: 25,
        backoff_max: 8,
        saturated: 70,
        fast_room: 40,
        // zstd:6.
        fast_top: 4,
        // TPC-H CSV and pgbench rows: zstd:3 about 2.5 times zstd:1's CPU per byte, zstd:6
        // about 4 times zstd:3's; none and lz4 never climb without a trial.
        next_cost: &[0, 0, 25, 40],
        ratio_window: 1024 * 1024,
        // The chunks saved less than 5%.
        incompressible: 95,
        probe_first: 8 * 1024 * 1024,
        probe_max: 256 * 1024 * 1024,
        // zstd:1: lz4 has no entropy stage, and text of few symbols (hex digests, digits,
        // base64) it cannot shrink zstd does.
        probe_level: 2,
    };

    /// Whether an interval at `level` in which writes waited `write` and the encoder took
    /// `encode` hundredths of the time lets the direction climb a rung without a trial.
    pub(super) fn climbs_at_once(&self, level: usize, write: u32, encode: u32) -> bool {
        let Some(&cost) = self.next_cost.get(level) else {
            return false;
        };
        (self.first_bulk..self.fast_top).contains(&level)
            && write >= self.saturated
            && encode.saturating_mul(cost) <= self.fast_room.saturating_mul(10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of docs/TUNNEL.md's table of `auto`'s constants: name, value.
    fn doc_rows() -> Vec<(String, String)> {
        let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/TUNNEL.md"));
        let table = doc
            .split("\n### Tuning\n")
            .nth(1)
            .expect("docs/TUNNEL.md has a \"### Tuning\" section");
        table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
            })
            .collect()
    }

    fn bytes(n: u64) -> String {
        match n {
            n if n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
            n if n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
            n => format!("{n} B"),
        }
    }

    fn rung(r: usize) -> String {
        format!("{r} (`{}`)", LADDER[r].spec())
    }

    fn share(h: impl std::fmt::Display) -> String {
        format!("{h} %")
    }

    /// The table as the code has it, in the order docs/TUNNEL.md lists it.
    fn code_rows() -> Vec<(String, String)> {
        // Every field by name: a field added to Tuning does not compile here until it has a row.
        let Tuning {
            interactive,
            first_bulk,
            interval,
            burst,
            active_rate,
            quiet_intervals,
            busy,
            idle,
            base_intervals,
            trial_skip,
            trial_intervals,
            trial_max,
            lost,
            up_gain,
            link_held,
            up_clear,
            down_keep,
            down_intervals,
            ceiling_intervals,
            backoff_max,
            saturated,
            fast_room,
            fast_top,
            next_cost,
            ratio_window,
            incompressible,
            probe_first,
            probe_max,
            probe_level,
        } = Tuning::DEFAULT;
        let ladder: Vec<String> = LADDER.iter().map(|l| format!("`{}`", l.spec())).collect();
        [
            ("LADDER", ladder.join(", ")),
            ("WIDE_FROM", WIDE_FROM.to_string()),
            ("WIDE_WINDOW_LOG", WIDE_WINDOW_LOG.to_string()),
            ("interactive", rung(interactive)),
            ("first_bulk", rung(first_bulk)),
            ("interval", format!("{} ms", interval.as_millis())),
            ("burst", bytes(burst)),
            ("active_rate", format!("{}/s", bytes(active_rate))),
            ("quiet_intervals", quiet_intervals.to_string()),
            ("busy", share(busy)),
            ("idle", share(idle)),
            ("base_intervals", base_intervals.to_string()),
            ("trial_skip", trial_skip.to_string()),
            ("trial_intervals", trial_intervals.to_string()),
            ("trial_max", trial_max.to_string()),
            ("lost", share(lost)),
            ("up_gain", share(up_gain)),
            ("link_held", share(link_held)),
            ("up_clear", share(up_clear)),
            ("down_keep", share(down_keep)),
            ("down_intervals", down_intervals.to_string()),
            ("ceiling_intervals", ceiling_intervals.to_string()),
            ("backoff_max", backoff_max.to_string()),
            ("saturated", share(saturated)),
            ("fast_room", share(fast_room)),
            ("fast_top", rung(fast_top)),
            ("next_cost", format!("{next_cost:?}")),
            ("ratio_window", bytes(ratio_window)),
            ("incompressible", share(incompressible)),
            ("probe_first", bytes(probe_first)),
            ("probe_max", bytes(probe_max)),
            ("probe_level", rung(probe_level)),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    #[test]
    fn the_documented_table_is_the_code_s() {
        assert_eq!(doc_rows(), code_rows());
    }

    #[test]
    fn a_rung_without_a_cost_never_climbs_at_once() {
        let t = Tuning {
            fast_top: TOP,
            ..Tuning::DEFAULT
        };
        assert!(t.climbs_at_once(3, 100, 0));
        assert!(!t.climbs_at_once(4, 100, 0), "no cost for zstd:6");
    }
}
