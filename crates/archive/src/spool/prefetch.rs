//! Getting ahead of recovery: a long-lived process restores the segments that follow the
//! last one PostgreSQL asked for into the spool, and `archive get --prefetch` moves a
//! prefetched file into place instead of fetching it, once it has checked it.
//!
//! Under the spool directory:
//!
//! - `fetch/data/<name>`: a restored file, complete (written to a temporary name, checked
//!   against the container's XXH3-128 while it was rebuilt, then renamed);
//! - `fetch/meta/<name>`: `<name> <xxh3-128 hex> <repository>`, written after the data;
//! - `fetch/wanted`: the last name asked for, and how many requests the queue answered and
//!   how many it did not, counted by the gets (PostgreSQL runs one at a time);
//! - `fetch.lock`, `fetch.pid`, `fetch.log`, `fetch/stats`.
//!
//! A prefetched file is used only when its meta names this file and this repository and its own
//! XXH3-128, computed at use, matches the meta: a damaged file, or one for another name,
//! another repository or other content, is removed and the file is fetched from the
//! repository as without prefetching. The queue holds at most `depth` files, the ones after
//! the last name asked for on its timeline; anything else is removed.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::Flock;

use super::metrics::SpoolMetrics;
use super::{list_names, write_in, write_replace, xxh3_file, Spool};
use crate::error::ArchiveError;
use crate::repo::Repository;
use crate::retention::{parse_segment_name, Position};
use service::pidlock::read_small;

/// How the prefetching process runs.
#[derive(Debug, Clone)]
pub struct PrefetchOptions {
    /// Files restored ahead of the last one asked for.
    pub depth: usize,
    /// Exit after this long without a new request (`None`: run until stopped).
    pub idle_exit: Option<Duration>,
    /// How often the request file is read when there is nothing to fetch.
    pub poll: Duration,
}

impl Default for PrefetchOptions {
    fn default() -> Self {
        PrefetchOptions {
            depth: 8,
            idle_exit: Some(Duration::from_secs(30)),
            poll: Duration::from_millis(20),
        }
    }
}

impl Spool {
    fn fetch_dir(&self) -> PathBuf {
        self.dir.join("fetch")
    }

    fn data_dir(&self) -> PathBuf {
        self.fetch_dir().join("data")
    }

    fn meta_dir(&self) -> PathBuf {
        self.fetch_dir().join("meta")
    }

    /// `fetch.pid`: the prefetching process's id.
    pub fn fetch_pid_path(&self) -> PathBuf {
        self.dir.join("fetch.pid")
    }

    /// `fetch.log`: where a prefetching process that a get started writes.
    pub fn fetch_log_path(&self) -> PathBuf {
        self.dir.join("fetch.log")
    }

    fn try_fetch_lock(&self) -> Result<Option<Flock<File>>, ArchiveError> {
        fs::create_dir_all(self.data_dir())
            .map_err(ArchiveError::io("creating", self.data_dir()))?;
        fs::create_dir_all(self.meta_dir())
            .map_err(ArchiveError::io("creating", self.meta_dir()))?;
        Ok(service::pidlock::try_lock_file(
            &self.dir.join("fetch.lock"),
        )?)
    }

    /// Whether a process prefetches into this spool now: `fetch.pid` names a live process
    /// and the lock is held, checked as [`Spool::served`] checks the serving one.
    pub fn prefetching(&self) -> Result<bool, ArchiveError> {
        Ok(service::pidlock::held(
            &self.dir.join("fetch.lock"),
            &self.fetch_pid_path(),
        )?)
    }

    /// Tells the prefetching process what was asked for last, and counts whether the queue
    /// had it.
    pub fn write_wanted(&self, name: &str, hit: bool) -> Result<(), ArchiveError> {
        let (mut hits, mut misses) = self.wanted().map_or((0, 0), |w| (w.hits, w.misses));
        if hit {
            hits += 1;
        } else {
            misses += 1;
        }
        let text = format!("{name} {hits} {misses}\n");
        write_replace(&self.fetch_dir(), "wanted", text.as_bytes())
    }

    fn wanted(&self) -> Option<Wanted> {
        let text = read_small(&self.fetch_dir().join("wanted"))?;
        let mut f = text.split_whitespace();
        Some(Wanted {
            name: f.next()?.to_owned(),
            hits: f.next()?.parse().ok()?,
            misses: f.next()?.parse().ok()?,
        })
    }

    /// `hits N misses M fetched K` as the prefetching process last wrote it.
    pub fn fetch_stats(&self) -> Option<String> {
        read_small(&self.fetch_dir().join("stats")).map(|s| s.trim_end().to_owned())
    }

    fn remove_prefetched(&self, name: &str) {
        let _ = fs::remove_file(self.meta_dir().join(name));
        let _ = fs::remove_file(self.data_dir().join(name));
    }

    /// Moves the prefetched `name` to `dest` if the queue holds it for the repository
    /// `location` and it checks out; `Ok(false)` otherwise (the caller fetches it). A file
    /// that does not check out is removed.
    pub fn take_prefetched(
        &self,
        name: &str,
        dest: &Path,
        location: &str,
    ) -> Result<bool, ArchiveError> {
        let Some(meta) = read_small(&self.meta_dir().join(name)) else {
            return Ok(false);
        };
        let mut fields = meta.trim_end().splitn(3, ' ');
        let (Some(for_name), Some(xxh3), Some(loc)) = (fields.next(), fields.next(), fields.next())
        else {
            self.remove_prefetched(name);
            return Ok(false);
        };
        if for_name != name || loc != location {
            self.remove_prefetched(name);
            return Ok(false);
        }
        let data = self.data_dir().join(name);
        match xxh3_file(&data) {
            Ok(actual) if hex::encode(actual) == xxh3 => {}
            _ => {
                self.remove_prefetched(name);
                return Ok(false);
            }
        }
        let _ = fs::remove_file(self.meta_dir().join(name));
        // The same file system: a rename. Another one: a copy next to `dest`, renamed.
        match fs::rename(&data, dest) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {
                let tmp = tmp_next_to(dest);
                let copied = fs::copy(&data, &tmp)
                    .and_then(|_| fs::rename(&tmp, dest))
                    .map_err(ArchiveError::io("copying prefetched file to", dest));
                let _ = fs::remove_file(&data);
                if copied.is_err() {
                    let _ = fs::remove_file(&tmp);
                }
                copied.map(|()| true)
            }
            Err(e) => {
                self.remove_prefetched(name);
                Err(ArchiveError::io("moving prefetched file to", dest)(e))
            }
        }
    }
}

/// The last request and the counts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    name: String,
    hits: u64,
    misses: u64,
}

fn tmp_next_to(dest: &Path) -> PathBuf {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = dest
        .file_name()
        .map_or_else(|| "restore".into(), |n| n.to_string_lossy().into_owned());
    parent.join(format!(
        ".{base}.pgcompress.{}.{}.tmp",
        std::process::id(),
        crate::repo::nanos()
    ))
}

/// The segment after `pos` with segments of `segment_size` bytes.
fn next_position(pos: Position, segment_size: u64) -> Position {
    let per_id = 0x1_0000_0000 / segment_size.max(1);
    let (hi, lo) = (pos.0 >> 32, pos.0 & 0xffff_ffff);
    if lo + 1 >= per_id {
        Position((hi + 1) << 32)
    } else {
        Position((hi << 32) | (lo + 1))
    }
}

/// The `depth` segment names after `name` on its timeline.
fn window(name: &str, segment_size: u64, depth: usize) -> Vec<String> {
    let Some((tli, mut pos)) = parse_segment_name(name) else {
        return Vec::new();
    };
    (0..depth)
        .map(|_| {
            pos = next_position(pos, segment_size);
            format!("{tli:08X}{pos}")
        })
        .collect()
}

/// Prefetches into `spool` until `stop` is set or no request came for the idle time.
/// `Ok(false)` without running when another process already prefetches into it.
pub fn prefetch(
    spool: &Spool,
    repo: Arc<Repository>,
    opts: &PrefetchOptions,
    metrics: Arc<SpoolMetrics>,
    stop: &AtomicBool,
) -> Result<bool, ArchiveError> {
    let Some(_lock) = service::pidlock::take(|| spool.try_fetch_lock(), || spool.prefetching())?
    else {
        return Ok(false);
    };
    let pid = spool.fetch_pid_path();
    // Only now, with the lock held, is this process named the prefetcher.
    write_in(
        spool.dir(),
        "fetch.pid",
        format!("{}\n", std::process::id()).as_bytes(),
    )?;
    let location = repo.location();
    let mut segment_size: Option<u64> = None;
    let mut last: Option<Wanted> = None;
    let mut idle_since = Instant::now();
    let mut fetched = 0u64;
    // A name found missing is not asked for again before this.
    let mut missing: Option<(String, Instant)> = None;
    let me = std::process::id().to_string();
    let mut stats = String::new();
    while !stop.load(Ordering::SeqCst) {
        // The spool removed under it (or its pid file replaced): nothing will ask again,
        // and writing on would re-create the directory someone deleted.
        if read_small(&pid).as_deref().map(str::trim) != Some(me.as_str()) {
            eprintln!(
                "pgcompress archive prefetch: {} is gone; stopping",
                pid.display()
            );
            return Ok(true);
        }
        let wanted = spool.wanted();
        if let Some(w) = &wanted {
            if Some(w) != last.as_ref() {
                let (h0, m0) = last.as_ref().map_or((0, 0), |l| (l.hits, l.misses));
                metrics.prefetch_counts(w.hits.saturating_sub(h0), w.misses.saturating_sub(m0));
                last = wanted.clone();
                idle_since = Instant::now();
            }
        }
        if opts.idle_exit.is_some_and(|t| idle_since.elapsed() >= t) {
            break;
        }
        let Some(Wanted {
            name, hits, misses, ..
        }) = &last
        else {
            std::thread::sleep(opts.poll);
            continue;
        };
        let (hits, misses) = (*hits, *misses);
        if segment_size.is_none() && parse_segment_name(name).is_some() {
            segment_size = repo.original_size(name).ok().flatten();
        }
        let names = segment_size.map_or_else(Vec::new, |size| window(name, size, opts.depth));
        // Only the window stays queued.
        for old in list_names(&spool.meta_dir())?
            .into_iter()
            .chain(list_names(&spool.data_dir())?)
        {
            if !names.contains(&old) {
                spool.remove_prefetched(&old);
            }
        }
        let queued = names
            .iter()
            .filter(|n| spool.meta_dir().join(n).exists())
            .count();
        metrics.set_prefetch_queue(queued);
        let now_stats = format!("hits {hits} misses {misses} fetched {fetched} queued {queued}\n");
        // Written only when it changes: an idle prefetcher writes nothing.
        if now_stats != stats && write_in(&spool.fetch_dir(), "stats", now_stats.as_bytes()).is_ok()
        {
            stats = now_stats;
        }
        let next = names.iter().find(|n| {
            !spool.meta_dir().join(n).exists()
                && !missing
                    .as_ref()
                    .is_some_and(|(m, until)| m == *n && Instant::now() < *until)
        });
        let Some(next) = next else {
            std::thread::sleep(opts.poll);
            continue;
        };
        // Fetch one file, then look at the request again.
        let tmp = spool.fetch_dir().join(format!(".{next}.tmp"));
        let started = Instant::now();
        match repo.get_with(next, &tmp, false) {
            Ok(header) => {
                let data = spool.data_dir().join(next);
                fs::rename(&tmp, &data).map_err(ArchiveError::io("renaming to", &data))?;
                let meta = format!("{next} {} {location}\n", header.xxh3_hex());
                write_in(&spool.meta_dir(), next, meta.as_bytes())?;
                metrics.fetched(header.original_size, started.elapsed());
                fetched += 1;
            }
            Err(ArchiveError::NotFound { .. }) => {
                // Not archived yet (a standby ahead of its primary's archive): ask later.
                missing = Some((next.clone(), Instant::now() + Duration::from_millis(500)));
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                metrics.get_failed();
                eprintln!("pgcompress archive prefetch: error: {e}");
                missing = Some((next.clone(), Instant::now() + Duration::from_secs(1)));
            }
        }
        if let Err(e) = fs::remove_file(&tmp) {
            if e.kind() != ErrorKind::NotFound {
                return Err(ArchiveError::io("removing", &tmp)(e));
            }
        }
    }
    let _ = fs::remove_file(&pid);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serving and the prefetching locks: one holder each, independent of each other,
    /// free again once dropped (flock locks belong to an open file, so two in one process
    /// exclude each other as two processes do).
    #[test]
    fn each_lock_has_one_holder_and_is_free_once_dropped() {
        let top = tempfile::tempdir().expect("tempdir");
        let spool = Spool::new(top.path().join("spool"));
        let serving = spool.try_lock().expect("lock").expect("free");
        assert!(spool.try_lock().expect("lock").is_none(), "held");
        // Held, but by nobody named in serve.pid yet: a server starting, not one serving.
        assert!(!spool.served().expect("served"), "taken before it is ready");
        drop(serving);
        let serving = spool.take_serving().expect("lock").expect("free");
        assert!(spool.served().expect("served"));
        // A second holder is refused.
        assert!(spool.take_serving().expect("lock").is_none(), "held");
        assert!(!spool.prefetching().expect("prefetching"), "another lock");
        let fetching = spool.try_fetch_lock().expect("lock").expect("free");
        assert!(spool.try_fetch_lock().expect("lock").is_none(), "held");
        assert!(
            !spool.prefetching().expect("prefetching"),
            "no fetch.pid yet"
        );
        fs::write(spool.fetch_pid_path(), format!("{}\n", std::process::id())).expect("pid");
        assert!(spool.prefetching().expect("prefetching"));
        drop(serving);
        assert!(!spool.served().expect("served"), "freed");
        assert!(spool.prefetching().expect("prefetching"), "still held");
        drop(fetching);
        assert!(spool.try_fetch_lock().expect("lock").is_some(), "freed");
    }

    #[test]
    fn the_window_follows_the_timeline_across_log_ids() {
        assert_eq!(
            window("0000000200000000000000FE", 16 << 20, 3),
            vec![
                "0000000200000000000000FF",
                "000000020000000100000000",
                "000000020000000100000001"
            ]
        );
        assert_eq!(
            window("000000010000000000000FFE", 1 << 20, 2),
            vec!["000000010000000000000FFF", "000000010000000100000000"]
        );
        assert!(window("00000002.history", 16 << 20, 3).is_empty());
    }

    /// A prefetcher whose spool is deleted under it (a test's or a bench's temporary
    /// directory) stops instead of re-creating the spool and running until its idle exit.
    #[test]
    fn a_prefetcher_stops_when_its_spool_is_removed() {
        let top = tempfile::tempdir().expect("tempdir");
        let repo = Arc::new(Repository::local(top.path().join("repo")));
        let spool = Spool::new(top.path().join("spool"));
        spool
            .write_wanted("000000010000000000000001", false)
            .expect("wanted");
        let opts = PrefetchOptions {
            idle_exit: None,
            ..PrefetchOptions::default()
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let run =
                s.spawn(|| prefetch(&spool, repo, &opts, Arc::new(SpoolMetrics::new()), &stop));
            let deadline = Instant::now() + Duration::from_secs(10);
            while !spool.fetch_pid_path().exists() || spool.fetch_stats().is_none() {
                assert!(Instant::now() < deadline, "the prefetcher never started");
                std::thread::sleep(Duration::from_millis(10));
            }
            fs::remove_dir_all(spool.dir()).expect("remove the spool");
            let deadline = Instant::now() + Duration::from_secs(10);
            while !run.is_finished() {
                if Instant::now() > deadline {
                    // Let the scope end instead of hanging the test.
                    stop.store(true, Ordering::SeqCst);
                    panic!("the prefetcher kept running after its spool was removed");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(matches!(run.join().expect("join"), Ok(true)));
        });
        assert!(
            !spool.dir().exists(),
            "the prefetcher re-created the spool it was running in"
        );
    }
}
