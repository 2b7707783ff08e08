//! `pgcompress demo`: one seeded pgbench workload, once per `wal_compression` setting, on a throwaway
//! cluster. The runs are the `demo` crate's ([`::demo::compare`]); this module handles Ctrl-C, shows
//! progress and prints the comparison.

use crate::args::demo::DemoArgs;
use ::demo::long_run::{self, EXIT_INTERRUPTED};
use anyhow::Context;
use serde::Serialize;
use std::process::ExitCode;

/// The demo's JSON: the bench crate's report and the advisor's, as `wal advise --json` prints it.
#[derive(Serialize)]
struct DemoJson<'a> {
    #[serde(flatten)]
    demo: &'a ::demo::Demo,
    #[serde(skip_serializing_if = "Option::is_none")]
    advice: Option<serde_json::Value>,
}

/// Runs the demo and prints the comparison (a table, or one JSON object with `--json`).
pub fn run(a: DemoArgs) -> anyhow::Result<ExitCode> {
    let progress = long_run::start("pgcompress demo");
    let options = ::demo::Options {
        scale: a.scale,
        transactions: a.transactions,
        clients: a.clients,
        pgcompress: std::env::current_exe().context("locating this executable")?,
    };
    let result = ::demo::compare(&options, &progress);
    progress.finish();
    let cancelled = matches!(&result, Err(e) if e.is_cancelled());
    if cancelled || long_run::interrupted() {
        eprintln!("pgcompress: interrupted; the temporary cluster was stopped and deleted");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let demo = result?;
    if a.json {
        let doc = DemoJson {
            demo: &demo,
            advice: demo.advice.as_ref().map(crate::advise::to_json),
        };
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        out!("{}", demo.table());
        if let Some(adv) = &demo.advice {
            outln!();
            outln!("What `pgcompress wal advise` predicts from the off run's WAL alone (compare with the runs above):");
            crate::advise::print_table(adv);
        }
    }
    Ok(ExitCode::SUCCESS)
}
