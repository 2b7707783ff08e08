//! `pgcompress-bench wal` end to end: two workloads on a real throwaway PostgreSQL, every setting run, and the
//! advisor's predictions from the `off` run checked against what the server wrote under each setting.

mod support;

use serde_json::Value;

const WORKLOADS: [&str; 2] = ["two short fields, one changed", "pgbench tpcb-like"];

#[test]
fn bench_wal_predicts_every_setting_within_two_percent() {
    let list = WORKLOADS.join(",");
    let out = support::bench()
        .args(["wal", "--json", "--scale", "1", "--workloads", &list])
        .output()
        .expect("pgcompress runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench wal failed: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let workloads = doc["workloads"].as_array().expect("a workloads array");
    let names: Vec<&str> = workloads
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(names, WORKLOADS);
    for w in workloads {
        let name = w["name"].as_str().unwrap_or("");
        let runs = w["runs"].as_array().expect("a runs array");
        let settings: Vec<&str> = runs.iter().filter_map(|r| r["setting"].as_str()).collect();
        assert_eq!(settings, ["off", "pglz", "lz4", "zstd"], "{name}");
        let fpi = |r: &Value| r["fpi_bytes"].as_u64().expect("fpi_bytes");
        let off = fpi(&runs[0]);
        assert!(
            off > 1 << 20,
            "{name}: off wrote only {off} bytes of images"
        );
        for r in &runs[1..] {
            assert!(
                off >= fpi(r),
                "{name}: {} stored more than off",
                r["setting"]
            );
            assert!(r["duration_s"].as_f64().is_some_and(|d| d > 0.0), "{name}");
            assert!(r["tps"].as_f64().is_some_and(|t| t > 0.0), "{name}");
        }
        let predictions = w["predictions"].as_array().expect("a predictions array");
        for method in ["pglz", "lz4", "zstd"] {
            let p = predictions
                .iter()
                .find(|p| p["method"] == method)
                .unwrap_or_else(|| panic!("{name}: no prediction for {method}"));
            let err = p["error_pct"].as_f64().expect("error_pct");
            assert!(
                err.abs() < 2.0,
                "{name}: {method} predicted {} against {} measured ({err:+.2}%)",
                p["predicted_fpi_bytes"],
                p["measured_fpi_bytes"]
            );
        }
    }
}
