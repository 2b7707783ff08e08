use super::*;

/// One measurement with the numbers that matter to the comparisons.
pub(crate) fn m(
    rate: Option<u64>,
    config: &str,
    workload: &str,
    wall_s: f64,
    c2s: u64,
    s2c: u64,
) -> Measurement {
    Measurement {
        rate_mbit: rate,
        config: config.into(),
        workload: workload.into(),
        wall_s,
        bytes_c2s: c2s,
        bytes_s2c: s2c,
        tps: None,
        latency_ms: None,
        cpu_s: BTreeMap::new(),
        check: "row counts equal".into(),
        zstd1_bytes: None,
        round: 0,
    }
}

/// A small run: two rates, the load at both, pgbench unshaped only, no `ssh -C` at 50 Mbit/s.
pub(crate) fn sample() -> TunnelReport {
    let mut pgb = m(None, "tunnel auto", "pgbench-S", 30.0, 4_000_000, 9_000_000);
    pgb.tps = Some(12_345.6);
    pgb.latency_ms = Some(0.648);
    pgb.cpu_s.insert("tunnel client".into(), 3.25);
    pgb.cpu_s.insert("tunnel server".into(), 4.5);
    let mut pgb_socat = m(None, "socat", "pgbench-S", 30.0, 4_100_000, 9_200_000);
    pgb_socat.tps = Some(12_000.0);
    TunnelReport {
        machine: "2 cores, 4 GiB, Linux 6.1, Test CPU".into(),
        scale: 1.0,
        command: "pgcompress-bench tunnel --rate 50".into(),
        notes: vec!["ssh -C skipped at 50 Mbit/s: <sshd> & friends".into()],
        runs: vec![
            m(Some(50), DIRECT, "load", 200.0, 1_000_000_000, 10_000_000),
            m(
                Some(50),
                "tunnel zstd:1",
                "load",
                50.0,
                300_000_000,
                3_000_000,
            ),
            m(None, DIRECT, "load", 20.0, 1_000_000_000, 10_000_000),
            m(None, "tunnel zstd:1", "load", 16.0, 300_000_000, 3_000_000),
            m(None, SSH_C, "load", 40.0, 400_000_000, 4_000_000),
            pgb,
            pgb_socat,
        ],
    }
}

#[test]
fn ratio_is_how_many_times_fewer_bytes_and_less_time() {
    let r = sample();
    let (b, w) = r
        .ratio(Some(50), "load", "tunnel zstd:1", DIRECT)
        .expect("both measured");
    assert!((b - 1_010_000_000.0 / 303_000_000.0).abs() < 1e-9, "{b}");
    assert!((w - 4.0).abs() < 1e-12, "{w}");
    let (b, w) = r.ratio(None, "load", "tunnel zstd:1", SSH_C).expect("both");
    assert!((b - 404.0 / 303.0).abs() < 1e-9, "{b}");
    assert!((w - 2.5).abs() < 1e-12, "{w}");
    // Against itself: exactly 1.
    assert_eq!(r.ratio(None, "load", DIRECT, DIRECT), Some((1.0, 1.0)));
}

#[test]
fn ratio_is_none_when_either_is_missing() {
    let r = sample();
    assert_eq!(r.ratio(Some(50), "load", "tunnel zstd:1", SSH_C), None);
    assert_eq!(r.ratio(Some(50), "load", SSH_C, DIRECT), None);
    assert_eq!(r.ratio(Some(1000), "load", "tunnel zstd:1", DIRECT), None);
    assert_eq!(r.ratio(None, "dump", "tunnel zstd:1", DIRECT), None);
    let mut z = sample();
    z.runs.push(m(Some(7), "a", "w", 0.0, 10, 10));
    z.runs.push(m(Some(7), "b", "w", 1.0, 0, 0));
    z.runs.push(m(Some(7), "c", "w", 1.0, 10, 10));
    assert_eq!(z.ratio(Some(7), "w", "a", "c"), None, "zero time");
    assert_eq!(z.ratio(Some(7), "w", "b", "c"), None, "zero bytes");
    assert_eq!(z.ratio(Some(7), "w", "c", "b"), Some((0.0, 1.0)));
}

#[test]
fn tps_ratio_against_socat() {
    let r = sample();
    let t = r
        .tps_ratio(None, "pgbench-S", "tunnel auto", SOCAT)
        .expect("both");
    assert!((t - 12_345.6 / 12_000.0).abs() < 1e-12, "{t}");
    assert_eq!(r.tps_ratio(None, "pgbench-S", "tunnel auto", DIRECT), None);
    assert_eq!(r.tps_ratio(None, "load", "tunnel zstd:1", DIRECT), None);
}

#[test]
fn axes_keep_first_seen_order() {
    let r = sample();
    assert_eq!(r.rates(), vec![Some(50), None]);
    assert_eq!(r.workloads(), vec!["load", "pgbench-S"]);
    assert_eq!(
        r.configs(),
        vec![DIRECT, "tunnel zstd:1", SSH_C, "tunnel auto", "socat"]
    );
}

#[test]
fn json_round_trips() {
    let r = sample();
    let j = serde_json::to_string(&r).expect("serialize");
    let back: TunnelReport = serde_json::from_str(&j).expect("parse");
    assert_eq!(back.runs.len(), r.runs.len());
    assert_eq!(back.runs[5].tps, Some(12_345.6));
    assert_eq!(back.runs[5].cpu_s["tunnel server"], 4.5);
    assert_eq!(back.runs[0].rate_mbit, Some(50));
    assert_eq!(back.runs[2].rate_mbit, None);
    assert_eq!(back.notes, r.notes);
}
fn text_of(r: &TunnelReport) -> String {
    let mut out = Vec::new();
    r.text(&mut out).expect("write to a Vec");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn text_has_a_table_per_rate_and_workload() {
    let t = text_of(&sample());
    assert!(
        t.contains("machine: 2 cores, 4 GiB, Linux 6.1, Test CPU"),
        "{t}"
    );
    assert!(
        t.contains("command: pgcompress-bench tunnel --rate 50"),
        "{t}"
    );
    assert!(t.contains("\nload, 50 Mbit/s link\n"), "{t}");
    assert!(t.contains("\nload, unshaped link\n"), "{t}");
    assert!(t.contains("\npgbench-S, unshaped link\n"), "{t}");
    // No pgbench at 50 Mbit/s: no empty table for it.
    assert!(!t.contains("pgbench-S, 50 Mbit/s link"), "{t}");
    // tunnel zstd:1 at 50 Mbit/s: 300 MB + 3.00 MB, 3.33x fewer bytes, 4x faster than direct,
    // no ssh -C to compare with.
    let row = t
        .lines()
        .skip_while(|l| *l != "load, 50 Mbit/s link")
        .find(|l| l.trim_start().starts_with("tunnel zstd:1"))
        .expect("row");
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            "tunnel zstd:1",
            "300 MB",
            "3.00 MB",
            "303 MB",
            "3.33x",
            "-",
            "50.0 s",
            "4.00x",
            "-"
        ],
        "{row}"
    );
    // Unshaped: ssh -C is there, 1.33x the bytes and 2.5x the time of zstd:1.
    let row = t
        .lines()
        .skip_while(|l| *l != "load, unshaped link")
        .find(|l| l.trim_start().starts_with("tunnel zstd:1"))
        .expect("row");
    assert!(
        row.contains("1.33x") && row.contains("2.50x") && row.contains("1.25x"),
        "{row}"
    );
    // The pgbench table has TPS, latency and CPU columns; the load tables have none.
    let pgb: Vec<&str> = t
        .lines()
        .skip_while(|l| *l != "pgbench-S, unshaped link")
        .take(4)
        .collect();
    assert!(
        pgb[1].contains("TPS") && pgb[1].contains("latency") && pgb[1].contains("CPU s"),
        "{pgb:?}"
    );
    assert!(
        pgb[1].contains("TPS vs socat") && pgb[2].contains("1.03x"),
        "{pgb:?}"
    );
    assert!(
        pgb[2].contains("12346") && pgb[2].contains("0.648 ms"),
        "{pgb:?}"
    );
    assert!(
        pgb[2].contains("tunnel client 3.25, tunnel server 4.50"),
        "{pgb:?}"
    );
    assert!(
        pgb[3].contains("socat") && pgb[3].contains("12000"),
        "{pgb:?}"
    );
    let load: Vec<&str> = t
        .lines()
        .skip_while(|l| *l != "load, unshaped link")
        .take(2)
        .collect();
    assert!(
        !load[1].contains("TPS") && !load[1].contains("CPU"),
        "{load:?}"
    );
    assert!(
        t.contains("note: ssh -C skipped at 50 Mbit/s: <sshd> & friends"),
        "{t}"
    );
}

#[test]
fn figures_read_at_a_glance() {
    assert_eq!(bytes(0), "0 B");
    assert_eq!(bytes(999), "999 B");
    assert_eq!(bytes(1_000), "1.00 kB");
    assert_eq!(bytes(12_340_000), "12.3 MB");
    assert_eq!(bytes(3_820_000_000), "3.82 GB");
    assert_eq!(bytes(999_999), "1.00 MB");
    assert_eq!(times(None), "-");
    assert_eq!(times(Some(f64::INFINITY)), "-");
    assert_eq!(times(Some(2.5)), "2.50x");
    assert_eq!(times(Some(250.4)), "250x");
    assert_eq!(secs(0.126), "0.13 s");
    assert_eq!(secs(200.0), "200 s");
    assert_eq!(rate_label(Some(50)), "50 Mbit/s");
    assert_eq!(rate_label(Some(1000)), "1 Gbit/s");
    assert_eq!(rate_label(Some(1500)), "1500 Mbit/s");
    assert_eq!(rate_label(None), "unshaped");
}

/// One pgbench round of `config`: its TPS and the wall time it took.
fn pgbench_round(config: &str, round: u32, tps: f64) -> Measurement {
    let mut r = m(None, config, "pgbench-S", 10.0, 1_000, 1_000);
    r.tps = Some(tps);
    r.round = round;
    r
}

/// Three rounds in which the machine's speed drifted: socat's TPS and the tunnel's move together.
fn drifting() -> TunnelReport {
    let mut r = sample();
    r.runs.clear();
    for (round, socat, tunnel) in [
        (0, 20_000.0, 18_000.0),
        (1, 12_000.0, 13_000.0),
        (2, 22_000.0, 21_000.0),
    ] {
        r.runs.push(pgbench_round("socat", round, socat));
        r.runs.push(pgbench_round("tunnel zstd:1", round, tunnel));
    }
    r
}

#[test]
fn a_configuration_s_row_is_its_median_round() {
    let r = drifting();
    // By TPS: 12,000, 20,000, 22,000 for socat.
    let socat = r.find(None, "pgbench-S", "socat").expect("socat");
    assert_eq!((socat.round, socat.tps), (0, Some(20_000.0)));
    let tunnel = r.find(None, "pgbench-S", "tunnel zstd:1").expect("tunnel");
    assert_eq!((tunnel.round, tunnel.tps), (0, Some(18_000.0)));
    // By wall time where pgbench did not run; of two, the faster.
    let mut r = sample();
    r.runs.clear();
    for (round, wall) in [(0, 9.0), (1, 7.0), (2, 8.0), (3, 30.0)] {
        let mut l = m(Some(50), "tunnel auto", "load", wall, 10, 10);
        l.round = round;
        r.runs.push(l);
    }
    let load = r.find(Some(50), "load", "tunnel auto").expect("load");
    assert_eq!((load.round, load.wall_s), (2, 8.0));
}

#[test]
fn tps_against_socat_pairs_the_rounds() {
    let r = drifting();
    let ratios = r.tps_ratios(None, "pgbench-S", "tunnel zstd:1", SOCAT);
    let want = [0.9, 13.0 / 12.0, 21.0 / 22.0];
    assert_eq!(ratios.len(), 3);
    for (got, want) in ratios.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{ratios:?}");
    }
    // The median of the pairs (0.95), not the ratio of the medians (18,000 / 20,000 = 0.90).
    let median = r
        .tps_ratio(None, "pgbench-S", "tunnel zstd:1", SOCAT)
        .expect("ratio");
    assert!((median - 21.0 / 22.0).abs() < 1e-9, "{median}");
    let t = text_of(&r);
    let row = t
        .lines()
        .find(|l| l.trim_start().starts_with("tunnel zstd:1"))
        .expect("tunnel row");
    assert!(row.contains("0.95x (0.90-1.08)"), "{row}");
    let socat = t
        .lines()
        .find(|l| l.trim_start().starts_with("socat"))
        .expect("socat row");
    assert!(
        socat.contains("1.00x") && !socat.contains("(1.00"),
        "{socat}"
    );
    // Two rounds: the mean of the middle pair.
    let mut two = r.clone();
    two.runs.retain(|m| m.round < 2);
    let median = two
        .tps_ratio(None, "pgbench-S", "tunnel zstd:1", SOCAT)
        .expect("ratio");
    assert!(
        (median - (0.9 + 13.0 / 12.0) / 2.0).abs() < 1e-9,
        "{median}"
    );
}

#[test]
fn a_round_missing_its_socat_pair_is_left_out() {
    let mut r = drifting();
    r.runs.retain(|m| !(m.config == "socat" && m.round == 1));
    assert_eq!(
        r.tps_ratios(None, "pgbench-S", "tunnel zstd:1", SOCAT)
            .len(),
        2
    );
}
