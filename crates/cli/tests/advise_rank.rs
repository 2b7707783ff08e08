//! `wal advise` ranks only what it knows: on the PostgreSQL 18 fixture (kept in
//! crates/wal/testdata), sampled at 1 % so that some intervals are too wide to mean
//! anything, the text and JSON outputs must rank every candidate whose place is
//! established, set apart the others as estimates, never print an uninformative
//! interval as a figure, and every order they claim must hold in an exhaustive run.

mod common;

use common::pgcompress;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Candidates of the test: the stock four and levels whose figures lie close.
const METHODS: &str = "off,pglz,lz4,zstd,zstd:6,zstd:9,zstd:15,lz4:9,snappy";
/// Widest interval (low to high, as a share of the figure) shown as a figure.
const INFORMATIVE: f64 = 0.2;

/// The fixture's segments, unpacked with the zstd and tar tools into `dir`.
fn fixture(dir: &Path) -> PathBuf {
    let tarball =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wal/testdata/pg18-small-1mb.tar.zst");
    let st = Command::new("sh")
        .arg("-c")
        .arg("zstd -dc \"$1\" | tar -xf - -C \"$2\"")
        .arg("sh")
        .arg(&tarball)
        .arg(dir)
        .status()
        .expect("run zstd and tar");
    assert!(st.success(), "unpack {}", tarball.display());
    dir.join("pg18-small-1mb")
}

fn advise(wal: &Path, extra: &[&str]) -> String {
    let w = wal.display().to_string();
    let mut args = vec!["wal", "advise", "--threads", "2", "--methods", METHODS];
    args.extend(extra);
    args.push(&w);
    let out = pgcompress(&args);
    assert!(
        out.status.success(),
        "advise {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// The WAL-bytes interval of a candidate: its figure when exact.
fn wal_range(c: &Value) -> (u64, u64) {
    let (w, f) = (u(c, "predicted_wal_bytes"), u(c, "predicted_fpi_bytes"));
    match (c["ci_low"].as_u64(), c["ci_high"].as_u64()) {
        (Some(lo), Some(hi)) if c["sampled"] == true => (w - (f - lo), w + (hi - f)),
        _ => (w, w),
    }
}

fn informative(c: &Value) -> bool {
    if c["sampled"] != true {
        return true;
    }
    let (lo, hi) = (u(c, "ci_low"), u(c, "ci_high"));
    (hi - lo) as f64 <= INFORMATIVE * u(c, "predicted_fpi_bytes") as f64
}

#[test]
fn advise_ranks_only_what_its_intervals_establish() {
    let dir = tempfile::tempdir().expect("tmp");
    let wal = fixture(dir.path());
    let j: Value =
        serde_json::from_str(&advise(&wal, &["--json", "--sample-rate", "0.01"])).expect("json");
    let cands = j["candidates"].as_array().expect("candidates");
    assert_eq!(cands.len(), METHODS.split(',').count());
    let wide: Vec<&Value> = cands.iter().filter(|c| !informative(c)).collect();
    assert!(
        !wide.is_empty(),
        "1 % of the fixture's images leaves some interval uninformative"
    );
    // Uninformative estimates come after every ranked candidate.
    let first_wide = cands.iter().position(|c| !informative(c)).expect("wide");
    assert!(
        cands[first_wide..].iter().all(|c| !informative(c)),
        "estimates that cannot be ranked are listed after the ranked candidates: {:?}",
        cands.iter().map(|c| &c["spec"]).collect::<Vec<_>>()
    );
    for c in &cands[first_wide..] {
        assert_eq!(c["rank"], Value::Null, "{}: not ranked", c["spec"]);
        assert!(u(c, "images_measured") < u(&j, "images"), "{}", c["spec"]);
    }
    // Ranks among the ranked: a span wherever intervals leave the order open.
    let ranked = &cands[..first_wide];
    for c in ranked {
        let (best, worst) = (u(&c["rank"], "best"), u(&c["rank"], "worst"));
        let (lo, hi) = wal_range(c);
        let ahead = ranked.iter().filter(|o| wal_range(o).1 < lo).count() as u64;
        let behind = ranked.iter().filter(|o| wal_range(o).0 > hi).count() as u64;
        assert_eq!(best, 1 + ahead, "{}: best rank", c["spec"]);
        assert_eq!(
            worst,
            ranked.len() as u64 - behind,
            "{}: worst rank",
            c["spec"]
        );
    }
    // Every order claimed holds in an exhaustive run.
    let ex: Value = serde_json::from_str(&advise(&wal, &["--json", "--exhaustive"])).expect("json");
    let truth = |spec: &Value| {
        ex["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .find(|c| c["spec"] == *spec)
            .map(|c| u(c, "predicted_wal_bytes"))
            .expect("same candidates")
    };
    for a in ranked {
        for b in ranked {
            if u(&a["rank"], "worst") < u(&b["rank"], "best") {
                assert!(
                    truth(&a["spec"]) < truth(&b["spec"]),
                    "{} ranked ahead of {} but the exhaustive run disagrees",
                    a["spec"],
                    b["spec"]
                );
            }
        }
    }

    // The text: the same split, no uninformative interval printed as a figure.
    let text = advise(&wal, &["--sample-rate", "0.01"]);
    let (table, rest) = text
        .split_once("Not ranked")
        .unwrap_or_else(|| panic!("a section of estimates that cannot be ranked:\n{text}"));
    for line in table.lines().chain(rest.lines()) {
        // "-2.73%/+1.53%" or "±0.50%": whatever interval is printed is narrow.
        for word in line.split_whitespace() {
            let parts: Vec<f64> = word
                .trim_start_matches('\u{b1}')
                .split('/')
                .filter_map(|p| p.trim_start_matches(['-', '+']).strip_suffix('%'))
                .filter_map(|p| p.parse().ok())
                .collect();
            if word.contains('/') && parts.len() == 2 {
                assert!(
                    parts[0] + parts[1] <= 100.0 * INFORMATIVE,
                    "an uninformative interval printed: {line}"
                );
            }
        }
    }
    for c in &wide {
        let spec = c["spec"].as_str().expect("spec");
        let row = rest
            .lines()
            .find(|l| l.split_whitespace().next() == Some(spec))
            .unwrap_or_else(|| panic!("{spec} among the estimates:\n{text}"));
        assert!(
            row.contains(&format!(
                "{} of {}",
                u(c, "images_measured"),
                u(&j, "images")
            )),
            "says what was measured: {row}"
        );
        assert!(
            !table
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(spec)),
            "{spec} is not in the ranked table:\n{table}"
        );
    }
}

/// The attributes of every `<tag ...>` in `svg` whose attributes hold `class="cls`.
fn elements<'a>(svg: &'a str, tag: &str, cls: &str) -> Vec<(Vec<(&'a str, &'a str)>, &'a str)> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let end = after.find('>').expect("tag ends");
        let attrs_text = &after[..end];
        let body = &after[end + 1..];
        let content = &body[..body.find('<').unwrap_or(0)];
        rest = body;
        if !attrs_text.contains(&format!("class=\"{cls}")) {
            continue;
        }
        let mut attrs = Vec::new();
        for part in attrs_text.split("\" ") {
            if let Some((k, v)) = part.split_once("=\"") {
                attrs.push((k.trim(), v.trim_end_matches(['"', '/'])));
            }
        }
        out.push((attrs, content));
    }
    out
}

fn attr(attrs: &[(&str, &str)], k: &str) -> f64 {
    attrs
        .iter()
        .find(|(n, _)| *n == k)
        .unwrap_or_else(|| panic!("{k} in {attrs:?}"))
        .1
        .parse()
        .unwrap_or_else(|_| panic!("{k} is a number in {attrs:?}"))
}

fn spec_of<'a>(attrs: &[(&str, &'a str)]) -> &'a str {
    attrs
        .iter()
        .find(|(n, _)| *n == "data-spec")
        .unwrap_or_else(|| panic!("data-spec in {attrs:?}"))
        .1
}

type Box2 = (f64, f64, f64, f64);

fn overlap(a: Box2, b: Box2) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

#[test]
fn html_whiskers_and_labels_do_not_collide() {
    let dir = tempfile::tempdir().expect("tmp");
    let wal = fixture(dir.path());
    // Thinly sampled, so that some intervals are wide: the default candidates, and
    // every level of zstd and lz4 (many points close together).
    let levels: Vec<String> = (1..=22)
        .map(|l| format!("zstd:{l}"))
        .chain((1..=12).map(|l| format!("lz4:{l}")))
        .collect();
    let crowded = format!("off,pglz,lz4,zstd,snappy,{}", levels.join(","));
    for (rate, methods) in [
        ("0.01", None),
        ("0.05", None),
        ("0.02", Some(crowded.as_str())),
    ] {
        let page = dir.path().join(format!("report-{rate}.html"));
        let p = page.display().to_string();
        let w = wal.display().to_string();
        let mut args = vec![
            "wal",
            "advise",
            "--json",
            "--threads",
            "2",
            "--sample-rate",
            rate,
            "--html",
            &p,
        ];
        if let Some(m) = methods {
            args.extend(["--methods", m]);
        }
        args.push(&w);
        let out = pgcompress(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).expect("json");
        let html = std::fs::read_to_string(&page).expect("report");
        let start = html
            .find("<svg id=\"chart-saving-vs-cpu\"")
            .expect("scatter");
        let svg = &html[start..start + html[start..].find("</svg>").expect("end")];
        // Markers of every candidate, by spec.
        let mut markers: Vec<(&str, Box2)> = Vec::new();
        for (a, _) in elements(svg, "circle", "point") {
            let (x, y, r) = (attr(&a, "cx"), attr(&a, "cy"), attr(&a, "r"));
            markers.push((spec_of(&a), (x - r, y - r, x + r, y + r)));
        }
        for (a, _) in elements(svg, "rect", "point") {
            let (x, y) = (attr(&a, "x"), attr(&a, "y"));
            let (w, h) = (attr(&a, "width"), attr(&a, "height"));
            markers.push((spec_of(&a), (x, y, x + w, y + h)));
        }
        let cands = j["candidates"].as_array().expect("candidates");
        assert_eq!(markers.len(), cands.len(), "{rate}: one marker each");
        // Whiskers: only for informative intervals, never across another's marker.
        for (a, _) in elements(svg, "path", "whisker") {
            let spec = spec_of(&a);
            let c = cands.iter().find(|c| c["spec"] == spec).expect("candidate");
            assert!(
                informative(c),
                "{rate}: {spec} has a whisker for an interval too wide to rank"
            );
            let d = a.iter().find(|(n, _)| *n == "d").expect("d").1;
            let (m, v) = d[1..].split_once('V').expect("M x y V y");
            let (x, ya) = m.split_once(' ').expect("x y");
            let yb = v.split('M').next().expect("y");
            let (x, ya, yb): (f64, f64, f64) = (
                x.parse().expect("x"),
                ya.parse().expect("y"),
                yb.parse().expect("y"),
            );
            let seg = (x - 4.0, ya.min(yb), x + 4.0, ya.max(yb));
            for (other, b) in &markers {
                assert!(
                    *other == spec || !overlap(seg, *b),
                    "{rate}: {spec}'s whisker crosses {other}'s marker"
                );
            }
        }
        // Labels: none overlaps another, nor another candidate's marker.
        let labels: Vec<(&str, Box2)> = elements(svg, "text", "label")
            .into_iter()
            .map(|(a, text)| {
                let (x, y, size) = (attr(&a, "x"), attr(&a, "y"), attr(&a, "font-size"));
                // An upper bound of the width of a sans-serif label of this size.
                let w = text.chars().count() as f64 * size * 0.6;
                (text, (x, y - size + 2.0, x + w, y + 2.0))
            })
            .collect();
        assert_eq!(labels.len(), cands.len(), "{rate}: a label each");
        for (i, (t, b)) in labels.iter().enumerate() {
            for (u2, o) in &labels[i + 1..] {
                assert!(!overlap(*b, *o), "{rate}: labels {t} and {u2} overlap");
            }
            for (m, mb) in &markers {
                assert!(
                    *m == *t || !overlap(*b, *mb),
                    "{rate}: label {t} covers {m}'s marker"
                );
            }
        }
    }
}
