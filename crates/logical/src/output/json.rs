//! Committed transactions as JSON lines in the spirit of wal2json's format 2: one object per
//! change with `action` (`I`, `U`, `D`, `T`, `M`, and `B`/`C` when asked for), `xid`,
//! `timestamp` (commit time), `lsn` (the transaction's commit LSN, shared by all its lines:
//! wal2json's on `B` and `C`, where wal2json gives each change its own),
//! `schema`, `table`, `columns` (`name`, `type`, `value`) and, for updates and deletes,
//! `identity` (the old key, or the whole old row with REPLICA IDENTITY FULL). Unchanged TOASTed
//! columns are left out, as wal2json does.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Display;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

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
    /// The name of a built-in type (it follows from the OID and typmod alone), made once
    /// per Relation message rather than once per value.
    builtin: Option<String>,
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

/// One line, its keys in wal2json's order; the keys an action lacks are left out.
#[derive(Serialize)]
struct Line<'a> {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    xid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    lsn: Shown<Lsn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nextlsn: Option<Shown<Lsn>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    columns: Option<Columns<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<Columns<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transactional: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Cow<'a, str>>,
}

impl<'a> Line<'a> {
    /// A line of transaction `t`: action, xid, commit time and commit LSN.
    fn txn(action: &'static str, t: &TxnInfo) -> Self {
        Line {
            xid: Some(t.xid),
            timestamp: Some(format_timestamp(t.commit_time)),
            ..Line::bare(action, t.commit_lsn)
        }
    }

    /// A line with only an action and an LSN.
    fn bare(action: &'static str, lsn: Lsn) -> Self {
        Line {
            action,
            xid: None,
            timestamp: None,
            lsn: Shown(lsn),
            nextlsn: None,
            schema: None,
            table: None,
            columns: None,
            identity: None,
            transactional: None,
            prefix: None,
            content: None,
        }
    }

    /// A line about table `rel`.
    fn rel(action: &'static str, t: &TxnInfo, rel: &'a Rel) -> Self {
        Line {
            schema: Some(&rel.schema),
            table: Some(&rel.table),
            ..Line::txn(action, t)
        }
    }

    /// The keys of a logical decoding message.
    fn message(self, m: &'a LogicalMessage<'a>) -> Self {
        Line {
            transactional: Some(m.is_transactional()),
            prefix: Some(String::from_utf8_lossy(m.prefix)),
            content: Some(String::from_utf8_lossy(m.content)),
            ..self
        }
    }

    /// Appends the line and its newline to `out`.
    fn write(&self, out: &mut Vec<u8>) {
        // Into a Vec, with keys that are all strings, serde_json has no error to return.
        if serde_json::to_writer(&mut *out, self).is_ok() {
            out.push(b'\n');
        }
    }
}

/// A value written as its `Display` form, as a JSON string, without a `String` in between.
struct Shown<T>(T);

impl<T: Display> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// The `columns` or `identity` array: the columns of a row that have a value, borrowed.
struct Columns<'a> {
    rel: &'a Rel,
    types: &'a HashMap<u32, String>,
    values: &'a [Value<'a>],
    key_only: bool,
}

impl Serialize for Columns<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.rel
                .columns
                .iter()
                .zip(self.values)
                .filter(|(c, v)| (c.key || !self.key_only) && **v != Value::UnchangedToast)
                .map(|(c, v)| Field {
                    name: &c.name,
                    type_name: TypeName::of(c, self.types),
                    value: FieldValue::of(c.type_oid, v),
                }),
        )
    }
}

/// One member of a `columns` or `identity` array.
#[derive(Serialize)]
struct Field<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    type_name: TypeName<'a>,
    value: FieldValue<'a>,
}

/// A column's type as `format_type` names it, or `oid N` for a type the stream never named.
enum TypeName<'a> {
    Known(&'a str),
    Oid(u32),
}

impl<'a> TypeName<'a> {
    fn of(c: &'a Column, types: &'a HashMap<u32, String>) -> Self {
        match c
            .builtin
            .as_deref()
            .or_else(|| types.get(&c.type_oid).map(String::as_str))
        {
            Some(name) => TypeName::Known(name),
            None => TypeName::Oid(c.type_oid),
        }
    }
}

impl Serialize for TypeName<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TypeName::Known(name) => s.serialize_str(name),
            TypeName::Oid(oid) => s.collect_str(&format_args!("oid {oid}")),
        }
    }
}

/// A column's value: `null`, a JSON boolean for `t`/`f` of a boolean, the server's own text
/// for a number JSON can carry, and otherwise a string (invalid UTF-8 replaced, as no
/// encoding is declared).
#[derive(Serialize)]
#[serde(untagged)]
enum FieldValue<'a> {
    Null,
    Bool(bool),
    Number(&'a RawValue),
    Text(Cow<'a, str>),
}

impl<'a> FieldValue<'a> {
    fn of(type_oid: u32, v: &'a Value<'a>) -> Self {
        let text = match v {
            Value::Null | Value::UnchangedToast => return FieldValue::Null,
            Value::Text(t) | Value::Binary(t) => *t,
        };
        match json_kind(type_oid) {
            JsonKind::Bool if text == b"t" => return FieldValue::Bool(true),
            JsonKind::Bool if text == b"f" => return FieldValue::Bool(false),
            // NaN and ±Infinity (and anything else a server might send) are not JSON numbers.
            JsonKind::Number if is_json_number(text) => {
                if let Ok(raw) = serde_json::from_slice::<&RawValue>(text) {
                    return FieldValue::Number(raw);
                }
            }
            _ => {}
        }
        FieldValue::Text(String::from_utf8_lossy(text))
    }
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
                builtin: builtin_name(c.type_oid, c.type_modifier),
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

    /// The `columns`/`identity` array of `tuple` (all columns, or the key's with `key_only`),
    /// once its column count is checked against the Relation message.
    fn columns<'a>(
        &'a self,
        relid: u32,
        rel: &'a Rel,
        tuple: &'a TupleData<'a>,
        key_only: bool,
    ) -> Result<Columns<'a>, OutputError> {
        if tuple.columns.len() != rel.columns.len() {
            return Err(OutputError::ColumnCount {
                relid,
                expected: rel.columns.len(),
                got: tuple.columns.len(),
            });
        }
        Ok(Columns {
            rel,
            types: &self.types,
            values: &tuple.columns,
            key_only,
        })
    }

    fn rel(&self, relid: u32) -> Result<&Rel, OutputError> {
        self.relations
            .get(&relid)
            .ok_or(OutputError::UnknownRelation { relid })
    }

    /// A `B` line, when asked for.
    pub fn begin(&self, t: &TxnInfo, out: &mut Vec<u8>) {
        self.boundary("B", t, out);
    }

    /// A `C` line, when asked for.
    pub fn commit(&self, t: &TxnInfo, out: &mut Vec<u8>) {
        self.boundary("C", t, out);
    }

    fn boundary(&self, action: &'static str, t: &TxnInfo, out: &mut Vec<u8>) {
        if self.begin_commit {
            Line {
                nextlsn: Some(Shown(t.end_lsn)),
                ..Line::txn(action, t)
            }
            .write(out);
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
    /// and Type messages are learnt and write nothing, Origin is skipped. On an error
    /// nothing of the message is written.
    pub fn change(
        &mut self,
        t: &TxnInfo,
        msg: &Message<'_>,
        out: &mut Vec<u8>,
    ) -> Result<usize, OutputError> {
        if self.learn(msg) {
            return Ok(0);
        }
        let line = match msg {
            Message::Insert(m) => {
                let rel = self.rel(m.relid)?;
                Line {
                    columns: Some(self.columns(m.relid, rel, &m.new, false)?),
                    ..Line::rel("I", t, rel)
                }
            }
            Message::Update(m) => {
                let rel = self.rel(m.relid)?;
                Line {
                    columns: Some(self.columns(m.relid, rel, &m.new, false)?),
                    identity: self.identity(m.relid, rel, m.old.as_ref(), Some(&m.new))?,
                    ..Line::rel("U", t, rel)
                }
            }
            Message::Delete(m) => {
                let rel = self.rel(m.relid)?;
                Line {
                    identity: self.identity(m.relid, rel, Some(&m.old), None)?,
                    ..Line::rel("D", t, rel)
                }
            }
            Message::Truncate(m) => {
                let rels = m
                    .relids
                    .iter()
                    .map(|relid| self.rel(*relid))
                    .collect::<Result<Vec<_>, _>>()?;
                for rel in &rels {
                    Line::rel("T", t, rel).write(out);
                }
                return Ok(rels.len());
            }
            Message::Message(m) => Line::txn("M", t).message(m),
            _ => return Ok(0),
        };
        line.write(out);
        Ok(1)
    }

    fn identity<'a>(
        &'a self,
        relid: u32,
        rel: &'a Rel,
        old: Option<&'a OldTuple<'a>>,
        new: Option<&'a TupleData<'a>>,
    ) -> Result<Option<Columns<'a>>, OutputError> {
        let (tuple, key_only) = match (old, new) {
            (Some(OldTuple::Full(t)), _) => (t, false),
            (Some(OldTuple::Key(t)), _) => (t, true),
            // An update that kept its key: the key is in the new row (wal2json does the same).
            (None, Some(t)) if rel.columns.iter().any(|c| c.key) => (t, true),
            _ => return Ok(None),
        };
        self.columns(relid, rel, tuple, key_only).map(Some)
    }

    /// The line of a non-transactional logical message (no transaction, so no xid).
    pub fn non_transactional(&self, m: &LogicalMessage<'_>, out: &mut Vec<u8>) {
        Line::bare("M", m.lsn).message(m).write(out);
    }
}

/// True when `s` is a number as JSON (RFC 8259 §6) writes one:
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_json_number(s: &[u8]) -> bool {
    fn digits(s: &[u8], mut i: usize) -> usize {
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    }
    let mut i = usize::from(s.first() == Some(&b'-'));
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(s, i + 1),
        _ => return false,
    }
    if s.get(i) == Some(&b'.') {
        let j = digits(s, i + 1);
        if j == i + 1 {
            return false;
        }
        i = j;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let j = digits(s, i);
        if j == i {
            return false;
        }
        i = j;
    }
    i == s.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decoder, Options, Streaming};

    #[test]
    fn json_numbers() {
        for ok in ["0", "-0", "12", "-1.5", "1e+20", "1.25E-7", "123456.789"] {
            assert!(is_json_number(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "-",
            "01",
            "1.",
            ".5",
            "1e",
            "NaN",
            "Infinity",
            "-Infinity",
            "1-2",
            "+1",
        ] {
            assert!(!is_json_number(bad.as_bytes()), "{bad}");
        }
    }

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

    /// Every string a line carries is escaped as serde_json escapes it, which is also how
    /// PostgreSQL's `escape_json` (and so wal2json) does it: `\b`, `\f`, `\n`, `\r`, `\t`,
    /// `\"`, `\\` by name, other control characters as `\u00XX`, DEL and non-ASCII as they
    /// are; invalid UTF-8 becomes U+FFFD.
    #[test]
    fn strings_escape_as_serde_json_does() {
        let cases: [(&[u8], &str); 10] = [
            (b"plain", r#""plain""#),
            (b"q\"uote", r#""q\"uote""#),
            (b"back\\slash", r#""back\\slash""#),
            (b"\x08\x0c\n\r\t", r#""\b\f\n\r\t""#),
            (b"\x00\x01\x1b\x1f", r#""\u0000\u0001\u001b\u001f""#),
            (b" \x7f", "\" \x7f\""),
            ("é€😀 ".as_bytes(), "\"é€😀 \""),
            ("\u{2028}\u{2029}".as_bytes(), "\"\u{2028}\u{2029}\""),
            (b"/<\\/script>", r#""/<\\/script>""#),
            (b"a\xffb\xc3", "\"a\u{fffd}b\u{fffd}\""),
        ];
        for (bytes, expected) in cases {
            let m = LogicalMessage {
                xid: None,
                flags: 0,
                lsn: Lsn(0x10),
                prefix: b"p",
                content: bytes,
            };
            let mut out = Vec::new();
            JsonLines::new(false).non_transactional(&m, &mut out);
            let line = String::from_utf8(out).expect("UTF-8");
            let lossy = String::from_utf8_lossy(bytes);
            let serde = serde_json::to_string(&lossy).expect("a string");
            assert_eq!(serde, expected, "serde_json's own escaping of {bytes:?}");
            assert_eq!(
                line,
                format!(
                    "{{\"action\":\"M\",\"lsn\":\"0/10\",\"transactional\":false,\"prefix\":\"p\",\"content\":{expected}}}\n"
                ),
                "{bytes:?}"
            );
            let back: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(back["content"], *lossy, "{bytes:?} reads back");
        }
    }
}
