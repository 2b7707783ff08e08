//! `bench tunnel --html`: one self-contained page (no scripts, fonts or images from anywhere) with, per
//! workload, a chart of the bytes each configuration put on the link and a chart of its wall time (TPS for
//! pgbench), one panel per link rate; then every measurement in a table, and the machine, command and
//! notes. Drawn as inline SVG here, deterministically, as the advisor's report is (crates/advise/src/html.rs).
//!
//! What a browser test can count: per workload `svg#chart-bytes-<workload>` and `svg#chart-wall-<workload>`
//! (or `svg#chart-tps-<workload>`), one `rect.bar` per measurement in each; `table#measurements` with one
//! `tr.run` per measurement.

use super::{
    bytes, cpu_list, heading, rate_label, secs, times, Measurement, TunnelReport, DIRECT, SOCAT,
    SSH_C,
};
use advise::html::{esc, nice_step};
use std::fmt::Write as _;

/// Width of every chart, in SVG user units (CSS pixels).
const WIDTH: f64 = 960.0;
/// Left margin of the charts: the configuration names.
const LABELS: f64 = 118.0;
/// Space kept right of each panel's bars for the value written after them.
const VALUE_ROOM: f64 = 62.0;
/// Gap between two rate panels.
const GAP: f64 = 18.0;
/// Height of one configuration's row.
const ROW: f64 = 20.0;

/// The colour of a configuration: grey for the baselines, blues for the tunnel's fixed methods (darker is
/// harder compression), green for `auto`, orange for `ssh -C`.
pub(crate) fn colour(config: &str) -> &'static str {
    match config {
        DIRECT => "#6e6e73",
        SOCAT => "#a1a1a6",
        "tunnel none" => "#9ec1f0",
        "tunnel lz4" => "#5b8fd9",
        "tunnel zstd:1" => "#1f5fbf",
        "tunnel zstd:3" => "#163f80",
        "tunnel auto" => "#12805c",
        SSH_C => "#e07b00",
        _ => "#7a4fbf",
    }
}

/// An id-safe form of a workload's name: lowercase letters, digits and `-`.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Renders the page for `r`; every text from the report is HTML-escaped.
pub(super) fn render(r: &TunnelReport) -> String {
    let title = format!(
        "pgcompress-bench tunnel: TPC-H scale {}",
        super::num(r.scale)
    );
    let mut h = String::with_capacity(64 << 10);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(h, "<title>{}</title>", esc(&title));
    h.push_str(CSS);
    h.push_str("</head>\n<body>\n");
    let _ = writeln!(h, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(
        h,
        "<p class=\"summary\">Machine: {}</p>\n<p class=\"summary\">Command: <code>{}</code></p>",
        esc(&r.machine),
        esc(&r.command)
    );
    h.push_str(&legend(r));
    let configs = r.configs();
    let rates = r.rates();
    let mut ids: Vec<String> = Vec::new();
    for (k, workload) in r.workloads().into_iter().enumerate() {
        let mut id = slug(workload);
        if ids.contains(&id) {
            id = format!("{id}-{k}");
        }
        ids.push(id.clone());
        let runs: Vec<&Measurement> = r.runs.iter().filter(|m| m.workload == workload).collect();
        let rates: Vec<Option<u64>> = rates
            .iter()
            .copied()
            .filter(|rate| runs.iter().any(|m| m.rate_mbit == *rate))
            .collect();
        let configs: Vec<&str> = configs
            .iter()
            .copied()
            .filter(|c| runs.iter().any(|m| m.config == *c))
            .collect();
        let chart = Chart {
            report: r,
            workload,
            rates: &rates,
            configs: &configs,
        };
        let _ = writeln!(h, "<h2>{}</h2>", esc(workload));
        h.push_str(&chart.draw(
            &format!("chart-bytes-{id}"),
            &format!("Bytes on the link, both directions: {workload}"),
            "bytes on the link, both directions; fewer is better",
            &|m| Some(m.bytes_total() as f64),
            &|v| bytes(v.round() as u64),
            &|m| {
                format!(
                    "{} c\u{2192}s + {} s\u{2192}c; {} fewer than direct, {} fewer than ssh -C",
                    bytes(m.bytes_c2s),
                    bytes(m.bytes_s2c),
                    times(
                        r.ratio(m.rate_mbit, workload, &m.config, DIRECT)
                            .map(|x| x.0)
                    ),
                    times(
                        r.ratio(m.rate_mbit, workload, &m.config, SSH_C)
                            .map(|x| x.0)
                    ),
                )
            },
        ));
        if runs.iter().any(|m| m.tps.is_some()) {
            h.push_str(&chart.draw(
                &format!("chart-tps-{id}"),
                &format!("Transactions per second: {workload}"),
                "transactions per second; more is better",
                &|m| m.tps,
                &|v| format!("{v:.0}"),
                &|m| {
                    let vs = times(r.tps_ratio(m.rate_mbit, workload, &m.config, SOCAT));
                    let lat = m
                        .latency_ms
                        .map_or(String::new(), |l| format!(", {l:.3} ms average latency"));
                    format!("{vs} socat's TPS{lat}")
                },
            ));
        } else {
            h.push_str(&chart.draw(
                &format!("chart-wall-{id}"),
                &format!("Wall time: {workload}"),
                "wall time; less is better",
                &|m| Some(m.wall_s),
                &secs,
                &|m| {
                    format!(
                        "{} faster than direct, {} faster than ssh -C",
                        times(
                            r.ratio(m.rate_mbit, workload, &m.config, DIRECT)
                                .map(|x| x.1)
                        ),
                        times(
                            r.ratio(m.rate_mbit, workload, &m.config, SSH_C)
                                .map(|x| x.1)
                        ),
                    )
                },
            ));
        }
    }
    h.push_str("<h2>All measurements</h2>\n");
    h.push_str(&table(r));
    h.push_str(
        "<p class=\"note\">Bytes are the veth interface's kernel counters, client namespace to server \
         namespace (c\u{2192}s) and back (s\u{2192}c). <em>Fewer</em> and <em>faster</em> are how many \
         times: the other configuration's bytes (both directions) or wall time divided by this row's; above \
         1 is better. CPU is user + system seconds per process.</p>\n",
    );
    if !r.notes.is_empty() {
        h.push_str("<h2>Notes</h2>\n<ul class=\"notes\">\n");
        for n in &r.notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The colour key: one swatch per configuration measured.
fn legend(r: &TunnelReport) -> String {
    let mut o = String::from("<p class=\"legend\">");
    for c in r.configs() {
        let _ = write!(
            o,
            "<span class=\"key\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            colour(c),
            esc(c)
        );
    }
    o.push_str("</p>\n");
    o
}

/// One workload's measurements, laid out as a chart: configurations down, one panel per rate across.
struct Chart<'a> {
    report: &'a TunnelReport,
    workload: &'a str,
    rates: &'a [Option<u64>],
    configs: &'a [&'a str],
}

impl Chart<'_> {
    /// Draws the chart of `value`, each panel with its own scale (a 50 Mbit/s load and an unshaped one
    /// differ by orders of magnitude); bars are labelled with `fmt` and carry `detail` as their tooltip.
    #[allow(clippy::too_many_arguments)]
    fn draw(
        &self,
        id: &str,
        aria: &str,
        axis: &str,
        value: &dyn Fn(&Measurement) -> Option<f64>,
        fmt: &dyn Fn(f64) -> String,
        detail: &dyn Fn(&Measurement) -> String,
    ) -> String {
        let n = self.rates.len().max(1) as f64;
        let (mt, mb) = (26.0, 40.0);
        let pw = (WIDTH - LABELS - 8.0 - GAP * (n - 1.0)) / n;
        let bw = (pw - VALUE_ROOM).max(20.0);
        let ph = ROW * self.configs.len().max(1) as f64;
        let h = mt + ph + mb;
        let bottom = mt + ph;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "<svg id=\"{}\" class=\"chart\" width=\"{WIDTH}\" height=\"{h}\" viewBox=\"0 0 {WIDTH} {h}\" \
             role=\"img\" aria-label=\"{}\">",
            esc(id),
            esc(aria)
        );
        for (k, c) in self.configs.iter().enumerate() {
            let y = mt + k as f64 * ROW + ROW / 2.0 + 4.0;
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{y:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
                LABELS - 8.0,
                esc(c)
            );
        }
        for (p, &rate) in self.rates.iter().enumerate() {
            let x0 = LABELS + p as f64 * (pw + GAP);
            let runs: Vec<(usize, &Measurement, Option<f64>)> = self
                .configs
                .iter()
                .enumerate()
                .filter_map(|(k, c)| {
                    self.report
                        .find(rate, self.workload, c)
                        .map(|m| (k, m, value(m).filter(|v| v.is_finite() && *v >= 0.0)))
                })
                .collect();
            let max = runs
                .iter()
                .filter_map(|r| r.2)
                .fold(0f64, f64::max)
                .max(f64::MIN_POSITIVE);
            let step = nice_step(max, 3.0);
            let top = ((max / step).ceil() * step).max(step);
            let x_of = |v: f64| x0 + v / top * bw;
            let _ = writeln!(
                o,
                "<rect x=\"{x0:.1}\" y=\"{mt}\" width=\"{bw:.1}\" height=\"{ph}\" fill=\"#fafafa\" stroke=\"#ddd\"/>\
                 <text class=\"rate\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"600\" \
                 text-anchor=\"middle\">{}</text>",
                x0 + bw / 2.0,
                mt - 9.0,
                esc(&rate_label(rate))
            );
            let mut v = 0.0;
            while v <= top + step / 2.0 {
                let x = x_of(v);
                let _ = writeln!(
                    o,
                    "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{mt}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e3e3\"/>\
                     <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\" text-anchor=\"middle\">{}</text>",
                    bottom + 4.0,
                    bottom + 16.0,
                    esc(&if v == 0.0 { "0".into() } else { tick(&fmt(v)) })
                );
                v += step;
            }
            for (k, m, val) in &runs {
                let y = mt + *k as f64 * ROW + 3.0;
                let tip = format!(
                    "{} at {}: {}",
                    m.config,
                    rate_label(rate),
                    [val.map_or("not measured".into(), fmt), detail(m)]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                match val {
                    Some(v) => {
                        let w = (x_of(*v) - x0).max(1.0);
                        let _ = writeln!(
                            o,
                            "<rect class=\"bar\" data-config=\"{}\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" \
                             height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>\
                             <text class=\"value\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#333\">{}</text>",
                            esc(&m.config),
                            ROW - 6.0,
                            colour(&m.config),
                            esc(&tip),
                            x0 + w + 4.0,
                            y + ROW / 2.0 + 1.0,
                            esc(&fmt(*v))
                        );
                    }
                    None => {
                        let _ = writeln!(
                            o,
                            "<text class=\"missing\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#888\">\
                             not measured<title>{}</title></text>",
                            x0 + 4.0,
                            y + ROW / 2.0 + 1.0,
                            esc(&tip)
                        );
                    }
                }
            }
            for (k, c) in self.configs.iter().enumerate() {
                if !runs.iter().any(|r| r.0 == k) {
                    let _ = writeln!(
                        o,
                        "<text class=\"missing\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#888\">\
                         not run<title>{} at {}: not run</title></text>",
                        x0 + 4.0,
                        mt + k as f64 * ROW + ROW / 2.0 + 4.0,
                        esc(c),
                        esc(&rate_label(rate))
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n</svg>",
            LABELS + (WIDTH - LABELS) / 2.0,
            h - 6.0,
            esc(axis)
        );
        o
    }
}

/// A tick label without the zeros that only say how precise a measured value is: `10.0 s` is `10 s`,
/// `1.50 GB` is `1.5 GB`.
fn tick(label: &str) -> String {
    let (num, unit) = label.split_once(' ').unwrap_or((label, ""));
    let num = if num.contains('.') {
        num.trim_end_matches('0').trim_end_matches('.')
    } else {
        num
    };
    if unit.is_empty() {
        num.to_string()
    } else {
        format!("{num} {unit}")
    }
}

/// Every measurement, grouped as the text report groups them.
fn table(r: &TunnelReport) -> String {
    let mut o = String::from(
        "<div class=\"wide\"><table id=\"measurements\">\n<thead><tr><th>rate</th><th>workload</th><th>config</th>\
         <th>c\u{2192}s</th><th>s\u{2192}c</th><th>total</th><th>fewer vs direct</th>\
         <th>fewer vs ssh -C</th><th>wall</th><th>faster vs direct</th><th>faster vs ssh -C</th>\
         <th>TPS</th><th>latency</th><th>CPU s</th><th>check</th></tr></thead>\n<tbody>\n",
    );
    let configs = r.configs();
    for rate in r.rates() {
        for workload in r.workloads() {
            for c in &configs {
                let Some(m) = r.find(rate, workload, c) else {
                    continue;
                };
                let d = r.ratio(rate, workload, c, DIRECT);
                let s = r.ratio(rate, workload, c, SSH_C);
                let _ = writeln!(
                    o,
                    "<tr class=\"run\" title=\"{}\"><td>{}</td><td>{}</td><td><span class=\"swatch\" \
                     style=\"background:{}\"></span>{}</td><td title=\"{} bytes\">{}</td>\
                     <td title=\"{} bytes\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                     <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&heading(rate, workload)),
                    esc(&rate_label(rate)),
                    esc(workload),
                    colour(c),
                    esc(c),
                    m.bytes_c2s,
                    bytes(m.bytes_c2s),
                    m.bytes_s2c,
                    bytes(m.bytes_s2c),
                    bytes(m.bytes_total()),
                    times(d.map(|x| x.0)),
                    times(s.map(|x| x.0)),
                    secs(m.wall_s),
                    times(d.map(|x| x.1)),
                    times(s.map(|x| x.1)),
                    m.tps.map_or("-".into(), |v| format!("{v:.0}")),
                    m.latency_ms.map_or("-".into(), |v| format!("{v:.3} ms")),
                    esc(&cpu_list(&m.cpu_s)),
                    esc(&m.check)
                );
            }
        }
    }
    o.push_str("</tbody>\n</table></div>\n");
    o
}

const CSS: &str = "<style>
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:24px auto;max-width:1000px;color:#1d1d1f;background:#fff;padding:0 16px}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.summary,.note{color:#555;font-size:13px;margin:4px 0}
.legend{font-size:13px;margin:12px 0}
.key{margin-right:14px;white-space:nowrap}
.swatch{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}
code{font-family:'DejaVu Sans Mono',monospace;font-size:12px}
svg{display:block;margin:8px 0}
svg text{font-family:system-ui,'DejaVu Sans',sans-serif}
.wide{overflow-x:auto}
table{border-collapse:collapse;font-size:11px;width:100%}
th,td{padding:3px 6px;border-bottom:1px solid #e5e5e5;text-align:right;white-space:nowrap}
th{background:#f5f5f7}
td:nth-child(-n+3),th:nth-child(-n+3),td:nth-last-child(-n+2),th:nth-last-child(-n+2){text-align:left}
td:nth-last-child(-n+2){white-space:normal;min-width:150px}
ul.notes{font-size:13px;color:#333}
</style>
";

#[cfg(test)]
mod tests;
