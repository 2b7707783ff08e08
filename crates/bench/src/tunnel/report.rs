//! What `bench tunnel` measured: every configuration (direct, socat, the tunnel's methods, `ssh -C`) running
//! every workload at every link rate, with the bytes the kernel counted on the link; and the comparisons a
//! reader wants (how many times fewer bytes, how many times faster, against direct and against `ssh -C`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The configuration every other one is measured against first: the client talks to PostgreSQL itself.
pub const DIRECT: &str = "direct";
/// The peer DBAs use today: an OpenSSH port forward with compression on.
pub const SSH_C: &str = "ssh -C";

/// One `bench tunnel` run: the machine, the command, and every measurement (the JSON output is this
/// serialized).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TunnelReport {
    /// Cores, RAM, kernel and CPU model, on one line.
    pub machine: String,
    /// The TPC-H scale factor of the data loaded and read.
    pub scale: f64,
    /// The command line that produced the report.
    pub command: String,
    /// What a reader should know besides the numbers: host load, configurations skipped and why, the ssh
    /// cipher.
    pub notes: Vec<String>,
    /// The measurements, in the order they were taken.
    pub runs: Vec<Measurement>,
}

/// One configuration running one workload at one link rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    /// The link's token-bucket rate in Mbit/s; `None` when the link was not shaped.
    pub rate_mbit: Option<u64>,
    /// `direct`, `socat`, `tunnel none`, `tunnel lz4`, `tunnel zstd:1`, `tunnel zstd:3`, `tunnel auto` or
    /// `ssh -C`.
    pub config: String,
    /// `load`, `dump`, `restore`, `copy-out`, `select`, `pgbench-S`, `tpcb` or `basebackup`.
    pub workload: String,
    /// Wall time of the workload, in seconds.
    pub wall_s: f64,
    /// Bytes the veth interface counted from the client namespace to the server namespace.
    pub bytes_c2s: u64,
    /// Bytes the veth interface counted from the server namespace to the client namespace.
    pub bytes_s2c: u64,
    /// Transactions per second (pgbench workloads only).
    pub tps: Option<f64>,
    /// Average latency in milliseconds (pgbench workloads only).
    pub latency_ms: Option<f64>,
    /// CPU seconds (user + system) per process that could be measured: `tunnel client`, `tunnel server`,
    /// `ssh`, `sshd`, `socat client`, `socat server`, ...
    pub cpu_s: BTreeMap<String, f64>,
    /// How the result was verified ("sha256 equal", "row counts equal").
    pub check: String,
}

impl Measurement {
    /// Bytes on the link in both directions.
    pub fn bytes_total(&self) -> u64 {
        self.bytes_c2s.saturating_add(self.bytes_s2c)
    }
}

impl TunnelReport {
    /// The first measurement of `config` running `workload` at `rate`.
    pub fn find(&self, rate: Option<u64>, workload: &str, config: &str) -> Option<&Measurement> {
        self.runs
            .iter()
            .find(|m| m.rate_mbit == rate && m.workload == workload && m.config == config)
    }

    /// How `config` compares with `against` on `workload` at `rate`: (how many times fewer bytes it put on
    /// the link in total, how many times less wall time it took). Above 1 means `config` did better: 3.0
    /// bytes is a third of `against`'s bytes, 2.5 wall is 2.5x faster.
    ///
    /// `None` when either was not measured (a configuration skipped, a run that failed), or when `config`
    /// measured zero bytes or zero time, which no ratio describes.
    pub fn ratio(
        &self,
        rate: Option<u64>,
        workload: &str,
        config: &str,
        against: &str,
    ) -> Option<(f64, f64)> {
        let m = self.find(rate, workload, config)?;
        let a = self.find(rate, workload, against)?;
        let bytes = m.bytes_total();
        if bytes == 0 || m.wall_s <= 0.0 || !m.wall_s.is_finite() || !a.wall_s.is_finite() {
            return None;
        }
        Some((a.bytes_total() as f64 / bytes as f64, a.wall_s / m.wall_s))
    }

    /// The link rates measured, in the order first seen.
    pub fn rates(&self) -> Vec<Option<u64>> {
        let mut v = Vec::new();
        for m in &self.runs {
            if !v.contains(&m.rate_mbit) {
                v.push(m.rate_mbit);
            }
        }
        v
    }

    /// The workloads measured, in the order first seen.
    pub fn workloads(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for m in &self.runs {
            if !v.contains(&m.workload.as_str()) {
                v.push(&m.workload);
            }
        }
        v
    }

    /// The configurations measured, in the order first seen.
    pub fn configs(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for m in &self.runs {
            if !v.contains(&m.config.as_str()) {
                v.push(&m.config);
            }
        }
        v
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One measurement with the numbers that matter to the comparisons.
    pub(crate) fn m(
        rate: Option<u64>,
        config: &str,
        workload: &str,
        wall_s: f64,
        c2s: u64,
        s2c: u64,
    ) -> Measurement {
        Measurement {
            rate_mbit: rate,
            config: config.into(),
            workload: workload.into(),
            wall_s,
            bytes_c2s: c2s,
            bytes_s2c: s2c,
            tps: None,
            latency_ms: None,
            cpu_s: BTreeMap::new(),
            check: "row counts equal".into(),
        }
    }

    /// A small run: two rates, the load at both, pgbench unshaped only, no `ssh -C` at 50 Mbit/s.
    pub(crate) fn sample() -> TunnelReport {
        let mut pgb = m(None, "tunnel auto", "pgbench-S", 30.0, 4_000_000, 9_000_000);
        pgb.tps = Some(12_345.6);
        pgb.latency_ms = Some(0.648);
        pgb.cpu_s.insert("tunnel client".into(), 3.25);
        pgb.cpu_s.insert("tunnel server".into(), 4.5);
        let mut pgb_socat = m(None, "socat", "pgbench-S", 30.0, 4_100_000, 9_200_000);
        pgb_socat.tps = Some(12_000.0);
        TunnelReport {
            machine: "2 cores, 4 GiB, Linux 6.1, Test CPU".into(),
            scale: 1.0,
            command: "pgcompress bench tunnel --rate 50".into(),
            notes: vec!["ssh -C skipped at 50 Mbit/s: <sshd> & friends".into()],
            runs: vec![
                m(Some(50), DIRECT, "load", 200.0, 1_000_000_000, 10_000_000),
                m(
                    Some(50),
                    "tunnel zstd:1",
                    "load",
                    50.0,
                    300_000_000,
                    3_000_000,
                ),
                m(None, DIRECT, "load", 20.0, 1_000_000_000, 10_000_000),
                m(None, "tunnel zstd:1", "load", 16.0, 300_000_000, 3_000_000),
                m(None, SSH_C, "load", 40.0, 400_000_000, 4_000_000),
                pgb,
                pgb_socat,
            ],
        }
    }

    #[test]
    fn ratio_is_how_many_times_fewer_bytes_and_less_time() {
        let r = sample();
        let (b, w) = r
            .ratio(Some(50), "load", "tunnel zstd:1", DIRECT)
            .expect("both measured");
        assert!((b - 1_010_000_000.0 / 303_000_000.0).abs() < 1e-9, "{b}");
        assert!((w - 4.0).abs() < 1e-12, "{w}");
        let (b, w) = r.ratio(None, "load", "tunnel zstd:1", SSH_C).expect("both");
        assert!((b - 404.0 / 303.0).abs() < 1e-9, "{b}");
        assert!((w - 2.5).abs() < 1e-12, "{w}");
        // Against itself: exactly 1.
        assert_eq!(r.ratio(None, "load", DIRECT, DIRECT), Some((1.0, 1.0)));
    }

    #[test]
    fn ratio_is_none_when_either_is_missing() {
        let r = sample();
        assert_eq!(r.ratio(Some(50), "load", "tunnel zstd:1", SSH_C), None);
        assert_eq!(r.ratio(Some(50), "load", SSH_C, DIRECT), None);
        assert_eq!(r.ratio(Some(1000), "load", "tunnel zstd:1", DIRECT), None);
        assert_eq!(r.ratio(None, "dump", "tunnel zstd:1", DIRECT), None);
        let mut z = sample();
        z.runs.push(m(Some(7), "a", "w", 0.0, 10, 10));
        z.runs.push(m(Some(7), "b", "w", 1.0, 0, 0));
        z.runs.push(m(Some(7), "c", "w", 1.0, 10, 10));
        assert_eq!(z.ratio(Some(7), "w", "a", "c"), None, "zero time");
        assert_eq!(z.ratio(Some(7), "w", "b", "c"), None, "zero bytes");
        assert_eq!(z.ratio(Some(7), "w", "c", "b"), Some((0.0, 1.0)));
    }

    #[test]
    fn axes_keep_first_seen_order() {
        let r = sample();
        assert_eq!(r.rates(), vec![Some(50), None]);
        assert_eq!(r.workloads(), vec!["load", "pgbench-S"]);
        assert_eq!(
            r.configs(),
            vec![DIRECT, "tunnel zstd:1", SSH_C, "tunnel auto", "socat"]
        );
    }

    #[test]
    fn json_round_trips() {
        let r = sample();
        let j = serde_json::to_string(&r).expect("serialize");
        let back: TunnelReport = serde_json::from_str(&j).expect("parse");
        assert_eq!(back.runs.len(), r.runs.len());
        assert_eq!(back.runs[5].tps, Some(12_345.6));
        assert_eq!(back.runs[5].cpu_s["tunnel server"], 4.5);
        assert_eq!(back.runs[0].rate_mbit, Some(50));
        assert_eq!(back.runs[2].rate_mbit, None);
        assert_eq!(back.notes, r.notes);
    }
}
