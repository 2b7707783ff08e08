//! `pgcompress-bench spill`: what large transactions cost on disk when PostgreSQL spills them itself
//! (pgoutput `streaming` off, `pg_stat_replication_slots.spill_bytes`) against our consumer-side spill of
//! the streamed transactions (`streaming` on, [`logical::Assembler`]) with each compression, in one run.
//!
//! Every workload writes into its own table on a throwaway cluster with `wal_level = logical` and
//! `logical_decoding_work_mem = 64kB` (its minimum, so that every transaction above 64 kB spills or
//! streams). Two pgoutput slots are created before it runs. The first is decoded through
//! `pg_logical_slot_get_binary_changes` with `streaming` off while the slot's `pg_replslot/` directory is
//! sampled; the second with `streaming` on, its payloads captured once into a file (binary COPY) and then
//! pushed, for each compression, through an assembler that spills above `--work-mem`, every committed
//! transaction replayed from its spill file, decoded and written as JSON lines. Capturing once keeps the
//! server's decoding time out of ours and gives every compression the same bytes.

mod copy;
mod ours;
mod report;
mod server;
mod workload;

pub use copy::{Change, CopyReader};
pub use ours::{peak_rss, reset_peak_rss, OursResult};
pub use report::{Ours, Report, WorkloadReport};
pub use server::{ServerSpill, PROTO_VERSION};
pub use workload::{Workload, ALL as WORKLOADS, DEFAULT as DEFAULT_WORKLOADS};

use crate::error::{Context, Error, IoContext, Result};
use crate::sys::cpu_model;
use crate::{check_cancelled, Progress};
use pgcluster::{Cluster, PgInstall};
use std::time::Instant;

/// Spill compressions measured unless `--specs` says otherwise.
pub const DEFAULT_SPECS: &str = "none,lz4,zstd:1,zstd:3";

/// The server's `logical_decoding_work_mem` for the run.
const SERVER_WORK_MEM: &str = "64kB";

/// What `decode_s` covers.
const DECODE_MEASURES: &str = "reading the captured stream, pushing every payload through the assembler, \
                               replaying every committed transaction from memory or its spill file, decoding each \
                               change and writing it as a JSON line with logical recv's writer to a file (not \
                               fsynced)";

/// The oldest server whose SQL decoding functions stream in-progress transactions through pgoutput.
const MIN_MAJOR: u32 = 15;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    /// Rows of the seed workload; the others scale from it (see each workload's description).
    pub rows: u64,
    /// Workloads to run, names separated by commas; see [`DEFAULT_WORKLOADS`].
    pub workloads: String,
    /// Spill compressions, in the project's spec syntax, separated by commas; see [`DEFAULT_SPECS`].
    pub specs: String,
    /// Bytes the open transactions may hold in memory together before our assembler spills.
    pub work_mem: u64,
}

/// Runs the benchmark; see the module documentation. [`Report::unmatched`] names the replays that missed
/// rows.
pub fn run(a: &Options, p: &dyn Progress) -> Result<Report> {
    let specs = codec::parse_spec_list(&a.specs).map_err(Error::Specs)?;
    let workloads = workload::select(&a.workloads)?;
    if workloads.is_empty() {
        return Err(Error::UnknownWorkload {
            name: a.workloads.clone(),
            choices: WORKLOADS.map(|w| format!("{:?}", w.name)).join(", "),
        });
    }
    let work_mem = usize::try_from(a.work_mem)
        .map_err(|_| Error::Internal("--work-mem does not fit this machine's address space"))?;
    p.step("looking for PostgreSQL".into());
    let install =
        PgInstall::find().context("bench spill runs a throwaway PostgreSQL 15+ server")?;
    if install.major() < MIN_MAJOR {
        return Err(Error::ServerTooOld {
            command: "bench spill",
            found: install.major(),
            need: MIN_MAJOR,
            why: "pgoutput streaming through the SQL decoding functions",
            bindir: install.bindir().to_path_buf(),
        });
    }
    p.step(format!(
        "initdb and start PostgreSQL {} from {}",
        install.major(),
        install.bindir().display()
    ));
    let cluster = Cluster::builder()
        .install(install)
        .guc("wal_level", "logical")
        .guc("logical_decoding_work_mem", SERVER_WORK_MEM)
        .guc("autovacuum", "off")
        .guc("checkpoint_timeout", "1h")
        .guc("max_wal_size", "10GB")
        .start()
        .context("starting a throwaway PostgreSQL cluster")?;
    let pg_version = cluster.query_one("SHOW server_version")?;
    let tmp = tempfile::Builder::new()
        .prefix("pgcompress-bench-spill-")
        .tempdir()
        .io(|| "creating a temporary directory for the captures and spill files".into())?;

    let mut reports = Vec::with_capacity(workloads.len());
    for w in &workloads {
        check_cancelled(p)?;
        let r = one_workload(&cluster, w, a.rows, &specs, work_mem, tmp.path(), p)
            .with_context(|| format!("workload {}", w.name))?;
        reports.push(r);
    }
    p.step("stopping and deleting the cluster".into());
    cluster.stop().context("stopping the throwaway cluster")?;
    Ok(Report {
        pg_version,
        rows: a.rows,
        logical_decoding_work_mem: SERVER_WORK_MEM,
        work_mem: a.work_mem,
        proto_version: PROTO_VERSION,
        decode_measures: DECODE_MEASURES,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        workloads: reports,
    })
}

/// One workload: table, publication and both slots, the work, the server's spill, the capture, and our
/// assembler once per compression; everything it created is dropped at the end.
fn one_workload(
    cluster: &Cluster,
    w: &Workload,
    rows: u64,
    specs: &[codec::Spec],
    work_mem: usize,
    tmp: &std::path::Path,
    p: &dyn Progress,
) -> Result<WorkloadReport> {
    let (publication, srv, ours_slot) = (
        format!("pub_{}", w.name),
        format!("srv_{}", w.name),
        format!("ours_{}", w.name),
    );
    p.step(format!("{}: table, publication and slots", w.name));
    w.create(cluster)?;
    cluster.psql(&format!(
        "CREATE PUBLICATION {publication} FOR TABLE {table}; \
         SELECT pg_create_logical_replication_slot('{srv}', 'pgoutput'); \
         SELECT pg_create_logical_replication_slot('{ours_slot}', 'pgoutput');",
        table = w.table
    ))?;
    p.step(format!("{}: running the workload", w.name));
    let began = Instant::now();
    let rows_inserted = w.run(cluster, rows)?;
    let workload_s = began.elapsed().as_secs_f64();
    check_cancelled(p)?;
    p.step(format!("{}: the server decodes with streaming off", w.name));
    let server = server::server_spill(cluster, &srv, &publication, w.binary)?;
    p.note(format!(
        "{}: {} rows; server spilled {} ({} spills)",
        w.name,
        rows_inserted,
        advise::fmt::bytes(server.spill_bytes),
        server.spill_count
    ));
    check_cancelled(p)?;
    p.step(format!(
        "{}: capturing the stream with streaming on",
        w.name
    ));
    let capture = tmp.join(format!("{}.copy", w.name));
    let captured_bytes =
        server::capture_streamed(cluster, &ours_slot, &publication, w.binary, &capture)?;
    cluster.psql(&format!(
        "SELECT pg_drop_replication_slot('{srv}'); SELECT pg_drop_replication_slot('{ours_slot}'); \
         DROP PUBLICATION {publication}; DROP TABLE {table};",
        table = w.table
    ))?;
    let mut results: Vec<OursResult> = Vec::with_capacity(specs.len());
    for spec in specs {
        check_cancelled(p)?;
        p.step(format!("{}: our assembler with {spec}", w.name));
        let dir = tmp.join(format!("spill-{}", w.name));
        let output = tmp.join(format!("{}.jsonl", w.name));
        let r = ours::assemble(&capture, *spec, work_mem, &dir, &output)
            .with_context(|| format!("assembling with {spec}"))?;
        std::fs::remove_dir_all(&dir).io(|| format!("deleting {}", dir.display()))?;
        std::fs::remove_file(&output).io(|| format!("deleting {}", output.display()))?;
        p.note(format!(
            "{}: {:<8} {} raw -> {} on disk ({:.3}x) in {:.2} s",
            w.name,
            r.spec,
            advise::fmt::bytes(r.raw_bytes),
            advise::fmt::bytes(r.disk_bytes),
            r.ratio,
            r.decode_s
        ));
        results.push(r);
    }
    std::fs::remove_file(&capture).io(|| format!("deleting {}", capture.display()))?;
    let none_s = results
        .iter()
        .find(|r| r.spec == "none")
        .map(|r| r.decode_s);
    let ours = results
        .into_iter()
        .map(|r| Ours {
            matched: r.inserts == rows_inserted,
            vs_server_spill: (server.spill_bytes > 0)
                .then(|| r.disk_bytes as f64 / server.spill_bytes as f64),
            time_vs_none: none_s.filter(|&n| n > 0.0).map(|n| r.decode_s / n),
            result: r,
        })
        .collect();
    Ok(WorkloadReport {
        name: w.name,
        about: w.about,
        rows_inserted,
        workload_s,
        server,
        captured_bytes,
        ours,
    })
}
