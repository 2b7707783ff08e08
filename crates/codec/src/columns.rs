//! Column coding: lines of delimited text (COPY's text and CSV formats as they cross the
//! link) rewritten column by column, so that a general-purpose compressor sees each column's
//! values next to each other instead of interleaved with the other columns.
//!
//! A chunk of `COPY ... FROM STDIN` traffic is rows like `1,155190,7706,1,17,21168.23,...`:
//! zstd finds the repeats inside a row and between rows, but a column of ascending keys, one
//! of small decimals and one of dates each have their own statistics, which interleaving
//! mixes. What the transform saves on TPC-H CSV as the link carries it is in docs/TUNNEL.md
//! (sender rules, column-coded chunks).
//!
//! The transform knows nothing of quoting or messages. The input is cut into lines at each
//! `\n` and each line into fields at each separator byte (the most frequent of `,`, `\t`
//! and `|`); a chunk that starts or ends inside a row, a message header inside a row, or a
//! quoted separator only make some lines' fields line up worse. Any input that [`encode`]
//! accepts comes back exactly from [`decode`]; [`encode`] declines (returns `None`) input
//! that does not look like lines of fields, and the caller then sends it as it is.
//!
//! Coded form, little-endian: separator `u8`; line count `L: u32`; column count `C: u16`
//! (1 to [`MAX_COLUMNS`]); run count `R: u32` and `R` runs (`fields: u16`, `lines: u32`):
//! the number of fields of each line, in line order; then the columns, first to last: the
//! `j`-th field of every line that has more than `j` fields, each followed by `\n`; then
//! the bytes after the input's last `\n`. Each field's `\n` in the columns becomes the
//! separator or the line's `\n` when decoded, so the decoded length is the coded length
//! less the header and the runs: [`decode`] checks it against the caller's cap before it
//! allocates.

use crate::cursor::{Cursor, ShortRead};

/// Most fields a line may have (PostgreSQL's limit on a table's columns).
pub const MAX_COLUMNS: usize = 1600;
/// Fewest lines worth transposing.
const MIN_LINES: usize = 8;
/// Separators [`encode`] chooses from.
const SEPARATORS: [u8; 3] = [b',', b'\t', b'|'];
/// Bytes of the fixed header.
const HEADER_LEN: usize = 1 + 4 + 2 + 4;
/// Bytes of one run.
const RUN_LEN: usize = 2 + 4;

/// A column-coded buffer that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ColumnsError {
    /// The header or the runs end early.
    #[error("column-coded header cut short: {0}")]
    Short(#[from] ShortRead),
    /// The decoded length is above the caller's cap.
    #[error("decoded length {len} is above the {cap}-byte limit")]
    TooLong {
        /// The decoded length the input implies.
        len: usize,
        /// The cap.
        cap: usize,
    },
    /// The column count is zero or above [`MAX_COLUMNS`].
    #[error("{columns} columns (1 to {MAX_COLUMNS} allowed)")]
    Columns {
        /// The count in the header.
        columns: usize,
    },
    /// A run is empty or gives its lines no fields or more fields than there are columns.
    #[error("run {run} gives {lines} lines {fields} fields each ({columns} columns)")]
    BadRun {
        /// Index of the run.
        run: usize,
        /// Its field count.
        fields: usize,
        /// Its line count.
        lines: usize,
        /// The column count.
        columns: usize,
    },
    /// The runs cover a different number of lines than the header states.
    #[error("the runs cover {runs} lines, the header states {lines}")]
    LineCount {
        /// Lines the runs cover.
        runs: u64,
        /// Lines the header states.
        lines: usize,
    },
    /// A column holds fewer fields than the runs give it.
    #[error("column {column} ends after {found} of its {expected} fields")]
    ColumnShort {
        /// The column (from 0).
        column: usize,
        /// Fields found.
        found: usize,
        /// Fields the runs give it.
        expected: usize,
    },
}

/// The column coding of `data`, or `None` when it does not look like lines of delimited
/// fields (fewer than eight lines, fewer separators than lines, a line of more than
/// [`MAX_COLUMNS`] fields, or field counts that change more often than every fourth line).
pub fn encode(data: &[u8]) -> Option<Vec<u8>> {
    let lines = memchr::memchr_iter(b'\n', data).count();
    if lines < MIN_LINES || u32::try_from(lines).is_err() {
        return None;
    }
    let body_end = memchr::memrchr(b'\n', data).map_or(0, |i| i + 1);
    let body = &data[..body_end];
    // The most frequent separator, counted once each.
    let (seps, sep) = SEPARATORS
        .iter()
        .map(|&s| (memchr::memchr_iter(s, body).count(), s))
        .max_by_key(|&(n, _)| n)?;
    if seps < lines {
        return None;
    }
    // Each column reserves its share of the body as the first line's field count splits
    // it, so the reservations add up to the body once; a fixed share each would, on rows
    // of 1 600 fields, reserve 200 times the chunk. Columns later lines add, and columns
    // longer than their share, grow as needed.
    let first_line = &body[..memchr::memchr(b'\n', body).unwrap_or(0)];
    let first_fields = memchr::memchr_iter(sep, first_line).count() + 1;
    let share = body.len() / first_fields;
    // Each line's fields go to the end of their columns; runs record the field counts.
    let mut columns: Vec<Vec<u8>> = Vec::new();
    let mut runs: Vec<(u16, u32)> = Vec::new();
    for line in body.split_inclusive(|&b| b == b'\n') {
        let line = &line[..line.len() - 1];
        let mut fields = 0usize;
        for field in line.split(|&b| b == sep) {
            if fields == MAX_COLUMNS {
                return None;
            }
            if fields == columns.len() {
                let reserve = if fields < first_fields { share } else { 0 };
                columns.push(Vec::with_capacity(reserve));
            }
            columns[fields].extend_from_slice(field);
            columns[fields].push(b'\n');
            fields += 1;
        }
        // At most MAX_COLUMNS, checked above.
        let fields = fields as u16;
        match runs.last_mut() {
            Some((f, n)) if *f == fields => *n += 1,
            _ => {
                if runs.len() > lines / 4 {
                    return None;
                }
                runs.push((fields, 1));
            }
        }
    }
    let mut out = Vec::with_capacity(HEADER_LEN + RUN_LEN * runs.len() + data.len());
    out.push(sep);
    out.extend_from_slice(&(lines as u32).to_le_bytes());
    out.extend_from_slice(&(columns.len() as u16).to_le_bytes());
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for (fields, n) in &runs {
        out.extend_from_slice(&fields.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
    }
    for column in &columns {
        out.extend_from_slice(column);
    }
    out.extend_from_slice(&data[body_end..]);
    Some(out)
}

/// Reverses [`encode`]. `max_len` caps the decoded length; nothing is allocated for the
/// output before the length the input implies has been checked against it.
pub fn decode(coded: &[u8], max_len: usize) -> Result<Vec<u8>, ColumnsError> {
    let mut out = Vec::new();
    decode_into(coded, max_len, &mut out)?;
    Ok(out)
}

/// [`decode`], appending to `out` (the link decoder writes a chunk straight into its output).
/// On an error nothing is appended.
pub fn decode_into(coded: &[u8], max_len: usize, out: &mut Vec<u8>) -> Result<(), ColumnsError> {
    let mut c = Cursor::new(coded);
    let sep = c.u8()?;
    let lines = c.u32_le()? as usize;
    let ncols = usize::from(c.u16_le()?);
    if ncols == 0 || ncols > MAX_COLUMNS {
        return Err(ColumnsError::Columns { columns: ncols });
    }
    let nruns = c.u32_le()? as usize;
    // Each run takes RUN_LEN bytes: a count past the input is cut short before allocating.
    let run_bytes = c.take(nruns.saturating_mul(RUN_LEN))?;
    let mut runs = Vec::with_capacity(nruns);
    // Lines with exactly k fields, for k up to ncols.
    let mut with_fields = vec![0u64; ncols + 1];
    let mut covered = 0u64;
    for (run, r) in run_bytes.chunks_exact(RUN_LEN).enumerate() {
        let fields = usize::from(u16::from_le_bytes([r[0], r[1]]));
        let n = u32::from_le_bytes([r[2], r[3], r[4], r[5]]) as usize;
        if n == 0 || fields == 0 || fields > ncols {
            return Err(ColumnsError::BadRun {
                run,
                fields,
                lines: n,
                columns: ncols,
            });
        }
        with_fields[fields] += n as u64;
        covered += n as u64;
        runs.push((fields, n));
    }
    if covered != lines as u64 {
        return Err(ColumnsError::LineCount {
            runs: covered,
            lines,
        });
    }
    let rest = c.rest();
    if rest.len() > max_len {
        return Err(ColumnsError::TooLong {
            len: rest.len(),
            cap: max_len,
        });
    }
    // Where each column starts: column j holds one field for every line with more than j
    // fields.
    let mut starts = Vec::with_capacity(ncols);
    let mut at = 0usize;
    let mut expected = covered;
    for (column, &k) in with_fields.iter().enumerate().take(ncols) {
        expected -= k;
        starts.push(at);
        let mut found = 0u64;
        let mut ends = memchr::memchr_iter(b'\n', &rest[at..]);
        while found < expected {
            match ends.next() {
                Some(e) => {
                    found += 1;
                    if found == expected {
                        at += e + 1;
                    }
                }
                None => {
                    return Err(ColumnsError::ColumnShort {
                        column,
                        found: found as usize,
                        expected: expected as usize,
                    })
                }
            }
        }
    }
    let tail = &rest[at..];
    // Everything is checked: from here on the decoding cannot fail.
    out.reserve(rest.len());
    for (fields, n) in runs {
        for _ in 0..n {
            for (j, pos) in starts.iter_mut().enumerate().take(fields) {
                // The scan above found every field of every column.
                let len = memchr::memchr(b'\n', &rest[*pos..]).unwrap_or(0);
                out.extend_from_slice(&rest[*pos..*pos + len]);
                out.push(if j + 1 == fields { b'\n' } else { sep });
                *pos += len + 1;
            }
        }
    }
    out.extend_from_slice(tail);
    Ok(())
}

#[cfg(test)]
mod tests;
