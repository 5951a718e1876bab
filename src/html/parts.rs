//! What both pages share: the style sheet, escaping, a figure with its legend.

use super::chart::{Chart, Line};
use super::model::Spectrum;
use std::fmt::Write;

/// The page's style sheet (inline: the page must open offline).
const CSS: &str =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1260px;color:#222;padding:0 12px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}\
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}\
th{background:#f6f6f6}td:first-child,th:first-child{text-align:left}table.facts td{text-align:left}\
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:14px}\
figure{margin:0;border:1px solid #e4e4e4;border-radius:4px;padding:6px}figcaption{font-weight:600;margin:0 0 2px 4px}\
.legend{font-size:12px;margin:2px 4px}.legend span{margin-right:14px;white-space:nowrap}\
.legend i{display:inline-block;width:14px;height:4px;margin:0 4px 3px 0;vertical-align:middle}\
.pass{color:#17702a;font-weight:600}.fail{color:#b3161b;font-weight:600}.nodata{color:#888;padding:40px 10px}\
.note{color:#555;font-size:12px;text-align:left}.ci{color:#777;font-size:12px;white-space:nowrap}.fault{background:rgba(255,0,0,.15);padding:0 4px}";

/// Escapes `s` for HTML text and attribute values (the five characters HTML gives meaning).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// One figure: a caption, the chart (or a note when it has nothing to draw) and its legend.
pub fn figure(out: &mut String, caption: &str, chart: &Chart, note: &str) {
    let _ = write!(out, "<figure><figcaption>{}</figcaption>", esc(caption));
    if chart.has_data() {
        out.push_str(&chart.render());
        out.push_str("<div class=\"legend\">");
        for line in &chart.lines {
            let rgb = line.color;
            let _ = write!(
                out,
                "<span><i style=\"background:rgb({},{},{})\"></i>{}</span>",
                rgb.0,
                rgb.1,
                rgb.2,
                esc(&line.label)
            );
        }
        if !chart.shade.is_empty() {
            out.push_str("<span><i style=\"background:rgba(255,0,0,.3)\"></i>fault windows</span>");
        }
        out.push_str("</div>");
    } else {
        let _ = write!(out, "<p class=\"nodata\">no data recorded{}</p>", esc(note));
    }
    out.push_str("</figure>");
}

/// Opens a page: doctype, title, the inline style sheet, `<body>`.
pub fn open_page(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    );
}

/// A spectrum as two series: the curve, and dots at its named percentiles.
pub fn spectrum_lines(label: &str, color: plotters::style::RGBColor, s: &Spectrum) -> [Line; 2] {
    [
        Line::from_points(label, color, s.points.iter().map(|p| Some(*p))),
        Line::dots(
            format!("{label}: p50, p90, p99, p99.9, p99.99, max"),
            color,
            s.marks.iter().map(|m| (m.1, m.2)).collect(),
        ),
    ]
}
