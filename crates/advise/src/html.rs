//! The `wal advise --html` report: one self-contained HTML file (no scripts, fonts
//! or images loaded from anywhere) with the recommendation, two charts drawn as
//! inline SVG, and the full table.
//!
//! Charts are generated here, deterministically, so that the same advice always
//! gives the same bytes and the report needs no JavaScript:
//! - `#chart-saving-vs-cpu`: WAL bytes saved against compression CPU per MB of page
//!   data, one `circle.point` (stock) or `rect.point` (not stock) per candidate;
//! - `#chart-wal-bytes`: predicted WAL bytes per candidate, fewest first, one
//!   `rect.bar` per candidate.

mod place;

use crate::advice::{Advice, CandidateAdvice};
use codec::Method;
use place::Box2;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// What the report says about where the advice came from, besides the advice.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// The WAL read, as the user named it (paths, joined by spaces).
    pub inputs: String,
    /// The program that wrote the report, e.g. `pgcompress 0.1.0`.
    pub generator: String,
}

/// Colour of stock candidates (what `wal_compression` can write today).
const STOCK: &str = "#1f5fbf";
/// Colour of candidates stock PostgreSQL cannot write.
const OTHER: &str = "#e07b00";
/// Width of both charts, in SVG user units (CSS pixels).
const WIDTH: f64 = 960.0;

/// Renders the report for `a`. Text from the advice and `meta` is HTML-escaped.
pub fn render(a: &Advice, meta: &Meta) -> String {
    let title = format!(
        "WAL compression advice: PostgreSQL {} WAL {} to {}",
        a.pg_version, a.start_lsn, a.end_lsn
    );
    let rec = crate::recommend(a).map(|r| r.sentence(a));
    let mut h = String::with_capacity(64 << 10);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(h, "<title>{}</title>", esc(&title));
    h.push_str(CSS);
    h.push_str("</head>\n<body>\n");
    let _ = writeln!(h, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(h, "<p class=\"summary\">{}</p>", esc(&summary(a)));
    if !meta.inputs.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"inputs\">Read: <code>{}</code></p>",
            esc(&meta.inputs)
        );
    }
    match &rec {
        Some(s) => {
            let _ = writeln!(h, "<p class=\"recommendation\">{}</p>", esc(s));
        }
        None => h.push_str(
            "<p class=\"recommendation\">No recommendation: no stock candidate was measured.</p>\n",
        ),
    }
    h.push_str("<h2>WAL bytes saved against compression CPU</h2>\n");
    h.push_str(
        "<p class=\"note\">Up is smaller WAL, left is cheaper CPU. Each candidate once; \
         blue circles are what <code>wal_compression</code> can write today, orange squares \
         what stock PostgreSQL cannot; whiskers are the 99.9% interval of sampled candidates.</p>\n",
    );
    h.push_str(&scatter(a));
    h.push_str("<h2>Predicted WAL bytes</h2>\n");
    h.push_str(&bars(a));
    h.push_str("<h2>All candidates</h2>\n");
    h.push_str(&table(a));
    let _ = writeln!(
        h,
        "<p class=\"note\">Saving = fewer WAL bytes ({}). MB/s per core of page data \
         (10<sup>6</sup> B); liblz4 {}, libzstd {}; {} threads, {:.1} s.{}</p>",
        esc(crate::advice::WAL_BYTES_MEANING),
        esc(&a.lz4_version),
        esc(&a.zstd_version),
        a.threads,
        a.elapsed.as_secs_f64(),
        if meta.generator.is_empty() {
            String::new()
        } else {
            format!(" Written by {}.", esc(&meta.generator))
        }
    );
    h.push_str("</body>\n</html>\n");
    h
}

/// Writes `html` to `path` through a temporary file in the same directory, renamed
/// into place: `path` is either the old file or the whole new one, never a part.
pub fn write_file(path: &Path, html: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(html.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const CSS: &str = "<style>
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:24px auto;max-width:1000px;color:#1d1d1f;background:#fff;padding:0 16px}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.summary,.inputs,.note{color:#555;font-size:13px;margin:4px 0}
.recommendation{font-size:16px;background:#eef4ff;border-left:4px solid #1f5fbf;padding:10px 14px;margin:14px 0}
code{font-family:'DejaVu Sans Mono',monospace;font-size:12px}
svg{display:block;margin:8px 0}
svg text{font-family:system-ui,'DejaVu Sans',sans-serif;fill:#1d1d1f}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #e5e5e5;text-align:right;white-space:nowrap}
th{background:#f5f5f7}
td:nth-child(2),th:nth-child(2),td:nth-child(3),th:nth-child(3),td:last-child,th:last-child{text-align:left}
tr.stock td:nth-child(2){color:#1f5fbf;font-weight:600}
rect.bar.estimate{fill-opacity:0.35}
tr.recommended td{background:#eef4ff}
</style>
";

fn summary(a: &Advice) -> String {
    let stored: Vec<String> = wal::ImageMethod::ALL
        .iter()
        .filter(|m| a.images_by_method[m.index()] > 0)
        .map(|m| format!("{} {}", a.images_by_method[m.index()], m.name()))
        .collect();
    format!(
        "{} segment(s), {} records, {} full-page images ({}) of {} page data. \
         Actual: FPI {} bytes, combined {} bytes, WAL {} bytes ({}; {} of unused segment space \
         after switches left out).",
        a.segments,
        a.records,
        a.images,
        if stored.is_empty() {
            "none".into()
        } else {
            stored.join(", ")
        },
        crate::fmt::bytes(a.image_page_bytes),
        a.actual_fpi_bytes,
        a.actual_combined_bytes,
        a.actual_wal_bytes,
        crate::fmt::bytes(a.actual_wal_bytes),
        crate::fmt::bytes(a.switch_tail_bytes)
    )
}

/// The WAL bytes savings are measured against: `off`'s prediction when it is a
/// candidate, else what was written.
fn reference(a: &Advice) -> (u64, &'static str) {
    a.candidates
        .iter()
        .find(|c| c.spec.method == Method::None)
        .map_or((a.actual_wal_bytes, "actual"), |c| {
            (c.predicted_wal_bytes, "off")
        })
}

fn mb_per_s(ns_per_mb: f64) -> String {
    if ns_per_mb <= 0.0 {
        "-".into()
    } else {
        format!("{:.0}", 1e9 / ns_per_mb)
    }
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `range` (a chart axis's span in
/// its own unit); a range at or below zero gives a tiny positive step (about 1e-9), never zero or NaN.
pub fn nice_step(range: f64, n: f64) -> f64 {
    let raw = (range / n).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A number for a tick label: no trailing zeros, at most 3 decimals.
fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Approximate width in pixels of `s` at `size` px in a sans-serif font.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

/// The scatter chart: y = % of WAL bytes saved against the reference, x = CPU ms of
/// compression per MB of page data on a log scale; candidates that cost nothing
/// (`off`) sit on a separate "0" column at the left.
fn scatter(a: &Advice) -> String {
    let (ref_bytes, ref_name) = reference(a);
    let (h, ml, mr, mt, mb) = (500.0, 78.0, 24.0, 16.0, 64.0);
    let (pw, ph) = (WIDTH - ml - mr, h - mt - mb);
    let ms = |c: &CandidateAdvice| c.compress_ns_per_mb / 1e6;
    let costs: Vec<f64> = a.candidates.iter().map(ms).filter(|&m| m > 0.0).collect();
    let (mut lo, mut hi) = costs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &m| {
            (l.min(m), h.max(m))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.1, 10.0);
    }
    let dlo = lo.log10().floor();
    let mut dhi = hi.log10().ceil();
    if dhi <= dlo {
        dhi = dlo + 1.0;
    }
    // x: a 64-px column for cost 0, then the log axis.
    let zero_col = 64.0;
    let x_of = |m: f64| {
        if m <= 0.0 {
            ml + zero_col / 2.0
        } else {
            ml + zero_col + (m.log10() - dlo) / (dhi - dlo) * (pw - zero_col - 40.0) + 28.0
        }
    };
    let sav = |c: &CandidateAdvice| crate::fmt::saving(ref_bytes, c.predicted_wal_bytes as f64);
    // Whiskers: the FPI interval moves WAL bytes one for one.
    // None for an interval too wide to rank: it would stretch the axis and say nothing.
    let whisker = |c: &CandidateAdvice| match (c.ci_low, c.ci_high) {
        (Some(l), Some(hh)) if c.sampled && crate::rank::informative(c) => {
            let w = c.predicted_wal_bytes as f64;
            let d_lo = c.predicted_fpi_bytes as f64 - l as f64;
            let d_hi = hh as f64 - c.predicted_fpi_bytes as f64;
            Some((
                crate::fmt::saving(ref_bytes, w + d_hi),
                crate::fmt::saving(ref_bytes, w - d_lo),
            ))
        }
        _ => None,
    };
    // Compressing candidates usually sit far above `off`: then the axis is broken,
    // their range fills the plot and `off` gets a strip of its own at the bottom.
    let (mut cmin, mut cmax) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut has_off = false;
    for c in &a.candidates {
        if c.spec.method == Method::None {
            has_off = true;
            continue;
        }
        let (l, hh) = whisker(c).unwrap_or((sav(c), sav(c)));
        cmin = cmin.min(l.min(sav(c)));
        cmax = cmax.max(hh.max(sav(c)));
    }
    let zoom = has_off && cmin.is_finite() && cmin > 2.0 && cmin > cmax - cmin;
    let (mut ymin, mut ymax) = if zoom { (cmin, cmax) } else { (0f64, 0f64) };
    if !zoom {
        for c in &a.candidates {
            let (l, hh) = whisker(c).unwrap_or((sav(c), sav(c)));
            ymin = ymin.min(l.min(sav(c)));
            ymax = ymax.max(hh.max(sav(c)));
        }
    }
    if ymax - ymin < 1.0 {
        ymax = ymin + 1.0;
    }
    let step = nice_step(ymax - ymin, 6.0);
    let y0 = (ymin / step).floor() * step;
    let y1 = (ymax / step).ceil() * step;
    let strip = if zoom { 44.0 } else { 0.0 };
    let y_of = |s: f64| {
        if zoom && s < y0 - step / 2.0 {
            mt + ph - strip / 2.0
        } else {
            mt + ph - strip - (s - y0) / (y1 - y0) * (ph - strip)
        }
    };

    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg id=\"chart-saving-vs-cpu\" width=\"{WIDTH}\" height=\"{h}\" \
         viewBox=\"0 0 {WIDTH} {h}\" role=\"img\" aria-label=\"WAL bytes saved against compression CPU per MB\">"
    );
    let _ = writeln!(
        o,
        "<rect x=\"{ml}\" y=\"{mt}\" width=\"{pw}\" height=\"{ph}\" fill=\"#fafafa\" stroke=\"#ccc\"/>"
    );
    // y grid and ticks.
    let mut v = y0;
    while v <= y1 + step / 2.0 {
        let y = y_of(v);
        let _ = writeln!(
            o,
            "<line class=\"grid\" x1=\"{ml}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}%</text>",
            ml + pw,
            if v.abs() < step / 1e6 { "#888" } else { "#e3e3e3" },
            ml - 6.0,
            y + 4.0,
            tick(v)
        );
        v += step;
    }
    if zoom {
        // The break: the strip below holds `off` alone, at 0 %.
        let yb = mt + ph - strip;
        let y = y_of(0.0);
        let _ = writeln!(
            o,
            "<rect x=\"{ml}\" y=\"{:.1}\" width=\"{pw}\" height=\"6\" fill=\"#fff\"/>\
             <path d=\"M{:.1} {:.1}l10 -6M{:.1} {:.1}l10 -6\" stroke=\"#888\"/>\
             <line class=\"grid\" x1=\"{ml}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#888\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">0%</text>",
            yb - 8.0,
            ml - 5.0,
            yb - 2.0,
            ml - 5.0,
            yb + 4.0,
            ml + pw,
            ml - 6.0,
            y + 4.0
        );
    }
    // x ticks: decades, labelled in ms/MB and MB/s.
    let bottom = mt + ph;
    let _ = writeln!(
        o,
        "<line x1=\"{:.1}\" y1=\"{mt}\" x2=\"{:.1}\" y2=\"{bottom}\" stroke=\"#ccc\" stroke-dasharray=\"3 3\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">0</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#666\" text-anchor=\"middle\">(off)</text>",
        ml + zero_col,
        ml + zero_col,
        ml + zero_col / 2.0,
        bottom + 16.0,
        ml + zero_col / 2.0,
        bottom + 29.0
    );
    let mut d = dlo;
    while d <= dhi + 0.5 {
        let m = 10f64.powf(d);
        let x = x_of(m);
        let _ = writeln!(
            o,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{mt}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#e3e3e3\"/>\
             <line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#888\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{} ms</text>\
             <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#666\" text-anchor=\"middle\">{} MB/s</text>",
            bottom + 5.0,
            bottom + 16.0,
            tick(m),
            bottom + 29.0,
            tick(1000.0 / m)
        );
        // Minor ticks at 2..9 × 10^d.
        if d < dhi - 0.5 {
            for k in 2..10 {
                let x = x_of(m * k as f64);
                let _ = write!(
                    o,
                    "<line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#aaa\"/>",
                    bottom + 3.0
                );
            }
            o.push('\n');
        }
        d += 1.0;
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\">compression CPU per MB of page data \
         (ms per MB, log scale; MB/s per core below) \u{2192} slower</text>",
        ml + pw / 2.0,
        h - 8.0
    );
    let _ = writeln!(
        o,
        "<text transform=\"translate(16 {:.1}) rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">\
         WAL bytes saved vs {ref_name} (%) \u{2192} smaller WAL</text>",
        mt + ph / 2.0
    );
    // Points, stock last so they are drawn on top; labels placed to avoid overlaps.
    let recommended = crate::recommend(a);
    let mut order: Vec<usize> = (0..a.candidates.len()).collect();
    order.sort_by_key(|&i| a.candidates[i].stock);
    let pos: Vec<(f64, f64)> = a
        .candidates
        .iter()
        .map(|c| (x_of(ms(c)), y_of(sav(c))))
        .collect();
    // Points first claim their own space, so labels and whiskers do not cover them.
    let markers: Vec<Box2> = pos
        .iter()
        .map(|&(x, y)| (x - 6.0, y - 6.0, x + 6.0, y + 6.0))
        .collect();
    let mut boxes = markers.clone();
    boxes.push(legend(&mut o, ml + pw, bottom));
    let whiskers: Vec<Option<(f64, f64, f64)>> = a
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (l, hh) = whisker(c)?;
            let (ya, yb) = (y_of(l), y_of(hh));
            let wx = place::whisker_x(i, pos[i].0, ya, yb, &markers)?;
            boxes.push((wx - place::CAP, ya.min(yb), wx + place::CAP, ya.max(yb)));
            Some((wx, ya, yb))
        })
        .collect();
    let area = (ml, mt, ml + pw, bottom);
    let mut labels = String::new();
    for &i in &order {
        let c = &a.candidates[i];
        let (x, y) = pos[i];
        let spec = esc(&c.spec.to_string());
        let col = if c.stock { STOCK } else { OTHER };
        if let Some((wx, ya, yb)) = whiskers[i] {
            // Beside its point, a short line joins them.
            let join = if wx == x {
                String::new()
            } else {
                format!("M{x:.1} {y:.1}H{wx:.1}")
            };
            let _ = writeln!(
                o,
                "<path class=\"whisker\" data-spec=\"{spec}\" d=\"M{wx:.1} {ya:.1}V{yb:.1}M{:.1} {ya:.1}H{:.1}M{:.1} {yb:.1}H{:.1}{join}\" \
                 stroke=\"{col}\" fill=\"none\"/>",
                wx - place::CAP,
                wx + place::CAP,
                wx - place::CAP,
                wx + place::CAP
            );
        }
        let ranked = crate::rank::informative(c);
        let tip = format!(
            "{}: {} WAL bytes ({:.1}% saved vs {ref_name}), {} MB/s compression, {} MB/s decompression{}",
            c.spec,
            c.predicted_wal_bytes,
            sav(c),
            mb_per_s(c.compress_ns_per_mb),
            mb_per_s(c.decompress_ns_per_mb),
            match (c.sampled, ranked) {
                (false, _) => String::new(),
                (true, true) => format!(", sampled: {}", crate::fmt::interval(c)),
                (true, false) => format!(", {}", crate::rank::unranked_note(c, a.images)),
            }
        );
        if recommended.as_ref().is_some_and(|r| r.stock == i) {
            let _ = writeln!(
                o,
                "<circle class=\"recommended\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"10\" fill=\"none\" stroke=\"{STOCK}\" stroke-width=\"2\"/>"
            );
        }
        if c.stock {
            let _ = writeln!(
                o,
                "<circle class=\"point stock\" data-spec=\"{spec}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5.5\" fill=\"{STOCK}\" stroke=\"#fff\">\
                 <title>{}</title></circle>",
                esc(&tip)
            );
        } else {
            // An estimate too uncertain to rank is hollow: a place, not a figure.
            let (class, fill, stroke) = if ranked {
                ("point other", OTHER, "#fff")
            } else {
                ("point other estimate", "#fff", OTHER)
            };
            let _ = writeln!(
                o,
                "<rect class=\"{class}\" data-spec=\"{spec}\" x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\" fill=\"{fill}\" \
                 stroke=\"{stroke}\"><title>{}</title></rect>",
                x - 4.5,
                y - 4.5,
                esc(&tip)
            );
        }
        let text = c.spec.to_string();
        let (size, tw, th) = (12.0, text_width(&text, 12.0), 12.0);
        let Some((lx, ly)) = place::label_spot(x, y, tw, th, area, &boxes) else {
            // No room left anywhere near: the tooltip and the table still name it.
            continue;
        };
        let b = place::text_box(lx, ly, tw, th);
        boxes.push(b);
        // Far from its point: a leader line to the label's nearest edge.
        let (nx, ny) = (x.clamp(b.0, b.2), y.clamp(b.1, b.3));
        if (nx - x).hypot(ny - y) > 14.0 {
            let _ = writeln!(
                o,
                "<line class=\"leader\" x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{nx:.1}\" y2=\"{ny:.1}\" stroke=\"#999\" stroke-width=\"0.8\"/>"
            );
        }
        let _ = writeln!(
            labels,
            "<text class=\"label\" x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"{size}\"{}>{}</text>",
            if c.stock { " font-weight=\"600\"" } else { "" },
            esc(&text)
        );
    }
    o.push_str(&labels);
    o.push_str("</svg>\n");
    o
}

/// The legend, one row at the bottom right of the plot (markers without the point
/// class); returns its box for label placement.
fn legend(o: &mut String, right: f64, bottom: f64) -> (f64, f64, f64, f64) {
    let (w, h) = (400.0, 22.0);
    let (x, y) = (right - w - 6.0, bottom - h - 6.0);
    let _ = writeln!(
        o,
        "<g class=\"legend\"><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w}\" height=\"{h}\" fill=\"#fff\" stroke=\"#ddd\"/>\
         <circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5.5\" fill=\"{STOCK}\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">stock (wal_compression today)</text>\
         <rect x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\" fill=\"{OTHER}\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">not in stock PostgreSQL</text></g>",
        x + 12.0,
        y + 11.0,
        x + 22.0,
        y + 15.0,
        x + 222.0,
        y + 6.5,
        x + 236.0,
        y + 15.0
    );
    (x, y, x + w, y + h)
}

/// The bar chart: predicted WAL bytes per candidate, fewest first, with the actual
/// WAL bytes as a dashed line.
fn bars(a: &Advice) -> String {
    let (ref_bytes, ref_name) = reference(a);
    let rows: Vec<&CandidateAdvice> = crate::rank::ranking(a)
        .iter()
        .map(|p| p.candidate)
        .collect();
    let (ml, mr, mt, row) = (110.0, 200.0, 10.0, 22.0);
    let pw = WIDTH - ml - mr;
    let ph = row * rows.len().max(1) as f64;
    let h = mt + ph + 44.0;
    let max = rows
        .iter()
        .map(|c| c.predicted_wal_bytes)
        .chain([a.actual_wal_bytes])
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // Ticks in MiB or GiB.
    let (unit, unit_name) = if max >= 4.0 * (1u64 << 30) as f64 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    };
    let step = nice_step(max / unit, 6.0);
    let top = (max / unit / step).ceil() * step;
    let x_of = |b: f64| ml + b / unit / top * pw;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg id=\"chart-wal-bytes\" width=\"{WIDTH}\" height=\"{h}\" \
         viewBox=\"0 0 {WIDTH} {h}\" role=\"img\" aria-label=\"Predicted WAL bytes per candidate\">"
    );
    let bottom = mt + ph;
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let x = ml + v / top * pw;
        let _ = writeln!(
            o,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{mt}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e3e3\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            bottom + 4.0,
            bottom + 18.0,
            tick(v)
        );
        v += step;
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\">predicted WAL bytes ({unit_name}); \
         fewer is better</text>",
        ml + pw / 2.0,
        h - 6.0
    );
    for (k, c) in rows.iter().enumerate() {
        let y = mt + k as f64 * row;
        let w = (x_of(c.predicted_wal_bytes as f64) - ml).max(1.0);
        let col = if c.stock { STOCK } else { OTHER };
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\"{}>{}</text>\
             <rect class=\"bar {}\" x=\"{ml}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{col}\">\
             <title>{}: {} WAL bytes</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#444\">{} ({:+.1}% vs {ref_name}){}</text>",
            ml - 8.0,
            y + row / 2.0 + 4.0,
            if c.stock { " font-weight=\"600\"" } else { "" },
            esc(&c.spec.to_string()),
            match (c.stock, crate::rank::informative(c)) {
                (true, _) => "stock",
                (false, true) => "other",
                (false, false) => "other estimate",
            },
            y + 3.0,
            row - 6.0,
            esc(&c.spec.to_string()),
            c.predicted_wal_bytes,
            ml + w + 6.0,
            y + row / 2.0 + 4.0,
            crate::fmt::bytes(c.predicted_wal_bytes),
            // No "-0.0%" for the reference itself.
            -crate::fmt::saving(ref_bytes, c.predicted_wal_bytes as f64) + 0.0,
            match (c.sampled, crate::rank::informative(c)) {
                (false, _) => "",
                (true, true) => ", sampled",
                (true, false) => ", estimate, not ranked",
            }
        );
    }
    let xa = x_of(a.actual_wal_bytes as f64);
    let _ = writeln!(
        o,
        "<line class=\"actual\" x1=\"{xa:.1}\" y1=\"{:.1}\" x2=\"{xa:.1}\" y2=\"{bottom:.1}\" stroke=\"#c00\" \
         stroke-dasharray=\"5 3\" stroke-width=\"1.5\"><title>actual: {} WAL bytes</title></line>",
        mt - 4.0,
        a.actual_wal_bytes
    );
    o.push_str("</svg>\n");
    let _ = writeln!(
        o,
        "<p class=\"note\">Dashed red line: WAL actually written ({} bytes). Blue: stock; orange: not in stock \
         PostgreSQL.</p>",
        a.actual_wal_bytes
    );
    o
}

/// The full table, with the columns of the CLI's.
fn table(a: &Advice) -> String {
    let (off, _) = reference(a);
    let has_off = a.candidates.iter().any(|c| c.spec.method == Method::None);
    let rec = crate::recommend(a);
    let rec_spec = rec.map(|r| a.candidates[r.stock].spec);
    let mut o = String::from(
        "<table id=\"candidates\">\n<thead><tr><th>rank</th><th>spec</th><th>stock</th><th>FPI bytes</th><th>WAL bytes</th>\
         <th>vs actual</th><th>vs off</th><th>comp MB/s</th><th>dec MB/s</th><th>ctx KiB</th>\
         <th>sampled</th></tr></thead>\n<tbody>\n",
    );
    for p in crate::rank::ranking(a) {
        let c = p.candidate;
        let sampled = if p.rank.is_some() {
            crate::fmt::interval(c)
        } else {
            crate::rank::unranked_note(c, a.images)
        };
        let mut class = Vec::new();
        if c.stock {
            class.push("stock");
        }
        if rec_spec == Some(c.spec) {
            class.push("recommended");
        }
        let _ = writeln!(
            o,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            class.join(" "),
            p.rank_text(),
            esc(&c.spec.to_string()),
            if c.stock { "yes" } else { "no" },
            c.predicted_fpi_bytes,
            c.predicted_wal_bytes,
            crate::fmt::saving(a.actual_wal_bytes, c.predicted_wal_bytes as f64),
            if has_off {
                format!("{:.1}%", crate::fmt::saving(off, c.predicted_wal_bytes as f64))
            } else {
                "-".into()
            },
            mb_per_s(c.compress_ns_per_mb),
            mb_per_s(c.decompress_ns_per_mb),
            c.context_bytes
                .map_or("?".into(), |b| format!("{:.0}", b as f64 / 1024.0)),
            esc(&sampled)
        );
    }
    o.push_str("</tbody>\n</table>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(37.0, 6.0), 10.0);
        assert_eq!(tick(0.1), "0.1");
        assert_eq!(tick(1000.0), "1000");
    }
}
