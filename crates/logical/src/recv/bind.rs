//! Whether an output file may be continued by this run: it must come from the same stream
//! (cluster, timeline, database, slot, publications, format), and the slot must not have been
//! confirmed past what the file holds (dropped and re-created, or advanced by someone else:
//! the changes in between are in no slot any more). Decided before anything is touched.

use std::path::Path;

use super::RecvError;
use crate::conn::SlotInfo;
use crate::output::{State, StreamId};
use crate::Lsn;

/// Refuses to continue the output at `path`, whose state is `state`, from stream `here` with
/// slot `slot` (`None`: the slot does not exist) and `--start` `start`.
pub(super) fn check(
    path: &Path,
    state: &State,
    here: &StreamId,
    slot: Option<&SlotInfo>,
    start: Option<Lsn>,
) -> Result<(), RecvError> {
    let Some(theirs) = &state.stream else {
        return Err(RecvError::UnboundState {
            path: path.to_owned(),
        });
    };
    if theirs != here {
        return Err(RecvError::OtherStream {
            path: path.to_owned(),
            file: Box::new(theirs.clone()),
            here: Box::new(here.clone()),
        });
    }
    let holds = state.confirmed;
    let Some(slot) = slot else {
        return Err(RecvError::SlotGone {
            path: path.to_owned(),
            slot: here.slot.clone(),
            holds,
        });
    };
    if let Some(confirmed) = slot.confirmed_flush {
        if confirmed > holds {
            return Err(RecvError::SlotAhead {
                path: path.to_owned(),
                slot: here.slot.clone(),
                holds,
                confirmed,
            });
        }
    }
    if let Some(start) = start {
        if start > holds {
            return Err(RecvError::StartPastFile {
                path: path.to_owned(),
                start,
                holds,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Position;

    fn stream(system: &str) -> StreamId {
        StreamId::new(system, 1, "app", "s1", vec!["p".into()], false)
    }

    fn state(confirmed: u64) -> State {
        State {
            position: Position {
                offset: 10,
                lsn: Lsn(50),
                end_lsn: Lsn(60),
            },
            confirmed: Lsn(confirmed),
            stream: Some(stream("1")),
        }
    }

    fn slot(at: u64) -> SlotInfo {
        SlotInfo {
            confirmed_flush: Some(Lsn(at)),
            plugin: Some("pgoutput".into()),
            database: Some("app".into()),
        }
    }

    #[test]
    fn the_same_stream_continues_up_to_what_it_confirmed() {
        let p = Path::new("out.jsonl");
        assert!(check(p, &state(100), &stream("1"), Some(&slot(100)), None).is_ok());
        assert!(check(p, &state(100), &stream("1"), Some(&slot(40)), Some(Lsn(90))).is_ok());
    }

    #[test]
    fn everything_else_is_refused_in_one_line() {
        let p = Path::new("out.jsonl");
        let refused = |st: &State, here: &StreamId, s: Option<&SlotInfo>, start| {
            let e = check(p, st, here, s, start).unwrap_err().to_string();
            assert!(!e.contains('\n') && e.contains("--start-over"), "{e}");
            e
        };
        let e = refused(&state(100), &stream("2"), Some(&slot(1)), None);
        assert!(e.contains("system 1 ") && e.contains("system 2 "), "{e}");
        let e = refused(&state(100), &stream("1"), Some(&slot(101)), None);
        assert!(e.contains("0/65") && e.contains("0/64"), "{e}");
        let e = refused(&state(100), &stream("1"), None, None);
        assert!(e.contains("no slot s1 exists"), "{e}");
        let e = refused(&state(100), &stream("1"), Some(&slot(1)), Some(Lsn(101)));
        assert!(e.contains("--start 0/65"), "{e}");
        let old = State {
            stream: None,
            ..state(100)
        };
        let e = refused(&old, &stream("1"), Some(&slot(1)), None);
        assert!(e.contains("older pgcompress"), "{e}");
    }
}
