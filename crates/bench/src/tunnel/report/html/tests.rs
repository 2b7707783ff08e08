use super::super::tests::sample;
use super::*;

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn a_chart_pair_per_workload_and_a_bar_per_measurement() {
    let r = sample();
    let h = r.html();
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(h.contains("id=\"chart-bytes-load\""), "load bytes");
    assert!(h.contains("id=\"chart-wall-load\""), "load wall");
    assert!(h.contains("id=\"chart-bytes-pgbench-s\""), "pgbench bytes");
    // pgbench runs for a fixed time: its second chart is TPS, not wall time.
    assert!(h.contains("id=\"chart-tps-pgbench-s\""), "pgbench tps");
    assert!(!h.contains("id=\"chart-wall-pgbench-s\""));
    // Two charts, each with a bar per measurement.
    assert_eq!(count(&h, "<rect class=\"bar\""), 2 * r.runs.len());
    assert_eq!(count(&h, "<tr class=\"run\""), r.runs.len());
    // The load ran at 50 Mbit/s without ssh -C: "not run" there, in both of its charts.
    assert_eq!(count(&h, "not run<title>ssh -C at 50 Mbit/s: not run"), 2);
    // Rate panels: the load has two, pgbench one.
    assert_eq!(count(&h, ">50 Mbit/s</text>"), 2);
    assert_eq!(count(&h, ">unshaped</text>"), 4);
    assert!(!h.contains("<script") && !h.contains("http://") && !h.contains("https://"));
}

#[test]
fn report_text_is_escaped() {
    let mut r = sample();
    r.machine = "<b>box</b>".into();
    r.command = "pgcompress-bench tunnel --html 'a&b'".into();
    r.runs[0].check = "sha256 \"equal\"".into();
    r.runs.push(super::super::tests::m(
        None,
        "<i>evil</i>",
        "load",
        1.0,
        1,
        1,
    ));
    let h = r.html();
    assert!(h.contains("&lt;b&gt;box&lt;/b&gt;"));
    assert!(h.contains("--html &#39;a&amp;b&#39;"));
    assert!(h.contains("sha256 &quot;equal&quot;"));
    assert!(h.contains("ssh -C skipped at 50 Mbit/s: &lt;sshd&gt; &amp; friends"));
    assert!(h.contains("data-config=\"&lt;i&gt;evil&lt;/i&gt;\""));
    assert!(!h.contains("<b>") && !h.contains("<i>") && !h.contains("<sshd>"));
}

#[test]
fn bars_scale_within_their_panel() {
    let h = sample().html();
    let bytes_chart = &h[h.find("id=\"chart-bytes-load\"").expect("chart")..];
    let bytes_chart = &bytes_chart[..bytes_chart.find("</svg>").expect("end")];
    let widths: Vec<f64> = bytes_chart
        .split("<rect class=\"bar\"")
        .skip(1)
        .map(|b| {
            let w = &b[b.find("width=\"").expect("width") + 7..];
            w[..w.find('"').expect("quote")].parse().expect("number")
        })
        .collect();
    // direct 1.01 GB, zstd:1 303 MB at 50 Mbit/s, then direct, zstd:1, ssh -C unshaped.
    assert_eq!(widths.len(), 5);
    assert!(
        (widths[0] / widths[1] - 1010.0 / 303.0).abs() < 0.01,
        "{widths:?}"
    );
    assert!(
        (widths[3] / widths[4] - 303.0 / 404.0).abs() < 0.01,
        "{widths:?}"
    );
    assert!(widths.iter().all(|w| *w > 1.0 && *w < WIDTH), "{widths:?}");
}

#[test]
fn ticks_drop_precision_zeros() {
    assert_eq!(tick("10.0 s"), "10 s");
    assert_eq!(tick("1.50 GB"), "1.5 GB");
    assert_eq!(tick("500 MB"), "500 MB");
    assert_eq!(tick("5000"), "5000");
    assert_eq!(tick("0.25 s"), "0.25 s");
}

#[test]
fn slugs_are_id_safe() {
    assert_eq!(slug("pgbench-S"), "pgbench-s");
    assert_eq!(slug("copy out \"x\""), "copy-out--x-");
}
