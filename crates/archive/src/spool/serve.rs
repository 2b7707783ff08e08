//! The long-lived pushing process: a dispatcher thread scans `archive_status`, worker threads
//! pack and store, each result becomes a marker.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codec::Spec;

use super::metrics::SpoolMetrics;
use super::Spool;
use crate::error::ArchiveError;
use crate::repo::{PushOutcome, Repository};

/// How a serving process runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The server's `pg_wal` directory (its `archive_status` is watched).
    pub wal_dir: PathBuf,
    /// Files packed and stored at once; each also uses a second thread for its self-check.
    pub workers: usize,
    /// A backlog (`.ready` files not yet stored) above this is reported loudly: log line,
    /// `pgcompress_archive_backlog_full`, and the foreground's timeout message. Nothing is
    /// ever dropped.
    pub queue_max: usize,
    /// Exit after this long with nothing to do (`None`: run until stopped).
    pub idle_exit: Option<Duration>,
    /// How often `archive_status` is scanned.
    pub scan_interval: Duration,
    /// Time before a failed file is tried again.
    pub retry_after: Duration,
    /// Log every stored file, not only failures and warnings.
    pub verbose: bool,
}

impl ServeOptions {
    /// Defaults for `wal_dir`: one worker per core, a backlog of 256 files reported, a scan
    /// every 20 ms, a retry after a second.
    pub fn new(wal_dir: impl Into<PathBuf>) -> ServeOptions {
        ServeOptions {
            wal_dir: wal_dir.into(),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            queue_max: 256,
            idle_exit: None,
            scan_interval: Duration::from_millis(20),
            retry_after: Duration::from_secs(1),
            verbose: false,
        }
    }
}

/// What a worker reports.
struct Done {
    name: String,
    result: Result<(), String>,
}

/// Serves `spool` until `stop` is set, the idle time runs out, or `wal_dir` disappears.
/// `Ok(false)` without serving when another process already serves the spool.
pub fn serve(
    spool: &Spool,
    repo: Arc<Repository>,
    spec: Spec,
    opts: &ServeOptions,
    metrics: Arc<SpoolMetrics>,
    stop: &AtomicBool,
) -> Result<bool, ArchiveError> {
    let Some(_lock) = spool.take_serving()? else {
        return Ok(false);
    };
    let pid = spool.pid_path();
    let status_dir = opts.wal_dir.join("archive_status");
    let workers = opts.workers.max(1);
    // At most `workers` files wait in the channel and `workers` are being stored: memory is
    // bounded by twice the workers' segments, whatever the backlog.
    let (work_tx, work_rx) = sync_channel::<String>(workers);
    let (done_tx, done_rx) = sync_channel::<Done>(workers * 2 + 1);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let result = std::thread::scope(|scope| {
        for _ in 0..workers {
            let work_rx = Arc::clone(&work_rx);
            let done_tx = done_tx.clone();
            let repo = Arc::clone(&repo);
            let metrics = Arc::clone(&metrics);
            let wal_dir = opts.wal_dir.clone();
            let verbose = opts.verbose;
            scope.spawn(move || {
                worker(
                    spool, &repo, &spec, &wal_dir, &work_rx, &done_tx, &metrics, verbose,
                )
            });
        }
        drop(done_tx);
        let r = dispatch(spool, &status_dir, opts, &metrics, stop, work_tx, &done_rx);
        // Dropping the sender (inside dispatch) ends the workers once they finish.
        while done_rx.recv().is_ok() {}
        r
    });
    if spool.still_ours() {
        let _ = std::fs::remove_file(&pid);
    }
    result.map(|()| true)
}

#[allow(clippy::too_many_arguments)]
fn worker(
    spool: &Spool,
    repo: &Repository,
    spec: &Spec,
    wal_dir: &Path,
    work: &Mutex<Receiver<String>>,
    done: &SyncSender<Done>,
    metrics: &SpoolMetrics,
    verbose: bool,
) {
    loop {
        let next = match work.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(name) = next else { return };
        let path = wal_dir.join(&name);
        let started = Instant::now();
        let result = repo.push(&path, &name, spec).and_then(|outcome| {
            let (header, fresh) = match outcome {
                PushOutcome::Stored(h) => (h, true),
                PushOutcome::AlreadyArchived(h) => (h, false),
            };
            // Only now, with the file durably stored, may a push be told so.
            spool.write_marker(&name, &header.xxh3, &repo.location())?;
            Ok((header, fresh))
        });
        let elapsed = started.elapsed();
        let result = match result {
            Ok((header, fresh)) => {
                metrics.pushed(header.original_size, header.container_len(), elapsed);
                spool.remove_error(&name);
                if verbose {
                    log(&format!(
                        "{} {name} ({} -> {} bytes, {} ms)",
                        if fresh { "stored" } else { "already archived" },
                        header.original_size,
                        header.container_len(),
                        elapsed.as_millis()
                    ));
                }
                Ok(())
            }
            Err(e) => {
                metrics.push_failed();
                let message = e.to_string();
                log(&format!("error: {message}"));
                let _ = spool.write_error(&name, &message);
                Err(message)
            }
        };
        if done.send(Done { name, result }).is_err() {
            return;
        }
    }
}

/// One line on stderr, with the time.
fn log(line: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    eprintln!("pgcompress archive serve [{now:.3}]: {line}");
}

/// `.ready` files in the order PostgreSQL's archiver takes them (`pgarch.c`): timeline
/// history files first, then by name.
fn ready_files(status_dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(status_dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".ready").map(str::to_owned))
        .filter(|n| crate::container::check_name(n).is_ok())
        .collect();
    names.sort_by_key(|n| (!n.ends_with(".history"), n.clone()));
    Ok(names)
}

fn dispatch(
    spool: &Spool,
    status_dir: &Path,
    opts: &ServeOptions,
    metrics: &SpoolMetrics,
    stop: &AtomicBool,
    work: SyncSender<String>,
    done: &Receiver<Done>,
) -> Result<(), ArchiveError> {
    let mut stored: HashSet<String> = spool.markers()?.into_iter().collect();
    let mut in_flight: BTreeSet<String> = BTreeSet::new();
    let mut retry_at: HashMap<String, Instant> = HashMap::new();
    let mut idle_since = Instant::now();
    let mut last_warning: Option<Instant> = None;
    log(&format!(
        "serving {} for {} ({} workers)",
        spool.dir().display(),
        opts.wal_dir.display(),
        opts.workers.max(1)
    ));
    // The status last written: it is written again only when it changes, so an idle server
    // writes nothing.
    let mut status = String::new();
    while !stop.load(Ordering::SeqCst) {
        // The spool removed under it (or taken over): writing on would re-create what someone
        // deleted, and no push would read it.
        if !spool.still_ours() {
            log(&format!(
                "{} no longer names this process; stopping",
                spool.pid_path().display()
            ));
            return Ok(());
        }
        let ready = match ready_files(status_dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                log(&format!("{} is gone; stopping", status_dir.display()));
                return Ok(());
            }
            Err(e) => return Err(ArchiveError::io("listing", status_dir)(e)),
        };
        let ready_set: HashSet<&str> = ready.iter().map(String::as_str).collect();
        // PostgreSQL has marked these done: their markers have served.
        stored.retain(|name| {
            let keep = ready_set.contains(name.as_str());
            if !keep {
                spool.remove_marker(name);
            }
            keep
        });
        let backlog = ready.iter().filter(|n| !stored.contains(*n)).count();
        metrics.set_backlog(backlog, in_flight.len());
        let full = backlog > opts.queue_max;
        metrics.set_full(full);
        if full && last_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            log(&format!(
                "warning: {backlog} files wait to be archived, more than the queue maximum {}: \
                 WAL is written faster than it is stored; nothing is dropped, pg_wal grows",
                opts.queue_max
            ));
            last_warning = Some(Instant::now());
        }
        let now_status = format!(
            "backlog {backlog} in_flight {} queue_max {}\n",
            in_flight.len(),
            opts.queue_max
        );
        if now_status != status && spool.write_status(&now_status).is_ok() {
            status = now_status;
        }
        let now = Instant::now();
        for name in &ready {
            if stored.contains(name)
                || in_flight.contains(name)
                || retry_at.get(name).is_some_and(|t| *t > now)
            {
                continue;
            }
            match work.try_send(name.clone()) {
                Ok(()) => {
                    in_flight.insert(name.clone());
                }
                Err(_) => break,
            }
        }
        if ready.is_empty() && in_flight.is_empty() {
            if opts.idle_exit.is_some_and(|t| idle_since.elapsed() >= t) {
                log("idle; exiting");
                return Ok(());
            }
        } else {
            idle_since = Instant::now();
        }
        // Wait for a result or the next scan.
        let mut first = true;
        loop {
            let got = if first {
                done.recv_timeout(opts.scan_interval)
            } else {
                done.try_recv().map_err(|_| RecvTimeoutError::Timeout)
            };
            first = false;
            match got {
                Ok(d) => {
                    in_flight.remove(&d.name);
                    match d.result {
                        Ok(()) => {
                            retry_at.remove(&d.name);
                            stored.insert(d.name);
                        }
                        Err(_) => {
                            retry_at.insert(d.name, Instant::now() + opts.retry_after);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ArchiveError::Config("every archive worker stopped".into()))
                }
            }
        }
        retry_at.retain(|n, _| ready_set.contains(n.as_str()));
    }
    log("stopping");
    Ok(())
}
