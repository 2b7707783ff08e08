//! `pgcompress demo`: one seeded pgbench workload, once per `wal_compression` setting, on a throwaway cluster.
//!
//! Every run starts from the same place: a byte-identical copy of the pgbench tables
//! (`CREATE DATABASE ... STRATEGY FILE_COPY` from a template loaded once), a checkpoint, and a segment switch.
//! So each run writes a full-page image the first time it touches a page, as production does after a
//! checkpoint, and its WAL sits alone in its own archived segments, which the `wal` crate then reads and
//! verifies.

mod progress;
mod report;
mod session;

use crate::args::DemoArgs;
use progress::Progress;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use wal::ImageMethod;

/// Set by the Ctrl-C handler. The server runs in its own session (pg_ctl calls `setsid`), so it does not see
/// the terminal's SIGINT; we must live long enough to stop it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Exit status of a program ended by SIGINT, as shells report it.
const EXIT_INTERRUPTED: u8 = 130;

/// The settings compared, in the order they run and are printed.
const SETTINGS: [ImageMethod; 4] = ImageMethod::ALL;

/// Runs the demo and prints the comparison (a table, or one JSON object with `--json`).
pub fn run(a: DemoArgs) -> anyhow::Result<ExitCode> {
    // Without the handler Ctrl-C would kill us and leave the daemonized server running. Children in our
    // process group (psql, pgbench) still die of the SIGINT, their failure unwinds to here, and dropping
    // the cluster stops and deletes it. A second handler cannot be installed; that only happens in tests.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let progress = Progress::new();
    let result = session::compare(&a, &progress);
    progress.finish();
    if interrupted() {
        eprintln!("pgcompress: interrupted; the temporary cluster was stopped and deleted");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let demo = result?;
    if a.json {
        let mut j = demo.json();
        if let (Some(obj), Some(adv)) = (j.as_object_mut(), &demo.advice) {
            obj.insert("advice".into(), crate::advise::to_json(adv));
        }
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", demo.table());
        if let Some(adv) = &demo.advice {
            println!();
            println!("What `pgcompress wal advise` predicts from the off run's WAL alone (compare with the runs above):");
            crate::advise::print_table(adv);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// True once Ctrl-C (or SIGTERM) was received.
fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Fails when Ctrl-C was received, so the demo stops between steps.
fn check_interrupted() -> anyhow::Result<()> {
    if interrupted() {
        anyhow::bail!("interrupted");
    }
    Ok(())
}
