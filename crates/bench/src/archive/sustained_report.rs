//! The types and the table of `bench archive --sustained` (the runs themselves are in `sustained.rs`).

use serde::Serialize;
use std::fmt::Write as _;

/// pgbench's scale for the sustained run.
pub(super) const SCALE: u32 = 10;
/// The segment size of the throwaway clusters (initdb's default).
pub(super) const SEGMENT_BYTES: u64 = 16 << 20;

/// The archivers compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Archiver {
    /// `archive_command = 'true'`: no archive, the machine's WAL rate.
    None,
    /// `pgcompress archive push --async` to a local directory.
    Pgcompress,
    /// pgBackRest `archive-push` with `archive-async=y`, `process-max=2`, zst:3, to a local directory.
    Pgbackrest,
    /// `pgcompress archive push --async` to an S3-compatible server.
    PgcompressS3,
    /// pgBackRest as [`Archiver::Pgbackrest`], to an S3-compatible server (over HTTPS: the only way it
    /// speaks to S3).
    PgbackrestS3,
}

impl Archiver {
    pub(super) fn label(self) -> &'static str {
        match self {
            Archiver::None => "no archiving (true)",
            Archiver::Pgcompress => "pgcompress push --async",
            Archiver::Pgbackrest => "pgbackrest async process-max=2 zst:3",
            Archiver::PgcompressS3 => "pgcompress push --async, S3",
            Archiver::PgbackrestS3 => "pgbackrest async process-max=2 zst:3, S3",
        }
    }

    /// Whether its repository is on the S3-compatible server.
    pub(super) fn s3(self) -> bool {
        matches!(self, Archiver::PgcompressS3 | Archiver::PgbackrestS3)
    }

    /// Whether it is pgBackRest.
    pub(super) fn pgbackrest(self) -> bool {
        matches!(self, Archiver::Pgbackrest | Archiver::PgbackrestS3)
    }
}

/// The runs of a sustained comparison, in order, as `(round, archiver)` (rounds counted from 1): no archiving
/// once, then in each round both tools on each store, pgcompress first in odd rounds and pgBackRest first in
/// even ones, so that over two rounds neither tool always runs on the machine the other has just worked.
pub(super) fn schedule(stores: &[Store], rounds: u32) -> Vec<(u32, Archiver)> {
    let mut runs = vec![(1, Archiver::None)];
    for round in 1..=rounds {
        for store in [Store::Local, Store::S3] {
            if !stores.contains(&store) {
                continue;
            }
            let [ours, peer] = store.tools();
            let [first, second] = if round % 2 == 1 {
                [ours, peer]
            } else {
                [peer, ours]
            };
            runs.extend([(round, first), (round, second)]);
        }
    }
    runs
}

/// Where the sustained run keeps the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// A directory on the machine's disk.
    Local,
    /// A bucket on an S3-compatible server on loopback (moto_server).
    S3,
}

impl Store {
    /// pgcompress and pgBackRest on this store, in that order.
    fn tools(self) -> [Archiver; 2] {
        match self {
            Store::Local => [Archiver::Pgcompress, Archiver::Pgbackrest],
            Store::S3 => [Archiver::PgcompressS3, Archiver::PgbackrestS3],
        }
    }
}

/// One archiver's run.
#[derive(Clone, Debug, Serialize)]
pub struct SustainedRun {
    /// The round it belongs to, counted from 1.
    pub round: u32,
    /// Which archiver.
    pub archiver: Archiver,
    /// Its label in tables.
    pub label: &'static str,
    /// WAL written during the pgbench run, bytes.
    pub wal_bytes: u64,
    /// Seconds pgbench ran.
    pub seconds: f64,
    /// WAL written per second, MB.
    pub wal_mb_per_s: f64,
    /// pgbench's transactions per second.
    pub tps: Option<f64>,
    /// Most `.ready` files seen at once during the run.
    pub ready_max: usize,
    /// `.ready` files when pgbench stopped.
    pub ready_at_end: usize,
    /// Seconds from pgbench's end until no `.ready` file was left.
    pub drain_s: f64,
    /// Bytes the repository holds after the run.
    pub stored_bytes: u64,
    /// WAL segments the repository holds (those of `pgbench -i` included).
    pub stored_segments: u64,
    /// CPU seconds the whole machine spent (user, nice, system, irq) from pgbench's start to the drain.
    pub machine_cpu_s: f64,
    /// Seconds from starting the restored server to its promotion at the end of the archive.
    pub recovery_s: Option<f64>,
    /// Whether the restored server has the primary's data.
    pub recovered_identical: Option<bool>,
}

impl SustainedRun {
    /// Bytes stored per segment.
    fn stored_per_segment(&self) -> f64 {
        self.stored_bytes as f64 / self.stored_segments.max(1) as f64
    }

    /// Machine CPU seconds per GB of WAL.
    fn cpu_per_gb(&self) -> f64 {
        self.machine_cpu_s / (self.wal_bytes as f64 / 1e9).max(1e-9)
    }
}

/// pgcompress against pgBackRest on one store, each figure the mean over the rounds of pgcompress's
/// divided by the mean of pgBackRest's.
#[derive(Clone, Debug, Serialize)]
pub struct SustainedRatios {
    /// The store.
    pub store: Store,
    /// Rounds each tool ran.
    pub rounds: usize,
    /// WAL rate held (above 1: pgcompress held more).
    pub wal_rate: f64,
    /// pgBackRest's bytes stored per segment over pgcompress's (above 1: pgcompress stores less).
    pub stored_less: f64,
    /// Machine CPU per GB of WAL (below 1: pgcompress costs the machine less).
    pub cpu_per_gb: f64,
    /// Recovery time (below 1: pgcompress recovers faster), when both recovered.
    pub recovery: Option<f64>,
    /// Lowest and highest WAL rate ratio of one round's pair, when there are several rounds.
    pub wal_rate_range: Option<(f64, f64)>,
}

/// The ratios of `runs` on `store`, if both tools ran there.
pub(super) fn ratios(runs: &[SustainedRun], store: Store) -> Option<SustainedRatios> {
    let [ours, peer] = store.tools();
    let of =
        |a: Archiver| -> Vec<&SustainedRun> { runs.iter().filter(|r| r.archiver == a).collect() };
    let (o, p) = (of(ours), of(peer));
    if o.is_empty() || p.is_empty() {
        return None;
    }
    let mean = |rs: &[&SustainedRun], f: &dyn Fn(&SustainedRun) -> f64| {
        rs.iter().map(|r| f(r)).sum::<f64>() / rs.len() as f64
    };
    let ratio = |f: &dyn Fn(&SustainedRun) -> f64| mean(&o, f) / mean(&p, f).max(1e-12);
    let recovered = |rs: &[&SustainedRun]| rs.iter().all(|r| r.recovery_s.is_some());
    let pairs: Vec<f64> = o
        .iter()
        .filter_map(|a| {
            let b = p.iter().find(|b| b.round == a.round)?;
            Some(a.wal_mb_per_s / b.wal_mb_per_s.max(1e-12))
        })
        .collect();
    Some(SustainedRatios {
        store,
        rounds: o.len().min(p.len()),
        wal_rate: ratio(&|r| r.wal_mb_per_s),
        stored_less: mean(&p, &SustainedRun::stored_per_segment)
            / mean(&o, &SustainedRun::stored_per_segment).max(1e-12),
        cpu_per_gb: ratio(&SustainedRun::cpu_per_gb),
        recovery: (recovered(&o) && recovered(&p)).then(|| ratio(&|r| r.recovery_s.unwrap_or(0.0))),
        wal_rate_range: (pairs.len() > 1).then(|| {
            pairs
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
        }),
    })
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SustainedReport {
    /// pgbench clients.
    pub clients: u32,
    /// pgbench seconds per run.
    pub seconds: u32,
    /// Rounds of both tools on every store.
    pub rounds: u32,
    /// Every run, in the order they ran.
    pub runs: Vec<SustainedRun>,
    /// pgcompress against pgBackRest, one entry per store where both ran.
    pub ratios: Vec<SustainedRatios>,
}

impl SustainedReport {
    /// The report of `runs`, with the ratios.
    pub(super) fn new(clients: u32, seconds: u32, rounds: u32, runs: Vec<SustainedRun>) -> Self {
        let ratios = [Store::Local, Store::S3]
            .into_iter()
            .filter_map(|s| ratios(&runs, s))
            .collect();
        SustainedReport {
            clients,
            seconds,
            rounds,
            runs,
            ratios,
        }
    }

    /// The table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "sustained archiving: pgbench scale {SCALE}, {} clients, {} s per run, 16 MB segments, \
             wal_compression off, synchronous_commit off\n\n",
            self.clients, self.seconds
        );
        let _ = writeln!(
            s,
            "| round | archiver | WAL GB | WAL MB/s | tps | .ready max | .ready at end | drain s | stored MB | ratio (segments x 16 MB / stored) | machine CPU s per GB WAL | recovery s | recovered identical |"
        );
        let _ = writeln!(
            s,
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for r in &self.runs {
            let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.1} | {} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {} |",
                r.round,
                r.label,
                r.wal_bytes as f64 / 1e9,
                r.wal_mb_per_s,
                opt(r.tps),
                r.ready_max,
                r.ready_at_end,
                r.drain_s,
                r.stored_bytes as f64 / 1e6,
                if r.stored_bytes > 0 {
                    format!(
                        "{:.2}x",
                        (r.stored_segments * SEGMENT_BYTES) as f64 / r.stored_bytes as f64
                    )
                } else {
                    "-".into()
                },
                r.cpu_per_gb(),
                opt(r.recovery_s),
                r.recovered_identical
                    .map_or("-".into(), |b| if b { "yes" } else { "NO" }.to_string()),
            );
        }
        if !self.ratios.is_empty() {
            let _ = writeln!(
                s,
                "\npgcompress against pgBackRest (means over the rounds; WAL rate and stored: above 1 is better; \
                 CPU and recovery: below 1 is better)\n\n\
                 | store | rounds | WAL rate held | stored per segment, times less | machine CPU per GB | recovery time |\n\
                 |---|---:|---:|---:|---:|---:|"
            );
            for r in &self.ratios {
                let rate = match r.wal_rate_range {
                    Some((lo, hi)) => format!("{:.2}x ({lo:.2}x to {hi:.2}x)", r.wal_rate),
                    None => format!("{:.2}x", r.wal_rate),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {rate} | {:.2}x | {:.2}x | {} |",
                    match r.store {
                        Store::Local => "local",
                        Store::S3 => "S3",
                    },
                    r.rounds,
                    r.stored_less,
                    r.cpu_per_gb,
                    r.recovery.map_or("-".into(), |x| format!("{x:.2}x")),
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        round: u32,
        archiver: Archiver,
        mb_s: f64,
        stored: u64,
        cpu: f64,
        rec: f64,
    ) -> SustainedRun {
        SustainedRun {
            round,
            archiver,
            label: archiver.label(),
            wal_bytes: (mb_s * 100e6) as u64,
            seconds: 100.0,
            wal_mb_per_s: mb_s,
            tps: None,
            ready_max: 1,
            ready_at_end: 0,
            drain_s: 0.0,
            stored_bytes: stored * 10,
            stored_segments: 10,
            machine_cpu_s: cpu,
            recovery_s: (archiver != Archiver::None).then_some(rec),
            recovered_identical: None,
        }
    }

    #[test]
    fn the_tools_take_turns_at_going_first_round_by_round() {
        use Archiver::*;
        assert_eq!(
            schedule(&[Store::Local, Store::S3], 1),
            [
                (1, None),
                (1, Pgcompress),
                (1, Pgbackrest),
                (1, PgcompressS3),
                (1, PgbackrestS3)
            ]
        );
        assert_eq!(
            schedule(&[Store::Local], 3),
            [
                (1, None),
                (1, Pgcompress),
                (1, Pgbackrest),
                (2, Pgbackrest),
                (2, Pgcompress),
                (3, Pgcompress),
                (3, Pgbackrest)
            ]
        );
        assert_eq!(
            schedule(&[Store::S3], 2),
            [
                (1, None),
                (1, PgcompressS3),
                (1, PgbackrestS3),
                (2, PgbackrestS3),
                (2, PgcompressS3)
            ]
        );
    }

    #[test]
    fn ratios_are_of_the_means_over_the_rounds_per_store() {
        use Archiver::*;
        let runs = vec![
            run(1, None, 10.0, 0, 100.0, 0.0),
            run(1, Pgcompress, 4.0, 200, 50.0, 10.0),
            run(1, Pgbackrest, 5.0, 300, 50.0, 20.0),
            run(2, Pgbackrest, 5.0, 300, 50.0, 20.0),
            run(2, Pgcompress, 6.0, 100, 90.0, 20.0),
        ];
        let r = ratios(&runs, Store::Local).expect("both tools ran locally");
        assert_eq!(r.rounds, 2);
        // Means: rate 5.0 against 5.0; stored 150 against 300 per segment; recovery 15 against 20.
        assert!((r.wal_rate - 1.0).abs() < 1e-9, "{r:?}");
        assert!((r.stored_less - 2.0).abs() < 1e-9, "{r:?}");
        assert!(
            (r.recovery.expect("both recovered") - 0.75).abs() < 1e-9,
            "{r:?}"
        );
        // CPU per GB: pgcompress (50/0.4 + 90/0.6) / 2 = 137.5; pgBackRest 100.
        assert!((r.cpu_per_gb - 1.375).abs() < 1e-9, "{r:?}");
        assert_eq!(r.wal_rate_range, Some((0.8, 1.2)));
        assert!(ratios(&runs, Store::S3).is_none());

        let report = SustainedReport::new(2, 100, 2, runs);
        assert_eq!(report.ratios.len(), 1);
        let text = report.text();
        assert!(
            text.contains("| local | 2 | 1.00x (0.80x to 1.20x) | 2.00x | 1.38x | 0.75x |"),
            "{text}"
        );
    }
}
