//! Which transactions the server has open, and what flush LSN may be confirmed because of it.

use std::collections::HashSet;

use crate::Lsn;

/// Transactions open on the server's side of the stream, followed from the tags and xid
/// fields of the payloads alone (no second decode).
#[derive(Debug, Default)]
pub(crate) struct OpenTxns {
    /// Streamed transactions between their first Stream Start and Stream Commit/Abort.
    streamed: HashSet<u32>,
    /// Between a Begin and its Commit.
    in_txn: bool,
}

impl OpenTxns {
    /// Takes one payload into account: Begin/Commit, Stream Start, Stream Commit, and Stream
    /// Abort of a top-level transaction (a subtransaction abort keeps it open).
    pub(crate) fn track(&mut self, payload: &[u8]) {
        let xid_at = |i: usize| {
            payload
                .get(i..i + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        match payload.first() {
            Some(b'B') => self.in_txn = true,
            Some(b'C') => self.in_txn = false,
            Some(b'S') => {
                if let Some(x) = xid_at(1) {
                    self.streamed.insert(x);
                }
            }
            Some(b'c') => {
                if let Some(x) = xid_at(1) {
                    self.streamed.remove(&x);
                }
            }
            Some(b'A') => {
                if let (Some(x), Some(sub)) = (xid_at(1), xid_at(5)) {
                    if x == sub {
                        self.streamed.remove(&x);
                    }
                }
            }
            _ => {}
        }
    }

    /// No transaction open on the server's side of the stream.
    pub(crate) fn quiet(&self) -> bool {
        self.streamed.is_empty() && !self.in_txn
    }
}

/// The flush LSN that may be confirmed: the end of durable (or already written and skipped)
/// output; the server's keepalive position only when nothing waits for an fsync and no
/// transaction is open (one that commits later is decoded again from the restart LSN).
pub(crate) fn confirmable(durable_end: Lsn, keepalive_end: Lsn, pending: bool, quiet: bool) -> Lsn {
    if !pending && quiet {
        durable_end.max(keepalive_end)
    } else {
        durable_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_confirms_past_durable_output_while_busy() {
        let (durable, keepalive) = (Lsn(100), Lsn(500));
        assert_eq!(confirmable(durable, keepalive, false, true), keepalive);
        assert_eq!(confirmable(durable, keepalive, true, true), durable);
        assert_eq!(confirmable(durable, keepalive, false, false), durable);
        assert_eq!(confirmable(durable, Lsn(50), false, true), durable);
    }

    #[test]
    fn open_transactions_are_tracked() {
        let mut open = OpenTxns::default();
        open.track(&[b'S', 0, 0, 0, 9, 1]);
        open.track(b"B");
        assert!(open.streamed.contains(&9) && open.in_txn);
        // A subtransaction abort keeps the transaction open.
        open.track(&[b'A', 0, 0, 0, 9, 0, 0, 0, 10]);
        assert!(open.streamed.contains(&9) && !open.quiet());
        open.track(&[b'A', 0, 0, 0, 9, 0, 0, 0, 9]);
        open.track(b"C");
        assert!(open.quiet());
        open.track(&[b'S', 0, 0, 0, 4, 1]);
        open.track(&[b'c', 0, 0, 0, 4]);
        assert!(open.quiet());
    }
}
