//! `pgcompress`: the thin command-line front of the pgcompress libraries.
//!
//! It parses arguments, calls one library function per command and maps errors to
//! exit codes: 0 success, 1 a finding (corrupt WAL, failed check), 2 bad usage or
//! unreadable input.

mod advise;
mod archive;
mod args;
mod bench;
mod demo;
mod logical;
mod long_run;
mod output;
mod tunnel;
mod walcmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = args::Cli::parse();
    let result = match cli.command {
        args::Command::Wal(w) => walcmd::run(w),
        args::Command::Demo(d) => demo::run(d),
        args::Command::Bench(b) => bench::run(b),
        args::Command::Archive(a) => archive::run(a),
        args::Command::Logical(l) => logical::run(l),
        args::Command::Tunnel(t) => tunnel::run(t),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pgcompress: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE, so `pgcompress wal stats DIR | head` would fail writing
/// to a closed pipe; a command-line tool should simply stop, as cat and grep do.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE and no Rust state depends on the old one.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
