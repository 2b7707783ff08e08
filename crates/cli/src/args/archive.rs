//! Arguments of `pgcompress archive ...`.

use clap::{Args, Subcommand};
use codec::Spec;
use std::path::PathBuf;
use std::str::FromStr;

/// `pgcompress archive --help`: repositories, settings and their precedence, the config file.
pub const ARCHIVE_HELP: &str = "Repositories:\n  \
--repo /backup/wal          a local directory: <name>.pgcz files\n  \
--repo s3://BUCKET/PREFIX   an S3-compatible bucket: objects PREFIX/<name>.pgcz\n\n\
Settings, highest precedence first: flag, environment, config file, default.\n  \
repo       --repo       $PGCOMPRESS_REPO\n  \
method     --method     $PGCOMPRESS_METHOD                       default zstd:level=3\n  \
endpoint   --endpoint   $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL  default AWS itself\n  \
region     --region     $AWS_REGION, $AWS_DEFAULT_REGION         default us-east-1\n\
The config file is --config FILE or $PGCOMPRESS_CONFIG (TOML; unknown keys are an error; a relative \
directory in `repo` is relative to the file). S3 credentials come from the environment only: \
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (or web identity or container \
credentials); archive_command runs with the PostgreSQL server's environment, so set them there. \
A custom endpoint may be http://.\n\n\
Example config file, /etc/pgcompress.toml:\n  \
repo = \"s3://pg-wal/main\"\n  \
endpoint = \"http://127.0.0.1:9000\"   # an S3-compatible server; omit for AWS\n  \
region = \"eu-west-1\"\n  \
method = \"xz:1\"   # the high-ratio setting: smaller than xz -6, several times the push CPU of the default\n\n\
Once per cluster, as the server's user, before archive_command points at the repository:\n  \
pgcompress archive init --config /etc/pgcompress.toml --pgdata \"$PGDATA\"\n\n\
postgresql.conf:\n  \
archive_command = 'pgcompress archive push --config /etc/pgcompress.toml %p'\n  \
restore_command = 'pgcompress archive get --config /etc/pgcompress.toml %f %p'\n\n\
Semantics are the same for both kinds of repository: a name is never overwritten (S3: a \
conditional PutObject, If-None-Match: *), pushing identical content again succeeds, different \
content fails; get writes %p only after the hash checks out.";

#[derive(Subcommand, Debug)]
pub enum ArchiveCommand {
    /// Make a location the repository of one cluster (once, before archive_command uses it).
    #[command(
        after_help = "Records in the repository which cluster it belongs to: the system identifier, the WAL \
segment size and the major version (file `pgcompress-repository` beside the containers), as pgBackRest's \
stanza-create does. Push and get refuse a location without it and create nothing there, so a typo in --repo \
or a backup volume that is not mounted cannot start an archive on the wrong disk; push refuses a WAL segment \
of another system, and get refuses to restore into a data directory of another system (restore_command \
runs in the data directory, whose global/pg_control it reads).\n\n\
A directory is created with its parents; an S3 bucket must exist. Running init again with the same cluster \
changes nothing. A repository that pgcompress filled before init existed is initialized the same way: init \
checks that the oldest and the newest WAL segment in it are of this cluster, then keeps every file.\n\n\
Examples:\n  \
pgcompress archive init --repo /backup/wal --pgdata /var/lib/postgresql/15/main\n  \
pgcompress archive init --repo s3://pg-wal/main --pgdata \"$PGDATA\"\n  \
pgcompress archive init --repo /backup/wal --from-segment /backup/wal-copy/000000010000000000000001\n\n\
Exit status: 0 initialized (or already, for this cluster); 1 the repository cannot be reached; 2 bad usage, \
not a data directory, or the location belongs to another cluster (nothing changed)."
    )]
    Init(InitArgs),
    /// Archive one file (use as archive_command).
    #[command(
        after_help = "Packs the file into a self-describing container (WAL segments: valid WAL \
compressed, the zero tail after a switch or past the insert point stored as a length), decodes it again \
and compares it with the original, then publishes it durably (directory: temp file, fsync, link, fsync directory; \
S3: one conditional PutObject that fails if the name exists). Pushing a \
name that is already archived with the same content succeeds; with different content it fails and \
overwrites nothing.\n\n\
postgresql.conf:\n  archive_mode = on\n  archive_command = 'pgcompress archive push --repo /backup/wal %p'\n  \
(or --repo s3://pg-wal/main, or --config FILE: see `pgcompress archive --help`)\n\n\
Exit status: 0 archived (or already archived, identical); 1 failure (nothing published); 2 bad usage, \
the repository is not initialized (see `archive init`; nothing is created), or the file is a WAL segment of \
another system or segment size than the repository's (nothing written)."
    )]
    Push(PushArgs),
    /// Restore one file (use as restore_command).
    #[command(
        after_help = "Decodes the archived file, writes it next to PATH while hashing it, \
and renames it to PATH only if the hash matches the original's: XXH3-128, which containers record \
beside the SHA-256. PATH appears only complete \
and checked. `archive verify` checks the SHA-256 as well.\n\n\
It is not fsynced unless --fsync is given: PostgreSQL fsyncs a restored segment itself when it \
keeps it, and after a crash asks restore_command again (pgBackRest's archive-get does the same). \
Use --fsync when PATH is not for PostgreSQL's recovery.\n\n\
postgresql.conf (or recovery settings):\n  restore_command = 'pgcompress archive get --repo /backup/wal %f %p'\n\n\
Exit status: 0 restored; 1 not in the archive (silently, as PostgreSQL expects); 200 anything else: \
a command line that does not parse (a misspelt flag, a missing argument), a repository that is missing, \
not initialized, unreachable or misconfigured, a data directory of another system, or a file archived but \
damaged or unreadable (one line on stderr; above 125, so PostgreSQL stops recovery with the error in its log \
instead of taking a mistake for the end of the archive and promoting)."
    )]
    Get(GetArgs),
    /// One line per archived file: size, stored size, ratio, method.
    #[command(
        after_help = "Examples:\n  pgcompress archive list --repo /backup/wal\n  \
pgcompress archive list --repo /backup/wal --json   # every field of every container\n\n\
Exit status: 0 listed; 1 the repository cannot be read; 2 bad usage."
    )]
    List(ListArgs),
    /// The repository summed up (files by kind, sizes, ratio, methods), or one file in detail.
    #[command(
        after_help = "Examples:\n  pgcompress archive info --repo /backup/wal\n  \
pgcompress archive info --repo /backup/wal 000000010000000000000003\n\n\
Exit status: 0 shown; 1 the repository cannot be read, or NAME is not in it; 2 bad usage."
    )]
    Info(InfoArgs),
    /// Decode every archived file and check every checksum and hash.
    #[command(
        after_help = "Exit status: 0 every file decodes to its recorded SHA-256 and XXH3-128; 1 a file is \
damaged (each bad file named on stderr, first one first); 2 bad usage."
    )]
    Verify(RepoArgs),
    /// Store the server's .ready files ahead of the archiver (what `push --async` starts).
    #[command(
        after_help = "Watches PG_WAL/archive_status for .ready files and packs and stores several at \
once (--workers, default one per core), over one repository connection kept for its lifetime, in the \
order PostgreSQL's archiver takes them (timeline history files first). After the repository reports a file \
durably stored it writes SPOOL/done/NAME (the file's XXH3-128 and the repository); `archive push --async \
--spool SPOOL %p` returns 0 only when that marker matches the bytes of %p, which it hashes itself. \
Markers are removed once PostgreSQL has marked the file done. The spool holds no WAL: memory and disk stay \
bounded however far the archiver lags. A backlog above --queue-max is reported (log line every 10 s, \
pgcompress_archive_backlog_full, the push's timeout message); nothing is dropped.\n\n\
Run it as a service (systemd: Restart=always, the PostgreSQL server's user and environment) or let \
`push --async` start it, detached, with --idle-exit 60. A SIGKILL or SIGTERM at any moment is safe: a \
file is stored whole or not at all, and a marker is written only after.\n\n\
Exit status: 0 stopped (idle, or PG_WAL gone, or another process already serves SPOOL); 1 failure; 2 bad usage."
    )]
    Serve(ServeArgs),
    /// Restore the segments after the last one asked for ahead of recovery (what `get
    /// --prefetch` starts).
    #[command(
        after_help = "Reads SPOOL/fetch/wanted, the last name restore_command asked for, and keeps the next \
--depth segments of its timeline restored in SPOOL/fetch/data, each checked against the XXH3-128 its \
container records while it was rebuilt, with SPOOL/fetch/meta/NAME naming that digest and the repository. \
`get --prefetch` moves a queued file into place only after hashing it again and comparing; anything else it \
fetches as usual. Files outside the window (older, or of another timeline) are removed, so the queue holds \
at most --depth files.\n\n\
Exit status: 0 stopped (idle, or another process already prefetches into SPOOL); 1 failure; 2 bad usage."
    )]
    Prefetch(PrefetchArgs),
    /// Remove what no kept base backup needs (retention).
    #[command(
        after_help = "Base backups are found by the backup history files PostgreSQL archives at the end of each backup (<segment>.<offset>.backup). Everything before the start of the oldest kept backup goes, on every timeline: WAL segments, .partial segments, older backup history files. Timeline history files go only when their timeline is below every kept backup's and is none's ancestor. Segments at or after the oldest kept backup's start are never touched, so archive_command may push while expire runs. A backup or timeline history file that cannot be read stops expire before anything is removed.\n\n\
Backups still running: PostgreSQL runs several backups at once, and one that started before the newest finished backup may still be running; it has no backup history file yet and needs WAL from before that backup's start. --min-age (default 24h) keeps it: nothing archived less than --min-age ago is removed, nor anything at or after the oldest such file's position. A backup needs WAL from the segment being written when it started, and every such segment is archived after that, so every backup that started less than --min-age ago stays restorable. The limit: a backup running for longer than --min-age is not protected; set it above your longest backup (a backup from a standby starts at its last restartpoint: add checkpoint_timeout and the standby's replay delay). The archive time is the store's (file mtime, S3 LastModified); a clock skew between the store and this host shortens or lengthens the margin. The server cannot tell us instead: it lists streamed backups in progress (pg_stat_progress_basebackup) but not those started with pg_backup_start.\n\n\
Backups are ordered by start timeline, then start position. Without any backup history file nothing is removed.\n\n\
Exit status: 0 done (or nothing to do); 1 failure (a damaged history file, --before past every backup, an unreachable repository); 2 bad usage."
    )]
    Expire(ExpireArgs),
}

/// Where the repository is and how to reach it.
#[derive(Args, Debug)]
pub struct RepoArgs {
    /// Repository: a directory, or s3://BUCKET/PREFIX (default: $PGCOMPRESS_REPO, then `repo`
    /// in the config file).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub repo: Option<std::ffi::OsString>,
    /// TOML config file (default: $PGCOMPRESS_CONFIG; none if unset).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Custom S3 endpoint such as http://127.0.0.1:9000, for S3-compatible stores
    /// (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, then `endpoint` in the config file).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// S3 region (default: $AWS_REGION, $AWS_DEFAULT_REGION, `region` in the config file,
    /// then us-east-1).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("identity").required(true).args(["pgdata", "from_segment"])))]
pub struct InitArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// The data directory of the cluster whose WAL the repository will hold (its
    /// global/pg_control and pg_wal are read).
    #[arg(long, value_name = "DIR")]
    pub pgdata: Option<PathBuf>,
    /// A WAL segment of that cluster, where its data directory cannot be read.
    #[arg(long, value_name = "SEGMENT")]
    pub from_segment: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Compression method for the compressed parts, in PostgreSQL's syntax (default:
    /// $PGCOMPRESS_METHOD, then `method` in the config file, then zstd:level=3). For the
    /// smallest archive use xz:1: on 16 MB segments it stores less than `xz -6` in about a
    /// tenth of its time (docs/BENCHMARKS.md).
    #[arg(long, value_name = "SPEC", value_parser = parse_spec)]
    pub method: Option<Spec>,
    /// Print one line saying what was stored.
    #[arg(long, short)]
    pub verbose: bool,
    /// Return as soon as a long-lived process (`archive serve` on --spool, started here if
    /// none runs) has durably stored this file; it stores the next .ready files meanwhile.
    #[arg(long = "async", requires = "spool")]
    pub r#async: bool,
    /// The spool directory of --async: markers of stored files, the serving process's lock,
    /// pid, status and log. One per server; outside the data directory.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// With --async: give up after this many seconds (exit 1; PostgreSQL calls again).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
    /// The file to archive (%p); it is archived under its file name.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Compression method, as for push.
    #[arg(long, value_name = "SPEC", value_parser = parse_spec)]
    pub method: Option<Spec>,
    /// The spool directory (see `push --async`).
    #[arg(long, value_name = "DIR")]
    pub spool: PathBuf,
    /// The server's pg_wal directory.
    #[arg(long, value_name = "PG_WAL")]
    pub wal_dir: PathBuf,
    /// Files stored at once (default: one per core).
    #[arg(long, value_name = "N")]
    pub workers: Option<std::num::NonZeroUsize>,
    /// Report a backlog of more .ready files than this.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub queue_max: usize,
    /// Exit after this many seconds with no .ready file (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub idle_exit: u64,
    /// Serve Prometheus metrics on ADDR:PORT (GET /metrics).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Log every file stored.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Archived file name (%f).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where to write it (%p).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Fsync the restored file and its directory before exiting.
    #[arg(long)]
    pub fsync: bool,
    /// Keep the next N segments of the timeline restored ahead in --spool (by an `archive
    /// prefetch` process started here if none runs); a prefetched file is used only after
    /// its hash checks out.
    #[arg(long, value_name = "N", requires = "spool")]
    pub prefetch: Option<std::num::NonZeroUsize>,
    /// The spool directory of --prefetch (outside the data directory).
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PrefetchArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// The spool directory (see `get --prefetch`).
    #[arg(long, value_name = "DIR")]
    pub spool: PathBuf,
    /// Segments kept restored ahead of the last one asked for.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub depth: usize,
    /// Exit after this many seconds without a request (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub idle_exit: u64,
    /// Serve Prometheus metrics on ADDR:PORT (GET /metrics).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// An archived file to show in detail (its container's parts and hashes).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("retention").required(true).args(["keep", "before"])))]
pub struct ExpireArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Keep the N newest base backups and what they need.
    #[arg(long, value_name = "N", value_parser = parse_keep)]
    pub keep: Option<std::num::NonZeroUsize>,
    /// Remove what precedes this WAL segment (000000010000000A000000FF) or LSN (A/FF000028)
    /// on every timeline; backups that start before it are expired. Refused if no backup
    /// would be left.
    #[arg(long, value_name = "SEGMENT|LSN", value_parser = parse_point)]
    pub before: Option<Point>,
    /// Keep every file archived less than DURATION ago (s, m, h or d; 0 turns this off), and
    /// everything at or after the oldest such file's position: a backup still running that
    /// started less than DURATION ago keeps the WAL it needs.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_age)]
    pub min_age: Age,
    /// Only say what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// A duration given as a number of seconds, minutes, hours or days (`90s`, `30m`, `24h`,
/// `7d`), or `0`; shown as it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Age {
    /// How long.
    pub duration: std::time::Duration,
    text: String,
}

const AGE_UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];

fn parse_age(s: &str) -> Result<Age, String> {
    let age = |secs: u64| Age {
        duration: std::time::Duration::from_secs(secs),
        text: s.to_owned(),
    };
    if s == "0" {
        return Ok(age(0));
    }
    let bad = || {
        format!("{s:?} is not a duration: a number and s, m, h or d (like 90s, 30m, 24h, 7d), or 0")
    };
    let unit = s.chars().last().ok_or_else(bad)?;
    let &(_, secs) = AGE_UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?;
    let digits = &s[..s.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(secs).map(age).ok_or_else(bad)
}

impl std::fmt::Display for Age {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where `--before` cuts.
#[derive(Debug, Clone)]
pub enum Point {
    /// A WAL segment name.
    Segment(String),
    /// An LSN, `%X/%X`.
    Lsn(u64),
}

fn parse_point(s: &str) -> Result<Point, String> {
    if ::archive::retention::parse_segment_name(s).is_some() {
        return Ok(Point::Segment(s.to_owned()));
    }
    if let Some(lsn) = ::archive::retention::parse_lsn(s) {
        return Ok(Point::Lsn(lsn));
    }
    Err(format!(
        "{s:?} is neither a WAL segment name (24 upper-case hex digits) nor an LSN (like 0/3000028)"
    ))
}

/// `--keep N`: at least one backup; keeping none would expire the whole archive.
fn parse_keep(s: &str) -> Result<std::num::NonZeroUsize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of backups; give 1 or more"))?;
    std::num::NonZeroUsize::new(n)
        .ok_or_else(|| "0 would keep no backup; give 1 or more".to_owned())
}

/// Parses a compression method in PostgreSQL's syntax.
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    Spec::from_str(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn min_ages_take_a_unit_or_zero_and_show_as_given() {
        for (text, secs) in [
            ("0", 0),
            ("90s", 90),
            ("30m", 1800),
            ("24h", 86_400),
            ("7d", 604_800),
        ] {
            let age = parse_age(text).expect(text);
            assert_eq!(age.duration, Duration::from_secs(secs), "{text}");
            assert_eq!(age.to_string(), text);
        }
        for bad in [
            "",
            "24",
            "h",
            "-1h",
            "1.5h",
            "1w",
            "24H",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
    }
}
