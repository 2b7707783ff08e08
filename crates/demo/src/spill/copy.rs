//! Reading the rows of `COPY (SELECT lsn, data FROM pg_logical_slot_peek_binary_changes(...)) TO STDOUT
//! (FORMAT binary)`: the pgoutput payloads the server produced, each with its LSN, without hex text.
//!
//! The layout is the "Binary Format" section of PostgreSQL's `doc/src/sgml/ref/copy.sgml`: an 11-byte
//! signature, an Int32 flags field, an Int32 header-extension length and the extension, then per tuple an
//! Int16 field count (-1 ends the data) and per field an Int32 length (-1 is NULL) and the bytes. `pg_lsn`
//! is sent as an Int64 (`pg_lsn_send`), `bytea` as its bytes. Lengths are checked against a cap before
//! anything is allocated.

use std::io::{self, Read};

/// `PGCOPY\n\377\r\n\0`.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// The field count that ends the data.
const TRAILER: i16 = -1;
/// The largest payload accepted: PostgreSQL's own limit on a bytea (`MaxAllocSize`, 1 GB - 1).
const MAX_FIELD: usize = (1 << 30) - 1;
/// The largest header extension accepted (PostgreSQL writes none).
const MAX_EXTENSION: usize = 1 << 16;

/// A row of the COPY stream: the change's LSN and the pgoutput payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The `lsn` column.
    pub lsn: u64,
    /// The `data` column: one pgoutput message.
    pub payload: Vec<u8>,
}

/// Reads the rows of one binary COPY stream of `(lsn pg_lsn, data bytea)`.
pub struct CopyReader<R> {
    inner: R,
    done: bool,
}

impl<R: Read> CopyReader<R> {
    /// Checks the header and returns a reader positioned at the first row.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut sig = [0u8; 11];
        inner.read_exact(&mut sig)?;
        if &sig != SIGNATURE {
            return Err(bad(
                "the stream does not start with the binary COPY signature",
            ));
        }
        let _flags = read_i32(&mut inner)?;
        let ext = usize::try_from(read_i32(&mut inner)?)
            .ok()
            .filter(|&n| n <= MAX_EXTENSION)
            .ok_or_else(|| bad("header extension length out of range"))?;
        io::copy(&mut (&mut inner).take(ext as u64), &mut io::sink())?;
        Ok(CopyReader { inner, done: false })
    }

    /// Reads the next row into `out` (its payload buffer reused); false after the trailer.
    pub fn next_into(&mut self, out: &mut Change) -> io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        let mut n = [0u8; 2];
        self.inner.read_exact(&mut n)?;
        let fields = i16::from_be_bytes(n);
        if fields == TRAILER {
            self.done = true;
            return Ok(false);
        }
        if fields != 2 {
            return Err(bad(format!(
                "a row has {fields} fields, expected 2 (lsn, data)"
            )));
        }
        let len = self.field_len()?;
        if len != 8 {
            return Err(bad(format!("the lsn field is {len} bytes, expected 8")));
        }
        let mut lsn = [0u8; 8];
        self.inner.read_exact(&mut lsn)?;
        out.lsn = u64::from_be_bytes(lsn);
        let len = self.field_len()?;
        out.payload.clear();
        out.payload.reserve(len.min(1 << 20));
        let got = (&mut self.inner)
            .take(len as u64)
            .read_to_end(&mut out.payload)?;
        if got != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ends inside a payload",
            ));
        }
        Ok(true)
    }

    /// A non-NULL field's length, checked against [`MAX_FIELD`].
    fn field_len(&mut self) -> io::Result<usize> {
        let n = read_i32(&mut self.inner)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_FIELD)
            .ok_or_else(|| bad(format!("field length {n} (NULL or out of range)")))
    }
}

fn read_i32(r: &mut impl Read) -> io::Result<i32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(i32::from_be_bytes(b))
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(rows: &[(u64, &[u8])]) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.extend(0i32.to_be_bytes());
        v.extend(0i32.to_be_bytes());
        for (lsn, data) in rows {
            v.extend(2i16.to_be_bytes());
            v.extend(8i32.to_be_bytes());
            v.extend(lsn.to_be_bytes());
            v.extend((data.len() as i32).to_be_bytes());
            v.extend_from_slice(data);
        }
        v.extend(TRAILER.to_be_bytes());
        v
    }

    #[test]
    fn reads_rows_until_the_trailer() {
        let bytes = stream(&[(0x1_0000_0010, b"B..."), (0x1_0000_0020, b"")]);
        let mut r = CopyReader::new(bytes.as_slice()).expect("header");
        let mut c = Change {
            lsn: 0,
            payload: Vec::new(),
        };
        assert!(r.next_into(&mut c).expect("row"));
        assert_eq!((c.lsn, c.payload.as_slice()), (0x1_0000_0010, &b"B..."[..]));
        assert!(r.next_into(&mut c).expect("row"));
        assert_eq!((c.lsn, c.payload.len()), (0x1_0000_0020, 0));
        assert!(!r.next_into(&mut c).expect("trailer"));
        assert!(!r.next_into(&mut c).expect("still done"));
    }

    #[test]
    fn hostile_streams_are_errors() {
        assert!(CopyReader::new(&b"PGCOPY\n"[..]).is_err());
        let mut bytes = stream(&[(1, b"abc")]);
        // Truncated inside the payload.
        let cut = bytes.len() - 3;
        let mut r = CopyReader::new(&bytes[..cut]).expect("header");
        let mut c = Change {
            lsn: 0,
            payload: Vec::new(),
        };
        assert!(r.next_into(&mut c).is_err());
        // A payload length of 2 GB - 1 is refused before anything is allocated.
        let at = 11 + 8 + 2 + 4 + 8;
        bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        let mut r = CopyReader::new(bytes.as_slice()).expect("header");
        assert!(r.next_into(&mut c).is_err());
    }
}
