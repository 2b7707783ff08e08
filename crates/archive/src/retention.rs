//! Retention: which archived files no kept base backup needs. Sans-IO: it reads names and the
//! bytes of backup and timeline history files, and returns a [`Plan`]; the repository carries
//! it out ([`crate::Repository::expire`]).
//!
//! The rules follow from how PostgreSQL recovers from an archive (`access/xlogrecovery.c`):
//!
//! - A base backup replays WAL from its start (the redo point, `START WAL LOCATION` of its
//!   backup history file `<segment>.<offset>.backup`, `access/xlogbackup.c`). No segment
//!   before the start of the oldest kept backup is read, on any timeline: segment positions
//!   are shared by all timelines, and recovery only moves forward. The cutoff is therefore a
//!   position, and every WAL segment, `.partial` segment and backup history file before it
//!   goes; everything at or after it stays, so a push that runs meanwhile (whose segments
//!   are newer than any finished backup's start) is never touched.
//! - Timeline history files (`<tli>.history`, `access/timeline.h`) are tiny and recovery
//!   needs more of them than it seems: with `recovery_target_timeline = latest` the startup
//!   process probes `<tli+1>.history`, `<tli+2>.history`, ... upwards from the backup's
//!   timeline and stops at the first one missing (`findNewestTimeLine`). A history file is
//!   removed only when its timeline is below every kept backup's and is not an ancestor of
//!   any kept backup's timeline.
//! - Backups are ordered newest first by (start timeline, start position): a new timeline
//!   number is always higher than every one PostgreSQL found in the archive when it
//!   promoted.
//! - A backup still running has no backup history file yet (PostgreSQL archives it when the
//!   backup ends), and PostgreSQL may run several backups at once: one that started before
//!   the newest finished one and is still running needs WAL from before that one's start.
//!   Nothing in the archive shows it, and the server lists only streamed backups in
//!   progress (`pg_stat_progress_basebackup`), not those of `pg_backup_start`. What is
//!   known is time: a backup that started at `T` needs WAL from the segment being written at
//!   `T` onwards, and each of those segments is archived after `T`. So with a minimum age
//!   ([`Hold`]) nothing archived less than that long ago goes, nor anything at or after the
//!   oldest such file's position: every backup that started less than the minimum age ago
//!   keeps all it needs. The store's time of each object (a file's modification time, an S3
//!   object's `LastModified`) is the time it was archived, since objects are never
//!   rewritten; the planner takes those times and the present as input and reads no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, SystemTime};

/// Bytes of a backup or timeline history file read at most; PostgreSQL writes a few hundred.
pub const MAX_HISTORY_FILE_LEN: usize = 1 << 20;

/// A segment's position: `XXXXXXXX` and `YYYYYYYY` of a segment name
/// `TTTTTTTTXXXXXXXXYYYYYYYY` as one number. The same on every timeline and ordered like the
/// segment numbers, whatever the segment size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position(pub u64);

impl Position {
    /// The position of the segment that holds `lsn` with segments of `segment_size` bytes
    /// (`XLByteToSeg` and `XLogFileName` of `access/xlog_internal.h`); `None` if the size
    /// is not a power of two from 1 MB to 1 GB.
    pub fn of_lsn(lsn: u64, segment_size: u64) -> Option<Position> {
        if !segment_size.is_power_of_two() || !(1 << 20..=1 << 30).contains(&segment_size) {
            return None;
        }
        let per_id = 0x1_0000_0000 / segment_size;
        let segno = lsn / segment_size;
        Some(Position(((segno / per_id) << 32) | (segno % per_id)))
    }
}

impl Position {
    /// The name of the segment at this position on timeline `tli`, as PostgreSQL names it.
    pub fn segment_name(self, tli: u32) -> String {
        format!("{tli:08X}{self}")
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08X}{:08X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

/// What an archived file is, by its name (`access/xlog_internal.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A WAL segment, `TTTTTTTTXXXXXXXXYYYYYYYY`.
    Segment {
        /// Its timeline.
        tli: u32,
        /// Its position.
        pos: Position,
    },
    /// The last, incomplete segment of a timeline a promotion ended, `<segment>.partial`.
    Partial {
        /// Its timeline.
        tli: u32,
        /// Its position.
        pos: Position,
    },
    /// A backup history file, `<segment>.<offset>.backup`.
    BackupHistory {
        /// The backup's start timeline.
        tli: u32,
        /// The position of its start segment.
        pos: Position,
        /// The start's offset in that segment.
        offset: u32,
    },
    /// A timeline history file, `<tli>.history`.
    TimelineHistory {
        /// The timeline it describes.
        tli: u32,
    },
    /// Anything else; retention never removes it.
    Other,
}

fn hex_u32(s: &str) -> Option<u32> {
    // PostgreSQL writes these names with %08X: exactly eight upper-case digits.
    (s.len() == 8 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F')))
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

/// The timeline and position of a segment name (24 upper-case hex digits).
pub fn parse_segment_name(s: &str) -> Option<(u32, Position)> {
    if s.len() != 24 || !s.is_ascii() {
        return None;
    }
    let tli = hex_u32(&s[..8])?;
    let hi = hex_u32(&s[8..16])?;
    let lo = hex_u32(&s[16..])?;
    Some((tli, Position((u64::from(hi) << 32) | u64::from(lo))))
}

/// Classifies an archived file by its name.
pub fn classify(name: &str) -> FileKind {
    if let Some((tli, pos)) = parse_segment_name(name) {
        return FileKind::Segment { tli, pos };
    }
    if let Some(seg) = name.strip_suffix(".partial") {
        if let Some((tli, pos)) = parse_segment_name(seg) {
            return FileKind::Partial { tli, pos };
        }
    }
    if let Some(rest) = name.strip_suffix(".backup") {
        if let Some((seg, offset)) = rest.split_once('.') {
            if let (Some((tli, pos)), Some(offset)) = (parse_segment_name(seg), hex_u32(offset)) {
                return FileKind::BackupHistory { tli, pos, offset };
            }
        }
    }
    if let Some(tli) = name.strip_suffix(".history").and_then(hex_u32) {
        return FileKind::TimelineHistory { tli };
    }
    FileKind::Other
}

/// What a backup history file says (`do_pg_backup_stop` in `access/xlogbackup.c` and
/// `xlog.c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupLabel {
    /// `START WAL LOCATION`, the redo point recovery starts from.
    pub start_lsn: u64,
    /// The segment named next to it.
    pub start_segment: String,
    /// `STOP WAL LOCATION`, the end of WAL the backup needs to be consistent.
    pub stop_lsn: Option<u64>,
    /// `START TIMELINE`.
    pub start_tli: Option<u32>,
    /// `STOP TIMELINE`.
    pub stop_tli: Option<u32>,
    /// `LABEL`.
    pub label: Option<String>,
    /// `START TIME`, as PostgreSQL wrote it.
    pub start_time: Option<String>,
    /// `STOP TIME`, as PostgreSQL wrote it.
    pub stop_time: Option<String>,
}

/// Why a backup or timeline history file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// Not UTF-8 text.
    #[error("not text (invalid UTF-8 at byte {0})")]
    NotText(usize),
    /// Longer than [`MAX_HISTORY_FILE_LEN`].
    #[error("{0} bytes, more than a history file can be")]
    TooLong(usize),
    /// A line that does not parse.
    #[error("line {line}: {detail}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A required line is missing.
    #[error("no {0} line")]
    Missing(&'static str),
}

fn text(bytes: &[u8]) -> Result<&str, HistoryError> {
    if bytes.len() > MAX_HISTORY_FILE_LEN {
        return Err(HistoryError::TooLong(bytes.len()));
    }
    std::str::from_utf8(bytes).map_err(|e| HistoryError::NotText(e.valid_up_to()))
}

/// Parses `%X/%X`.
pub fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    let digits = |p: &str| {
        (!p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(p, 16).ok())
            .flatten()
    };
    Some((u64::from(digits(hi)?) << 32) | u64::from(digits(lo)?))
}

/// `0/3000028 (file 000000010000000000000003)` → the LSN and the segment name.
fn lsn_and_file(value: &str) -> Option<(u64, String)> {
    let (lsn, rest) = value.split_once(' ')?;
    let file = rest.strip_prefix("(file ")?.strip_suffix(')')?;
    parse_segment_name(file)?;
    Some((parse_lsn(lsn)?, file.to_owned()))
}

/// Parses a backup history file.
pub fn parse_backup_label(bytes: &[u8]) -> Result<BackupLabel, HistoryError> {
    let text = text(bytes)?;
    let mut start = None;
    let mut label = BackupLabel {
        start_lsn: 0,
        start_segment: String::new(),
        stop_lsn: None,
        start_tli: None,
        stop_tli: None,
        label: None,
        start_time: None,
        stop_time: None,
    };
    for (i, line) in text.lines().enumerate() {
        let bad = |detail: &str| HistoryError::Line {
            line: i + 1,
            detail: detail.to_owned(),
        };
        let Some((key, value)) = line.split_once(": ") else {
            continue;
        };
        match key {
            "START WAL LOCATION" => {
                start = Some(lsn_and_file(value).ok_or_else(|| bad("bad START WAL LOCATION"))?)
            }
            "STOP WAL LOCATION" => {
                label.stop_lsn = Some(
                    lsn_and_file(value)
                        .ok_or_else(|| bad("bad STOP WAL LOCATION"))?
                        .0,
                )
            }
            "START TIMELINE" => {
                label.start_tli = Some(value.parse().map_err(|_| bad("bad START TIMELINE"))?)
            }
            "STOP TIMELINE" => {
                label.stop_tli = Some(value.parse().map_err(|_| bad("bad STOP TIMELINE"))?)
            }
            "LABEL" => label.label = Some(value.to_owned()),
            "START TIME" => label.start_time = Some(value.to_owned()),
            "STOP TIME" => label.stop_time = Some(value.to_owned()),
            _ => {}
        }
    }
    let (lsn, segment) = start.ok_or(HistoryError::Missing("START WAL LOCATION"))?;
    label.start_lsn = lsn;
    label.start_segment = segment;
    Ok(label)
}

/// The timelines a timeline history file names as ancestors (`readTimeLineHistory` in
/// `access/transam/timeline.c`: `parentTLI<TAB>switchpoint<TAB>reason`, `#` comments).
pub fn parse_timeline_history(bytes: &[u8]) -> Result<Vec<u32>, HistoryError> {
    let text = text(bytes)?;
    let mut parents = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |detail: &str| HistoryError::Line {
            line: i + 1,
            detail: detail.to_owned(),
        };
        let mut fields = line.split_whitespace();
        let tli: u32 = fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| bad("no parent timeline number"))?;
        fields
            .next()
            .and_then(parse_lsn)
            .ok_or_else(|| bad("no switch point"))?;
        parents.push(tli);
    }
    Ok(parents)
}

/// A base backup found in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// The backup history file's name.
    pub name: String,
    /// Its start timeline.
    pub tli: u32,
    /// Its start segment's position.
    pub pos: Position,
    /// The start's offset in that segment.
    pub offset: u32,
    /// What the file says.
    pub label: BackupLabel,
}

impl Backup {
    /// The backup history file `name` with its contents, checked against each other.
    pub fn new(name: &str, bytes: &[u8]) -> Result<Backup, HistoryError> {
        let FileKind::BackupHistory { tli, pos, offset } = classify(name) else {
            return Err(HistoryError::Missing("backup history file name"));
        };
        let label = parse_backup_label(bytes)?;
        if !name.starts_with(&label.start_segment) {
            return Err(HistoryError::Line {
                line: 1,
                detail: format!(
                    "START WAL LOCATION names {}, the file name another segment",
                    label.start_segment
                ),
            });
        }
        Ok(Backup {
            name: name.to_owned(),
            tli,
            pos,
            offset,
            label,
        })
    }

    fn order(&self) -> (u32, Position, u32) {
        (self.tli, self.pos, self.offset)
    }
}

/// Which backups to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The `n` newest (at least one).
    Newest(std::num::NonZeroUsize),
    /// Those that start at or after this position: everything before it goes.
    From(Position),
}

/// An archived file as the store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name (without the container suffix).
    pub name: String,
    /// When it was archived, by the store's clock; `None` when the store does not say, which
    /// counts as just now.
    pub archived: Option<SystemTime>,
}

/// The minimum age: what was archived more recently than `min_age` before `now` stays,
/// whatever the retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// How long a file stays at least; zero turns the hold off.
    pub min_age: Duration,
    /// The present, by the clock of whoever runs expire.
    pub now: SystemTime,
}

impl Hold {
    /// No minimum age: retention alone decides.
    pub const OFF: Hold = Hold {
        min_age: Duration::ZERO,
        now: SystemTime::UNIX_EPOCH,
    };

    /// Files archived after this instant are held; `None` when the hold is off.
    pub fn since(&self) -> Option<SystemTime> {
        (!self.min_age.is_zero())
            .then(|| self.now.checked_sub(self.min_age))
            .map(|t| t.unwrap_or(SystemTime::UNIX_EPOCH))
    }

    fn holds(&self, file: &Listed) -> bool {
        self.since()
            .is_some_and(|since| file.archived.is_none_or(|t| t > since))
    }
}

/// What expiring removes and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The backups kept, oldest first: those starting at or after the cutoff.
    pub kept: Vec<Backup>,
    /// The backups expired (their history files are removed), oldest first.
    pub expired: Vec<Backup>,
    /// Everything before this position goes (`None`: nothing is removed): the retention's
    /// cutoff, or the minimum age's when that is older.
    pub cutoff: Option<Position>,
    /// Where the retention alone would cut.
    pub retention_cutoff: Option<Position>,
    /// The position of the oldest file archived within the minimum age, if any: nothing at
    /// or after it goes.
    pub held_from: Option<Position>,
    /// Files the retention alone would remove that the minimum age keeps, by name.
    pub held: Vec<String>,
    /// Files to remove, in the order to remove them: backup history files first (so that a
    /// listing never shows a backup whose WAL is partly gone), then segments oldest first,
    /// then timeline history files.
    pub remove: Vec<String>,
}

/// Why there is no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// `--before` would expire every backup.
    #[error("no base backup starts at or after segment position {0}: expiring before it would leave no backup to restore (nothing removed)")]
    NoBackupLeft(Position),
}

/// The position of a segment, `.partial` segment or backup history file.
fn position(name: &str) -> Option<(u32, Position)> {
    match classify(name) {
        FileKind::Segment { tli, pos }
        | FileKind::Partial { tli, pos }
        | FileKind::BackupHistory { tli, pos, .. } => Some((tli, pos)),
        _ => None,
    }
}

/// Plans what to remove among `files` (every file of the repository), given the `backups`
/// among them, `ancestors` (the parent timelines of each timeline whose history file the
/// repository holds) and the minimum age `hold`.
pub fn plan(
    files: &[Listed],
    mut backups: Vec<Backup>,
    keep: Keep,
    ancestors: &BTreeMap<u32, Vec<u32>>,
    hold: Hold,
) -> Result<Plan, PlanError> {
    backups.sort_by_key(Backup::order);
    let retention_cutoff = match keep {
        Keep::Newest(n) => {
            let split = backups.len().saturating_sub(n.get());
            match backups[split..].iter().map(|b| b.pos).min() {
                Some(oldest) => oldest,
                // No backup at all: nothing says what is needed, so nothing goes.
                None => return Ok(Plan::default()),
            }
        }
        Keep::From(at) => {
            if backups.is_empty() {
                return Ok(Plan::default());
            }
            if backups.iter().all(|b| b.pos < at) {
                return Err(PlanError::NoBackupLeft(at));
            }
            at
        }
    };
    // A backup still running needs everything from where the server wrote when it started;
    // all of that was archived since, so the oldest recent file bounds what it may need.
    let recent: Vec<&Listed> = files.iter().filter(|f| hold.holds(f)).collect();
    let recent_tlis: BTreeSet<u32> = recent
        .iter()
        .filter_map(|f| position(&f.name))
        .map(|(tli, _)| tli)
        .collect();
    let held_from = recent
        .iter()
        .filter_map(|f| position(&f.name))
        .map(|(_, pos)| pos)
        .min();
    let cutoff = held_from.map_or(retention_cutoff, |p| p.min(retention_cutoff));
    let recent_names: BTreeSet<&str> = recent.iter().map(|f| f.name.as_str()).collect();
    let remove: Vec<String> = select(files, &backups, cutoff, &recent_tlis, ancestors)
        .into_iter()
        .filter(|n| !recent_names.contains(n.as_str()))
        .collect();
    let removed: BTreeSet<&str> = remove.iter().map(String::as_str).collect();
    let held = select(
        files,
        &backups,
        retention_cutoff,
        &BTreeSet::new(),
        ancestors,
    )
    .into_iter()
    .filter(|n| !removed.contains(n.as_str()))
    .collect();
    // A backup older by (timeline, position) than the newest n but starting at or after the
    // cutoff keeps all it needs anyway: it is kept.
    let (kept, expired): (Vec<Backup>, Vec<Backup>) =
        backups.into_iter().partition(|b| b.pos >= cutoff);
    Ok(Plan {
        kept,
        expired,
        cutoff: Some(cutoff),
        retention_cutoff: Some(retention_cutoff),
        held_from,
        held,
        remove,
    })
}

/// The files to remove, in order, when everything before `cutoff` goes; the timelines of
/// the backups kept and `more_tlis` keep their history files and their ancestors'.
fn select(
    files: &[Listed],
    backups: &[Backup],
    cutoff: Position,
    more_tlis: &BTreeSet<u32>,
    ancestors: &BTreeMap<u32, Vec<u32>>,
) -> Vec<String> {
    let mut roots: BTreeSet<u32> = backups
        .iter()
        .filter(|b| b.pos >= cutoff)
        .map(|b| b.tli)
        .collect();
    roots.extend(more_tlis);
    let min_tli = roots.first().copied().unwrap_or(1);
    let mut needed_tlis = roots.clone();
    for tli in &roots {
        needed_tlis.extend(ancestors.get(tli).into_iter().flatten());
    }
    let mut backup_files = Vec::new();
    let mut segments = Vec::new();
    let mut histories = Vec::new();
    for file in files {
        let name = &file.name;
        match classify(name) {
            FileKind::BackupHistory { pos, .. } if pos < cutoff => backup_files.push(name),
            FileKind::Segment { pos, .. } | FileKind::Partial { pos, .. } if pos < cutoff => {
                segments.push((pos, name))
            }
            FileKind::TimelineHistory { tli } if tli < min_tli && !needed_tlis.contains(&tli) => {
                histories.push(name)
            }
            _ => {}
        }
    }
    backup_files.sort();
    segments.sort();
    histories.sort();
    backup_files
        .into_iter()
        .chain(segments.into_iter().map(|(_, n)| n))
        .chain(histories)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroUsize;

    const LABEL: &str = "START WAL LOCATION: 0/6000028 (file 000000010000000000000006)\n\
STOP WAL LOCATION: 0/6000100 (file 000000010000000000000006)\n\
CHECKPOINT LOCATION: 0/6000060\nBACKUP METHOD: streamed\nBACKUP FROM: primary\n\
START TIME: 2026-11-25 00:10:00 UTC\nLABEL: pg_basebackup base backup\n\
START TIMELINE: 1\nSTOP TIME: 2026-11-25 00:10:01 UTC\nSTOP TIMELINE: 1\n";

    fn backup(seg: &str, offset: &str) -> Backup {
        let name = format!("{seg}.{offset}.backup");
        let (tli, pos) = parse_segment_name(seg).expect("segment");
        let text = LABEL
            .replace("000000010000000000000006", seg)
            .replace("START TIMELINE: 1", &format!("START TIMELINE: {tli}"));
        let mut b = Backup::new(&name, text.as_bytes()).expect("label");
        assert_eq!((b.tli, b.pos), (tli, pos));
        b.label.start_lsn = 0;
        b
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Files archived at `at` seconds after the epoch.
    fn listed(list: &[String], at: u64) -> Vec<Listed> {
        list.iter()
            .map(|name| Listed {
                name: name.clone(),
                archived: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(at)),
            })
            .collect()
    }

    #[test]
    fn names_are_classified_as_postgresql_writes_them() {
        assert_eq!(
            classify("000000020000000A000000FF"),
            FileKind::Segment {
                tli: 2,
                pos: Position(0xA_0000_00FF)
            }
        );
        assert!(matches!(
            classify("000000010000000000000003.partial"),
            FileKind::Partial { tli: 1, .. }
        ));
        assert_eq!(
            classify("000000010000000000000002.00000028.backup"),
            FileKind::BackupHistory {
                tli: 1,
                pos: Position(2),
                offset: 0x28
            }
        );
        assert_eq!(
            classify("0000000A.history"),
            FileKind::TimelineHistory { tli: 10 }
        );
        for other in [
            "00000001000000000000000a",
            "0000000100000000000000030",
            "000000010000000000000003.backup",
            "a.history",
            "README",
            "000000010000000000000003.partial.x",
        ] {
            assert_eq!(classify(other), FileKind::Other, "{other}");
        }
    }

    #[test]
    fn lsns_map_to_positions_for_every_segment_size() {
        assert_eq!(
            Position::of_lsn(0x1_0300_0028, 16 << 20),
            Some(Position(0x1_0000_0003))
        );
        assert_eq!(Position::of_lsn(0x0300_0028, 1 << 20), Some(Position(0x30)));
        assert_eq!(
            Position::of_lsn(0x1_4000_0000, 1 << 30),
            Some(Position(0x1_0000_0001))
        );
        assert_eq!(Position::of_lsn(5, 3 << 20), None);
        assert_eq!(Position(0x1_0000_0003).to_string(), "0000000100000003");
    }

    #[test]
    fn backup_labels_parse_and_must_match_their_name() {
        let b = Backup::new("000000010000000000000006.00000028.backup", LABEL.as_bytes())
            .expect("parse");
        assert_eq!(b.label.start_lsn, 0x600_0028);
        assert_eq!(b.label.stop_lsn, Some(0x600_0100));
        assert_eq!(b.label.start_tli, Some(1));
        assert_eq!(b.label.label.as_deref(), Some("pg_basebackup base backup"));
        assert!(Backup::new("000000010000000000000007.00000028.backup", LABEL.as_bytes()).is_err());
        assert_eq!(
            parse_backup_label(b"LABEL: x\n"),
            Err(HistoryError::Missing("START WAL LOCATION"))
        );
        assert!(parse_backup_label(b"START WAL LOCATION: 0/zz (file x)\n").is_err());
        assert!(matches!(
            parse_backup_label(&[0xff, 0xfe]),
            Err(HistoryError::NotText(0))
        ));
        assert!(matches!(
            parse_backup_label(&vec![b' '; MAX_HISTORY_FILE_LEN + 1]),
            Err(HistoryError::TooLong(_))
        ));
    }

    #[test]
    fn timeline_histories_name_their_ancestors() {
        let text = b"1\t0/3000158\tno recovery target specified\n\n# comment\n2\t0/5000000\tbefore 2000-01-01 00:00:00+00\n";
        assert_eq!(parse_timeline_history(text), Ok(vec![1, 2]));
        assert!(parse_timeline_history(b"x\t0/1\n").is_err());
        assert!(parse_timeline_history(b"1\n").is_err());
    }

    fn repo() -> Vec<Listed> {
        listed(&repo_names(), 0)
    }

    fn repo_names() -> Vec<String> {
        names(&[
            "000000010000000000000001",
            "000000010000000000000002",
            "000000010000000000000002.00000028.backup",
            "000000010000000000000003",
            "000000010000000000000004",
            "000000010000000000000004.partial",
            "00000002.history",
            "000000020000000000000004",
            "000000020000000000000005",
            "000000020000000000000005.00000060.backup",
            "000000020000000000000006",
            "00000003.history",
            "000000030000000000000006",
            "notes.txt",
        ])
    }

    fn backups() -> Vec<Backup> {
        vec![
            backup("000000020000000000000005", "00000060"),
            backup("000000010000000000000002", "00000028"),
        ]
    }

    fn history(list: &[(u32, &[u32])]) -> BTreeMap<u32, Vec<u32>> {
        list.iter().map(|(t, a)| (*t, a.to_vec())).collect()
    }

    #[test]
    fn keep_one_removes_everything_before_the_newest_backup() {
        let n = NonZeroUsize::new(1).expect("1");
        let anc = history(&[(2, &[1])]);
        let p = plan(&repo(), backups(), Keep::Newest(n), &anc, Hold::OFF).expect("plan");
        assert_eq!(p.cutoff, Some(Position(5)));
        assert_eq!(p.kept.len(), 1);
        assert_eq!(p.kept[0].tli, 2);
        assert_eq!(p.expired.len(), 1);
        assert_eq!(
            p.remove,
            names(&[
                "000000010000000000000002.00000028.backup",
                "000000010000000000000001",
                "000000010000000000000002",
                "000000010000000000000003",
                "000000010000000000000004",
                "000000010000000000000004.partial",
                "000000020000000000000004",
            ])
        );
    }

    #[test]
    fn keep_two_keeps_both_backups_and_every_timeline() {
        let n = NonZeroUsize::new(2).expect("2");
        let p = plan(
            &repo(),
            backups(),
            Keep::Newest(n),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert_eq!(p.cutoff, Some(Position(2)));
        assert_eq!(p.remove, names(&["000000010000000000000001"]));
        let n = NonZeroUsize::new(5).expect("5");
        let p = plan(
            &repo(),
            backups(),
            Keep::Newest(n),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert_eq!(p.remove, names(&["000000010000000000000001"]));
    }

    #[test]
    fn history_files_below_the_kept_timelines_go_unless_they_are_ancestors() {
        let mut files = repo_names();
        files.push("00000001.history".into());
        let files = listed(&files, 0);
        let only_tl3 = vec![backup("000000030000000000000006", "00000028")];
        let n = NonZeroUsize::new(1).expect("1");
        let p = plan(
            &files,
            only_tl3.clone(),
            Keep::Newest(n),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert!(p.remove.contains(&"00000002.history".to_string()));
        assert!(p.remove.contains(&"00000001.history".to_string()));
        assert!(!p.remove.contains(&"00000003.history".to_string()));
        let anc = history(&[(3, &[1, 2])]);
        let p = plan(&files, only_tl3, Keep::Newest(n), &anc, Hold::OFF).expect("plan");
        assert!(p.remove.iter().all(|n| !n.ends_with(".history")), "{p:?}");
    }

    #[test]
    fn before_a_position_keeps_the_backups_after_it_and_refuses_to_keep_none() {
        let p = plan(
            &repo(),
            backups(),
            Keep::From(Position(4)),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert_eq!(p.cutoff, Some(Position(4)));
        assert_eq!(p.kept.len(), 1);
        assert!(p.remove.contains(&"000000010000000000000003".to_string()));
        assert!(!p.remove.contains(&"000000010000000000000004".to_string()));
        assert_eq!(
            plan(
                &repo(),
                backups(),
                Keep::From(Position(6)),
                &history(&[]),
                Hold::OFF
            ),
            Err(PlanError::NoBackupLeft(Position(6)))
        );
    }

    #[test]
    fn without_backups_nothing_goes() {
        let n = NonZeroUsize::new(1).expect("1");
        let p = plan(
            &repo(),
            Vec::new(),
            Keep::Newest(n),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert_eq!(p, Plan::default());
        let p = plan(
            &repo(),
            Vec::new(),
            Keep::From(Position(9)),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert!(p.remove.is_empty());
    }

    /// Backup A starts in segment 3 at t = 300 and is still running; backup B starts in
    /// segment 6 and has finished; segment i was archived at t = 100 i.
    fn running_backup_repo() -> (Vec<Listed>, Vec<Backup>) {
        let mut files: Vec<Listed> = (1..=9u64)
            .map(|i| Listed {
                name: format!("00000001000000000000000{i}"),
                archived: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(100 * i)),
            })
            .collect();
        files.push(Listed {
            name: "000000010000000000000006.00000028.backup".into(),
            archived: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(650)),
        });
        (files, vec![backup("000000010000000000000006", "00000028")])
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn the_minimum_age_keeps_what_a_backup_running_since_then_needs() {
        let (files, backups) = running_backup_repo();
        let n = NonZeroUsize::new(1).expect("1");
        let seg = |i: u32| format!("00000001000000000000000{i}");
        // Without it, --keep 1 cuts at B's start and A loses segments 3 to 5.
        let p = plan(
            &files,
            backups.clone(),
            Keep::Newest(n),
            &history(&[]),
            Hold::OFF,
        )
        .expect("plan");
        assert_eq!(p.remove, (1..=5).map(seg).collect::<Vec<_>>());
        assert!(p.held.is_empty());
        // A started at t = 300; at t = 1000 a minimum age of 750 s covers it.
        let hold = Hold {
            min_age: Duration::from_secs(750),
            now: at(1000),
        };
        assert_eq!(hold.since(), Some(at(250)));
        let p = plan(
            &files,
            backups.clone(),
            Keep::Newest(n),
            &history(&[]),
            hold,
        )
        .expect("plan");
        assert_eq!(p.retention_cutoff, Some(Position(6)));
        assert_eq!(p.held_from, Some(Position(3)));
        assert_eq!(p.cutoff, Some(Position(3)));
        assert_eq!(p.remove, vec![seg(1), seg(2)]);
        assert_eq!(p.held, (3..=5).map(seg).collect::<Vec<_>>());
        assert_eq!(p.kept.len(), 1);
        // One that does not reach back to A's start does not protect it: the limit.
        let hold = Hold {
            min_age: Duration::from_secs(550),
            now: at(1000),
        };
        let p = plan(
            &files,
            backups.clone(),
            Keep::Newest(n),
            &history(&[]),
            hold,
        )
        .expect("plan");
        assert_eq!(p.cutoff, Some(Position(5)));
        assert!(p.remove.contains(&seg(3)));
        // A file archived exactly min-age ago is old enough.
        let hold = Hold {
            min_age: Duration::from_secs(700),
            now: at(1000),
        };
        let p = plan(&files, backups, Keep::Newest(n), &history(&[]), hold).expect("plan");
        assert_eq!(p.held_from, Some(Position(4)));
    }

    #[test]
    fn a_minimum_age_past_every_file_keeps_everything_and_zero_keeps_nothing() {
        let (files, backups) = running_backup_repo();
        let n = NonZeroUsize::new(1).expect("1");
        let hold = Hold {
            min_age: Duration::from_secs(24 * 3600),
            now: at(1000),
        };
        let p = plan(
            &files,
            backups.clone(),
            Keep::Newest(n),
            &history(&[]),
            hold,
        )
        .expect("plan");
        assert!(p.remove.is_empty(), "{p:?}");
        assert_eq!(p.held.len(), 5);
        // Zero is off, even for a file whose time is in the future (a skewed clock).
        let hold = Hold {
            min_age: Duration::ZERO,
            now: at(0),
        };
        assert_eq!(hold.since(), None);
        let p = plan(&files, backups, Keep::Newest(n), &history(&[]), hold).expect("plan");
        assert_eq!(p.remove.len(), 5);
    }

    #[test]
    fn a_file_without_a_time_counts_as_just_archived() {
        let (mut files, backups) = running_backup_repo();
        files[3].archived = None;
        let n = NonZeroUsize::new(1).expect("1");
        let hold = Hold {
            min_age: Duration::from_secs(1),
            now: at(1000),
        };
        let p = plan(&files, backups, Keep::Newest(n), &history(&[]), hold).expect("plan");
        assert_eq!(p.held_from, Some(Position(4)));
        assert_eq!(p.remove.len(), 3);
    }

    #[test]
    fn the_minimum_age_keeps_recent_timeline_history_files_and_their_timelines() {
        let mut files = listed(&repo_names(), 0);
        files.push(Listed {
            name: "00000001.history".into(),
            archived: Some(at(0)),
        });
        let only_tl3 = vec![backup("000000030000000000000006", "00000028")];
        let n = NonZeroUsize::new(1).expect("1");
        let hold = Hold {
            min_age: Duration::from_secs(60),
            now: at(1000),
        };
        // A recent timeline 2 segment (a backup may still run there): timeline 2's history
        // file and its ancestors stay.
        let mut with_tl2 = files.clone();
        with_tl2.push(Listed {
            name: "000000020000000000000007".into(),
            archived: Some(at(990)),
        });
        let anc = history(&[(2, &[1])]);
        let p = plan(&with_tl2, only_tl3.clone(), Keep::Newest(n), &anc, hold).expect("plan");
        assert!(p.remove.iter().all(|n| !n.ends_with(".history")), "{p:?}");
        // A recent history file itself stays.
        files[6].archived = Some(at(999));
        assert_eq!(files[6].name, "00000002.history");
        let p = plan(&files, only_tl3, Keep::Newest(n), &history(&[]), hold).expect("plan");
        assert!(!p.remove.contains(&"00000002.history".to_string()), "{p:?}");
        assert!(p.remove.contains(&"00000001.history".to_string()), "{p:?}");
        assert_eq!(p.held, vec!["00000002.history".to_string()]);
    }
}
