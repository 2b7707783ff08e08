//! The one error type of the harness.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while finding, starting, driving or stopping a throwaway cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No usable PostgreSQL installation was found.
    #[error(
        "no PostgreSQL installation found ({tried}); install PostgreSQL or set PGCOMPRESS_PG_BINDIR to its bin directory"
    )]
    InstallNotFound {
        /// The places that were looked at, for the message.
        tried: String,
    },
    /// A directory was named as a PostgreSQL bin directory but lacks a required program.
    #[error("{bindir}: not a PostgreSQL bin directory (missing {program})")]
    NotABindir {
        /// The directory that was checked.
        bindir: PathBuf,
        /// The program that is missing.
        program: String,
    },
    /// The PostgreSQL major asked for (`PGCOMPRESS_PG_MAJOR`, `ClusterBuilder::major`) is not installed.
    #[error(
        "PostgreSQL {major} is not installed ({tried}); run scripts/pg-majors.sh {major} (16-18) or install Debian's postgresql-{major}"
    )]
    MajorNotInstalled {
        /// The major that was asked for.
        major: u32,
        /// The places that were looked at, for the message.
        tried: String,
    },
    /// `PGCOMPRESS_PG_MAJOR` is not a number.
    #[error("PGCOMPRESS_PG_MAJOR={value:?} is not a PostgreSQL major version (for example 17)")]
    BadMajorEnv {
        /// The variable's value.
        value: String,
    },
    /// `postgres --version` printed something we could not parse.
    #[error("cannot parse PostgreSQL version from {output:?}")]
    BadVersion {
        /// What the program printed.
        output: String,
    },
    /// An I/O operation on the harness's own files failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A program could not be started at all.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A program ran but exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// The exit status, as printed by the standard library.
        status: String,
        /// What the program wrote to standard error (trimmed).
        stderr: String,
        /// What the program wrote to standard output (trimmed).
        stdout: String,
    },
    /// A program did not finish in time and was killed.
    #[error("`{command}` did not finish within {after:?} and was killed; stderr so far: {stderr}")]
    Timeout {
        /// The command line.
        command: String,
        /// How long we waited.
        after: Duration,
        /// What the program had written to standard error.
        stderr: String,
    },
    /// Waiting for some condition of the server took too long.
    #[error("timed out after {after:?} waiting for {what}")]
    WaitTimeout {
        /// What we were waiting for.
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The server did not start; the log tail usually says why.
    #[error("PostgreSQL server in {data_dir} did not start: {reason}\n--- server log tail ---\n{log_tail}")]
    StartFailed {
        /// The data directory.
        data_dir: PathBuf,
        /// The first error seen (usually from `pg_ctl`).
        reason: String,
        /// The last lines of the server log.
        log_tail: String,
    },
    /// Running as root, but there is no `postgres` system user to run the server as.
    #[error(
        "running as root but there is no `postgres` system user to run PostgreSQL as (PostgreSQL refuses root); create one or run as a normal user"
    )]
    NoServerUser,
    /// A GUC name is not a plain identifier, so it cannot be written safely.
    #[error("invalid GUC name {name:?} (expected letters, digits, `_` and `.`)")]
    InvalidGucName {
        /// The rejected name.
        name: String,
    },
    /// A query returned something other than what the caller asked for.
    #[error("query {sql:?} returned {output:?}, expected {expected}")]
    UnexpectedOutput {
        /// The SQL that was run.
        sql: String,
        /// Its output.
        output: String,
        /// What shape was expected.
        expected: &'static str,
    },
    /// A path is too long for a Unix socket (PostgreSQL's limit comes from `sockaddr_un.sun_path`).
    #[error("socket path {path} is too long for a Unix socket ({len} bytes, max {max}); set TMPDIR to a shorter directory")]
    SocketPathTooLong {
        /// The socket file path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A network-namespace link (pgtest's `NetLink`) tag would not make a plain namespace name.
    #[error(
        "invalid network namespace tag {tag:?} (expected 1 to 16 ASCII letters, digits or `_`)"
    )]
    InvalidNetnsTag {
        /// The rejected tag.
        tag: String,
    },
}

impl Error {
    /// Wraps an I/O error with a description of what was being done.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
