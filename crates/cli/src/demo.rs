//! `pgcompress demo`: one seeded pgbench workload, once per `wal_compression` setting, on a throwaway
//! cluster. The runs are the `bench` crate's ([`bench::demo`]); this module handles Ctrl-C, shows progress
//! and prints the comparison.

pub(crate) mod progress;

use crate::args::bench::DemoArgs;
use progress::Progress;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the Ctrl-C handler. The server runs in its own session (pg_ctl calls `setsid`), so it does not see
/// the terminal's SIGINT; we must live long enough to stop it.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Exit status of a program ended by SIGINT, as shells report it.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// The demo's JSON: the bench crate's report and the advisor's, as `wal advise --json` prints it.
#[derive(Serialize)]
struct DemoJson<'a> {
    #[serde(flatten)]
    demo: &'a bench::demo::Demo,
    #[serde(skip_serializing_if = "Option::is_none")]
    advice: Option<serde_json::Value>,
}

/// Runs the demo and prints the comparison (a table, or one JSON object with `--json`).
pub fn run(a: DemoArgs) -> anyhow::Result<ExitCode> {
    // Without the handler Ctrl-C would kill us and leave the daemonized server running. Children in our
    // process group (psql, pgbench) still die of the SIGINT, their failure unwinds to here, and dropping
    // the cluster stops and deletes it. A second handler cannot be installed; that only happens in tests.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let progress = Progress::new(|| INTERRUPTED.load(Ordering::SeqCst));
    let options = bench::demo::Options {
        scale: a.scale,
        transactions: a.transactions,
        clients: a.clients,
        pgcompress: crate::bench::me()?,
    };
    let result = bench::demo::compare(&options, &progress);
    progress.finish();
    let cancelled = matches!(&result, Err(e) if e.is_cancelled());
    if cancelled || INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!("pgcompress: interrupted; the temporary cluster was stopped and deleted");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let demo = result?;
    if a.json {
        let doc = DemoJson {
            demo: &demo,
            advice: demo.advice.as_ref().map(crate::advise::to_json),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
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
