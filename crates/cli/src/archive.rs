//! `pgcompress archive ...`: archive_command / restore_command and repository inspection.

mod config;

use std::path::PathBuf;
use std::process::ExitCode;

use ::archive::{ArchiveError, Header, PushOutcome, Repository, Role};
use clap::{Args, Subcommand};
use codec::Spec;
use serde_json::json;

use crate::output::bytes;
use config::{parse_spec, Flags, Settings};

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
method = \"xz:1\"   # the high-ratio setting: smaller than xz -6, about 7x the push CPU of the default\n\n\
postgresql.conf:\n  \
archive_command = 'pgcompress archive push --config /etc/pgcompress.toml %p'\n  \
restore_command = 'pgcompress archive get --config /etc/pgcompress.toml %f %p'\n\n\
Semantics are the same for both kinds of repository: a name is never overwritten (S3: a \
conditional PutObject, If-None-Match: *), pushing identical content again succeeds, different \
content fails; get writes %p only after the hash checks out.";

#[derive(Subcommand, Debug)]
pub enum ArchiveCommand {
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
Exit status: 0 archived (or already archived, identical); 1 failure (nothing published); 2 bad usage."
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
Exit status: 0 restored; 1 not in the archive (silently, as PostgreSQL expects); 200 the repository is missing, \
unreachable or misconfigured, or the file is archived but damaged or unreadable (one line on stderr; above 125, so PostgreSQL aborts recovery instead of taking \
it for the end of the archive); 2 bad usage."
    )]
    Get(GetArgs),
    /// List the archived files with their sizes and ratios.
    List(ListArgs),
    /// Totals and per-file ratios of a repository.
    Info(ListArgs),
    /// Decode every archived file and check every checksum and hash.
    #[command(
        after_help = "Exit status: 0 every file decodes to its recorded SHA-256 and XXH3-128; 1 a file is \
damaged (each bad file named on stderr, first one first); 2 bad usage."
    )]
    Verify(RepoArgs),
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
    /// The file to archive (%p); it is archived under its file name.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
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
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ArchiveCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        // One file per process (archive_command, restore_command): the allocator's arena
        // saves most of the page faults of their middle-sized buffers (see crate::alloc).
        ArchiveCommand::Push(a) => {
            crate::alloc::use_arena();
            push(a)
        }
        ArchiveCommand::Get(a) => {
            crate::alloc::use_arena();
            get(a)
        }
        ArchiveCommand::List(a) => list(a, false),
        ArchiveCommand::Info(a) => list(a, true),
        ArchiveCommand::Verify(a) => verify(a),
    }
}

/// The settings for `args`, weighing flags, environment, config file and defaults.
fn settings(args: &RepoArgs, method: Option<&Spec>) -> anyhow::Result<Settings> {
    let flags = Flags {
        config: args.config.as_deref(),
        repo: args.repo.as_deref(),
        method,
        endpoint: args.endpoint.as_deref(),
        region: args.region.as_deref(),
    };
    config::resolve(&flags, |name| std::env::var_os(name))
}

fn open(s: &Settings) -> anyhow::Result<Repository> {
    Ok(Repository::open(&s.location, &s.s3)?)
}

fn repo(args: &RepoArgs) -> anyhow::Result<Repository> {
    open(&settings(args, None)?)
}

fn failure(e: &ArchiveError) -> ExitCode {
    eprintln!("pgcompress: error: {e}");
    ExitCode::from(1)
}

fn push(a: PushArgs) -> anyhow::Result<ExitCode> {
    let settings = settings(&a.repo, a.method.as_ref())?;
    let repo = open(&settings)?;
    let Some(name) = a.path.file_name().and_then(|n| n.to_str()) else {
        anyhow::bail!("{} does not end in a file name", a.path.display());
    };
    match repo.push(&a.path, name, &settings.method) {
        Ok(PushOutcome::Stored(h)) => {
            if a.verbose {
                println!("{}", describe(&h, h.container_len()));
            }
            Ok(ExitCode::SUCCESS)
        }
        Ok(PushOutcome::AlreadyArchived(h)) => {
            eprintln!(
                "pgcompress: warning: {name} is already archived with the same content (SHA-256 {}); \
nothing written",
                h.sha256_hex()
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Ok(failure(&e)),
    }
}

fn get(a: GetArgs) -> anyhow::Result<ExitCode> {
    // Anything that keeps the repository from being read, a misconfiguration included, is a
    // failure above 125: "not in the archive" could make PostgreSQL end recovery early.
    let repo = match repo(&a.repo) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pgcompress: error: {e:#}");
            return Ok(ExitCode::from(GET_FAILED));
        }
    };
    match repo.get_with(&a.name, &a.path, a.fsync) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        // restore_command is asked for files that do not exist; that is not an error to log.
        Err(ArchiveError::NotFound { .. }) => Ok(ExitCode::from(1)),
        Err(e) => {
            eprintln!("pgcompress: error: {e}");
            Ok(ExitCode::from(GET_FAILED))
        }
    }
}

/// `get`'s exit status when the file is archived but cannot be restored (damaged or
/// unreadable). PostgreSQL reads exit statuses up to 125 from restore_command as
/// "not in the archive", which can end archive recovery early; above 125 it aborts
/// recovery instead, which is what a damaged archive calls for.
const GET_FAILED: u8 = 200;

fn ratio(original: u64, stored: u64) -> f64 {
    if stored == 0 {
        0.0
    } else {
        original as f64 / stored as f64
    }
}

fn transform_name(h: &Header) -> String {
    let parts: Vec<String> = h
        .parts
        .iter()
        .map(|p| format!("{} {}", p.role.name(), bytes(p.raw_len)))
        .collect();
    let t = h.transform.name();
    if parts.is_empty() {
        t.to_string()
    } else {
        format!("{t} ({})", parts.join(", "))
    }
}

fn describe(h: &Header, stored: u64) -> String {
    format!(
        "{}: {} -> {} ({:.2}x) {} {}",
        h.name,
        h.original_size,
        stored,
        ratio(h.original_size, stored),
        h.spec,
        transform_name(h)
    )
}

fn list(a: ListArgs, info: bool) -> anyhow::Result<ExitCode> {
    let repo = repo(&a.repo)?;
    let entries = match repo.list() {
        Ok(e) => e,
        Err(e) => return Ok(failure(&e)),
    };
    let (mut original, mut stored, mut bad) = (0u64, 0u64, 0usize);
    let mut wal_tail = 0u64;
    let mut rows = Vec::new();
    for e in &entries {
        match &e.header {
            Ok(h) => {
                original += h.original_size;
                stored += e.stored_size;
                wal_tail += h
                    .parts
                    .iter()
                    .filter(|p| p.role == Role::ZeroTail)
                    .map(|p| p.raw_len)
                    .sum::<u64>();
                rows.push(json!({
                    "name": e.name,
                    "size": h.original_size,
                    "stored": e.stored_size,
                    "ratio": ratio(h.original_size, e.stored_size),
                    "method": h.spec.to_string(),
                    "transform": h.transform.name(),
                    "valid_wal_bytes": h.transform.wal_info().map(|w| w.valid_len),
                    "parts": h.parts.iter().map(|p| json!({
                        "role": p.role.name(), "raw": p.raw_len, "stored": p.stored_len,
                        "word_coded": p.words,
                    })).collect::<Vec<_>>(),
                    "sha256": h.sha256_hex(),
                    "xxh3_128": ::archive::container::hex(&h.xxh3),
                }));
            }
            Err(err) => {
                bad += 1;
                rows.push(
                    json!({ "name": e.name, "stored": e.stored_size, "error": err.to_string() }),
                );
            }
        }
    }
    if a.json {
        let mut obj = json!({ "repository": repo.location(), "files": rows });
        if info {
            obj["total"] = json!({
                "files": entries.len(),
                "unreadable": bad,
                "original_bytes": original,
                "stored_bytes": stored,
                "ratio": ratio(original, stored),
                "zero_tail_bytes": wal_tail,
            });
        }
        println!("{obj}");
        return Ok(ExitCode::SUCCESS);
    }
    if !info || !entries.is_empty() {
        println!(
            "{:<28} {:>12} {:>10} {:>8}  {:<16} layout",
            "name", "size", "stored", "ratio", "method"
        );
    }
    for e in &entries {
        match &e.header {
            Ok(h) => println!(
                "{:<28} {:>12} {:>10} {:>7.2}x  {:<16} {}",
                e.name,
                h.original_size,
                e.stored_size,
                ratio(h.original_size, e.stored_size),
                h.spec.to_string(),
                transform_name(h)
            ),
            Err(err) => println!(
                "{:<28} {:>12} {:>10}  unreadable: {err}",
                e.name, "?", e.stored_size
            ),
        }
    }
    if info {
        println!(
            "total: {} files ({} unreadable), {} -> {} ({:.2}x); zero tails not stored: {}; repository {}",
            entries.len(),
            bad,
            bytes(original),
            bytes(stored),
            ratio(original, stored),
            bytes(wal_tail),
            repo.location()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(a: RepoArgs) -> anyhow::Result<ExitCode> {
    let repo = repo(&a)?;
    let files = match repo.files() {
        Ok(f) => f,
        Err(e) => return Ok(failure(&e)),
    };
    let (mut ok, mut bad, mut original) = (0usize, 0usize, 0u64);
    for (name, _) in &files {
        match repo.verify_one(name) {
            Ok(h) => {
                ok += 1;
                original += h.original_size;
            }
            Err(e) => {
                bad += 1;
                eprintln!("pgcompress: error: {e}");
            }
        }
    }
    if bad > 0 {
        eprintln!(
            "pgcompress: {bad} of {} archived files are damaged",
            files.len()
        );
        return Ok(ExitCode::from(1));
    }
    println!(
        "verified {ok} files ({}) in {}: every SHA-256 and XXH3-128 matches",
        bytes(original),
        repo.location()
    );
    Ok(ExitCode::SUCCESS)
}
