//! The one error type of the benchmarks and the demo.
//!
//! Each variant says what went wrong in its own words and keeps what caused it as its [`source`]
//! (the binary prints the whole chain, `a: b: c`), so a message reads as "what was being done: why it failed".
//!
//! [`source`]: std::error::Error::source

use std::path::PathBuf;
use std::process::ExitStatus;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can end a benchmark or the demo early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The user asked to stop ([`crate::Progress::cancelled`]); the throwaway cluster is stopped on the way out.
    #[error("interrupted")]
    Cancelled,
    /// What was being done when `source` failed: a step of a run, a workload, a setting.
    #[error("{context}")]
    Context {
        /// The step, in words ("run with wal_compression = lz4").
        context: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
    /// Finding, starting, driving or stopping the throwaway cluster failed.
    #[error(transparent)]
    Cluster(#[from] pgcluster::Error),
    /// A file or directory operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, naming the path ("creating /tmp/x/restore").
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A program could not be started.
    #[error("{what}: cannot run {program}")]
    Spawn {
        /// The step that runs it ("xz -6 push of 000000010000000000000002").
        what: String,
        /// The program.
        program: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A program ran and exited unsuccessfully.
    #[error("{what} failed ({status}): {stderr}")]
    Failed {
        /// The step, or the command line.
        what: String,
        /// How it exited.
        status: ExitStatus,
        /// The first line it printed on standard error, or "no message".
        stderr: String,
    },
    /// Segment files could not be found or read.
    #[error(transparent)]
    Wal(#[from] wal::source::SourceError),
    /// The advisor failed on a run's WAL.
    #[error(transparent)]
    Advise(#[from] advise::AdviseError),
    /// A built-in list of methods does not parse (a bug: the list is a constant).
    #[error(transparent)]
    Spec(#[from] codec::SpecError),
    /// `--methods` names a method that does not parse.
    #[error("--methods")]
    Methods(#[source] codec::SpecError),
    /// `--specs` names a compression that does not parse.
    #[error("--specs")]
    Specs(#[source] codec::SpecError),
    /// Our spill store failed: an I/O error on a spill file, a corrupt record, a stream that breaks the
    /// protocol.
    #[error("the transaction assembler")]
    Assemble(#[from] logical::AssembleError),
    /// A change could not be written as a JSON line.
    #[error("writing JSON lines")]
    Output(#[from] logical::output::OutputError),
    /// A pgoutput message did not decode.
    #[error("decoding pgoutput")]
    Decode(#[from] logical::DecodeError),
    /// `--methods` is malformed: an empty item, a setting listed twice.
    #[error("--methods: {0}")]
    MethodsList(String),
    /// `--workloads` names no known workload.
    #[error("no workload named {name:?}; choose from: {choices}")]
    UnknownWorkload {
        /// The name asked for.
        name: String,
        /// The names there are, quoted and separated by commas.
        choices: String,
    },
    /// A workload kind this version of the benchmark does not know how to run.
    #[error("workload {0:?}: its setup or run is of a kind this benchmark does not know")]
    UnsupportedWorkload(&'static str),
    /// Programs the benchmark runs are not installed.
    #[error(
        "{command} needs {} on PATH; install with scripts/setup.sh (Debian packages: {})",
        .programs.join(", "),
        .packages.join(" ")
    )]
    MissingPrograms {
        /// The command that needs them ("bench archive").
        command: &'static str,
        /// The programs not found.
        programs: Vec<String>,
        /// The Debian packages that hold them.
        packages: Vec<String>,
    },
    /// A tunnel half did not start, stop or report as it should, or data through it differed.
    #[error("{what}: {reason}")]
    Tunnel {
        /// The half or the step ("the tunnel's client half").
        what: String,
        /// What went wrong.
        reason: String,
    },
    /// The S3-compatible server of `bench archive --sustained` did not start or answer.
    #[error("the S3-compatible server: {what}: {reason}")]
    S3Server {
        /// The step ("creating bucket pgcompress").
        what: String,
        /// What went wrong.
        reason: String,
    },
    /// The PostgreSQL found is older than the command needs.
    #[error(
        "PostgreSQL {found} found in {}; {command} needs {need} or later ({why}); install it or set {} to its bin directory",
        .bindir.display(),
        pgcluster::BINDIR_ENV
    )]
    ServerTooOld {
        /// The command ("bench wal", "the demo").
        command: &'static str,
        /// The major version found.
        found: u32,
        /// The oldest major version that works.
        need: u32,
        /// What the command needs of it.
        why: &'static str,
        /// Where it was found.
        bindir: PathBuf,
    },
    /// The cluster's WAL segments are not the size asked for.
    #[error("the cluster's WAL segments are {found} bytes, not the {asked_mb} MB asked for")]
    SegmentSize {
        /// The size the server reports, in bytes.
        found: u64,
        /// The size asked for, in MB.
        asked_mb: u32,
    },
    /// The WAL to read was written by another major version than the installed pg_waldump's.
    #[error(
        "this WAL was written by PostgreSQL {wal} but the installed pg_waldump is {installed}'s: it reads only its own version"
    )]
    WalVersion {
        /// The WAL's version.
        wal: String,
        /// The installed major version.
        installed: u32,
    },
    /// The two programs compared do not do the same work, so timing them would compare nothing.
    #[error("pgcompress and pg_waldump disagree on this WAL; not timing different work")]
    OutputsDisagree,
    /// Text from the server or a program is not what was expected.
    #[error("{what} returned {text:?}, expected {expected}")]
    Parse {
        /// Where the text came from (a query).
        what: String,
        /// The text.
        text: String,
        /// What it should have been.
        expected: &'static str,
    },
    /// The server does not show the `wal_compression` just set.
    #[error("SHOW wal_compression says {shown:?} after setting it to {set:?}")]
    SettingNotShown {
        /// What SHOW says.
        shown: String,
        /// What was set.
        set: &'static str,
    },
    /// A run's images were stored with another method than its setting, so the setting did not reach the
    /// backends.
    #[error("{count} image(s) stored with {found} while wal_compression = {setting}")]
    OtherMethod {
        /// Images stored with `found`.
        count: u64,
        /// The method they were stored with.
        found: &'static str,
        /// The run's setting.
        setting: &'static str,
    },
    /// A run with a compressing setting wrote images, none of them compressed with it.
    #[error("no image stored with {method} although wal_compression = {setting}")]
    NoImageWithMethod {
        /// The method expected.
        method: &'static str,
        /// The run's setting.
        setting: &'static str,
    },
    /// A run's WAL ends in damage before the end of its last segment.
    #[error("the run's WAL ends before its last segment does")]
    WalEndsEarly(#[source] wal::WalError),
    /// A run's WAL fails verification.
    #[error("the run's WAL is not sound: {0}")]
    WalUnsound(String),
    /// A tool reported success but what it should have written is not there.
    #[error("{tool} archived {segment} but no file for it is in {}", .repo.display())]
    NotStored {
        /// The tool.
        tool: String,
        /// The segment.
        segment: String,
        /// Where its files should be.
        repo: PathBuf,
    },
    /// The demo was asked to measure pgBackRest, which it does not configure.
    #[error("the demo does not set up pgBackRest")]
    NoPgbackrest,
    /// Something that cannot happen did: a bug in this crate.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl Error {
    /// True when the run ended because the user asked to stop, however deep in the chain.
    pub fn is_cancelled(&self) -> bool {
        match self {
            Error::Cancelled => true,
            Error::Context { source, .. } => source.is_cancelled(),
            _ => false,
        }
    }
}

/// Adds what was being done to an error, as [`Error::Context`].
pub trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl Into<String>) -> Result<T>;
    /// Wraps the error with the text `f` makes, made only on failure.
    fn with_context(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: context.into(),
            source: Box::new(e.into()),
        })
    }

    fn with_context(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: f(),
            source: Box::new(e.into()),
        })
    }
}

/// Names the path an I/O error happened on, as [`Error::Io`].
pub trait IoContext<T> {
    /// Wraps the error with the text `f` makes ("reading /x/y"), made only on failure.
    fn io(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: f(),
            source,
        })
    }
}

/// An error with its causes as the binary prints them (`{:#}` of anyhow): every error's own
/// words, joined with ": ".
pub fn chain(e: &Error) -> String {
    let mut out = e.to_string();
    let mut cur: &dyn std::error::Error = e;
    while let Some(s) = cur.source() {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_and_io_keep_their_source() {
        let e: Result<()> = Err(std::io::Error::new(std::io::ErrorKind::NotFound, "gone"))
            .io(|| "reading /x/seg".into());
        let e = e.context("archiving the off run's WAL").unwrap_err();
        assert_eq!(
            chain(&e),
            "archiving the off run's WAL: reading /x/seg: gone"
        );
        assert!(!e.is_cancelled());
    }

    #[test]
    fn cancellation_is_found_under_context() {
        let e = Err::<(), _>(Error::Cancelled)
            .context("run with wal_compression = lz4")
            .unwrap_err();
        assert!(e.is_cancelled());
        assert_eq!(chain(&e), "run with wal_compression = lz4: interrupted");
    }

    #[test]
    fn methods_errors_name_the_option() {
        let e = Error::Methods("zstd:99".parse::<codec::Spec>().unwrap_err());
        assert!(chain(&e).starts_with("--methods: "), "{}", chain(&e));
    }
}
