//! What `bench tunnel` measured: every configuration (direct, socat, the tunnel's methods, `ssh -C`) running
//! every workload at every link rate, with the bytes the kernel counted on the link; and the comparisons a
//! reader wants (how many times fewer bytes, how many times faster, against direct and against `ssh -C`).

mod html;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The configuration every other one is measured against first: the client talks to PostgreSQL itself.
pub const DIRECT: &str = "direct";
/// The name of [`super::config::Config::DirectTls`] in reports.
pub const DIRECT_TLS: &str = "direct TLS";
/// The peer DBAs use today: an OpenSSH port forward with compression on.
pub const SSH_C: &str = "ssh -C";
/// The plain TCP relay pair: what any two-hop proxy costs at least, so interactive TPS is compared with it.
pub const SOCAT: &str = "socat";

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
    /// Bytes the workload's whole output makes compressed by `zstd -1` (narrow workloads): the
    /// yardstick of `s->c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zstd1_bytes: Option<u64>,
    /// Which round of `--rounds` (from 0) took it.
    #[serde(default)]
    pub round: u32,
}

impl Measurement {
    /// Bytes on the link in both directions.
    pub fn bytes_total(&self) -> u64 {
        self.bytes_c2s.saturating_add(self.bytes_s2c)
    }
}

impl TunnelReport {
    /// The measurement of `config` running `workload` at `rate`: with several rounds, the median one,
    /// by TPS where pgbench measured it and by wall time otherwise (of an even number, the lower of
    /// the middle two by that order).
    pub fn find(&self, rate: Option<u64>, workload: &str, config: &str) -> Option<&Measurement> {
        let mut all = self.rounds_of(rate, workload, config);
        all.sort_by(|a, b| {
            let key = |m: &Measurement| m.tps.map_or(m.wall_s, |t| -t);
            key(a).total_cmp(&key(b))
        });
        all.get(all.len().saturating_sub(1) / 2).copied()
    }

    /// Every round's measurement of `config` running `workload` at `rate`, in the order taken.
    fn rounds_of(&self, rate: Option<u64>, workload: &str, config: &str) -> Vec<&Measurement> {
        self.runs
            .iter()
            .filter(|m| m.rate_mbit == rate && m.workload == workload && m.config == config)
            .collect()
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

    /// Writes the report as text tables: one per rate and workload, one row per configuration, with bytes
    /// each way and in total, wall time, how many times fewer bytes and less time than direct and than
    /// `ssh -C`, pgbench's TPS (and its ratio to socat's) and latency where measured, and CPU seconds per process; then the notes.
    pub fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "bench tunnel: TPC-H scale {}", num(self.scale))?;
        writeln!(w, "machine: {}", self.machine)?;
        writeln!(w, "command: {}", self.command)?;
        let configs = self.configs();
        for rate in self.rates() {
            for workload in self.workloads() {
                let rows: Vec<&Measurement> = configs
                    .iter()
                    .filter_map(|c| self.find(rate, workload, c))
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                writeln!(w)?;
                writeln!(w, "{}", heading(rate, workload))?;
                self.table(rate, workload, &rows).write(w)?;
            }
        }
        writeln!(w)?;
        writeln!(
            w,
            "fewer (bytes) and faster (wall time) are how many times: the other configuration's bytes (both \
             directions) or wall time divided by this row's; above 1 is better. Bytes are the veth \
             interface's kernel counters."
        )?;
        for n in &self.notes {
            writeln!(w, "note: {n}")?;
        }
        Ok(())
    }

    /// The report as one self-contained HTML page: per workload, charts of the bytes on the link and the
    /// wall time (TPS for pgbench) of each configuration, a panel per rate; every measurement in a table;
    /// the machine, the command and the notes. Write it with [`advise::html::write_file`].
    pub fn html(&self) -> String {
        html::render(self)
    }

    /// The text table of one rate and workload.
    fn table(&self, rate: Option<u64>, workload: &str, rows: &[&Measurement]) -> Table {
        let tps = rows
            .iter()
            .any(|m| m.tps.is_some() || m.latency_ms.is_some());
        let cpu = rows.iter().any(|m| !m.cpu_s.is_empty());
        let zstd1 = rows.iter().any(|m| m.zstd1_bytes.is_some());
        let mut head = vec![
            "config",
            "c->s",
            "s->c",
            "total",
            "fewer vs direct",
            "fewer vs ssh -C",
            "wall",
            "faster vs direct",
            "faster vs ssh -C",
        ];
        if tps {
            head.extend(["TPS", "TPS vs socat", "latency"]);
        }
        if zstd1 {
            // Of zstd -1's ratio on the whole output, the share the link reached: zstd -1's
            // bytes over the link's backend->frontend bytes.
            head.push("of zstd -1's ratio");
        }
        if cpu {
            head.push("CPU s");
        }
        let mut t = Table::new(&head);
        for m in rows {
            let d = self.ratio(rate, workload, &m.config, DIRECT);
            let s = self.ratio(rate, workload, &m.config, SSH_C);
            let mut row = vec![
                m.config.clone(),
                bytes(m.bytes_c2s),
                bytes(m.bytes_s2c),
                bytes(m.bytes_total()),
                times(d.map(|r| r.0)),
                times(s.map(|r| r.0)),
                secs(m.wall_s),
                times(d.map(|r| r.1)),
                times(s.map(|r| r.1)),
            ];
            if tps {
                row.push(m.tps.map_or("-".into(), |v| format!("{v:.0}")));
                row.push(self.tps_ratio_text(rate, workload, &m.config));
                row.push(m.latency_ms.map_or("-".into(), |v| format!("{v:.3} ms")));
            }
            if zstd1 {
                row.push(m.zstd1_bytes.map_or("-".into(), |z| {
                    format!("{:.2}", z as f64 / m.bytes_s2c.max(1) as f64)
                }));
            }
            if cpu {
                row.push(cpu_list(&m.cpu_s));
            }
            t.rows.push(row);
        }
        t
    }

    /// `config`'s TPS divided by `against`'s on `workload` at `rate` (above 1: more transactions);
    /// `None` when either has no TPS or `against`'s is not positive. With several rounds, the median
    /// of the ratios taken within a round ([`TunnelReport::tps_ratios`]).
    pub fn tps_ratio(
        &self,
        rate: Option<u64>,
        workload: &str,
        config: &str,
        against: &str,
    ) -> Option<f64> {
        let mut r = self.tps_ratios(rate, workload, config, against);
        r.sort_by(f64::total_cmp);
        let n = r.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(r[n / 2]),
            _ => Some((r[n / 2 - 1] + r[n / 2]) / 2.0),
        }
    }

    /// `config`'s TPS divided by `against`'s in each round both measured, in round order: a
    /// machine whose speed drifts over minutes moves both sides of a pair alike.
    pub fn tps_ratios(
        &self,
        rate: Option<u64>,
        workload: &str,
        config: &str,
        against: &str,
    ) -> Vec<f64> {
        let others = self.rounds_of(rate, workload, against);
        self.rounds_of(rate, workload, config)
            .into_iter()
            .filter_map(|m| {
                let a = others.iter().find(|a| a.round == m.round)?.tps?;
                let t = m.tps?;
                (a > 0.0 && a.is_finite() && t.is_finite()).then(|| t / a)
            })
            .collect()
    }

    /// [`TunnelReport::tps_ratio`] as the table shows it: `0.95x`, and with several rounds their range,
    /// `0.95x (0.83-1.02)`.
    fn tps_ratio_text(&self, rate: Option<u64>, workload: &str, config: &str) -> String {
        let median = times(self.tps_ratio(rate, workload, config, SOCAT));
        let r = self.tps_ratios(rate, workload, config, SOCAT);
        if r.len() < 2 || config == SOCAT {
            return median;
        }
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{median} ({lo:.2}-{hi:.2})")
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

/// The title of one rate and workload's table: `load, 50 Mbit/s link`.
pub(crate) fn heading(rate: Option<u64>, workload: &str) -> String {
    format!("{workload}, {} link", rate_label(rate))
}

/// A rate as a reader says it: `50 Mbit/s`, `1 Gbit/s`, `unshaped`.
pub fn rate_label(rate: Option<u64>) -> String {
    match rate {
        None => "unshaped".into(),
        Some(r) if r >= 1000 && r % 1000 == 0 => format!("{} Gbit/s", r / 1000),
        Some(r) => format!("{r} Mbit/s"),
    }
}

/// Bytes in decimal units with three significant figures (`303 MB`, `1.01 GB`), as link rates count them.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 999.5 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v >= 99.95 {
        format!("{v:.0} {}", UNITS[u])
    } else if v >= 9.995 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A ratio as `3.33x`, or `-` when there is none.
pub(crate) fn times(r: Option<f64>) -> String {
    match r {
        Some(v) if v.is_finite() && v >= 99.95 => format!("{v:.0}x"),
        Some(v) if v.is_finite() => format!("{v:.2}x"),
        _ => "-".into(),
    }
}

/// Seconds with a precision that fits their size.
pub(crate) fn secs(s: f64) -> String {
    if s >= 99.95 {
        format!("{s:.0} s")
    } else if s >= 9.995 {
        format!("{s:.1} s")
    } else {
        format!("{s:.2} s")
    }
}

/// CPU seconds per process, `tunnel client 3.25, tunnel server 4.50`; `-` when none was measured.
pub(crate) fn cpu_list(cpu: &BTreeMap<String, f64>) -> String {
    if cpu.is_empty() {
        return "-".into();
    }
    let v: Vec<String> = cpu.iter().map(|(k, s)| format!("{k} {s:.2}")).collect();
    v.join(", ")
}

/// A number without trailing zeros (`1`, `0.1`).
fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A text table: the first column left-aligned, the others right-aligned, the last left-aligned when it
/// is the CPU list (so a long list does not push the numbers apart).
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn write(&self, w: &mut dyn Write) -> io::Result<()> {
        let n = self.head.len();
        let mut width: Vec<usize> = self.head.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (k, c) in r.iter().enumerate().take(n) {
                width[k] = width[k].max(c.chars().count());
            }
        }
        let left = |k: usize| k == 0 || (k == n - 1 && self.head[k] == "CPU s");
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (k, c) in r.iter().enumerate().take(n) {
                if k > 0 {
                    line.push_str("  ");
                }
                let pad = width[k] - c.chars().count();
                if left(k) {
                    line.push_str(c);
                    line.extend(std::iter::repeat_n(' ', pad));
                } else {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(c);
                }
            }
            writeln!(w, "  {}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
