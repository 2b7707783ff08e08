//! `Repository::expire`: reads the backup and timeline history files and the time each
//! file was archived, asks [`crate::retention::plan`] what no kept backup (nor one still
//! running) needs, and removes it in the plan's order.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::{Duration, SystemTime};

use super::{Repository, SUFFIX};
use crate::container::check_name;
use crate::error::ArchiveError;
use crate::retention::{
    self, classify, parse_segment_name, parse_timeline_history, Backup, FileKind, Hold, Keep,
    Listed, Plan, Position, MAX_HISTORY_FILE_LEN,
};

/// Which backups `expire` keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retain {
    /// The `n` newest base backups.
    Newest(NonZeroUsize),
    /// Backups that start at or after this segment (any timeline): everything before it goes.
    BeforeSegment(String),
    /// Backups that start at or after the segment holding this LSN.
    BeforeLsn(u64),
}

/// What [`Repository::expire`] removed, or with `dry_run` would remove.
#[derive(Debug, Clone)]
pub struct Expired {
    /// The plan: kept and expired backups, the cutoff, the files in removal order.
    pub plan: Plan,
    /// The minimum age it held files back by, and when it ran.
    pub hold: Hold,
    /// Each removed file's stored size, in removal order.
    pub removed: Vec<(String, u64)>,
    /// Files the repository holds afterwards (with `dry_run`, would hold).
    pub remaining: usize,
    /// Nothing was removed, only planned.
    pub dry_run: bool,
}

impl Repository {
    /// Removes every archived file no kept base backup needs (see [`crate::retention`]):
    /// WAL and `.partial` segments and backup history files before the oldest kept backup's
    /// start, and history files of timelines no kept backup descends from; but nothing
    /// archived less than `min_age` ago, nor anything at or after the oldest such file's
    /// position, so that a backup that started less than `min_age` ago and is still running
    /// keeps its WAL (zero: no such hold). With `dry_run` it only says what it would
    /// remove. A backup or timeline history file that cannot be read is an error and nothing
    /// is removed.
    pub fn expire(
        &self,
        retain: &Retain,
        min_age: Duration,
        dry_run: bool,
    ) -> Result<Expired, ArchiveError> {
        let files = self.files_archived()?;
        // Read after the listing: a file listed is at least as old as it looks.
        let hold = Hold {
            min_age,
            now: SystemTime::now(),
        };
        let names: Vec<String> = files.iter().map(|(l, _)| l.name.clone()).collect();
        let mut backups = Vec::new();
        let mut ancestors = BTreeMap::new();
        for name in &names {
            match classify(name) {
                FileKind::BackupHistory { .. } => {
                    let Some(bytes) = self.read_small(name, MAX_HISTORY_FILE_LEN as u64)? else {
                        continue;
                    };
                    backups.push(Backup::new(name, &bytes).map_err(|source| {
                        ArchiveError::History {
                            name: name.clone(),
                            source,
                        }
                    })?);
                }
                FileKind::TimelineHistory { tli } => {
                    let Some(bytes) = self.read_small(name, MAX_HISTORY_FILE_LEN as u64)? else {
                        continue;
                    };
                    let parents =
                        parse_timeline_history(&bytes).map_err(|source| ArchiveError::History {
                            name: name.clone(),
                            source,
                        })?;
                    ancestors.insert(tli, parents);
                }
                _ => {}
            }
        }
        let keep = match retain {
            Retain::Newest(n) => Keep::Newest(*n),
            Retain::BeforeSegment(s) => Keep::From(
                parse_segment_name(s)
                    .ok_or_else(|| {
                        ArchiveError::Config(format!(
                            "{s:?} is not a WAL segment name (24 upper-case hex digits)"
                        ))
                    })?
                    .1,
            ),
            Retain::BeforeLsn(lsn) => Keep::From(self.position_of(*lsn, &names)?),
        };
        let listed: Vec<Listed> = files.iter().map(|(l, _)| l.clone()).collect();
        let plan = retention::plan(&listed, backups, keep, &ancestors, hold)?;
        let sizes: BTreeMap<&str, u64> = files.iter().map(|(l, s)| (l.name.as_str(), *s)).collect();
        let removed: Vec<(String, u64)> = plan
            .remove
            .iter()
            .map(|n| (n.clone(), sizes.get(n.as_str()).copied().unwrap_or(0)))
            .collect();
        if !dry_run {
            // Backup history files first, then segments, then timeline history files, each
            // batch durable before the next starts: a crash leaves no backup listed whose
            // WAL is partly gone, and running expire again finishes the job.
            let (backup_files, rest): (Vec<String>, Vec<String>) = plan
                .remove
                .iter()
                .cloned()
                .partition(|n| matches!(classify(n), FileKind::BackupHistory { .. }));
            let (histories, segments): (Vec<String>, Vec<String>) = rest
                .into_iter()
                .partition(|n| matches!(classify(n), FileKind::TimelineHistory { .. }));
            for batch in [backup_files, segments, histories] {
                self.remove(&batch)?;
            }
        }
        Ok(Expired {
            // What the run leaves, dry or not: a dry run says what the real one will.
            remaining: files.len() - removed.len(),
            plan,
            hold,
            removed,
            dry_run,
        })
    }

    /// The containers with their stored sizes and the time each was archived, sorted by
    /// name; like [`Repository::files`].
    fn files_archived(&self) -> Result<Vec<(Listed, u64)>, ArchiveError> {
        let mut files: Vec<(Listed, u64)> = self
            .store
            .list_modified()?
            .into_iter()
            .filter_map(|(key, size, archived)| {
                let name = key.strip_suffix(SUFFIX)?;
                check_name(name).ok()?;
                let name = name.to_owned();
                Some((Listed { name, archived }, size))
            })
            .collect();
        files.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        Ok(files)
    }

    /// The position of the segment holding `lsn`, with the segment size the archived WAL
    /// segments record.
    fn position_of(&self, lsn: u64, names: &[String]) -> Result<Position, ArchiveError> {
        let segment = names
            .iter()
            .rev()
            .find(|n| matches!(classify(n), FileKind::Segment { .. }));
        let size = match segment {
            Some(name) => self.original_size(name)?,
            None => None,
        };
        let Some(size) = size else {
            return Err(ArchiveError::Config(
                "an LSN needs the WAL segment size, and the repository holds no WAL segment to \
                 learn it from; give a segment name instead"
                    .into(),
            ));
        };
        Position::of_lsn(lsn, size).ok_or_else(|| {
            ArchiveError::Config(format!(
                "archived segments are {size} bytes, not a WAL segment size"
            ))
        })
    }
}
