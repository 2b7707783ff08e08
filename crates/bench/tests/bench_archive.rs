//! `pgcompress-bench archive` end to end: both corpora written on a real throwaway PostgreSQL, every tool
//! (pgcompress, pgBackRest, gzip, zstd, xz) pushing and restoring every segment. Checks the structure and the
//! arithmetic of the report, never a timing.
//!
//! The cluster has 1 MB segments (`--segment-size 1`): the code path is the one 16 MB segments take, and
//! `xz -6`, which needs about 30 CPU seconds for one 16 MB segment of the text corpus, would otherwise
//! take most of the CI budget.

mod support;

use serde_json::Value;
use std::process::Command;

/// The tools in report order; the default's label names the default method.
fn expected_tools() -> Vec<String> {
    let default: codec::Spec = archive::DEFAULT_METHOD.parse().expect("default method");
    let mut v = vec![format!("pgcompress (default {default})")];
    v.extend(OTHER_TOOLS.iter().map(|t| t.to_string()));
    v
}

const OTHER_TOOLS: [&str; 7] = [
    "pgcompress --method lz4",
    "pgbackrest gz:6",
    "pgbackrest lz4:1",
    "pgbackrest zst:3",
    "gzip -6",
    "zstd -3",
    "xz -6",
];

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing or not a number in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing or not an integer in {v}"))
}

/// The segment size of the test's cluster, in MB.
const SEGMENT_MB: u64 = 1;

#[test]
fn bench_archive_measures_every_tool_on_both_corpora() {
    let out = support::bench()
        .args([
            "archive",
            "--segments",
            "2",
            "--segment-size",
            "1",
            "--methods",
            "default,lz4",
            "--rounds",
            "2",
            "--json",
        ])
        .output()
        .expect("pgcompress runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench archive failed: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let seg = SEGMENT_MB << 20;
    assert_eq!(u(&doc, "segment_size"), seg);
    // Two rounds: every tool pushed each segment again after what it stored was deleted (pgBackRest
    // refuses nothing and stores the same file again), and the steal share is a share.
    assert_eq!(u(&doc, "rounds"), 2);
    let steal = f(&doc["machine"], "steal_percent");
    assert!((0.0..=100.0).contains(&steal), "steal {steal}");
    assert_eq!(doc["wal_compression"], "off");
    let tools: Vec<&str> = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    let expected = expected_tools();
    assert_eq!(tools, expected);

    let corpora = doc["corpora"].as_array().expect("corpora");
    let names: Vec<&str> = corpora.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["pgbench", "text", "all"]);
    for c in corpora {
        let name = c["name"].as_str().unwrap_or("");
        let segments = if name == "all" { 4 } else { 2 };
        assert_eq!(u(c, "segments"), segments, "{name}");
        assert_eq!(u(c, "original_bytes"), segments * seg, "{name}");
        let results = c["results"].as_array().expect("results");
        let labels: Vec<&str> = results.iter().filter_map(|r| r["tool"].as_str()).collect();
        assert_eq!(labels, expected, "{name}");
        let ratio_of = |label: &str| {
            let r = results
                .iter()
                .find(|r| r["tool"] == label)
                .expect("reference present");
            f(r, "ratio")
        };
        for r in results {
            let tool = r["tool"].as_str().unwrap_or("");
            let (original, stored) = (u(r, "original_bytes"), u(r, "stored_bytes"));
            assert_eq!(original, u(c, "original_bytes"), "{name} {tool}");
            // Every tool compresses WAL with wal_compression = off, and none of them to nothing.
            assert!(stored > 0 && stored < original, "{name} {tool}: {stored}");
            let ratio = f(r, "ratio");
            assert!(
                (ratio - original as f64 / stored as f64).abs() < 1e-9 * ratio,
                "{name} {tool}: ratio {ratio} is not {original} / {stored}"
            );
            for k in ["push_wall_s", "get_wall_s"] {
                assert!(f(r, k) > 0.0, "{name} {tool}: {k}");
            }
            for k in ["push_cpu_s", "get_cpu_s"] {
                assert!(f(r, k) >= 0.0, "{name} {tool}: {k}");
            }
            // Every push and get is a fresh process: loading it alone takes dozens of faults.
            for k in ["push_faults", "get_faults"] {
                assert!(f(r, k) >= 50.0, "{name} {tool}: {k} {}", f(r, k));
            }
            assert_eq!(u(r, "roundtrips"), segments, "{name} {tool}");
            // Every restored file is the original, byte for byte (SHA-256), for every tool.
            assert_eq!(u(r, "roundtrips_identical"), segments, "{name} {tool}");
            for reference in ["pgbackrest zst:3", "xz -6"] {
                let rel = &r["relative"][reference];
                let expected = ratio / ratio_of(reference);
                assert!(
                    (f(rel, "ratio") - expected).abs() < 1e-9 * expected,
                    "{name} {tool} against {reference}: {rel}"
                );
                for k in ["push_wall", "get_wall"] {
                    assert!(f(rel, k) > 0.0, "{name} {tool} against {reference}: {k}");
                }
                if tool == reference {
                    assert_eq!(f(rel, "ratio"), 1.0);
                    assert_eq!(f(rel, "push_wall"), 1.0);
                    assert_eq!(f(rel, "get_wall"), 1.0);
                }
            }
        }
        // The byte counts of the combined corpus are the sums of the two corpora.
        if name == "all" {
            for (i, r) in results.iter().enumerate() {
                let parts: u64 = corpora[..2]
                    .iter()
                    .map(|k| u(&k["results"][i], "stored_bytes"))
                    .sum();
                assert_eq!(u(r, "stored_bytes"), parts, "{}", r["tool"]);
            }
        }
    }
}

#[test]
fn bench_archive_refuses_a_bad_method_list() {
    for methods in ["zstd:99", "default,,lz4", "default,default", "brotli"] {
        let out = support::bench()
            .args(["archive", "--methods", methods])
            .output()
            .expect("pgcompress runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{methods}: {stderr}");
        assert!(out.stdout.is_empty(), "{methods}");
        assert_eq!(stderr.trim().lines().count(), 1, "{methods}: {stderr}");
        assert!(stderr.contains("--methods"), "{methods}: {stderr}");
    }
}

#[test]
fn bench_archive_refuses_a_segment_size_initdb_refuses() {
    for size in ["0", "3", "2048", "16MB"] {
        let out = support::bench()
            .args(["archive", "--segment-size", size])
            .output()
            .expect("pgcompress runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{size}: {stderr}");
        assert!(out.stdout.is_empty(), "{size}");
        assert!(stderr.contains("--segment-size"), "{size}: {stderr}");
        assert!(stderr.contains("power of two"), "{size}: {stderr}");
    }
}

/// `--sustained` end to end on a short run: no archiving, then both tools on a local directory and on the
/// S3-compatible server, each recovering a base backup through its own prefetching get. Checks that every
/// run archived something, stored every segment it reports, and recovered the primary's data; no timing.
#[test]
fn bench_archive_sustained_archives_and_recovers_with_both_tools_on_both_stores() {
    let out = support::bench()
        .args([
            "archive",
            "--sustained",
            "5",
            "--stores",
            "local,s3",
            "--json",
        ])
        .output()
        .expect("pgcompress runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench archive --sustained failed: {stderr}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let runs = report["runs"].as_array().expect("runs");
    let archivers: Vec<&str> = runs
        .iter()
        .map(|r| r["archiver"].as_str().expect("archiver"))
        .collect();
    assert_eq!(
        archivers,
        [
            "none",
            "pgcompress",
            "pgbackrest",
            "pgcompress_s3",
            "pgbackrest_s3"
        ]
    );
    for r in runs {
        assert!(u(r, "wal_bytes") > 0, "{r}");
        assert!(f(r, "wal_mb_per_s") > 0.0, "{r}");
        if r["archiver"] == "none" {
            assert_eq!(u(r, "stored_bytes"), 0, "{r}");
            assert!(r["recovery_s"].is_null(), "{r}");
            continue;
        }
        // pgbench -i alone writes several segments; every one is stored, and compressed.
        let segments = u(r, "stored_segments");
        assert!(segments >= 2, "{r}");
        let stored = u(r, "stored_bytes");
        assert!(stored > 0 && stored < segments * (16 << 20), "{r}");
        assert_eq!(r["recovered_identical"], Value::Bool(true), "{r}");
        assert!(f(r, "recovery_s") > 0.0, "{r}");
    }
    // One round: a ratio per store, from that round's pair.
    let ratios = report["ratios"].as_array().expect("ratios");
    let stores: Vec<&str> = ratios
        .iter()
        .map(|r| r["store"].as_str().expect("store"))
        .collect();
    assert_eq!(stores, ["local", "s3"]);
    for r in ratios {
        assert_eq!(u(r, "rounds"), 1, "{r}");
        for key in ["wal_rate", "stored_less", "cpu_per_gb", "recovery"] {
            assert!(f(r, key) > 0.0, "{key}: {r}");
        }
        assert!(r["wal_rate_range"].is_null(), "{r}");
    }
    assert!(stderr.contains("S3"), "{stderr}");
}

/// SIGTERM during a sustained run ends it with status 130 once pgbench's seconds are over, after stopping
/// its throwaway cluster, instead of leaving a server and an archiver running.
#[test]
fn bench_archive_sustained_ends_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = support::bench()
        .args(["archive", "--sustained", "5", "--stores", "local"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pgcompress runs");
    let pid = child.id();
    let mut seen = Vec::new();
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        let pushing = line.contains("push --async: 5 s of pgbench");
        seen.push(line);
        if pushing {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("push --async")),
        "the run with pgcompress never started: {seen:?}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    seen.extend(lines.map_while(Result::ok));
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{seen:#?}");
    assert!(
        seen.iter()
            .any(|l| l.contains("interrupted; the temporary clusters were stopped")),
        "{seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("pgbackrest")),
        "the run went on to the next archiver: {seen:#?}"
    );
}
