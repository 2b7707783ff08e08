//! Whatever bytes a server sends as names and values, every line `JsonLines` writes is valid
//! JSON, and each value reads back as what was sent: a string (invalid UTF-8 replaced), a bare
//! number only for numeric types whose text is a JSON number, `true`/`false` only for `t`/`f`.

use logical::output::{JsonLines, TxnInfo};
use logical::{Decoder, Lsn, Options, Streaming};
use proptest::prelude::*;
use serde_json::Value;

/// Type OIDs of the columns: integer, boolean, text, double precision, numeric.
const TYPES: [u32; 5] = [23, 16, 25, 701, 1700];

fn relation(names: &[Vec<u8>]) -> Vec<u8> {
    let mut m = vec![b'R'];
    m.extend(7u32.to_be_bytes());
    m.extend(b"s\xffchema\0tab\"le\0d");
    m.extend((names.len() as u16).to_be_bytes());
    for (i, n) in names.iter().enumerate() {
        m.push(u8::from(i == 0));
        m.extend(n);
        m.push(0);
        m.extend(TYPES[i % TYPES.len()].to_be_bytes());
        m.extend((-1i32).to_be_bytes());
    }
    m
}

fn insert(values: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut m = vec![b'I'];
    m.extend(7u32.to_be_bytes());
    m.push(b'N');
    m.extend((values.len() as u16).to_be_bytes());
    for v in values {
        match v {
            None => m.push(b'n'),
            Some(v) => {
                m.push(b't');
                m.extend((v.len() as u32).to_be_bytes());
                m.extend(v);
            }
        }
    }
    m
}

fn value_strategy() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        Just(None),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(Some),
        "-?[0-9]{1,5}(\\.[0-9]{1,3})?(e[+-]?[0-9])?".prop_map(|s| Some(s.into_bytes())),
        prop_oneof![Just("t"), Just("f"), Just("NaN"), Just("-Infinity")]
            .prop_map(|s| Some(s.as_bytes().to_vec())),
    ]
}

proptest! {
    #[test]
    fn every_line_is_json_and_values_read_back(
        rows in proptest::collection::vec(
            proptest::collection::vec(value_strategy(), 5), 1..4),
        names in proptest::collection::vec(
            proptest::collection::vec(1u8..=255, 1..6), 5),
    ) {
        let mut dec = Decoder::new(Options { proto_version: 1, streaming: Streaming::Off })
            .expect("decoder");
        let mut j = JsonLines::new(true);
        let t = TxnInfo { xid: 1, commit_lsn: Lsn(16), end_lsn: Lsn(32), commit_time: -5 };
        let mut out = Vec::new();
        let rel = relation(&names);
        j.change(&t, &dec.decode(&rel).expect("relation"), &mut out).expect("relation");
        j.begin(&t, &mut out);
        for row in &rows {
            let msg = insert(row);
            j.change(&t, &dec.decode(&msg).expect("insert"), &mut out).expect("insert");
        }
        j.commit(&t, &mut out);
        let text = String::from_utf8(out).expect("output is UTF-8");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        prop_assert_eq!(lines.len(), rows.len() + 2);
        for (line, row) in lines[1..=rows.len()].iter().zip(&rows) {
            let cols = line["columns"].as_array().expect("columns");
            for (i, (c, sent)) in cols.iter().zip(row).enumerate() {
                let name = String::from_utf8_lossy(&names[i]).into_owned();
                prop_assert_eq!(c["name"].as_str().expect("name"), name.as_str());
                let v = &c["value"];
                match sent {
                    None => prop_assert!(v.is_null()),
                    Some(s) => {
                        let lossy = String::from_utf8_lossy(s);
                        match v {
                            Value::String(got) => prop_assert_eq!(got, &lossy),
                            Value::Bool(b) => {
                                prop_assert_eq!(TYPES[i], 16);
                                prop_assert_eq!(lossy, if *b { "t" } else { "f" });
                            }
                            Value::Number(_) => {
                                prop_assert!([23, 701, 1700].contains(&TYPES[i]));
                                prop_assert!(lossy.parse::<f64>().is_ok_and(f64::is_finite));
                            }
                            other => prop_assert!(false, "unexpected {other}"),
                        }
                    }
                }
            }
        }
    }
}
