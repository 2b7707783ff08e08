//! Committed transactions as JSON lines in the spirit of wal2json's format 2: one object per
//! change with `action` (`I`, `U`, `D`, `T`, `M`, and `B`/`C` when asked for), `xid`,
//! `timestamp` (commit time), `lsn` (the transaction's commit LSN, shared by all its lines:
//! wal2json's on `B` and `C`, where wal2json gives each change its own),
//! `schema`, `table`, `columns` (`name`, `type`, `value`) and, for updates and deletes,
//! `identity` (the old key, or the whole old row with REPLICA IDENTITY FULL). Unchanged TOASTed
//! columns are left out, as wal2json does.

use std::collections::HashMap;

use super::time::format_timestamp;
use super::types::{builtin_name, json_kind, JsonKind};
use super::OutputError;
use crate::dml::OldTuple;
use crate::message::LogicalMessage;
use crate::schema::{Relation, Type};
use crate::{Lsn, Message, TupleData, Value};

/// The transaction a line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnInfo {
    /// Top-level xid.
    pub xid: u32,
    /// Commit LSN.
    pub commit_lsn: Lsn,
    /// End LSN (shown as `nextlsn` on Commit lines).
    pub end_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_time: i64,
}

#[derive(Debug, Clone)]
struct Column {
    name: String,
    type_oid: u32,
    typmod: i32,
    key: bool,
}

#[derive(Debug, Clone)]
struct Rel {
    schema: String,
    table: String,
    columns: Vec<Column>,
}

/// Turns decoded messages into JSON lines; keeps the relations and types the stream described.
#[derive(Debug, Default)]
pub struct JsonLines {
    relations: HashMap<u32, Rel>,
    types: HashMap<u32, String>,
    begin_commit: bool,
}

/// Appends `s` as a JSON string (invalid UTF-8 is replaced, as no encoding is declared).
pub fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for c in String::from_utf8_lossy(s).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl JsonLines {
    /// A writer; `begin_commit` adds a `B` line before and a `C` line after each transaction.
    pub fn new(begin_commit: bool) -> Self {
        JsonLines {
            begin_commit,
            ..JsonLines::default()
        }
    }

    fn relation(&mut self, r: &Relation<'_>) {
        let columns = r
            .columns
            .iter()
            .map(|c| Column {
                name: lossy(c.name),
                type_oid: c.type_oid,
                typmod: c.type_modifier,
                key: c.is_key(),
            })
            .collect();
        let schema = if r.namespace.is_empty() {
            "pg_catalog".to_owned()
        } else {
            lossy(r.namespace)
        };
        self.relations.insert(
            r.relid,
            Rel {
                schema,
                table: lossy(r.name),
                columns,
            },
        );
    }

    fn type_msg(&mut self, t: &Type<'_>) {
        let name = if t.namespace.is_empty() || t.namespace == b"public" {
            lossy(t.name)
        } else {
            format!("{}.{}", lossy(t.namespace), lossy(t.name))
        };
        self.types.insert(t.type_oid, name);
    }

    fn type_name(&self, c: &Column) -> String {
        builtin_name(c.type_oid, c.typmod)
            .or_else(|| self.types.get(&c.type_oid).cloned())
            .unwrap_or_else(|| format!("oid {}", c.type_oid))
    }

    fn head(&self, out: &mut Vec<u8>, action: &str, t: &TxnInfo) {
        out.extend_from_slice(
            format!(
                "{{\"action\":\"{action}\",\"xid\":{},\"timestamp\":\"{}\",\"lsn\":\"{}\"",
                t.xid,
                format_timestamp(t.commit_time),
                t.commit_lsn
            )
            .as_bytes(),
        );
    }

    fn rel_head(&self, out: &mut Vec<u8>, action: &str, t: &TxnInfo, rel: &Rel) {
        self.head(out, action, t);
        out.extend_from_slice(b",\"schema\":");
        push_str(out, rel.schema.as_bytes());
        out.extend_from_slice(b",\"table\":");
        push_str(out, rel.table.as_bytes());
    }

    /// Writes `"key":[…]` with the columns of `tuple` that `pick` selects and that have a value.
    fn columns(
        &self,
        out: &mut Vec<u8>,
        key: &str,
        relid: u32,
        rel: &Rel,
        tuple: &TupleData<'_>,
        pick: impl Fn(&Column) -> bool,
    ) -> Result<(), OutputError> {
        if tuple.columns.len() != rel.columns.len() {
            return Err(OutputError::ColumnCount {
                relid,
                expected: rel.columns.len(),
                got: tuple.columns.len(),
            });
        }
        out.extend_from_slice(format!(",\"{key}\":[").as_bytes());
        let mut first = true;
        for (c, v) in rel.columns.iter().zip(&tuple.columns) {
            if !pick(c) || *v == Value::UnchangedToast {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(b"{\"name\":");
            push_str(out, c.name.as_bytes());
            out.extend_from_slice(b",\"type\":");
            push_str(out, self.type_name(c).as_bytes());
            out.extend_from_slice(b",\"value\":");
            match v {
                Value::Null | Value::UnchangedToast => out.extend_from_slice(b"null"),
                Value::Text(t) | Value::Binary(t) => push_value(out, json_kind(c.type_oid), t),
            }
            out.push(b'}');
        }
        out.push(b']');
        Ok(())
    }

    fn rel(&self, relid: u32) -> Result<&Rel, OutputError> {
        self.relations
            .get(&relid)
            .ok_or(OutputError::UnknownRelation { relid })
    }

    /// A `B` line, when asked for.
    pub fn begin(&self, t: &TxnInfo, out: &mut Vec<u8>) {
        if self.begin_commit {
            self.head(out, "B", t);
            out.extend_from_slice(format!(",\"nextlsn\":\"{}\"}}\n", t.end_lsn).as_bytes());
        }
    }

    /// A `C` line, when asked for.
    pub fn commit(&self, t: &TxnInfo, out: &mut Vec<u8>) {
        if self.begin_commit {
            self.head(out, "C", t);
            out.extend_from_slice(format!(",\"nextlsn\":\"{}\"}}\n", t.end_lsn).as_bytes());
        }
    }

    /// Takes in a Relation or Type message (returns true), so later changes can be named.
    pub fn learn(&mut self, msg: &Message<'_>) -> bool {
        match msg {
            Message::Relation(r) => self.relation(r),
            Message::Type(ty) => self.type_msg(ty),
            _ => return false,
        }
        true
    }

    /// Writes the lines of one message of transaction `t` and returns how many; Relation
    /// and Type messages are learnt and write nothing, Origin is skipped.
    pub fn change(
        &mut self,
        t: &TxnInfo,
        msg: &Message<'_>,
        out: &mut Vec<u8>,
    ) -> Result<usize, OutputError> {
        if self.learn(msg) {
            return Ok(0);
        }
        match msg {
            Message::Insert(m) => {
                let rel = self.rel(m.relid)?;
                self.rel_head(out, "I", t, rel);
                self.columns(out, "columns", m.relid, rel, &m.new, |_| true)?;
            }
            Message::Update(m) => {
                let rel = self.rel(m.relid)?;
                self.rel_head(out, "U", t, rel);
                self.columns(out, "columns", m.relid, rel, &m.new, |_| true)?;
                self.identity(out, m.relid, rel, m.old.as_ref(), Some(&m.new))?;
            }
            Message::Delete(m) => {
                let rel = self.rel(m.relid)?;
                self.rel_head(out, "D", t, rel);
                self.identity(out, m.relid, rel, Some(&m.old), None)?;
            }
            Message::Truncate(m) => {
                for relid in &m.relids {
                    let rel = self.rel(*relid)?;
                    self.rel_head(out, "T", t, rel);
                    out.extend_from_slice(b"}\n");
                }
                return Ok(m.relids.len());
            }
            Message::Message(m) => {
                self.head(out, "M", t);
                message_tail(out, m);
            }
            _ => return Ok(0),
        }
        out.extend_from_slice(b"}\n");
        Ok(1)
    }

    fn identity(
        &self,
        out: &mut Vec<u8>,
        relid: u32,
        rel: &Rel,
        old: Option<&OldTuple<'_>>,
        new: Option<&TupleData<'_>>,
    ) -> Result<(), OutputError> {
        match (old, new) {
            (Some(OldTuple::Full(t)), _) => self.columns(out, "identity", relid, rel, t, |_| true),
            (Some(OldTuple::Key(t)), _) => self.columns(out, "identity", relid, rel, t, |c| c.key),
            // An update that kept its key: the key is in the new row (wal2json does the same).
            (None, Some(t)) if rel.columns.iter().any(|c| c.key) => {
                self.columns(out, "identity", relid, rel, t, |c| c.key)
            }
            _ => Ok(()),
        }
    }

    /// The line of a non-transactional logical message (no transaction, so no xid).
    pub fn non_transactional(&self, m: &LogicalMessage<'_>, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("{{\"action\":\"M\",\"lsn\":\"{}\"", m.lsn).as_bytes());
        message_tail(out, m);
        out.extend_from_slice(b"}\n");
    }
}

fn message_tail(out: &mut Vec<u8>, m: &LogicalMessage<'_>) {
    out.extend_from_slice(
        format!(",\"transactional\":{},\"prefix\":", m.is_transactional()).as_bytes(),
    );
    push_str(out, m.prefix);
    out.extend_from_slice(b",\"content\":");
    push_str(out, m.content);
}

fn push_value(out: &mut Vec<u8>, kind: JsonKind, text: &[u8]) {
    match kind {
        JsonKind::Bool if text == b"t" => out.extend_from_slice(b"true"),
        JsonKind::Bool if text == b"f" => out.extend_from_slice(b"false"),
        // NaN and ±Infinity are not JSON numbers.
        JsonKind::Number
            if !text.is_empty()
                && text.iter().all(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) =>
        {
            out.extend_from_slice(text)
        }
        _ => push_str(out, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decoder, Options, Streaming};

    fn relation_msg() -> Vec<u8> {
        let mut m = vec![b'R'];
        m.extend_from_slice(&16384u32.to_be_bytes());
        m.extend_from_slice(b"public\0t\0d");
        m.extend_from_slice(&3u16.to_be_bytes());
        for (flags, name, oid, typmod) in [
            (1u8, "id", 23u32, -1i32),
            (0, "v", 1043, 14),
            (0, "f", 701, -1),
        ] {
            m.push(flags);
            m.extend_from_slice(name.as_bytes());
            m.push(0);
            m.extend_from_slice(&oid.to_be_bytes());
            m.extend_from_slice(&typmod.to_be_bytes());
        }
        m
    }

    fn tuple(m: &mut Vec<u8>, cols: &[Option<&str>]) {
        m.extend_from_slice(&(cols.len() as u16).to_be_bytes());
        for c in cols {
            match c {
                None => m.push(b'n'),
                Some("~") => m.push(b'u'),
                Some(s) => {
                    m.push(b't');
                    m.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    m.extend_from_slice(s.as_bytes());
                }
            }
        }
    }

    #[test]
    fn insert_update_delete_lines() {
        let mut dec = Decoder::new(Options {
            proto_version: 1,
            streaming: Streaming::Off,
        })
        .unwrap();
        let mut j = JsonLines::new(true);
        let t = TxnInfo {
            xid: 7,
            commit_lsn: Lsn(0x1_0000_0010),
            end_lsn: Lsn(0x1_0000_0040),
            commit_time: 0,
        };
        let mut out = Vec::new();
        let rel = relation_msg();
        j.change(&t, &dec.decode(&rel).unwrap(), &mut out).unwrap();
        j.begin(&t, &mut out);
        let mut ins = vec![b'I'];
        ins.extend_from_slice(&16384u32.to_be_bytes());
        ins.push(b'N');
        tuple(&mut ins, &[Some("1"), Some("a\"b\n"), Some("NaN")]);
        assert_eq!(
            j.change(&t, &dec.decode(&ins).unwrap(), &mut out).unwrap(),
            1
        );
        let mut upd = vec![b'U'];
        upd.extend_from_slice(&16384u32.to_be_bytes());
        upd.push(b'K');
        tuple(&mut upd, &[Some("1"), None, None]);
        upd.push(b'N');
        tuple(&mut upd, &[Some("2"), Some("~"), Some("1.5")]);
        j.change(&t, &dec.decode(&upd).unwrap(), &mut out).unwrap();
        let mut del = vec![b'D'];
        del.extend_from_slice(&16384u32.to_be_bytes());
        del.push(b'K');
        tuple(&mut del, &[Some("2"), None, None]);
        j.change(&t, &dec.decode(&del).unwrap(), &mut out).unwrap();
        j.commit(&t, &mut out);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let head = r#""xid":7,"timestamp":"2000-01-01 00:00:00+00","lsn":"1/10""#;
        assert_eq!(
            lines[0],
            format!(r#"{{"action":"B",{head},"nextlsn":"1/40"}}"#)
        );
        assert_eq!(
            lines[1],
            format!(
                r#"{{"action":"I",{head},"schema":"public","table":"t","columns":[{{"name":"id","type":"integer","value":1}},{{"name":"v","type":"character varying(10)","value":"a\"b\n"}},{{"name":"f","type":"double precision","value":"NaN"}}]}}"#
            )
        );
        assert_eq!(
            lines[2],
            format!(
                r#"{{"action":"U",{head},"schema":"public","table":"t","columns":[{{"name":"id","type":"integer","value":2}},{{"name":"f","type":"double precision","value":1.5}}],"identity":[{{"name":"id","type":"integer","value":1}}]}}"#
            )
        );
        assert_eq!(
            lines[3],
            format!(
                r#"{{"action":"D",{head},"schema":"public","table":"t","identity":[{{"name":"id","type":"integer","value":2}}]}}"#
            )
        );
        assert_eq!(
            lines[4],
            format!(r#"{{"action":"C",{head},"nextlsn":"1/40"}}"#)
        );
    }

    #[test]
    fn unknown_relation_is_an_error() {
        let mut dec = Decoder::new(Options {
            proto_version: 1,
            streaming: Streaming::Off,
        })
        .unwrap();
        let mut ins = vec![b'I', 0, 0, 0, 9, b'N'];
        tuple(&mut ins, &[Some("1")]);
        let t = TxnInfo {
            xid: 1,
            commit_lsn: Lsn(1),
            end_lsn: Lsn(2),
            commit_time: 0,
        };
        let err = JsonLines::new(false)
            .change(&t, &dec.decode(&ins).unwrap(), &mut Vec::new())
            .unwrap_err();
        assert!(matches!(err, OutputError::UnknownRelation { relid: 9 }));
    }
}
