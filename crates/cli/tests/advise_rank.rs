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
