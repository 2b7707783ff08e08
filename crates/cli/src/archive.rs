//! `pgcompress archive ...`: archive_command / restore_command and repository inspection.

mod config;
mod expire;
mod report;
mod spool;

use std::process::ExitCode;

use ::archive::repo::Initialized;
use ::archive::{ArchiveError, Header, PushOutcome, Repository};
use codec::Spec;
use serde_json::json;

use crate::args::archive::{ArchiveCommand, GetArgs, InitArgs, PushArgs, RepoArgs};
use crate::output::bytes;
use config::{Flags, Settings};

pub fn run(cmd: ArchiveCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ArchiveCommand::Init(a) => init(a),
        ArchiveCommand::Push(a) => push(a),
        ArchiveCommand::Get(a) => get(a),
        ArchiveCommand::List(a) => report::list(a),
        ArchiveCommand::Info(a) => report::info(a),
        ArchiveCommand::Verify(a) => verify(a),
        ArchiveCommand::Expire(a) => expire::run(a),
        ArchiveCommand::Serve(a) => spool::serve(a),
        ArchiveCommand::Prefetch(a) => spool::prefetch(a),
    }
}

/// The settings for `args`, weighing flags, environment, config file and defaults.
pub(crate) fn settings(args: &RepoArgs, method: Option<&Spec>) -> anyhow::Result<Settings> {
    let flags = Flags {
        config: args.config.as_deref(),
        repo: args.repo.as_deref(),
        method,
        endpoint: args.endpoint.as_deref(),
        region: args.region.as_deref(),
    };
    config::resolve(&flags, |name| std::env::var_os(name))
}

pub(crate) fn open(s: &Settings) -> anyhow::Result<Repository> {
    Ok(Repository::open(&s.location, &s.s3)?)
}

pub(crate) fn repo(args: &RepoArgs) -> anyhow::Result<Repository> {
    open(&settings(args, None)?)
}

pub(crate) fn failure(e: &ArchiveError) -> ExitCode {
    crate::errors::print(e);
    ExitCode::from(1)
}

/// A push the operator's setup refuses (no repository there, another cluster's file): exit 2,
/// so that it reads as a mistake to fix, not a passing failure of the store.
fn is_setup_error(e: &ArchiveError) -> bool {
    matches!(
        e,
        ArchiveError::NotInitialized { .. }
            | ArchiveError::ForeignFile { .. }
            | ArchiveError::Identity { .. }
            | ArchiveError::Config(_)
    )
}

fn init(a: InitArgs) -> anyhow::Result<ExitCode> {
    let identity = match (&a.pgdata, &a.from_segment) {
        (Some(dir), _) => ::archive::repo::data_directory_identity(dir)?,
        (None, Some(segment)) => segment_identity(segment)?,
        (None, None) => anyhow::bail!("archive init needs --pgdata DIR or --from-segment SEGMENT"),
    };
    let repo = repo(&a.repo)?;
    let done = match repo.init(&identity) {
        Ok(done) => done,
        Err(e) if is_setup_error(&e) || matches!(e, ArchiveError::OtherCluster { .. }) => {
            crate::errors::print(&e);
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Ok(failure(&e)),
    };
    let (created, adopted) = match done {
        Initialized::Created { adopted } => (true, adopted),
        _ => (false, 0),
    };
    if a.json {
        outln!(
            "{}",
            json!({
                "repository": repo.location(),
                "created": created,
                "adopted_files": adopted,
                "system_identifier": identity.system_identifier.to_string(),
                "wal_segment_size": identity.wal_segment_size,
                "pg_major": identity.pg_major,
            })
        );
    } else if !created {
        outln!(
            "repository {} already belongs to {identity}; nothing changed",
            repo.location()
        );
    } else if adopted > 0 {
        outln!(
            "repository {} now belongs to {identity}; the {adopted} files already there are kept",
            repo.location()
        );
    } else {
        outln!("repository {} created for {identity}", repo.location());
    }
    Ok(ExitCode::SUCCESS)
}

/// The identity in the first page of the WAL segment file `path`.
fn segment_identity(path: &std::path::Path) -> anyhow::Result<::archive::Identity> {
    use std::io::Read;
    let mut first = Vec::with_capacity(::archive::identity::FIRST_PAGE_HEADER_LEN);
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(::archive::identity::FIRST_PAGE_HEADER_LEN as u64)
                .read_to_end(&mut first)
        })
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    ::archive::Identity::of_segment(&first).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn push(a: PushArgs) -> anyhow::Result<ExitCode> {
    let settings = settings(&a.repo, a.method.as_ref())?;
    let repo = open(&settings)?;
    let Some(name) = a.path.file_name().and_then(|n| n.to_str()) else {
        anyhow::bail!("{} does not end in a file name", a.path.display());
    };
    // Checked here too, not only by the store's push, so that `--async` refuses a mistake at
    // once instead of handing the file to a server that would refuse it. A store that fails
    // to answer is the push's to meet (and the serving process's to report as a backlog).
    match repo.identity() {
        Err(e) if is_setup_error(&e) => {
            crate::errors::print(&e);
            return Ok(ExitCode::from(2));
        }
        _ => {}
    }
    if a.r#async {
        return spool::push(&a, &repo, name);
    }
    match repo.push(&a.path, name, &settings.method) {
        Ok(PushOutcome::Stored(h)) => {
            if a.verbose {
                outln!("{}", describe(&h, h.container_len()));
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
        Err(e) if is_setup_error(&e) => {
            crate::errors::print(&e);
            Ok(ExitCode::from(2))
        }
        Err(e) => Ok(failure(&e)),
    }
}

fn get(a: GetArgs) -> anyhow::Result<ExitCode> {
    // Anything that keeps the repository from being read, a misconfiguration included, is a
    // failure above 125: "not in the archive" could make PostgreSQL end recovery early.
    let repo = match repo(&a.repo) {
        Ok(r) => r,
        Err(e) => {
            crate::errors::print(crate::errors::chain(&e));
            return Ok(ExitCode::from(GET_FAILED));
        }
    };
    // restore_command runs in the data directory: one of another cluster is refused.
    if let Err(e) = repo.admit_data_directory(std::path::Path::new(".")) {
        crate::errors::print(&e);
        return Ok(ExitCode::from(GET_FAILED));
    }
    if let (Some(depth), Some(spool)) = (a.prefetch, &a.spool) {
        match spool::get_prefetched(&a, &repo, depth, spool) {
            Ok(true) => return Ok(ExitCode::SUCCESS),
            Ok(false) => {}
            Err(e) => {
                crate::errors::print(crate::errors::chain(&e));
                return Ok(ExitCode::from(GET_FAILED));
            }
        }
    }
    match repo.get_with(&a.name, &a.path, a.fsync) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        // restore_command is asked for files that do not exist; that is not an error to log.
        Err(ArchiveError::NotFound { .. }) => Ok(ExitCode::from(1)),
        Err(e) => {
            crate::errors::print(&e);
            Ok(ExitCode::from(GET_FAILED))
        }
    }
}

/// `get`'s exit status when the file is archived but cannot be restored (damaged or
/// unreadable). PostgreSQL reads exit statuses up to 125 from restore_command as
/// "not in the archive", which can end archive recovery early; above 125 it aborts
/// recovery instead, which is what a damaged archive calls for.
pub(crate) const GET_FAILED: u8 = 200;

pub(crate) fn ratio(original: u64, stored: u64) -> f64 {
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
                crate::errors::print(&e);
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
    outln!(
        "verified {ok} files ({}) in {}: every SHA-256 and XXH3-128 matches",
        bytes(original),
        repo.location()
    );
    Ok(ExitCode::SUCCESS)
}
