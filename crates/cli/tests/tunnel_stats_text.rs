//! `pgcompress tunnel stats FILE` in text shows every counter the JSON carries that a DBA
//! reads, `method_switches` of each direction included.

use std::process::Command;

use wire::net::{DirectionStats, Half, StatsSnapshot};

#[test]
fn text_stats_show_method_switches_per_direction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("client.json");
    let direction = |switches| DirectionStats {
        raw_bytes: 10_000_000,
        link_bytes: 2_500_000,
        chunks: 80,
        column_chunks: 0,
        frames: 120,
        method_switches: switches,
    };
    let s = StatsSnapshot {
        half: Half::Client,
        method: "auto".into(),
        connections_open: 0,
        connections_total: 3,
        refused_peers: 0,
        decompression_errors: 0,
        refused_connections: 0,
        links_cut: 0,
        frontend_to_backend: direction(2),
        backend_to_frontend: direction(7),
    };
    std::fs::write(&file, serde_json::to_string(&s).expect("json")).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .args(["tunnel", "stats"])
        .arg(&file)
        .output()
        .expect("pgcompress");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{text}"))
            .to_owned()
    };
    assert!(
        line("frontend->backend").contains("2 method switches"),
        "{text}"
    );
    assert!(
        line("backend->frontend").contains("7 method switches"),
        "{text}"
    );
}
