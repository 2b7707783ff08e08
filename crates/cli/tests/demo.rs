//! `pgcompress demo` end to end: the built binary against a real throwaway PostgreSQL.

use serde_json::Value;
use std::process::{Command, Output};

/// Runs the built `pgcompress` with `args`.
fn pgcompress(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgcompress"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("pgcompress runs")
}

/// A field of a run as an unsigned integer.
fn num(run: &Value, field: &str) -> u64 {
    run[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing or not an integer in {run}"))
}

/// The wal_compression settings the server under test offers (pglz only in the packages of 16
/// and 18 the compatibility matrix runs), in the demo's order.
fn offered_settings() -> Vec<&'static str> {
    let cluster = pgtest::Cluster::start().expect("cluster");
    let vals = cluster
        .query_one(
            "SELECT array_to_string(enumvals, ',') FROM pg_settings WHERE name = 'wal_compression'",
        )
        .expect("wal_compression's values");
    let vals: Vec<&str> = vals.split(',').collect();
    ["off", "pglz", "lz4", "zstd"]
        .into_iter()
        .filter(|s| vals.contains(s))
        .collect()
}

#[test]
fn demo_json_compares_the_four_settings() {
    let out = pgcompress(
        &["demo", "--json", "--scale", "1", "--transactions", "200"],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");
    // Progress goes to stderr; stdout is exactly one JSON object.
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let runs = doc["runs"].as_array().expect("a runs array");
    let settings: Vec<&str> = runs.iter().filter_map(|r| r["setting"].as_str()).collect();
    assert_eq!(settings, offered_settings());
    for r in runs {
        // A run starts right after a checkpoint, so its first change to each page writes an image.
        assert!(num(r, "fpi_count") > 0, "{r}");
        assert!(num(r, "wal_bytes") > 0, "{r}");
        assert!(num(r, "lsn_bytes") > 0, "{r}");
        assert!(num(r, "record_bytes") > 0, "{r}");
        assert_eq!(
            num(r, "wal_bytes"),
            num(r, "record_bytes") + num(r, "fpi_bytes"),
            "{r}"
        );
        assert!(r["tps"].as_f64().is_some_and(|t| t > 0.0), "{r}");
        assert!(r["duration_s"].as_f64().is_some_and(|d| d > 0.0), "{r}");
        if r["setting"] == "off" {
            assert_eq!(num(r, "fpi_bytes"), num(r, "fpi_raw_bytes"), "{r}");
        } else {
            // pgbench pages are mostly repetitive filler; every method shrinks them.
            assert!(num(r, "fpi_bytes") < num(r, "fpi_raw_bytes"), "{r}");
        }
    }
    check_archive(&doc);
    check_tunnel(&doc);
    check_advisor_agrees(&doc);
    check_logical_spill(&doc);
}

/// The logical section: the seed workload's large INSERT, the server's own spill against ours with lz4 and
/// zstd:1, every row replayed.
fn check_logical_spill(doc: &Value) {
    let l = &doc["logical_spill"];
    assert_eq!(l["logical_decoding_work_mem"], "64kB", "{l}");
    let seed = &l["seed"];
    assert_eq!(seed["name"], "seed", "{l}");
    let rows = num(seed, "rows_inserted");
    assert_eq!(rows, 100_000, "{l}");
    let server_spill = num(&seed["server"], "spill_bytes");
    assert!(server_spill > 0, "{l}");
    let ours = seed["ours"].as_array().expect("ours");
    let specs: Vec<&str> = ours.iter().filter_map(|o| o["spec"].as_str()).collect();
    assert_eq!(specs, ["lz4", "zstd:1"]);
    for o in ours {
        assert_eq!(num(o, "inserts"), rows, "{o}");
        assert_eq!(o["matched"], true, "{o}");
        let disk = num(o, "disk_bytes");
        assert!(disk > 0 && disk < server_spill / 4, "{o}");
        let bound = if o["spec"] == "lz4" { 0.25 } else { 0.05 };
        assert!(o["ratio"].as_f64().is_some_and(|r| r <= bound), "{o}");
    }
}

/// Regression: the advisor, reading the off run, must show the saving of each stock
/// method that the run table shows (it counted the zeros after the run's final
/// switch as WAL, and said 43% where the runs said 82%).
fn check_advisor_agrees(doc: &Value) {
    let runs = doc["runs"].as_array().expect("a runs array");
    let run = |s: &str| {
        num(
            runs.iter().find(|r| r["setting"] == s).expect("run"),
            "wal_bytes",
        )
    };
    let advice = &doc["advice"];
    let cands = advice["candidates"].as_array().expect("advisor candidates");
    let predicted = |s: &str| {
        num(
            cands.iter().find(|c| c["spec"] == s).expect("candidate"),
            "predicted_wal_bytes",
        )
    };
    let saving = |off: u64, x: u64| 100.0 * (1.0 - x as f64 / off as f64);
    let offered = offered_settings();
    for m in offered.iter().filter(|m| **m != "off") {
        let table = saving(run("off"), run(m));
        let advisor = saving(predicted("none"), predicted(m));
        eprintln!("{m}: run table {table:.1}%, advisor {advisor:.1}%");
        assert!(
            (table - advisor).abs() <= 1.0,
            "{m}: run table saves {table:.2}%, advisor {advisor:.2}%"
        );
    }
}

/// The archive comparison: the off run's segments, pushed by pgcompress, gzip -6 and zstd -3.
fn check_archive(doc: &Value) {
    let a = &doc["archive"];
    assert_eq!(a["run"], "off", "{a}");
    let off_segments = doc["runs"][0]["segments"]
        .as_array()
        .expect("the off run's segments")
        .len() as u64;
    assert!(off_segments > 0);
    assert_eq!(num(a, "segments"), off_segments, "{a}");
    let original = num(a, "original_bytes");
    assert_eq!(original, off_segments * num(doc, "segment_size"), "{a}");
    let tools = a["tools"].as_array().expect("an archive tools array");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["tool"].as_str()).collect();
    let default = default_label();
    assert_eq!(names, [default.as_str(), "gzip -6", "zstd -3"]);
    for t in tools {
        let stored = num(t, "stored_bytes");
        assert!(stored > 0 && stored < original, "{t}");
        let ratio = t["ratio"].as_f64().expect("ratio");
        assert!(
            (ratio - original as f64 / stored as f64).abs() < 1e-9 * ratio,
            "{t}"
        );
    }
}

/// The tunnel section: the same COPY output both ways, fewer bytes on the link than the protocol carries.
fn check_tunnel(doc: &Value) {
    let t = &doc["tunnel"];
    assert_eq!(t["method"], "zstd:1", "{t}");
    assert_eq!(t["statement"], "COPY pgbench_accounts TO STDOUT", "{t}");
    let output = num(t, "output_bytes");
    let direct = num(t, "direct_bytes");
    let link = num(t, "link_bytes");
    // scale 1: 100,000 accounts of about 100 bytes each.
    assert!(output > 5_000_000, "{t}");
    // The protocol adds a CopyData header per row and the CopyOutResponse, CopyDone, CommandComplete.
    assert!(
        direct > output && direct < output + 6 * 100_000 + 1000,
        "{t}"
    );
    assert!(link > 0 && link * 3 < direct, "{t}");
    assert_eq!(t["output_sha256"].as_str().map(str::len), Some(64), "{t}");
}

#[test]
fn demo_table_shows_the_archive_comparison() {
    let out = pgcompress(&["demo", "--scale", "1", "--transactions", "100"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let heading = text
        .lines()
        .position(|l| l.starts_with("Archiving the off run's"))
        .unwrap_or_else(|| panic!("no archive comparison in:\n{text}"));
    let lines: Vec<&str> = text.lines().skip(heading + 1).take(3).collect();
    for (line, tool) in lines
        .iter()
        .zip([default_label().as_str(), "gzip -6", "zstd -3"])
    {
        assert!(line.trim_start().starts_with(tool), "{line:?} in:\n{text}");
        let ratio: f64 = line
            .rsplit("ratio")
            .next()
            .and_then(|r| r.trim().strip_suffix('x'))
            .and_then(|r| r.trim().parse().ok())
            .unwrap_or_else(|| panic!("no ratio in {line:?}"));
        assert!(ratio > 1.0, "{line:?}");
    }
    assert_eq!(lines.len(), 3, "{text}");
    let logical = text
        .lines()
        .position(|l| l.starts_with("A large transaction over logical replication"))
        .unwrap_or_else(|| panic!("no logical section in:\n{text}"));
    let lines: Vec<&str> = text.lines().skip(logical + 1).take(3).collect();
    assert!(
        lines[0]
            .trim_start()
            .starts_with("PostgreSQL spills it itself"),
        "{text}"
    );
    for (line, spec) in lines[1..].iter().zip(["lz4", "zstd:1"]) {
        assert!(
            line.trim_start()
                .starts_with(&format!("pgcompress streams it, spills with {spec}")),
            "{line:?} in:\n{text}"
        );
        assert!(line.ends_with("every row replayed: yes)"), "{line:?}");
    }
}

#[test]
fn demo_without_postgres_says_what_to_do() {
    let out = pgcompress(
        &["demo", "--json"],
        &[("PGCOMPRESS_PG_BINDIR", "/nonexistent/pgcompress-demo-test")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("PGCOMPRESS_PG_BINDIR")
            && stderr.contains("not a PostgreSQL bin directory"),
        "{stderr}"
    );
}

/// The demo's label for pgcompress's default archive method.
fn default_label() -> String {
    let spec: codec::Spec = archive::DEFAULT_METHOD.parse().expect("default method");
    format!("pgcompress (default {spec})")
}
