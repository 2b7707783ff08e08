//! `archive push --async` and `archive serve`: pushing ahead of the archiver.

use std::fs::OpenOptions;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ::archive::spool::{
    self as lib, PrefetchOptions, ServeOptions, Spool, SpoolMetrics, WaitOptions,
};
use ::archive::{ArchiveError, Repository};
use anyhow::Context;

use crate::args::archive::{GetArgs, PrefetchArgs, PushArgs, RepoArgs, ServeArgs};

/// How long a serving process that a push started waits for more work before exiting.
const SPAWNED_IDLE_EXIT: &str = "60";

pub fn push(a: &PushArgs, repo: &Repository, name: &str) -> anyhow::Result<ExitCode> {
    let Some(spool_dir) = &a.spool else {
        anyhow::bail!("--async needs --spool DIR");
    };
    let spool = Spool::new(absolute(spool_dir)?);
    let path = absolute(&a.path)?;
    let wal_dir = path
        .parent()
        .context("the file to archive has no directory")?
        .to_path_buf();
    let opts = WaitOptions {
        timeout: Duration::from_secs(a.timeout),
        ..WaitOptions::default()
    };
    let mut start = || start_server(&spool, &wal_dir, &a.repo, a.method.as_ref());
    match lib::wait_stored(&spool, &path, name, &repo.location(), &opts, &mut start) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => Ok(super::failure(&e)),
    }
}

fn absolute(p: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))
}

/// Moves the prefetched `a.name` into place if the spool's queue holds it and it checks
/// out (`Ok(true)`); tells the prefetching process what was asked for, starting one if none
/// runs. Anything wrong with the queue only means the file is fetched as usual.
pub fn get_prefetched(
    a: &GetArgs,
    repo: &Repository,
    depth: std::num::NonZeroUsize,
    spool_dir: &std::path::Path,
) -> anyhow::Result<bool> {
    let spool = Spool::new(absolute(spool_dir)?);
    let hit = spool
        .take_prefetched(&a.name, &a.path, &repo.location())
        .unwrap_or(false);
    if hit && a.fsync {
        std::fs::File::open(&a.path)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("syncing {}", a.path.display()))?;
        if let Some(dir) = a.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(dir)
                .and_then(|f| f.sync_all())
                .with_context(|| format!("syncing {}", dir.display()))?;
        }
    }
    let _ = spool.write_wanted(&a.name, hit);
    if !spool.prefetching().unwrap_or(true) {
        let _ = start_prefetcher(&spool, &a.repo, depth.get());
    }
    Ok(hit)
}

fn start_prefetcher(spool: &Spool, repo: &RepoArgs, depth: usize) -> Result<(), ArchiveError> {
    let mut cmd = detached(spool, &spool.fetch_log_path())?;
    cmd.args(["archive", "prefetch", "--spool"])
        .arg(spool.dir())
        .args(["--depth", &depth.to_string()]);
    repo_flags(&mut cmd, repo);
    cmd.spawn()
        .map(drop)
        .map_err(|e| ArchiveError::Spool(format!("starting archive prefetch: {e}")))
}

/// The pgcompress binary as a detached process: its own process group, stdin closed,
/// output appended to `log`.
fn detached(spool: &Spool, log_path: &std::path::Path) -> Result<Command, ArchiveError> {
    spool.create()?;
    let open = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| ArchiveError::Spool(format!("opening {}: {e}", log_path.display())))
    };
    let exe = std::env::current_exe()
        .map_err(|e| ArchiveError::Spool(format!("finding the pgcompress binary: {e}")))?;
    let mut cmd = Command::new(exe);
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(open()?)
        .stderr(open()?)
        .process_group(0);
    Ok(cmd)
}

fn repo_flags(cmd: &mut Command, repo: &RepoArgs) {
    if let Some(r) = &repo.repo {
        cmd.arg("--repo").arg(r);
    }
    if let Some(c) = &repo.config {
        cmd.arg("--config").arg(c);
    }
    if let Some(e) = &repo.endpoint {
        cmd.args(["--endpoint", e]);
    }
    if let Some(r) = &repo.region {
        cmd.args(["--region", r]);
    }
}

pub fn prefetch(a: PrefetchArgs) -> anyhow::Result<ExitCode> {
    let settings = super::settings(&a.repo, None)?;
    let repo = Arc::new(super::open(&settings)?);
    let spool = Spool::new(absolute(&a.spool)?);
    let opts = PrefetchOptions {
        depth: a.depth,
        idle_exit: (a.idle_exit > 0).then(|| Duration::from_secs(a.idle_exit)),
        ..PrefetchOptions::default()
    };
    let metrics = spool_metrics(a.metrics.as_deref())?;
    let stop = service::stop::install()?;
    match lib::prefetch(&spool, repo, &opts, metrics, stop.flag()) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Ok(super::failure(&e)),
    }
}

/// Starts `archive serve` on `spool`, detached (its own process group, stdin closed, output
/// appended to the spool's log), with the settings this push was given.
fn start_server(
    spool: &Spool,
    wal_dir: &std::path::Path,
    repo: &RepoArgs,
    method: Option<&codec::Spec>,
) -> Result<(), ArchiveError> {
    let mut cmd = detached(spool, &spool.log_path())?;
    cmd.args(["archive", "serve", "--spool"])
        .arg(spool.dir())
        .arg("--wal-dir")
        .arg(wal_dir)
        .args(["--idle-exit", SPAWNED_IDLE_EXIT]);
    repo_flags(&mut cmd, repo);
    if let Some(m) = method {
        cmd.arg("--method").arg(m.to_string());
    }
    // Not waited for: it outlives this push. Two pushes may both start one; the second
    // finds the spool served and exits.
    cmd.spawn()
        .map(drop)
        .map_err(|e| ArchiveError::Spool(format!("starting archive serve: {e}")))
}

pub fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let settings = super::settings(&a.repo, a.method.as_ref())?;
    let repo = Arc::new(super::open(&settings)?);
    let spool = Spool::new(absolute(&a.spool)?);
    let mut opts = ServeOptions::new(absolute(&a.wal_dir)?);
    if let Some(w) = a.workers {
        opts.workers = w.get();
    }
    opts.queue_max = a.queue_max;
    opts.idle_exit = (a.idle_exit > 0).then(|| Duration::from_secs(a.idle_exit));
    opts.verbose = a.verbose;
    let metrics = spool_metrics(a.metrics.as_deref())?;
    // SIGTERM and SIGINT stop the scan and let the files being stored finish; a SIGKILL
    // is as safe, only less tidy.
    let stop = service::stop::install()?;
    match lib::serve(&spool, repo, settings.method, &opts, metrics, stop.flag()) {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => {
            eprintln!(
                "pgcompress: {} is already served by another process",
                spool.dir().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(super::failure(&e)),
    }
}

/// The counters of a serving or prefetching process, served on `--metrics ADDR` if given.
fn spool_metrics(addr: Option<&str>) -> anyhow::Result<Arc<SpoolMetrics>> {
    let metrics = Arc::new(SpoolMetrics::new());
    if let Some(addr) = addr {
        let shown = Arc::clone(&metrics);
        service::endpoint::serve(service::endpoint::bind(addr)?, move || shown.render());
    }
    Ok(metrics)
}
