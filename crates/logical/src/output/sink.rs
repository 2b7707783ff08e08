//! The durable output: JSON lines appended to a file, fsynced per transaction (or batch), with
//! a state file beside it (`FILE.state`, see [`super::state`]) that records, after each fsync,
//! the byte offset up to which the output is whole and the last commit LSN written there, and
//! before each status update the flush LSN about to be confirmed, together with the stream
//! the file continues. The state is replaced atomically (write a temporary file, fsync,
//! rename, fsync the directory), so after a crash it names a point the output file is known to
//! reach: [`Sink::open`] cuts the torn tail after it, and the caller skips every transaction
//! whose commit LSN is not above [`Sink::last_lsn`]. Standard output has no state and no
//! recovery.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Seek, Stdout, Write};
use std::path::{Path, PathBuf};

use super::state::{self, State, StreamId, STATE_MAX};
use super::OutputError;
use crate::Lsn;

/// Output buffered before it goes to the file.
const BUFFER: usize = 1 << 20;

/// A point in the output: bytes up to `offset` hold every transaction up to commit `lsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// Bytes of output.
    pub offset: u64,
    /// Commit LSN of the last transaction in them (or the LSN of the last non-transactional
    /// message).
    pub lsn: Lsn,
    /// End LSN of that transaction: what may be confirmed to the server.
    pub end_lsn: Lsn,
}

enum Target {
    File(BufWriter<File>),
    Stdout(BufWriter<Stdout>),
}

/// Where the JSON lines go.
pub struct Sink {
    target: Target,
    path: Option<PathBuf>,
    written: Position,
    durable: Position,
    txn_start: u64,
    recovered_tail: u64,
    /// The stream a file continues (`None` for standard output).
    stream: Option<StreamId>,
    /// Highest flush LSN recorded in the state as confirmable.
    confirmed: Lsn,
}

/// `FILE.state` for output `FILE`.
pub fn state_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".state");
    PathBuf::from(s)
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> OutputError + 'a {
    move |source| OutputError::Io {
        path: path.to_owned(),
        what,
        source,
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

fn sync_dir(path: &Path) -> Result<(), OutputError> {
    let dir = parent_dir(path);
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(&dir, "fsync directory"))
}

/// Reads the state of output `path` (`FILE.state`) without touching anything: `None` when
/// there is none.
pub fn read_state(path: &Path) -> Result<Option<State>, OutputError> {
    let state = state_path(path);
    match fs::metadata(&state) {
        Ok(m) if m.len() > STATE_MAX => Err(OutputError::BadState {
            path: state,
            reason: format!("{} bytes, more than a state file holds", m.len()),
        }),
        Ok(_) => {
            let text = fs::read_to_string(&state).map_err(io_err(&state, "read"))?;
            state::parse(&state, &text).map(Some)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&state, "stat")(e)),
    }
}

fn write_state(
    path: &Path,
    pos: Position,
    confirmed: Lsn,
    stream: &StreamId,
) -> Result<(), OutputError> {
    let state = state_path(path);
    let mut tmp = state.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let text = state::render(pos, confirmed, stream);
    let mut f = File::create(&tmp).map_err(io_err(&tmp, "create"))?;
    f.write_all(text.as_bytes())
        .map_err(io_err(&tmp, "write"))?;
    f.sync_all().map_err(io_err(&tmp, "fsync"))?;
    fs::rename(&tmp, &state).map_err(io_err(&state, "rename onto"))?;
    sync_dir(&state)
}

impl Sink {
    /// Opens output file `path` of stream `stream` for appending after a recovery: with a
    /// state file, the file is cut back to the recorded offset (a torn tail from a crash);
    /// without one, the file must be absent or empty (it is not output of this tool) and a
    /// state is written first, saying the file begins at `begin_at` (the slot's confirmed
    /// position). `start_over` empties the file and its state and begins again.
    ///
    /// Whether the file may be continued from `stream` is the caller's decision, made before
    /// (see [`read_state`]); a state of another stream is refused here all the same.
    pub fn open(
        path: &Path,
        stream: &StreamId,
        begin_at: Lsn,
        start_over: bool,
    ) -> Result<Self, OutputError> {
        let found = if start_over { None } else { read_state(path)? };
        let (durable, confirmed) = match found {
            Some(st) => {
                if st.stream.as_ref() != Some(stream) {
                    return Err(OutputError::BadState {
                        path: state_path(path),
                        reason: "written from another stream".into(),
                    });
                }
                (st.position, st.confirmed)
            }
            None => {
                match fs::metadata(path) {
                    Ok(m) if m.len() > 0 && !start_over => {
                        return Err(OutputError::NotOurs {
                            path: path.to_owned(),
                        })
                    }
                    _ => {}
                }
                // The state first: should the run stop before the file is emptied, the next
                // one cuts it back to the state's offset 0 as a torn tail.
                let p = Position::default();
                write_state(path, p, begin_at, stream)?;
                (p, begin_at)
            }
        };
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err(path, "open"))?;
        if start_over {
            file.set_len(0).map_err(io_err(path, "truncate"))?;
        }
        let len = file.metadata().map_err(io_err(path, "stat"))?.len();
        if len < durable.offset {
            return Err(OutputError::Shrunk {
                path: path.to_owned(),
                len,
                offset: durable.offset,
            });
        }
        let recovered_tail = len - durable.offset;
        if recovered_tail > 0 {
            file.set_len(durable.offset)
                .map_err(io_err(path, "truncate"))?;
        }
        file.sync_all().map_err(io_err(path, "fsync"))?;
        sync_dir(path)?;
        let mut file = BufWriter::with_capacity(BUFFER, file);
        file.seek(io::SeekFrom::Start(durable.offset))
            .map_err(io_err(path, "seek"))?;
        Ok(Sink {
            target: Target::File(file),
            path: Some(path.to_owned()),
            written: durable,
            durable,
            txn_start: durable.offset,
            recovered_tail,
            stream: Some(stream.clone()),
            confirmed: confirmed.max(durable.end_lsn),
        })
    }

    /// Standard output: flushed at each sync, nothing to recover.
    pub fn stdout() -> Self {
        Sink {
            target: Target::Stdout(BufWriter::with_capacity(BUFFER, io::stdout())),
            path: None,
            written: Position::default(),
            durable: Position::default(),
            txn_start: 0,
            recovered_tail: 0,
            stream: None,
            confirmed: Lsn::INVALID,
        }
    }

    /// Bytes of a torn tail cut off at open.
    pub fn recovered_tail(&self) -> u64 {
        self.recovered_tail
    }

    /// The last commit LSN written (durable or not): a transaction at or below it is a
    /// duplicate.
    pub fn last_lsn(&self) -> Lsn {
        self.written.lsn
    }

    /// What is durable.
    pub fn durable(&self) -> Position {
        self.durable
    }

    /// The highest flush LSN the state records as confirmable: never below the end of what
    /// is durable.
    pub fn confirmed(&self) -> Lsn {
        self.confirmed
    }

    /// Records in the state that `lsn` is about to be confirmed to the server, if it is past
    /// what the state already allows; the caller sends it only once this returned. On a later
    /// start, the slot's `confirmed_flush_lsn` is then never past the state unless someone
    /// else moved the slot. Standard output records nothing.
    pub fn record_confirmed(&mut self, lsn: Lsn) -> Result<(), OutputError> {
        if lsn <= self.confirmed {
            return Ok(());
        }
        if let (Some(path), Some(stream)) = (&self.path, &self.stream) {
            write_state(path, self.durable, lsn, stream)?;
        }
        self.confirmed = lsn;
        Ok(())
    }

    /// True when output was written since the last [`Sink::sync`].
    pub fn has_pending(&self) -> bool {
        self.written != self.durable
    }

    /// Appends bytes of the current transaction.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        let r = match &mut self.target {
            Target::File(f) => f.write_all(bytes),
            Target::Stdout(s) => s.write_all(bytes),
        };
        r.map_err(|source| OutputError::Io {
            path: self.path.clone().unwrap_or_else(|| "-".into()),
            what: "write",
            source,
        })?;
        self.written.offset += bytes.len() as u64;
        Ok(())
    }

    /// Marks the end of a transaction (commit `lsn`, end `end_lsn`) in what was written.
    pub fn end_txn(&mut self, lsn: Lsn, end_lsn: Lsn) {
        self.written.lsn = self.written.lsn.max(lsn);
        self.written.end_lsn = self.written.end_lsn.max(end_lsn);
        self.txn_start = self.written.offset;
    }

    /// Takes back the bytes of a transaction that was being written when it failed (a
    /// corrupt spill record, a decoding error), so no part of it stays in the file. Standard
    /// output cannot take back what it already passed on.
    pub fn discard_open_txn(&mut self) -> Result<(), OutputError> {
        if self.written.offset == self.txn_start {
            return Ok(());
        }
        if let (Target::File(f), Some(path)) = (&mut self.target, &self.path) {
            f.flush().map_err(io_err(path, "write"))?;
            f.get_ref()
                .set_len(self.txn_start)
                .map_err(io_err(path, "truncate"))?;
            f.seek(io::SeekFrom::Start(self.txn_start))
                .map_err(io_err(path, "seek"))?;
        }
        self.written.offset = self.txn_start;
        Ok(())
    }

    /// Makes everything written durable (fsync, then the state file) and returns the new
    /// durable position.
    pub fn sync(&mut self) -> Result<Position, OutputError> {
        if !self.has_pending() {
            return Ok(self.durable);
        }
        match (&mut self.target, &self.path) {
            (Target::File(f), Some(path)) => {
                f.flush().map_err(io_err(path, "write"))?;
                f.get_ref().sync_data().map_err(io_err(path, "fsync"))?;
                if let Some(stream) = &self.stream {
                    write_state(path, self.written, self.confirmed, stream)?;
                }
            }
            (Target::Stdout(s), _) => {
                s.flush().map_err(|source| OutputError::Io {
                    path: "-".into(),
                    what: "write",
                    source,
                })?;
            }
            (Target::File(_), None) => {}
        }
        self.durable = self.written;
        self.confirmed = self.confirmed.max(self.durable.end_lsn);
        Ok(self.durable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> StreamId {
        StreamId::new("7312", 1, "app", "s1", vec!["p".into()], false)
    }

    fn open(out: &Path) -> Result<Sink, OutputError> {
        Sink::open(out, &stream(), Lsn(3), false)
    }

    #[test]
    fn the_confirmed_position_is_recorded_before_it_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        let mut s = open(&out).unwrap();
        assert_eq!(s.confirmed(), Lsn(3));
        s.write(b"one\n").unwrap();
        s.end_txn(Lsn(10), Lsn(11));
        s.sync().unwrap();
        assert_eq!(s.confirmed(), Lsn(11));
        s.record_confirmed(Lsn(40)).unwrap();
        // Pending output does not reach the state with the confirmed position.
        s.write(b"two\n").unwrap();
        s.end_txn(Lsn(50), Lsn(51));
        s.record_confirmed(Lsn(45)).unwrap();
        drop(s);
        let st = read_state(&out).unwrap().unwrap();
        assert_eq!((st.confirmed, st.position.offset), (Lsn(45), 4));
        assert_eq!(st.stream, Some(stream()));
        // A new file of another stream is refused; starting over empties it.
        let other = StreamId::new("9999", 1, "app", "s1", vec!["p".into()], false);
        assert!(matches!(
            Sink::open(&out, &other, Lsn(1), false),
            Err(OutputError::BadState { .. })
        ));
        let s = Sink::open(&out, &other, Lsn(7), true).unwrap();
        assert_eq!((s.recovered_tail(), s.confirmed()), (0, Lsn(7)));
        assert_eq!(fs::read(&out).unwrap(), b"");
        assert_eq!(read_state(&out).unwrap().unwrap().stream, Some(other));
    }

    #[test]
    fn torn_tail_is_cut_and_state_survives() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        let mut s = open(&out).unwrap();
        s.write(b"one\n").unwrap();
        s.end_txn(Lsn(10), Lsn(11));
        s.sync().unwrap();
        s.write(b"two-torn").unwrap();
        s.end_txn(Lsn(20), Lsn(21));
        // Simulate a crash: the bytes reach the file but no sync (and no state) follows.
        if let Target::File(f) = &mut s.target {
            f.flush().unwrap();
        }
        drop(s);
        assert_eq!(fs::read(&out).unwrap(), b"one\ntwo-torn");
        let s = open(&out).unwrap();
        assert_eq!(s.recovered_tail(), 8);
        assert_eq!(s.last_lsn(), Lsn(10));
        assert_eq!(s.durable().end_lsn, Lsn(11));
        assert_eq!(fs::read(&out).unwrap(), b"one\n");
    }

    #[test]
    fn a_failed_transaction_leaves_no_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        let mut s = open(&out).unwrap();
        s.write(b"ok\n").unwrap();
        s.end_txn(Lsn(5), Lsn(6));
        s.write(&vec![b'x'; 3 << 20]).unwrap();
        s.discard_open_txn().unwrap();
        s.write(b"next\n").unwrap();
        s.end_txn(Lsn(7), Lsn(8));
        assert_eq!(s.sync().unwrap().offset, 8);
        drop(s);
        assert_eq!(fs::read(&out).unwrap(), b"ok\nnext\n");
    }

    #[test]
    fn foreign_or_shrunk_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o");
        fs::write(&out, b"not ours").unwrap();
        assert!(matches!(open(&out), Err(OutputError::NotOurs { .. })));
        fs::remove_file(&out).unwrap();
        let mut s = open(&out).unwrap();
        s.write(b"abc\n").unwrap();
        s.end_txn(Lsn(1), Lsn(2));
        s.sync().unwrap();
        drop(s);
        fs::write(&out, b"ab").unwrap();
        assert!(matches!(
            open(&out),
            Err(OutputError::Shrunk {
                len: 2,
                offset: 4,
                ..
            })
        ));
        fs::write(state_path(&out), "garbage").unwrap();
        assert!(matches!(open(&out), Err(OutputError::BadState { .. })));
    }
}
