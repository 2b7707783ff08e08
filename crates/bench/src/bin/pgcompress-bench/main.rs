//! `pgcompress-bench`: the lab of pgcompress, apart from the product. It measures `pgcompress` against
//! the tools DBAs use today (pg_waldump, pgBackRest, gzip, zstd, xz, socat, `ssh -C`) on throwaway
//! clusters; `tunnel` builds network namespaces and may install its peers, so it needs root. It runs the
//! `pgcompress` binary beside it (or the one `$PGCOMPRESS` names, or the one on PATH).
//!
//! Exit status: 0 figures printed, 1 a check of a run failed, 2 bad usage or a missing tool, 130 interrupted.

/// `print!` into standard output that returns the write's error (a closed pipe) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `println!` into standard output that returns the write's error instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod args;
mod commands;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Our tools against their peers, measured in the same run (the lab; not part of `pgcompress`).
#[derive(Parser, Debug)]
#[command(name = "pgcompress-bench", version, about, long_about = None)]
#[command(
    after_help = "Examples:\n  pgcompress-bench read\n  pgcompress-bench archive --segments 16\n  pgcompress-bench spill --rows 100000\n  sudo pgcompress-bench tunnel --scale 0.1\n\n\
Runs the pgcompress binary next to this one; set PGCOMPRESS to the path of another."
)]
struct Cli {
    #[command(subcommand)]
    command: args::BenchCommand,
}

/// Names the `pgcompress` executable the benchmarks run.
const PGCOMPRESS_ENV: &str = "PGCOMPRESS";

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(2),
            };
        }
    };
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pgcompress-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The `pgcompress` executable measured: `$PGCOMPRESS`, else the one beside this executable (both come
/// out of the same `cargo build`), else the one on PATH.
fn pgcompress() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(PGCOMPRESS_ENV) {
        let p = PathBuf::from(p);
        anyhow::ensure!(
            p.is_file(),
            "{PGCOMPRESS_ENV}={} is not a file; set it to the pgcompress executable to measure",
            p.display()
        );
        return Ok(p);
    }
    let me = std::env::current_exe().context("locating this executable")?;
    if let Some(beside) = me.parent().map(|d| d.join("pgcompress")) {
        if beside.is_file() {
            return Ok(beside);
        }
    }
    pgtest::which("pgcompress").with_context(|| {
        format!(
            "no pgcompress beside {} nor on PATH: build it (cargo build -p cli) or set {PGCOMPRESS_ENV}",
            me.display()
        )
    })
}
