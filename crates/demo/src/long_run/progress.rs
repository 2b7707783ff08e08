//! Progress on stderr: a spinner on a terminal, plain step lines otherwise (logs, CI, tests).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Reports what a long-running command is doing; never writes to stdout.
pub struct Progress {
    /// The spinner, when stderr is a terminal.
    bar: Option<ProgressBar>,
    /// When the demo started, for the timestamps of plain lines.
    start: Instant,
    /// Whether the user asked to stop.
    cancelled: fn() -> bool,
    /// The command the plain lines name (`pgcompress demo`).
    label: &'static str,
}

impl Progress {
    /// A spinner when stderr is a terminal, plain lines starting with `label` (`pgcompress-bench spill`)
    /// when it is not.
    pub fn labelled(label: &'static str, cancelled: fn() -> bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed:>3}] {msg}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Progress {
            bar,
            start: Instant::now(),
            cancelled,
            label,
        }
    }

    /// Removes the spinner before the results are printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// `pgcompress demo [  3.2s] ` for plain lines.
    fn prefix(&self) -> String {
        format!(
            "{} [{:>5.1}s] ",
            self.label,
            self.start.elapsed().as_secs_f64()
        )
    }
}

impl crate::Progress for Progress {
    /// Announces the step now under way.
    fn step(&self, msg: String) {
        match &self.bar {
            Some(bar) => bar.set_message(msg),
            None => eprintln!("{}{msg}", self.prefix()),
        }
    }

    /// Prints a line that stays (a finished run), above the spinner if there is one.
    fn note(&self, msg: String) {
        match &self.bar {
            Some(bar) => bar.println(format!("  {msg}")),
            None => eprintln!("{}{msg}", self.prefix()),
        }
    }

    fn cancelled(&self) -> bool {
        (self.cancelled)()
    }
}
