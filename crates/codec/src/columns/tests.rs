use proptest::prelude::*;

use super::{decode, encode, ColumnsError, HEADER_LEN, MAX_COLUMNS, RUN_LEN};

/// A pseudo-random generator, so every test sees the same data.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Rows shaped like TPC-H lineitem as CSV: keys, small integers, decimals, flags, dates,
/// a few repeated strings and a comment of words.
fn lineitem_csv(rows: usize) -> Vec<u8> {
    let modes = ["AIR", "MAIL", "RAIL", "SHIP", "TRUCK", "REG AIR", "FOB"];
    let instructs = [
        "DELIVER IN PERSON",
        "COLLECT COD",
        "NONE",
        "TAKE BACK RETURN",
    ];
    let words = [
        "carefully",
        "final",
        "deposits",
        "sleep",
        "quickly",
        "ironic",
        "packages",
        "among",
        "the",
        "furiously",
        "express",
        "accounts",
        "blithely",
        "regular",
        "requests",
    ];
    let mut r = Lcg(42);
    let mut out = Vec::new();
    for i in 0..rows {
        let comment: Vec<&str> = (0..2 + r.next(4))
            .map(|_| words[r.next(15) as usize])
            .collect();
        out.extend_from_slice(
            format!(
                "{},{},{},{},{},{}.{:02},0.0{},0.0{},{},{},199{}-{:02}-{:02},199{}-{:02}-{:02},{},{},{}\n",
                i / 4 + 1,
                r.next(200_000) + 1,
                r.next(10_000) + 1,
                i % 4 + 1,
                r.next(50) + 1,
                r.next(100_000),
                r.next(100),
                r.next(10),
                r.next(9),
                ["R", "A", "N"][r.next(3) as usize],
                ["O", "F"][r.next(2) as usize],
                2 + r.next(7),
                r.next(12) + 1,
                r.next(28) + 1,
                2 + r.next(7),
                r.next(12) + 1,
                r.next(28) + 1,
                instructs[r.next(4) as usize],
                modes[r.next(7) as usize],
                comment.join(" "),
            )
            .as_bytes(),
        );
    }
    out
}

fn round_trip(data: &[u8]) -> Vec<u8> {
    let coded = encode(data).expect("coded");
    // Every field's newline stands for a separator or a line's newline: the columns and the
    // tail are as long as the input.
    let runs = u32::from_le_bytes(coded[7..11].try_into().expect("4 bytes")) as usize;
    assert_eq!(coded.len(), HEADER_LEN + RUN_LEN * runs + data.len());
    let back = decode(&coded, data.len()).expect("decodes");
    assert!(back == data, "decoded bytes differ");
    coded
}

#[test]
fn csv_rows_come_back_and_compress_smaller() {
    let data = lineitem_csv(2000);
    let coded = round_trip(&data);
    let plain = zstd::bulk::compress(&data, 9).expect("zstd").len();
    let columns = zstd::bulk::compress(&coded, 9).expect("zstd").len();
    assert!(
        columns * 100 < plain * 95,
        "zstd:9 of the columns {columns} bytes, of the rows {plain}"
    );
}

#[test]
fn tab_separated_rows_with_nulls_come_back() {
    let data: Vec<u8> = (0..500)
        .flat_map(|i| format!("{i}\t\\N\tname {i}\t{}\n", i * 7).into_bytes())
        .collect();
    let coded = round_trip(&data);
    assert_eq!(coded[0], b'\t');
}

#[test]
fn a_chunk_cut_inside_rows_comes_back() {
    let data = lineitem_csv(300);
    // As a 128 KiB chunk would be cut: inside a row at both ends.
    for (from, to) in [(17, data.len() - 23), (0, data.len() - 1), (5, data.len())] {
        round_trip(&data[from..to]);
    }
}

#[test]
fn ragged_empty_and_quoted_lines_come_back() {
    let mut data = Vec::new();
    for i in 0..200 {
        match i % 40 {
            0 => data.extend_from_slice(b"\n"),
            10 => data.extend_from_slice(b"\"quoted, with a separator\",2,3,4\n"),
            20 => data.extend_from_slice(b"1,2\n"),
            _ => data.extend_from_slice(format!("{i},b,c,d\n").as_bytes()),
        }
    }
    data.extend_from_slice(b"\"a value with a newline\ninside\",x\n");
    round_trip(&data);
}

#[test]
fn what_is_not_lines_of_fields_is_declined() {
    let mut r = Lcg(7);
    let noise: Vec<u8> = (0..100_000).map(|_| r.next(256) as u8).collect();
    assert!(encode(&noise).is_none(), "binary noise");
    assert!(encode(b"a,b\nc,d\ne,f\n").is_none(), "three lines");
    let prose: Vec<u8> = (0..100)
        .flat_map(|_| b"no separators here\n".to_vec())
        .collect();
    assert!(encode(&prose).is_none(), "no separators");
    let wide: Vec<u8> = (0..10)
        .flat_map(|_| {
            let mut l = vec![b','; MAX_COLUMNS];
            l.push(b'\n');
            l
        })
        .collect();
    assert!(encode(&wide).is_none(), "1601 fields");
    let ragged: Vec<u8> = (0..100)
        .flat_map(|i| {
            let mut l = vec![b','; i % 5];
            l.push(b'\n');
            l
        })
        .collect();
    assert!(encode(&ragged).is_none(), "field count changing every line");
}

#[test]
fn damage_is_an_error() {
    let data = lineitem_csv(50);
    let coded = encode(&data).expect("coded");
    // Cut short anywhere in the header or the runs.
    for n in 0..HEADER_LEN + 6 {
        assert!(
            matches!(decode(&coded[..n], usize::MAX), Err(ColumnsError::Short(_))),
            "{n}"
        );
    }
    // Cut short in the columns: the last column lacks fields.
    assert!(matches!(
        decode(&coded[..coded.len() - 40], usize::MAX),
        Err(ColumnsError::ColumnShort { .. })
    ));
    // A cap below the decoded length.
    assert_eq!(
        decode(&coded, data.len() - 1),
        Err(ColumnsError::TooLong {
            len: data.len(),
            cap: data.len() - 1
        })
    );
    // More lines in the header than the runs cover.
    let mut bad = coded.clone();
    bad[1] = bad[1].wrapping_add(1);
    assert!(matches!(
        decode(&bad, usize::MAX),
        Err(ColumnsError::LineCount { .. })
    ));
    // No columns; a run of more fields than columns.
    let mut bad = coded.clone();
    bad[5..7].copy_from_slice(&0u16.to_le_bytes());
    assert!(matches!(
        decode(&bad, usize::MAX),
        Err(ColumnsError::Columns { columns: 0 })
    ));
    let mut bad = coded;
    bad[HEADER_LEN..HEADER_LEN + 2].copy_from_slice(&99u16.to_le_bytes());
    assert!(matches!(
        decode(&bad, usize::MAX),
        Err(ColumnsError::BadRun { .. })
    ));
}

/// Lines of `k` fields joined by `sep`, with `extra` more separators put in at the given
/// places (ragged lines), and `tail` after the last newline.
fn rows(fields: &[Vec<Vec<u8>>], sep: u8, extra: &[usize], tail: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    for line in fields {
        data.extend_from_slice(&line.join(&sep));
        data.push(b'\n');
    }
    for &at in extra {
        let at = at % data.len().max(1);
        data.insert(at, sep);
    }
    data.extend_from_slice(tail);
    data
}

fn field() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"ab1 \"\\.-".to_vec()), 0..10)
}

proptest! {
    #[test]
    fn rows_of_fields_are_coded_and_come_back(
        fields in (2usize..7).prop_flat_map(|k| {
            prop::collection::vec(prop::collection::vec(field(), k), 8..80)
        }),
        sep in prop::sample::select(vec![b',', b'\t', b'|']),
        extra in prop::collection::vec(any::<usize>(), 0..3),
        // A newline in the tail would make it one more line, of one field.
        tail in prop::collection::vec(any::<u8>().prop_filter("not a newline", |b| *b != b'\n'), 0..20),
    ) {
        let data = rows(&fields, sep, &extra, &tail);
        let coded = encode(&data);
        prop_assert!(coded.is_some() || !extra.is_empty(), "rows of fields declined");
        if let Some(coded) = coded {
            prop_assert_eq!(decode(&coded, data.len()).expect("decodes"), data);
        }
    }

    #[test]
    fn any_accepted_input_comes_back(
        lines in prop::collection::vec(
            prop::collection::vec(prop::sample::select(b"ab1,,|\t\"\\ ".to_vec()), 0..12),
            0..60,
        ),
        tail in prop::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut data: Vec<u8> = lines.iter().flat_map(|l| l.iter().copied().chain([b'\n'])).collect();
        data.extend_from_slice(&tail);
        if let Some(coded) = encode(&data) {
            prop_assert_eq!(decode(&coded, data.len()).expect("decodes"), data);
        }
    }

    #[test]
    fn any_bytes_decode_to_an_error_or_at_most_the_cap(
        coded in prop::collection::vec(any::<u8>(), 0..400),
        cap in 0usize..500,
    ) {
        if let Ok(out) = decode(&coded, cap) {
            prop_assert!(out.len() <= cap);
        }
    }
}
