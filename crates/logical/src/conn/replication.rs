//! Replication commands (protocol.sgml "Streaming Replication Protocol"): IDENTIFY_SYSTEM,
//! CREATE_REPLICATION_SLOT … LOGICAL pgoutput, START_REPLICATION … LOGICAL, and the CopyBoth
//! exchange that follows.

use std::time::Duration;

use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::{server_error, ConnError, Connection, COPY_BOTH_RESPONSE, COPY_DATA};
use crate::{Lsn, StandbyStatus};

/// IDENTIFY_SYSTEM's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifySystem {
    /// The cluster's system identifier.
    pub system_id: String,
    /// The current timeline.
    pub timeline: u32,
    /// The current WAL flush position.
    pub xlogpos: Lsn,
    /// The database connected to.
    pub dbname: Option<String>,
}

/// CREATE_REPLICATION_SLOT's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotCreated {
    /// The slot name.
    pub slot: String,
    /// The LSN from which the slot's decoding is consistent.
    pub consistent_point: Lsn,
}

/// A replication slot as `pg_replication_slots` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    /// `confirmed_flush_lsn`: where the slot's consumer has confirmed it up to (`None` for a
    /// physical slot).
    pub confirmed_flush: Option<Lsn>,
    /// The output plugin (`None` for a physical slot).
    pub plugin: Option<String>,
    /// The database of a logical slot.
    pub database: Option<String>,
}

/// What to ask START_REPLICATION for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartOptions {
    /// The slot.
    pub slot: String,
    /// Where to start (the server starts at the later of this and the slot's confirmed flush).
    pub start: Lsn,
    /// pgoutput `proto_version`.
    pub proto_version: u32,
    /// Publications, at least one.
    pub publications: Vec<String>,
    /// `streaming 'on'` (needs proto_version ≥ 2).
    pub streaming: bool,
    /// `messages 'true'`.
    pub messages: bool,
}

/// One event of the CopyBoth phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyEvent {
    /// A CopyData payload (XLogData or keepalive, see [`crate::CopyMessage`]).
    Data(Vec<u8>),
    /// The server ended the copy (CopyDone).
    Done,
}

/// `name` as an SQL identifier in double quotes.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `s` as an SQL string literal.
pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn lsn_cell(v: &Option<String>, what: &str) -> Result<Lsn, ConnError> {
    v.as_deref()
        .and_then(Lsn::parse)
        .ok_or_else(|| ConnError::Protocol(format!("{what}: no valid LSN in {v:?}")))
}

/// IDENTIFY_SYSTEM's row: systemid, timeline, xlogpos, dbname. A value that does not parse is
/// an error, never a default.
fn identify_row(row: &[Option<String>]) -> Result<IdentifySystem, ConnError> {
    let bad = |what: &str, v: &Option<String>| {
        ConnError::Protocol(format!("IDENTIFY_SYSTEM: {what} {v:?} is not valid"))
    };
    let system_id = row[0]
        .clone()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| bad("systemid", &row[0]))?;
    let timeline = row[1]
        .as_deref()
        .and_then(|t| t.parse::<u32>().ok())
        .filter(|&t| t > 0)
        .ok_or_else(|| bad("timeline", &row[1]))?;
    Ok(IdentifySystem {
        system_id,
        timeline,
        xlogpos: lsn_cell(&row[2], "IDENTIFY_SYSTEM")?,
        dbname: row[3].clone(),
    })
}

/// The highest pgoutput protocol version a server of major version `major` speaks.
pub fn proto_version_for(major: u32) -> u32 {
    match major {
        16.. => 4,
        15 => 3,
        14 => 2,
        _ => 1,
    }
}

impl Connection {
    /// IDENTIFY_SYSTEM.
    pub fn identify_system(&mut self) -> Result<IdentifySystem, ConnError> {
        let rows = self.simple_query("IDENTIFY_SYSTEM")?;
        let row = rows
            .first()
            .filter(|r| r.len() >= 4)
            .ok_or_else(|| ConnError::Protocol("IDENTIFY_SYSTEM: no row of 4 columns".into()))?;
        identify_row(row)
    }

    /// CREATE_REPLICATION_SLOT `slot` LOGICAL pgoutput, exporting no snapshot.
    ///
    /// The server waits for the transactions open on it to end before it answers, however
    /// long that takes: there is no deadline, but a raised stop flag cancels the command.
    pub fn create_slot(&mut self, slot: &str) -> Result<SlotCreated, ConnError> {
        let tail = if self.server_major()? >= 15 {
            "(SNAPSHOT 'nothing')"
        } else {
            "NOEXPORT_SNAPSHOT"
        };
        let sql = format!(
            "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput {tail}",
            quote_ident(slot)
        );
        let rows = self.query_within(&sql, None)?;
        let row = rows
            .first()
            .filter(|r| r.len() >= 2)
            .ok_or_else(|| ConnError::Protocol("CREATE_REPLICATION_SLOT: no row".into()))?;
        Ok(SlotCreated {
            slot: row[0].clone().unwrap_or_default(),
            consistent_point: lsn_cell(&row[1], "CREATE_REPLICATION_SLOT")?,
        })
    }

    /// Slot `slot` from `pg_replication_slots` (a replication connection to a database takes
    /// SQL), or `None` when there is no such slot.
    pub fn slot_info(&mut self, slot: &str) -> Result<Option<SlotInfo>, ConnError> {
        let sql = format!(
            "SELECT confirmed_flush_lsn, plugin, database FROM pg_catalog.pg_replication_slots \
             WHERE slot_name = {}",
            quote_literal(slot)
        );
        let rows = self.simple_query(&sql)?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        if row.len() < 3 {
            return Err(ConnError::Protocol(
                "pg_replication_slots: no row of 3 columns".into(),
            ));
        }
        let confirmed_flush = match &row[0] {
            None => None,
            v => Some(lsn_cell(v, "pg_replication_slots.confirmed_flush_lsn")?),
        };
        Ok(Some(SlotInfo {
            confirmed_flush,
            plugin: row[1].clone(),
            database: row[2].clone(),
        }))
    }

    /// Which of `names` are not publications of the connected database, in the order given
    /// (START_REPLICATION takes any name; the server complains only at the first change).
    pub fn missing_publications(&mut self, names: &[String]) -> Result<Vec<String>, ConnError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let list = names
            .iter()
            .map(|n| quote_literal(n))
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT n FROM unnest(ARRAY[{list}]::text[]) WITH ORDINALITY AS a(n, i) \
             WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication p \
             WHERE p.pubname = a.n::name) ORDER BY i"
        );
        Ok(self
            .simple_query(&sql)?
            .into_iter()
            .filter_map(|row| row.into_iter().next().flatten())
            .collect())
    }

    /// START_REPLICATION SLOT … LOGICAL …; on success the connection is in CopyBoth mode.
    pub fn start_replication(&mut self, o: &StartOptions) -> Result<(), ConnError> {
        let pubs = o
            .publications
            .iter()
            .map(|p| quote_ident(p))
            .collect::<Vec<_>>()
            .join(",");
        let mut opts = vec![
            format!("proto_version '{}'", o.proto_version),
            format!("publication_names {}", quote_literal(&pubs)),
        ];
        if o.streaming {
            opts.push("streaming 'on'".into());
        }
        if o.messages {
            opts.push("messages 'true'".into());
        }
        let sql = format!(
            "START_REPLICATION SLOT {} LOGICAL {} ({})",
            quote_ident(&o.slot),
            o.start,
            opts.join(", ")
        );
        self.answer_within(Some(super::COMMAND_TIMEOUT));
        frontend::query(&sql, &mut self.wbuf).map_err(ConnError::io("building a query"))?;
        self.flush()?;
        loop {
            let f = self.read_frame_blocking("waiting for the answer to START_REPLICATION")?;
            if f.tag == COPY_BOTH_RESPONSE {
                // Streaming: from here the caller's reads set their own waits.
                self.answer_within(None);
                return Ok(());
            }
            match f.parse()? {
                Message::ErrorResponse(body) => return Err(server_error(&body)),
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                _ => {
                    return Err(ConnError::Protocol(format!(
                        "START_REPLICATION: unexpected message '{}'",
                        f.tag as char
                    )))
                }
            }
        }
    }

    /// The next CopyData of the CopyBoth phase, waiting at most `wait`; `Ok(None)` on timeout.
    pub fn recv_copy(&mut self, wait: Duration) -> Result<Option<CopyEvent>, ConnError> {
        loop {
            let Some(f) = self.read_frame(Some(wait))? else {
                return Ok(None);
            };
            if f.tag == COPY_DATA {
                let mut data = f.bytes;
                data.drain(..5);
                return Ok(Some(CopyEvent::Data(data)));
            }
            match f.parse()? {
                Message::CopyDone => return Ok(Some(CopyEvent::Done)),
                Message::ErrorResponse(body) => return Err(server_error(&body)),
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                _ => {
                    return Err(ConnError::Protocol(format!(
                        "unexpected message '{}' during replication",
                        f.tag as char
                    )))
                }
            }
        }
    }

    /// Sends a Standby status update.
    pub fn send_status(&mut self, status: &StandbyStatus) -> Result<(), ConnError> {
        let payload = status.encode();
        frontend::CopyData::new(&payload[..])
            .map_err(ConnError::io("building CopyData"))?
            .write(&mut self.wbuf);
        self.flush()
    }

    /// Ends the CopyBoth phase and the session: CopyDone, then Terminate. Errors are
    /// ignored: the server may already have gone.
    pub fn close(mut self) {
        frontend::copy_done(&mut self.wbuf);
        frontend::terminate(&mut self.wbuf);
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_versions() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!([13, 14, 15, 16, 18].map(proto_version_for), [1, 2, 3, 4, 4]);
    }

    fn row(cells: [Option<&str>; 4]) -> Vec<Option<String>> {
        cells.iter().map(|c| c.map(str::to_owned)).collect()
    }

    #[test]
    fn an_unparsable_identify_system_is_an_error() {
        let good = identify_row(&row([Some("7301"), Some("3"), Some("0/16B3748"), None]))
            .expect("a whole row");
        assert_eq!((good.system_id.as_str(), good.timeline), ("7301", 3));
        for (cells, what) in [
            ([Some("7301"), Some("x"), Some("0/1"), None], "timeline"),
            ([Some("7301"), Some("-1"), Some("0/1"), None], "timeline"),
            ([Some("7301"), Some("0"), Some("0/1"), None], "timeline"),
            ([Some("7301"), None, Some("0/1"), None], "timeline"),
            ([None, Some("1"), Some("0/1"), None], "systemid"),
            ([Some("abc"), Some("1"), Some("0/1"), None], "systemid"),
            ([Some("7301"), Some("1"), Some("nowhere"), None], "LSN"),
        ] {
            let e = identify_row(&row(cells)).unwrap_err().to_string();
            assert!(e.contains(what), "{cells:?}: {e}");
        }
    }
}
