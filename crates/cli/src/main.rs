//! `pgcompress`: the thin command-line front of the pgcompress libraries.
//!
//! It parses arguments, calls one library function per command and maps errors to
//! exit codes: 0 success, 1 a finding (corrupt WAL, failed check), 2 bad usage or
//! unreadable input.

mod args;
mod demo;
mod output;
mod walcmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let result = match cli.command {
        args::Command::Wal(w) => walcmd::run(w),
        args::Command::Demo(d) => demo::run(d),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pgcompress: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
