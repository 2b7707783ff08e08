//! Small helpers for human-readable output.

/// Bytes as a short human figure: 1.5 MiB.
pub use advise::fmt::bytes;

/// A share as a percentage, 0 when the whole is 0.
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Writes to standard output as `print!` does, except that a closed pipe ends the process
/// quietly with status 141 (what a shell reports for a command ended by SIGPIPE), as `cat`
/// into `head` ends. SIGPIPE itself stays ignored by the commands that talk to a network (see
/// `main`), so a network peer's reset is an error they handle; only their standard output
/// going away ends them here, after everything before the write is done.
pub fn stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(CLOSED_STDOUT);
        }
        panic!("failed printing to stdout: {e}");
    }
}

/// The status of a command whose standard output was a pipe closed by its reader.
pub const CLOSED_STDOUT: i32 = 128 + libc::SIGPIPE;

/// `print!` that stops quietly on a closed pipe ([`stdout`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::stdout(format_args!($($arg)*)) };
}

/// `println!` that stops quietly on a closed pipe ([`stdout`]).
macro_rules! outln {
    () => { $crate::output::stdout(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}
