//! `pgcompress`: the thin command-line front of the pgcompress libraries.
//!
//! It parses arguments, calls one library function per command and maps errors to
//! exit codes: 0 success, 1 a finding (corrupt WAL, failed check), 2 bad usage or
//! unreadable input.

// First: its macros serve the modules below.
#[macro_use]
mod output;
mod advise;
mod archive;
mod args;
mod demo;
mod errors;
mod help;
mod logical;
mod tunnel;
mod walcmd;

use clap::error::ErrorKind;
use clap::FromArgMatches;
use std::process::ExitCode;

fn main() -> ExitCode {
    let (command, after_help) = help::command();
    let parsed = command
        .try_get_matches()
        .and_then(|m| args::Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, &after_help),
    };
    if matches!(cli.command, args::Command::Wal(_)) && stdout_is_pipe() {
        restore_sigpipe();
    }
    let result = match cli.command {
        args::Command::Wal(w) => walcmd::run(w),
        args::Command::Demo(d) => demo::run(d),
        args::Command::Archive(a) => archive::run(a),
        args::Command::Logical(l) => logical::run(l),
        args::Command::Tunnel(t) => tunnel::run(t),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            errors::print(errors::chain(&e));
            ExitCode::from(2)
        }
    }
}

/// Prints help, or the error for a command line that does not parse in the style of every
/// other error, and exits with the status the caller reads right: 2, but for `archive get`,
/// whose caller is PostgreSQL's restore_command, [`archive::GET_FAILED`]. PostgreSQL takes
/// any status up to 125 as "not in the archive" and would end recovery early on a typo.
fn usage_error(
    e: &clap::Error,
    after_help: &std::collections::BTreeMap<String, String>,
) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelp => {
            help::print(e, after_help);
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => help::print(e, after_help),
        _ => errors::print_usage(e, &help::command_path()),
    }
    let words: Vec<String> = std::env::args_os()
        .skip(1)
        .filter_map(|a| a.into_string().ok())
        .filter(|a| !a.starts_with('-'))
        .collect();
    if words.first().is_some_and(|w| w == "archive") && words.iter().any(|w| w == "get") {
        ExitCode::from(archive::GET_FAILED)
    } else {
        ExitCode::from(2)
    }
}

/// Whether standard output is a pipe.
fn stdout_is_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt;
    let stdout = std::io::stdout();
    let Ok(fd) = std::os::fd::AsFd::as_fd(&stdout).try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo())
}

/// Rust ignores SIGPIPE, so `pgcompress wal stats DIR | head` would fail writing to a closed
/// pipe; a report on standard output should simply stop, as cat and grep do. Only the `wal`
/// commands, which touch no network and write their report to a pipe, get the default back:
/// every other command keeps SIGPIPE ignored, so that a peer that resets a connection (rustls
/// writes TLS records with `writev`, which raises SIGPIPE) is an error the command handles,
/// never a death by signal: PostgreSQL ends recovery when restore_command dies of one, and a
/// killed `logical recv` or `archive serve` skips its cleanup.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called from main before any thread exists; SIG_DFL is a valid disposition for
    // SIGPIPE and no Rust state depends on the old one.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
