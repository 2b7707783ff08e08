//! Every valid and invalid specification form.

use super::*;

fn spec(method: Method, level: Option<i32>, long: Option<u32>, workers: Option<u32>) -> Spec {
    Spec {
        method,
        level,
        long,
        workers,
    }
}

fn err(s: &str) -> String {
    match s.parse::<Spec>() {
        Ok(v) => panic!("{s:?} parsed as {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn valid_forms() {
    use Method as M;
    let cases = [
        ("zstd", spec(M::Zstd, None, None, None)),
        ("zstd:5", spec(M::Zstd, Some(5), None, None)),
        ("zstd:-7", spec(M::Zstd, Some(-7), None, None)),
        ("zstd:0", spec(M::Zstd, Some(0), None, None)),
        (
            "zstd:level=19,long",
            spec(M::Zstd, Some(19), Some(27), None),
        ),
        ("zstd:level=-7", spec(M::Zstd, Some(-7), None, None)),
        ("zstd:long=30", spec(M::Zstd, None, Some(30), None)),
        ("zstd:long=on", spec(M::Zstd, None, Some(27), None)),
        ("zstd:long=off", spec(M::Zstd, None, None, None)),
        ("zstd:workers=4", spec(M::Zstd, None, None, Some(4))),
        (
            "zstd:19,long,workers=2",
            spec(M::Zstd, Some(19), Some(27), Some(2)),
        ),
        (
            "zstd:long,level=22",
            spec(M::Zstd, Some(22), Some(27), None),
        ),
        ("lz4", spec(M::Lz4, None, None, None)),
        ("lz4:9", spec(M::Lz4, Some(9), None, None)),
        ("lz4:level=12", spec(M::Lz4, Some(12), None, None)),
        ("lz4:1", spec(M::Lz4, Some(1), None, None)),
        ("pglz", spec(M::Pglz, None, None, None)),
        ("none", spec(M::None, None, None, None)),
        ("off", spec(M::None, None, None, None)),
        ("gzip:9", spec(M::Gzip, Some(9), None, None)),
        ("gzip:level=1", spec(M::Gzip, Some(1), None, None)),
        ("xz:6", spec(M::Xz, Some(6), None, None)),
        ("xz:0", spec(M::Xz, Some(0), None, None)),
        ("snappy", spec(M::Snappy, None, None, None)),
    ];
    for (s, want) in cases {
        let got: Spec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(got, want, "{s}");
        // Display round-trips.
        let shown = got.to_string();
        assert_eq!(shown.parse::<Spec>().ok(), Some(got), "{s} -> {shown}");
    }
}

#[test]
fn display_forms() {
    let show = |s: &str| s.parse::<Spec>().map(|v| v.to_string()).ok();
    assert_eq!(show("zstd").as_deref(), Some("zstd"));
    assert_eq!(show("zstd:level=5").as_deref(), Some("zstd:5"));
    assert_eq!(
        show("zstd:level=19,long").as_deref(),
        Some("zstd:level=19,long")
    );
    assert_eq!(
        show("zstd:long=30,workers=3").as_deref(),
        Some("zstd:long=30,workers=3")
    );
    assert_eq!(show("zstd:workers=3").as_deref(), Some("zstd:workers=3"));
    assert_eq!(show("off").as_deref(), Some("none"));
}

#[test]
fn invalid_forms() {
    assert_eq!(
        err("zsd:3"),
        "unknown compression method \"zsd\" in \"zsd:3\"; valid methods: none, pglz, lz4, zstd, snappy, gzip, xz"
    );
    assert_eq!(
        err("zstd:30"),
        "compression level 30 is out of range for zstd (-7..22) in \"zstd:30\""
    );
    assert!(err("pglz:3").starts_with("compression method pglz does not accept a level"));
    assert!(err("snappy:level=1").starts_with("compression method snappy does not accept a level"));
    assert!(err("none:1").starts_with("compression method none does not accept a level"));
    assert!(err("zstd:-8").contains("out of range for zstd (-7..22)"));
    assert!(err("zstd:99999999999").contains("out of range"));
    assert!(err("lz4:0").contains("out of range for lz4 (1..12)"));
    assert!(err("lz4:13").contains("out of range for lz4 (1..12)"));
    assert!(err("gzip:0").contains("(1..9)"));
    assert!(err("xz:10").contains("(0..9)"));
    assert!(err("").starts_with("empty compression specification"));
    assert!(err(":3").starts_with("empty compression specification"));
    assert_eq!(
        err("ZSTD"),
        "unknown compression method \"ZSTD\"; valid methods: none, pglz, lz4, zstd, snappy, gzip, xz"
    );
    assert!(err("zstd:").contains("unknown compression option \"\""));
    assert!(err("zstd:foo=1").contains("unknown compression option \"foo\""));
    assert!(err("zstd:level").contains("\"level\" requires an integer value, got \"\""));
    assert!(err("zstd:level=abc").contains("got \"abc\""));
    assert!(err("zstd:level=3,level=4").contains("more than once"));
    assert!(err("zstd:3,level=4").contains("more than once"));
    assert!(err("zstd:long,long=28").contains("more than once"));
    assert!(err("zstd:long=9").contains("\"long\" value 9 is out of range (10..31)"));
    assert!(err("zstd:long=32").contains("out of range"));
    assert!(err("zstd:long=x").contains("window log"));
    assert!(err("zstd:workers").contains("\"workers\" requires an integer value"));
    assert!(err("zstd:workers=-1").contains("out of range (0..200)"));
    assert!(err("lz4:long").contains("does not support option \"long\""));
    assert!(err("gzip:workers=2").contains("does not support option \"workers\""));
    assert!(err("zstd:5,").contains("unknown compression option"));
    assert!(err("zstd:3.5").contains("requires an integer"));
}

#[test]
fn lists() {
    let l = parse_spec_list("pglz,lz4,zstd:level=19,long,zstd:5").expect("valid");
    let shown: Vec<String> = l.iter().map(Spec::to_string).collect();
    assert_eq!(shown, ["pglz", "lz4", "zstd:level=19,long", "zstd:5"]);
    let l = parse_spec_list("zstd,long=30,workers=2,gzip").expect("valid");
    assert_eq!(l[0], spec(Method::Zstd, None, Some(30), Some(2)));
    assert_eq!(l[1], Spec::new(Method::Gzip));
    assert_eq!(
        parse_spec_list("none").ok(),
        Some(vec![Spec::new(Method::None)])
    );
    assert!(matches!(
        parse_spec_list("long,zstd"),
        Err(SpecError::DanglingOption { .. })
    ));
    assert!(matches!(
        parse_spec_list("pglz,,lz4"),
        Err(SpecError::Empty { .. })
    ));
    assert!(matches!(parse_spec_list(""), Err(SpecError::Empty { .. })));
    assert!(matches!(
        parse_spec_list("pglz,level=3"),
        Err(SpecError::LevelNotAccepted { .. })
    ));
    assert!(matches!(
        parse_spec_list("pglz,zsd"),
        Err(SpecError::UnknownMethod { .. })
    ));
}

#[test]
fn a_use_that_takes_some_methods_lists_only_those() {
    let some = [Method::None, Method::Lz4, Method::Zstd];
    let msg = |s: &str| Spec::parse_among(s, &some).expect_err(s).to_string();
    assert_eq!(
        msg("lz5"),
        "unknown compression method \"lz5\"; valid methods: none, lz4, zstd"
    );
    assert_eq!(
        msg("snappy"),
        "compression method snappy cannot be used here; valid methods: none, lz4, zstd"
    );
    assert_eq!(
        msg("gzip:3"),
        "compression method gzip cannot be used here in \"gzip:3\"; valid methods: none, lz4, zstd"
    );
    assert_eq!(Spec::parse_among("zstd:5", &some), "zstd:5".parse::<Spec>());
}

proptest::proptest! {
    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,40}") {
        if let Ok(v) = s.parse::<Spec>() {
            proptest::prop_assert_eq!(v.to_string().parse::<Spec>(), Ok(v));
        }
        let _ = parse_spec_list(&s);
    }

    #[test]
    fn spec_like_strings_never_panic(s in "(zstd|lz4|pglz|gzip|xz|off)(:[-0-9a-z=,]{0,20})?") {
        if let Ok(v) = s.parse::<Spec>() {
            proptest::prop_assert_eq!(v.to_string().parse::<Spec>(), Ok(v));
        }
        let _ = parse_spec_list(&s);
    }
}
