//! Names of built-in types (`catalog/pg_type.dat`) as `format_type` prints them, which is what
//! wal2json and test_decoding show; other types are named by the Type messages pgoutput sends
//! before their first use.

/// `(oid, name, array oid)` of the built-in types a table column commonly has.
const BUILTIN: &[(u32, &str, u32)] = &[
    (16, "boolean", 1000),
    (17, "bytea", 1001),
    (18, "\"char\"", 1002),
    (19, "name", 1003),
    (20, "bigint", 1016),
    (21, "smallint", 1005),
    (23, "integer", 1007),
    (24, "regproc", 1008),
    (25, "text", 1009),
    (26, "oid", 1028),
    (27, "tid", 1010),
    (28, "xid", 1011),
    (114, "json", 199),
    (142, "xml", 143),
    (600, "point", 1017),
    (650, "cidr", 651),
    (700, "real", 1021),
    (701, "double precision", 1022),
    (790, "money", 791),
    (829, "macaddr", 1040),
    (869, "inet", 1041),
    (1042, "character", 1014),
    (1043, "character varying", 1015),
    (1082, "date", 1182),
    (1083, "time without time zone", 1183),
    (1114, "timestamp without time zone", 1115),
    (1184, "timestamp with time zone", 1185),
    (1186, "interval", 1187),
    (1266, "time with time zone", 1270),
    (1560, "bit", 1561),
    (1562, "bit varying", 1563),
    (1700, "numeric", 1231),
    (2205, "regclass", 2210),
    (2950, "uuid", 2951),
    (3220, "pg_lsn", 3221),
    (3614, "tsvector", 3643),
    (3615, "tsquery", 3645),
    (3802, "jsonb", 3807),
];

/// `VARHDRSZ`: character and numeric typmods are offset by it (`utils/adt/varchar.c`,
/// `numeric.c`).
const VARHDRSZ: i32 = 4;

/// The element type of a built-in array type, or the type itself.
fn lookup(oid: u32) -> Option<(u32, &'static str, bool)> {
    BUILTIN.iter().find_map(|&(o, name, arr)| {
        if o == oid {
            Some((o, name, false))
        } else if arr == oid {
            Some((o, name, true))
        } else {
            None
        }
    })
}

/// The `(n)` or `(p,s)` a typmod adds, for the types whose typmod `format_type` shows.
fn typmod_suffix(base: u32, typmod: i32) -> String {
    if typmod < 0 {
        return String::new();
    }
    match base {
        1042 | 1043 if typmod >= VARHDRSZ => format!("({})", typmod - VARHDRSZ),
        1560 | 1562 => format!("({typmod})"),
        1700 if typmod >= VARHDRSZ => {
            let t = typmod - VARHDRSZ;
            format!("({},{})", (t >> 16) & 0xffff, t & 0xffff)
        }
        1083 | 1114 | 1184 | 1266 => format!("({typmod})"),
        _ => String::new(),
    }
}

/// The name of built-in type `oid` with modifier `typmod` as `format_type` prints it
/// (`character varying(20)`, `timestamp(3) with time zone`, `integer[]`), or `None` for a
/// type this table does not know.
pub fn builtin_name(oid: u32, typmod: i32) -> Option<String> {
    let (base, name, array) = lookup(oid)?;
    let suffix = typmod_suffix(base, typmod);
    // format_type puts the precision of time types before "with(out) time zone".
    let mut s = match name.split_once(" with") {
        Some((head, tail)) if !suffix.is_empty() && base != 1043 => {
            format!("{head}{suffix} with{tail}")
        }
        _ => format!("{name}{suffix}"),
    };
    if array {
        s.push_str("[]");
    }
    Some(s)
}

/// How a value of this type is written in JSON: numbers and booleans bare, like wal2json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// An integer, float or numeric: bare unless NaN or infinite.
    Number,
    /// `t`/`f` as `true`/`false`.
    Bool,
    /// Everything else: a JSON string of the text form.
    String,
}

/// The JSON kind of type `oid`.
pub fn json_kind(oid: u32) -> JsonKind {
    match oid {
        20 | 21 | 23 | 26 | 700 | 701 | 1700 => JsonKind::Number,
        16 => JsonKind::Bool,
        _ => JsonKind::String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_like_format_type() {
        let n = |o, m| builtin_name(o, m).unwrap();
        assert_eq!(n(23, -1), "integer");
        assert_eq!(n(1007, -1), "integer[]");
        assert_eq!(n(1043, 24), "character varying(20)");
        assert_eq!(n(1015, 14), "character varying(10)[]");
        assert_eq!(n(1042, 5), "character(1)");
        assert_eq!(n(1700, (10 << 16 | 2) + 4), "numeric(10,2)");
        assert_eq!(n(1700, -1), "numeric");
        assert_eq!(n(1184, 3), "timestamp(3) with time zone");
        assert_eq!(n(1114, -1), "timestamp without time zone");
        assert_eq!(builtin_name(16385, -1), None);
        assert_eq!(json_kind(1700), JsonKind::Number);
        assert_eq!(json_kind(25), JsonKind::String);
    }
}
