//! `FILE.state`: where an output file stands, and which stream it continues.
//!
//! Version 2 (one `key value` per line after the header; values escape `\`, newline and
//! carriage return as `\\`, `\n`, `\r`):
//!
//! ```text
//! pgcompress-logical-state 2
//! offset 123456          bytes of the output that are durable
//! lsn 0/3000060          commit LSN of the last transaction in them
//! end_lsn 0/3000090      its end LSN
//! confirmed 0/30000C8    highest flush LSN this consumer may have sent the server for the file
//! system 7312...         IDENTIFY_SYSTEM: the cluster's system identifier
//! timeline 1             IDENTIFY_SYSTEM: its timeline
//! database app           the database connected to
//! slot s1                the slot read
//! publication p1         one line per publication, sorted
//! format changes         `changes`, or `begin-commit` with B and C lines
//! ```
//!
//! Version 1 (offset, lsn and end_lsn only) is read so that it can be refused by name: it does
//! not say which stream its file came from.

use std::fmt;
use std::path::Path;

use super::{OutputError, Position};
use crate::Lsn;

/// First line of a state file of this version.
pub(crate) const MAGIC: &str = "pgcompress-logical-state 2";
/// First line of a state file written before the stream was recorded.
const MAGIC_V1: &str = "pgcompress-logical-state 1";
/// Largest state file read back (publication names make it grow; 1 MiB is far past any).
pub(crate) const STATE_MAX: u64 = 1 << 20;

/// What decides the contents of an output file: the stream of changes it continues.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamId {
    /// The cluster's system identifier (IDENTIFY_SYSTEM).
    pub system_id: String,
    /// The cluster's timeline (IDENTIFY_SYSTEM); a promotion or a point-in-time recovery
    /// starts a new one, whose WAL may differ from what the file holds.
    pub timeline: u32,
    /// The database the slot decodes.
    pub database: String,
    /// The logical replication slot.
    pub slot: String,
    /// The publications, sorted and without repeats.
    pub publications: Vec<String>,
    /// B and C lines around each transaction (`--begin-commit`).
    pub begin_commit: bool,
}

impl StreamId {
    /// A stream; `publications` are sorted and repeats dropped, so their order on the command
    /// line does not matter.
    pub fn new(
        system_id: impl Into<String>,
        timeline: u32,
        database: impl Into<String>,
        slot: impl Into<String>,
        mut publications: Vec<String>,
        begin_commit: bool,
    ) -> Self {
        publications.sort();
        publications.dedup();
        StreamId {
            system_id: system_id.into(),
            timeline,
            database: database.into(),
            slot: slot.into(),
            publications,
            begin_commit,
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pubs: Vec<String> = self.publications.iter().map(|p| escape(p)).collect();
        write!(
            f,
            "system {} timeline {}, database {}, slot {}, publication {}{}",
            escape(&self.system_id),
            self.timeline,
            escape(&self.database),
            escape(&self.slot),
            pubs.join(","),
            if self.begin_commit {
                ", with --begin-commit"
            } else {
                ""
            }
        )
    }
}

/// A state file's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// What the output holds, durably.
    pub position: Position,
    /// The highest flush LSN the consumer may have sent the server while writing this file,
    /// never below `position.end_lsn`; for a new file, the slot's position when it began. A
    /// slot confirmed past it lost changes the file does not hold.
    pub confirmed: Lsn,
    /// The stream the file continues; `None` for a version 1 state, which did not record it.
    pub stream: Option<StreamId>,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    Some(out)
}

/// The text of a state file.
pub(crate) fn render(pos: Position, confirmed: Lsn, stream: &StreamId) -> String {
    let mut t = format!(
        "{MAGIC}\noffset {}\nlsn {}\nend_lsn {}\nconfirmed {}\nsystem {}\ntimeline {}\n\
         database {}\nslot {}\n",
        pos.offset,
        pos.lsn,
        pos.end_lsn,
        confirmed.max(pos.end_lsn),
        escape(&stream.system_id),
        stream.timeline,
        escape(&stream.database),
        escape(&stream.slot),
    );
    for p in &stream.publications {
        t.push_str("publication ");
        t.push_str(&escape(p));
        t.push('\n');
    }
    t.push_str(if stream.begin_commit {
        "format begin-commit\n"
    } else {
        "format changes\n"
    });
    t
}

/// Reads a state file's text (version 2, or version 1 without a stream).
pub(crate) fn parse(path: &Path, text: &str) -> Result<State, OutputError> {
    let bad = |reason: &str| OutputError::BadState {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let mut lines = text.lines();
    let v1 = match lines.next() {
        Some(MAGIC) => false,
        Some(MAGIC_V1) => true,
        _ => return Err(bad("first line is not the state header")),
    };
    let (mut offset, mut lsn, mut end_lsn, mut confirmed) = (None, None, None, None);
    let (mut system, mut timeline, mut database, mut slot, mut format) =
        (None, None, None, None, None);
    let mut publications = Vec::new();
    for line in lines {
        let (k, v) = line
            .split_once(' ')
            .ok_or_else(|| bad("a line without a value"))?;
        let lsn_of =
            |what: &str| Lsn::parse(v).ok_or_else(|| bad(&format!("{what} is not an LSN")));
        let text_of = || unescape(v).ok_or_else(|| bad("a value with a bad escape"));
        match (k, v1) {
            ("offset", _) => offset = Some(v.parse().map_err(|_| bad("offset is not a number"))?),
            ("lsn", _) => lsn = Some(lsn_of("lsn")?),
            ("end_lsn", _) => end_lsn = Some(lsn_of("end_lsn")?),
            ("confirmed", false) => confirmed = Some(lsn_of("confirmed")?),
            ("system", false) => system = Some(text_of()?),
            ("timeline", false) => {
                timeline = Some(v.parse().map_err(|_| bad("timeline is not a number"))?)
            }
            ("database", false) => database = Some(text_of()?),
            ("slot", false) => slot = Some(text_of()?),
            ("publication", false) => publications.push(text_of()?),
            ("format", false) => {
                format = Some(match v {
                    "changes" => false,
                    "begin-commit" => true,
                    _ => return Err(bad("unknown format")),
                })
            }
            _ => return Err(bad("unknown key")),
        }
    }
    let (Some(offset), Some(lsn), Some(end_lsn)) = (offset, lsn, end_lsn) else {
        return Err(bad("offset, lsn or end_lsn missing"));
    };
    let position = Position {
        offset,
        lsn,
        end_lsn,
    };
    if v1 {
        return Ok(State {
            position,
            confirmed: end_lsn,
            stream: None,
        });
    }
    let (Some(confirmed), Some(system), Some(timeline), Some(database), Some(slot), Some(format)) =
        (confirmed, system, timeline, database, slot, format)
    else {
        return Err(bad(
            "confirmed, system, timeline, database, slot or format missing",
        ));
    };
    if publications.is_empty() {
        return Err(bad("no publication"));
    }
    Ok(State {
        position,
        confirmed: confirmed.max(end_lsn),
        stream: Some(StreamId::new(
            system,
            timeline,
            database,
            slot,
            publications,
            format,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> StreamId {
        StreamId::new(
            "7312345678901234567",
            3,
            "shop\nfloor \\ one",
            "s1",
            vec!["b".into(), "a".into(), "b".into()],
            true,
        )
    }

    #[test]
    fn a_state_reads_back_as_written() {
        let pos = Position {
            offset: 42,
            lsn: Lsn(0x100),
            end_lsn: Lsn(0x180),
        };
        let text = render(pos, Lsn(0x200), &stream());
        assert!(text.contains("publication a\npublication b\nformat begin-commit\n"));
        let st = parse(Path::new("x"), &text).unwrap();
        assert_eq!(st.position, pos);
        assert_eq!(st.confirmed, Lsn(0x200));
        assert_eq!(st.stream, Some(stream()));
        // Confirmed is never below the end of what is durable.
        let st = parse(Path::new("x"), &render(pos, Lsn(0x10), &stream())).unwrap();
        assert_eq!(st.confirmed, Lsn(0x180));
    }

    #[test]
    fn version_1_has_no_stream() {
        let st = parse(
            Path::new("x"),
            "pgcompress-logical-state 1\noffset 4\nlsn 0/10\nend_lsn 0/18\n",
        )
        .unwrap();
        assert_eq!(st.stream, None);
        assert_eq!(st.confirmed, Lsn(0x18));
        // Version 1 cannot carry the keys of version 2.
        assert!(parse(
            Path::new("x"),
            "pgcompress-logical-state 1\noffset 4\nlsn 0/10\nend_lsn 0/18\nslot s\n",
        )
        .is_err());
    }

    #[test]
    fn incomplete_or_damaged_states_are_refused() {
        let text = render(Position::default(), Lsn(1), &stream());
        for drop in [
            "confirmed",
            "system",
            "timeline",
            "database",
            "slot",
            "publication",
            "format",
        ] {
            let cut: String = text
                .lines()
                .filter(|l| !l.starts_with(drop))
                .map(|l| format!("{l}\n"))
                .collect();
            assert!(parse(Path::new("x"), &cut).is_err(), "without {drop}");
        }
        assert!(parse(Path::new("x"), &text.replace("shop\\n", "shop\\q")).is_err());
        assert!(parse(Path::new("x"), "garbage").is_err());
    }

    #[test]
    fn the_stream_shows_on_one_line() {
        let s = stream().to_string();
        assert!(!s.contains('\n'), "{s}");
        assert!(
            s.contains("slot s1, publication a,b, with --begin-commit"),
            "{s}"
        );
    }
}
