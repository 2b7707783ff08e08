//! What `bench spill` measured: the report types (their serialization is the JSON output) and the text.

use super::ours::OursResult;
use super::server::ServerSpill;
use advise::fmt::bytes;
use serde::Serialize;
use std::fmt::Write as _;

/// The whole benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `SHOW server_version`.
    pub pg_version: String,
    /// `--rows`.
    pub rows: u64,
    /// The server's `logical_decoding_work_mem` for every decoding: its minimum, so that everything large
    /// spills (streaming off) or streams (streaming on).
    pub logical_decoding_work_mem: &'static str,
    /// Our `--work-mem`, in bytes: what a transaction may hold in memory before it goes to a spill file.
    pub work_mem: u64,
    /// pgoutput `proto_version` of every decoding.
    pub proto_version: u32,
    /// What `decode_s` of our results covers.
    pub decode_measures: &'static str,
    /// CPUs available to this process.
    pub cpus: usize,
    /// From /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// One entry per workload, in the order they ran.
    pub workloads: Vec<WorkloadReport>,
}

/// One workload: the server's spill beside ours with each compression.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub about: &'static str,
    /// Rows its table holds after it ran: the inserts every replay must see.
    pub rows_inserted: u64,
    /// Wall seconds the workload took.
    pub workload_s: f64,
    /// PostgreSQL decoding it with `streaming` off.
    pub server: ServerSpill,
    /// Bytes of the captured streamed pgoutput (binary COPY rows: payloads with LSNs and lengths).
    pub captured_bytes: u64,
    /// Our assembler with each compression, in `--specs` order.
    pub ours: Vec<Ours>,
}

/// Our assembler with one compression on one workload, set against the server and against `none`.
#[derive(Clone, Debug, Serialize)]
pub struct Ours {
    /// The figures.
    #[serde(flatten)]
    pub result: OursResult,
    /// The replay saw as many inserts as the workload left rows in its table.
    pub matched: bool,
    /// Our bytes on disk over the server's `spill_bytes` for the same changes.
    pub vs_server_spill: Option<f64>,
    /// Our decode time over that of `none` in the same run, when `none` was measured.
    pub time_vs_none: Option<f64>,
}

impl Report {
    /// Workloads and compressions whose replay did not see every row: `workload spec` items.
    pub fn unmatched(&self) -> Vec<String> {
        self.workloads
            .iter()
            .flat_map(|w| {
                w.ours
                    .iter()
                    .filter(|o| !o.matched)
                    .map(move |o| format!("{} {}", w.name, o.result.spec))
            })
            .collect()
    }

    /// The text report: per workload, the server's spill, then ours with each compression.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "PostgreSQL {}, logical_decoding_work_mem = {}, pgoutput proto_version {}; our --work-mem {}; {} CPUs ({})",
            self.pg_version,
            self.logical_decoding_work_mem,
            self.proto_version,
            bytes(self.work_mem),
            self.cpus,
            self.cpu_model.as_deref().unwrap_or("unknown CPU"),
        );
        for w in &self.workloads {
            let sv = &w.server;
            let _ = writeln!(
                s,
                "\n{}: {}; {} rows inserted in {:.1} s",
                w.name, w.about, w.rows_inserted, w.workload_s
            );
            let _ = writeln!(
                s,
                "  server, streaming off: spill_bytes {} ({} spills, {} txns), peak {} under pg_replslot/; \
                 sends {} of pgoutput in {} messages; decoded in {:.2} s",
                bytes(sv.spill_bytes),
                sv.spill_count,
                sv.spill_txns,
                bytes(sv.peak_replslot_bytes),
                bytes(sv.pgoutput_bytes),
                sv.messages,
                sv.decode_s,
            );
            let _ = writeln!(
                s,
                "  {:<24} {:>11} {:>11} {:>7} {:>11} {:>9} {:>9} {:>8} {:>8} {:>10} {:>9}",
                "ours, streaming on",
                "raw",
                "on disk",
                "ratio",
                "peak disk",
                "vs server",
                "decode s",
                "cpu s",
                "vs none",
                "peak RSS",
                "replayed",
            );
            for o in &w.ours {
                let r = &o.result;
                let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}x"));
                let _ = writeln!(
                    s,
                    "  {:<24} {:>11} {:>11} {:>6.3}x {:>11} {:>9} {:>9.2} {:>8} {:>8} {:>10} {:>9}",
                    r.spec,
                    bytes(r.raw_bytes),
                    bytes(r.disk_bytes),
                    r.ratio,
                    bytes(r.peak_disk_bytes),
                    x(o.vs_server_spill),
                    r.decode_s,
                    r.decode_cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
                    x(o.time_vs_none),
                    r.peak_rss_bytes.map_or("-".into(), bytes),
                    if o.matched {
                        format!("{} ok", r.inserts)
                    } else {
                        format!("{} BAD", r.inserts)
                    },
                );
            }
        }
        let _ = writeln!(
            s,
            "\nratio: our bytes on disk / raw change bytes (below 1 is smaller). vs server: our bytes on disk / the \
             server's spill_bytes for the same workload. decode s: {}; cpu s: the CPU time of that, user and system, \
             which other load on the machine does not stretch; vs none: decode s over that of the first none. \
             replayed: inserts seen in the replay, ok when they equal the rows in the table.",
            self.decode_measures
        );
        s
    }
}
