//! `compare.html`: a comparison (compare.json) as pictures: per script both arms' percentile
//! spectra overlaid (their totals.hlog merged over the repetitions: histograms added, never
//! percentiles averaged), the per-repetition values as dots, and the verdict table with its
//! confidence intervals.

use super::chart::{Chart, Line, XAxis, PALETTE};
use super::model::Spectrum;
use super::parts::{esc, figure, open_page, spectrum_lines};
use crate::compare::{Comparison, Measure, SetInfo};
use crate::report::hlog::read_log;
use crate::report::ReportError;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The page's file name.
pub const COMPARE_FILE: &str = "compare.html";

/// One arm's whole-run histograms by tag (`latency.<script>`), merged over its repetitions;
/// the repetitions whose totals.hlog is missing are listed in `missing`.
fn merged(set: &SetInfo, missing: &mut Vec<String>) -> Result<BTreeMap<String, Histogram<u64>>, ReportError> {
    let mut out: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for name in &set.used {
        let folder = if name == "run" { PathBuf::from(&set.dir) } else { Path::new(&set.dir).join(name) };
        let path = folder.join("totals.hlog");
        if !path.exists() {
            missing.push(path.display().to_string());
            continue;
        }
        for entry in read_log(&path)? {
            match out.get_mut(&entry.tag) {
                // Both come from the same histogram layout; a failed add would be a foreign file.
                Some(h) => h
                    .add(&entry.histogram)
                    .map_err(|e| ReportError::Read { path: path.clone(), message: format!("{e:?}") })?,
                None => {
                    out.insert(entry.tag, entry.histogram);
                }
            }
        }
    }
    Ok(out)
}

/// Renders compare.html for `comparison`.
///
/// # Errors
/// [`ReportError::Read`] when an arm's totals.hlog is malformed.
pub fn render(comparison: &Comparison) -> Result<String, ReportError> {
    let mut missing = Vec::new();
    let (base, new) = (merged(&comparison.base, &mut missing)?, merged(&comparison.new, &mut missing)?);
    let mut out = String::with_capacity(128 * 1024);
    open_page(&mut out, "emq-bench compare");
    let _ = write!(
        out,
        "<h1>emq-bench compare: {:?}</h1><table class=\"facts\"><tr><td>base</td><td>{} ({} repetitions)</td></tr>\
         <tr><td>new</td><td>{} ({} repetitions)</td></tr>",
        comparison.verdict,
        esc(&comparison.base.dir),
        comparison.base.used.len(),
        esc(&comparison.new.dir),
        comparison.new.used.len()
    );
    for note in &comparison.notes {
        let _ = write!(out, "<tr><td>note</td><td class=\"note\">{}</td></tr>", esc(note));
    }
    if !missing.is_empty() {
        let _ = write!(out, "<tr><td>not found</td><td class=\"note\">{}</td></tr>", esc(&missing.join(", ")));
    }
    out.push_str("</table>");
    verdict_table(&mut out, comparison);
    if let Some(safety) = &comparison.safety {
        safety_table(&mut out, safety, comparison.options.confidence);
    }
    let mut scripts: Vec<&str> = comparison.metrics.iter().filter_map(|m| m.metric.script.as_deref()).collect();
    scripts.dedup();
    for script in scripts {
        let _ = write!(out, "<h2>{}</h2><div class=\"grid\">", esc(script));
        let tag = format!("latency.{script}");
        let spectrum =
            |arm: &BTreeMap<String, Histogram<u64>>| arm.get(&tag).map_or_else(Spectrum::default, Spectrum::of);
        let mut lines = Vec::new();
        lines.extend(spectrum_lines("base", PALETTE[0], &spectrum(&base)));
        lines.extend(spectrum_lines("new", PALETTE[1], &spectrum(&new)));
        let chart = Chart { y_label: "ms", x: XAxis::Percentile, log_y: true, lines, shade: &[] };
        figure(&mut out, "latency spectrum, all repetitions merged (ms, log)", &chart, ": totals.hlog not found");
        let per_rep = |measure: Measure, scale: f64| {
            let metric = comparison
                .metrics
                .iter()
                .find(|m| m.metric.script.as_deref() == Some(script) && m.metric.measure == measure);
            // Base a little left of the repetition, new a little right: equal values stay visible.
            let dots = |values: &[f64], dx: f64| {
                values.iter().enumerate().map(|(i, v)| ((i + 1) as f64 + dx, v * scale)).collect::<Vec<_>>()
            };
            metric.map_or_else(Vec::new, |m| {
                vec![
                    Line::dots(format!("base {}", measure.name()), PALETTE[0], dots(&m.base.values, -0.08)),
                    Line::dots(format!("new {}", measure.name()), PALETTE[1], dots(&m.new.values, 0.08)),
                ]
            })
        };
        let x = XAxis::Repetition(comparison.base.used.len().max(comparison.new.used.len()));
        let lines: Vec<Line> = [Measure::P50, Measure::P99].into_iter().flat_map(|m| per_rep(m, 1e-3)).collect();
        let lines = lines
            .into_iter()
            .enumerate()
            .map(|(i, mut l)| {
                l.color = PALETTE[[0, 1, 3, 4][i % 4]];
                l
            })
            .collect();
        figure(
            &mut out,
            "p50 and p99 per repetition (ms)",
            &Chart { y_label: "ms", x, log_y: false, lines, shade: &[] },
            ": too few calls per repetition to compare its percentiles (see the verdicts)",
        );
        let lines = per_rep(Measure::OpsPerSec, 1.0);
        figure(&mut out, "ops/s per repetition", &Chart { y_label: "ops/s", x, log_y: false, lines, shade: &[] }, "");
        out.push_str("</div>");
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

fn verdict_table(out: &mut String, c: &Comparison) {
    let _ = write!(
        out,
        "<h2>Verdicts</h2><table><tr><th>metric</th><th>base median</th><th>new median</th><th>change</th>\
         <th>{:.0}% interval of new/base</th><th>p worse</th><th>p better</th><th>verdict</th><th>why</th></tr>",
        c.options.confidence * 100.0
    );
    let num = |v: Option<f64>, latency: bool| match v {
        Some(v) if latency => format!("{:.3} ms", v / 1000.0),
        Some(v) => format!("{v:.1}"),
        None => "–".into(),
    };
    for m in &c.metrics {
        let latency = m.metric.measure.is_latency();
        let class = match m.verdict {
            crate::compare::MetricVerdict::Regressed => "fail",
            crate::compare::MetricVerdict::Improved => "pass",
            _ => "",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td class=\"note\">{}</td></tr>",
            esc(&m.label),
            num(m.base.median, latency),
            num(m.new.median, latency),
            m.change.map_or("–".into(), |x| format!("{:+.1}%", x * 100.0)),
            m.ci.as_ref().map_or("–".into(), |i| format!("[{:.3}, {:.3}]", i.lo, i.hi)),
            m.p_worse.map_or("–".into(), |p| format!("{p:.4}")),
            m.p_better.map_or("–".into(), |p| format!("{p:.4}")),
            m.verdict.word(),
            esc(&m.reason)
        );
    }
    out.push_str("</table>");
}

/// The effects of the injected faults, per side and per fault, with each effect's verdict.
fn safety_table(out: &mut String, s: &crate::compare::SafetyComparison, confidence: f64) {
    let _ = write!(
        out,
        "<h2>Safety under faults</h2><p>BASE: {} fault(s) ({}); NEW: {} fault(s) ({}). Per fault, with the exact          {:.0}% interval.</p><table><tr><th>effect</th><th>BASE per fault</th><th>NEW per fault</th><th>p</th>         <th>verdict</th></tr>",
        s.base.faults,
        esc(&s.base.kinds()),
        s.new.faults,
        esc(&s.new.kinds()),
        confidence * 100.0
    );
    for e in &s.effects {
        let class = match e.verdict {
            crate::compare::SafetyVerdict::More => "fail",
            crate::compare::SafetyVerdict::Fewer => "pass",
            crate::compare::SafetyVerdict::NoDifferenceShown => "",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td><td class=\"{class}\">{}</td></tr>",
            e.effect.words(),
            e.base.describe(),
            e.new.describe(),
            e.p,
            esc(&e.sentence)
        );
    }
    out.push_str("</table>");
}

/// Re-renders `dir/compare.html` from `dir/compare.json` (and the arms' folders it names).
///
/// # Errors
/// [`ReportError::Io`] / [`ReportError::Read`] naming compare.json or a totals.hlog.
pub fn write_compare(dir: &Path) -> Result<PathBuf, ReportError> {
    let path = dir.join("compare.json");
    let text = std::fs::read_to_string(&path).map_err(|source| ReportError::Io { path: path.clone(), source })?;
    let comparison: Comparison =
        serde_json::from_str(&text).map_err(|e| ReportError::Read { path: path.clone(), message: e.to_string() })?;
    write_compare_html(&dir.join(COMPARE_FILE), &comparison)?;
    Ok(dir.join(COMPARE_FILE))
}

/// Writes compare.html for `comparison` at `path`, atomically.
///
/// # Errors
/// As [`render`], or the write's [`ReportError::Io`].
pub fn write_compare_html(path: &Path, comparison: &Comparison) -> Result<(), ReportError> {
    crate::report::write_text(path, &render(comparison)?)
}
