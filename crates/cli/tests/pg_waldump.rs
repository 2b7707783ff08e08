//! `pgcompress wal stats` against the installed pg_waldump, on WAL a real
//! PostgreSQL wrote: every figure pg_waldump prints must be equal.

mod common;

use common::*;
use serde_json::Value;

/// Where a major's package has no pg_waldump (16's server-only package), the server's own
/// pg_walinspect is the oracle: `pg_get_wal_stats` over the LSN range we report must give the
/// same records, record bytes and FPI bytes for every resource manager.
fn assert_agrees_walinspect(c: &Corpus, label: &str, files: &[std::path::PathBuf]) -> Value {
    let j = stats_json(files);
    c.cluster
        .psql("CREATE EXTENSION IF NOT EXISTS pg_walinspect;")
        .expect("pg_walinspect");
    let text = c
        .cluster
        .psql(&format!(
            "SELECT \"resource_manager/record_type\", count, record_size, fpi_size FROM pg_get_wal_stats('{}', '{}', false) WHERE count > 0 ORDER BY 1",
            j["start_lsn"].as_str().expect("start"),
            j["end_lsn"].as_str().expect("end")
        ))
        .expect("pg_get_wal_stats");
    let theirs: Vec<(String, u64, u64, u64)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let n = |i: usize| f[i].parse::<u64>().expect("figure");
            (f[0].to_string(), n(1), n(2), n(3))
        })
        .collect();
    let mut ours: Vec<(String, u64, u64, u64)> = j["rmgrs"]
        .as_array()
        .expect("rmgrs")
        .iter()
        .filter(|r| r["records"].as_u64() != Some(0))
        .map(|r| {
            let n = |k: &str| r[k].as_u64().expect("figure");
            (
                r["name"].as_str().expect("name").to_string(),
                n("records"),
                n("record_bytes"),
                n("fpi_bytes"),
            )
        })
        .collect();
    ours.sort();
    assert!(!theirs.is_empty(), "{label}: pg_walinspect saw records");
    assert_eq!(
        ours, theirs,
        "{label}: per-rmgr figures against pg_get_wal_stats"
    );
    j
}

/// Compares one run of segments: the JSON figures and the text table.
fn assert_agrees(c: &Corpus, label: &str, files: &[std::path::PathBuf]) -> Value {
    let files = isolate(c.dir.path(), label, files);
    if c.cluster.install().own_bin("pg_waldump").is_none() {
        return assert_agrees_walinspect(c, label, &files);
    }
    let (text, _ok) = pg_waldump_stats(&c.cluster, &files);
    let (start, end, rows) = parse_pg_waldump(&text);
    let j = stats_json(&files);
    assert_eq!(j["start_lsn"], start, "{label}: start LSN");
    assert_eq!(j["end_lsn"], end, "{label}: end LSN");
    let (total, per_rmgr) = rows.split_last().expect("rows");
    assert_eq!(total.name, "Total");
    assert_eq!(j["records"], total.records, "{label}: records");
    assert_eq!(
        j["record_bytes"], total.record_bytes,
        "{label}: record bytes"
    );
    assert_eq!(j["fpi_bytes"], total.fpi_bytes, "{label}: FPI bytes");
    let ours = j["rmgrs"].as_array().expect("rmgrs");
    assert_eq!(ours.len(), per_rmgr.len(), "{label}: rmgr rows");
    for (o, p) in ours.iter().zip(per_rmgr) {
        assert_eq!(o["name"], p.name, "{label}");
        assert_eq!(o["records"], p.records, "{label} {}", p.name);
        assert_eq!(o["record_bytes"], p.record_bytes, "{label} {}", p.name);
        assert_eq!(o["fpi_bytes"], p.fpi_bytes, "{label} {}", p.name);
    }
    // Every byte between the first record and the end is accounted for.
    let lsn = |v: &Value| {
        let (hi, lo) = v.as_str().expect("lsn").split_once('/').expect("X/Y");
        (u64::from_str_radix(hi, 16).expect("hex") << 32)
            + u64::from_str_radix(lo, 16).expect("hex")
    };
    let parts = [
        "combined_bytes",
        "page_header_bytes",
        "padding_bytes",
        "switch_tail_bytes",
    ]
    .iter()
    .map(|k| j[*k].as_u64().expect("figure"))
    .sum::<u64>();
    assert_eq!(
        parts,
        lsn(&j["end_lsn"]) - lsn(&j["start_lsn"]),
        "{label}: bytes accounted for"
    );
    // The text table is pg_waldump's, byte for byte.
    let out = pgcompress_on(&["wal", "stats"], &files);
    assert!(out.status.success());
    let ours_text = String::from_utf8(out.stdout).expect("utf8");
    assert!(
        ours_text.starts_with(&text),
        "{label}: table differs:\n{ours_text}\n---\n{text}"
    );
    j
}

fn images(j: &Value, method: &str) -> u64 {
    j["images"][method]["count"].as_u64().expect("count")
}

fn check_corpus(seg_mb: u32, transactions: u32) {
    let c = corpus(seg_mb, transactions);
    let offered = offered_settings(&c.cluster);
    for (setting, files) in &c.phases {
        let j = assert_agrees(&c, &format!("{seg_mb}mb-{setting}"), files);
        assert!(
            j["fpi_count"].as_u64().expect("fpi") > 0,
            "{setting}: the phase wrote images"
        );
        match setting.as_str() {
            "off" => assert_eq!(j["fpi_count"], images(&j, "none")),
            "mixed" => {
                for m in offered.iter().filter(|m| **m != "off") {
                    assert!(images(&j, m) > 0, "mixed phase has {m} images");
                }
                assert!(j["records_crossing_pages"].as_u64().expect("n") > 0);
                if seg_mb == 1 {
                    // The 2.5 MB record alone crosses two 1 MB boundaries.
                    assert!(j["records_crossing_segments"].as_u64().expect("n") >= 2);
                }
            }
            m => assert!(images(&j, m) > 0, "{m} phase has {m} images"),
        }
        assert!(
            j["switches"].as_u64().expect("switches") >= 1,
            "phase ends in a switched segment"
        );
    }
    // All archived segments at once: many switches, every method.
    let j = assert_agrees(&c, &format!("{seg_mb}mb-all"), &c.all);
    assert!(j["records_crossing_segments"].as_u64().expect("n") > 0);
    if c.cluster.install().own_bin("pg_waldump").is_none() {
        // The end of valid WAL in a live pg_wal needs pg_waldump as its judge; pg_walinspect
        // stops at the server's flush point instead.
        return;
    }
    // The live pg_wal: the last segment is partial, later ones may be recycled.
    let live_first_to_last = &c.live;
    let files = isolate(
        c.dir.path(),
        &format!("{seg_mb}mb-live"),
        live_first_to_last,
    );
    let (text, pg_ok) = pg_waldump_stats(&c.cluster, &files);
    let j = stats_json(&files);
    let (_, end, rows) = parse_pg_waldump(&text);
    assert_eq!(j["end_lsn"], end, "live: end of valid WAL");
    assert_eq!(j["records"], rows.last().expect("total").records);
    assert_eq!(j["fpi_bytes"], rows.last().expect("total").fpi_bytes);
    // pg_waldump reports the end of valid WAL as an error; we report it as the stop.
    assert!(!pg_ok);
    assert_eq!(j["stop"]["kind"], "end_of_valid_wal");
}

#[test]
fn stats_equal_pg_waldump_1mb_segments() {
    check_corpus(1, 300);
}

#[test]
fn stats_equal_pg_waldump_16mb_segments() {
    check_corpus(16, 300);
}

/// A parallel read must give exactly what one sequential read gives, extras included.
#[test]
fn parallel_stats_equal_sequential() {
    let c = corpus(1, 100);
    let names: Vec<String> = c.all.iter().map(|f| f.display().to_string()).collect();
    let run = |threads: &str| {
        let mut args = vec!["wal", "stats", "--json", "--threads", threads];
        args.extend(names.iter().map(|s| s.as_str()));
        let out = pgcompress(&args);
        assert!(out.status.success());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
    };
    let one = run("1");
    assert!(
        c.all.len() >= 6,
        "enough segments to split: {}",
        c.all.len()
    );
    for t in ["2", "3", "5"] {
        assert_eq!(run(t), one, "{t} threads");
    }
}
