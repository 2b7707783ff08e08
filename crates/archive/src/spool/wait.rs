//! The foreground of `archive push --async`: returns once the spool's marker says that this
//! file's exact bytes are durably in this repository, starting the serving process when none
//! runs.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::{xxh3_file, Spool};
use crate::error::ArchiveError;

/// How the foreground waits.
#[derive(Debug, Clone)]
pub struct WaitOptions {
    /// Give up (exit non-zero, PostgreSQL retries) after this long.
    pub timeout: Duration,
    /// How often the serving process's lock is checked while waiting.
    pub liveness_interval: Duration,
}

impl Default for WaitOptions {
    fn default() -> Self {
        WaitOptions {
            timeout: Duration::from_secs(60),
            liveness_interval: Duration::from_millis(500),
        }
    }
}

/// Waits until `name` (the file at `path`) is durably stored in the repository `location`
/// according to `spool`. `start` is called whenever no process serves the spool; it starts
/// one (detached) and returns.
///
/// The marker must carry the XXH3-128 of the bytes at `path`, computed here, and
/// `location`: a marker for another file or repository never counts.
pub fn wait_stored(
    spool: &Spool,
    path: &Path,
    name: &str,
    location: &str,
    opts: &WaitOptions,
    start: &mut dyn FnMut() -> Result<(), ArchiveError>,
) -> Result<(), ArchiveError> {
    let began = Instant::now();
    let began_wall = SystemTime::now();
    let want = hex::encode(xxh3_file(path)?);
    let mut next_liveness = began;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(m) = spool.marker(name) {
            if m.xxh3 == want && m.location == location {
                return Ok(());
            }
            return Err(ArchiveError::Spool(if m.location == location {
                format!(
                    "{name}: the spool {} says a file of this name with other content (XXH3-128 {}, \
                     this file {want}) was stored; refusing it",
                    spool.dir().display(),
                    m.xxh3
                )
            } else {
                format!(
                    "{name}: the spool {} is served for repository {}, not {location}; give each \
                     repository a spool of its own",
                    spool.dir().display(),
                    m.location
                )
            }));
        }
        // A failure since this push began is final for this call; PostgreSQL calls again,
        // and the serving process retries meanwhile.
        if let Some((message, when)) = spool.error(name) {
            if when >= began_wall {
                return Err(ArchiveError::Spool(message.trim_end().to_owned()));
            }
        }
        let now = Instant::now();
        if now >= next_liveness {
            if !spool.served()? {
                start()?;
            }
            next_liveness = now + opts_interval(opts);
        }
        if began.elapsed() >= opts.timeout {
            let status = spool.status().unwrap_or_else(|| "no status".into());
            return Err(ArchiveError::Spool(format!(
                "{name} was not stored within {} s by the process serving {} ({status}); \
                 see its log; nothing was dropped and PostgreSQL will call again",
                opts.timeout.as_secs(),
                spool.dir().display()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

fn opts_interval(opts: &WaitOptions) -> Duration {
    opts.liveness_interval.max(Duration::from_millis(10))
}
