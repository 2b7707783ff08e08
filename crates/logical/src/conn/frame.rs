//! Sans-IO framing of backend messages (protocol.sgml "Message Formats"): a tag byte, an
//! Int32 length that counts itself, and the body. The length is checked against a cap before
//! anything is buffered for it.

use super::ConnError;

/// The largest backend message accepted: a pgoutput message carries at most one row, and a
/// column value is at most 1 GB; a little more covers the headers.
pub const MAX_MESSAGE_LEN: usize = (1 << 30) + (1 << 20);

/// Looks at the start of `buf`: `Ok(Some((tag, total)))` when a whole message of `total` bytes
/// (tag and length included) is there, `Ok(None)` when more bytes are needed.
pub fn split(buf: &[u8], cap: usize) -> Result<Option<(u8, usize)>, ConnError> {
    let Some(head) = buf.get(..5) else {
        return Ok(None);
    };
    let tag = head[0];
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len < 4 {
        return Err(ConnError::Protocol(format!(
            "message '{}' declares length {len}, below the minimum 4",
            tag as char
        )));
    }
    if len > cap {
        return Err(ConnError::TooLarge {
            tag: tag as char,
            len,
            cap,
        });
    }
    Ok((buf.len() > len).then_some((tag, len + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_partial_and_bad_frames() {
        let msg = [b'd', 0, 0, 0, 6, b'x', b'y', b'Z'];
        assert_eq!(split(&msg, 100).unwrap(), Some((b'd', 7)));
        for n in 0..7 {
            assert_eq!(split(&msg[..n], 100).unwrap(), None, "{n}");
        }
        assert!(split(&[b'd', 0, 0, 0, 3], 100).is_err());
        assert!(matches!(
            split(&[b'd', 0, 0, 1, 0], 100),
            Err(ConnError::TooLarge { len: 256, .. })
        ));
    }
}
