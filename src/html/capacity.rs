//! `capacity.html`: a capacity search (capacity.json) as pictures: per script named by an
//! objective, its p50, p99 and p99.9 against the throughput each probe achieved, with the 95 %
//! intervals as bars, the objective's limit as a line and the sustained rate marked; then the
//! answer and every probe in a table.

use std::fmt::Write as _;
use std::path::Path;

use super::chart::{Chart, Line, XAxis, PALETTE};
use super::parts::{esc, figure, open_page};
use crate::capacity::{CapacityReport, ProbeOutcome, ProbeRecord, SloDecision};
use crate::report::ReportError;

/// The page's file name.
pub const CAPACITY_HTML: &str = "capacity.html";

/// Renders capacity.html for `report`.
pub fn render(report: &CapacityReport) -> String {
    let mut out = String::with_capacity(64 * 1024);
    open_page(&mut out, "emq-bench capacity");
    let _ = write!(
        out,
        "<h1>emq-bench capacity: {}</h1><p><b>{}</b></p><table class=\"facts\">\
         <tr><td>target</td><td>{}</td></tr><tr><td>protocol</td><td>{}</td></tr>\
         <tr><td>objectives</td><td>{}</td></tr><tr><td>workload</td><td>{}: judged on {}; a client-bound probe is \
         never counted against the deployment</td></tr><tr><td>probes</td><td>{} in {:.0} s of a {:.0} s budget; base \
         probe {:.0} s measured</td></tr></table>",
        esc(&report.scenario),
        esc(&report.answer()).replace('\n', "<br>"),
        esc(&report.target),
        esc(&report.protocol),
        esc(&report.slos.join("; ")),
        esc(&report.workload),
        esc(&report.criteria.join(", ")),
        report.probes.len(),
        report.elapsed_secs,
        report.budget_secs,
        report.probe_secs,
    );
    let mut scripts: Vec<&'static str> = Vec::new();
    for slo in report.slos.iter().filter_map(|s| crate::capacity::Slo::parse(s).ok()) {
        let name = leak_name(&slo.script);
        if !scripts.contains(&name) {
            scripts.push(name);
        }
    }
    out.push_str("<div class=\"charts\">");
    for script in scripts {
        let (chart, x) = curve(report, script);
        figure(&mut out, &format!("{script}: latency from the intended send against {x}"), &chart, "");
    }
    out.push_str("</div>");
    probes_table(&mut out, report);
    out.push_str(
        "<p class=\"note\">Each probe is a whole run at one offered rate (its folder holds its report.html). A \
         probe is sustained when every objective's 95 % interval (from the order statistics of the recorded \
         histogram) lies under its limit, the run was steady (rate held, no growing backlog, no trend in \
         throughput, nor in the p99 of a script an objective names) and its verdict passed; an interval across the limit is undecided and the probe is \
         run again longer. A probe whose client was saturated (its CPU, or its wait for a CPU: summary.json \
         <code>client</code>) measured the harness's host: unless sustained it is client-bound, never counted \
         as not sustained by the deployment, and no rate is named from it.</p></body></html>",
    );
    out
}

/// A script's name as the static string of its catalog entry (the chart captions borrow it).
fn leak_name(name: &str) -> &'static str {
    crate::lua::Script::from_name(name).map_or("?", crate::lua::Script::name)
}

/// The rate that drives `script`, per probe, and its axis' description: the enqueues sent per
/// second for an enqueue (what a producers-only search varies: nobody finishes jobs there), the
/// jobs finished per second for a consumer's script; the offered rate where that rate is zero
/// at every probe, so no axis has an empty range.
fn driving_rate(report: &CapacityReport, script: &str) -> (fn(&ProbeRecord) -> f64, &'static str) {
    let enqueue = crate::lua::Script::from_name(script).is_some_and(crate::lua::Script::is_enqueue);
    let (rate, desc): (fn(&ProbeRecord) -> f64, _) = if enqueue {
        (|p| p.achieved_per_sec, "enqueues sent per second")
    } else {
        (|p| p.completed_per_sec, "jobs finished per second")
    };
    if report.probes.iter().any(|p| rate(p) > 0.0) {
        (rate, desc)
    } else {
        (|p| p.rate, "jobs offered per second")
    }
}

/// The latency-throughput chart of `script`: dots per percentile, interval bars for p99, the
/// objectives' limits and the sustained rate; with the x axis' description.
fn curve(report: &CapacityReport, script: &str) -> (Chart<'static>, &'static str) {
    let ms = |us: u64| us as f64 / 1000.0;
    let (rate, desc) = driving_rate(report, script);
    let mut points: Vec<(f64, &crate::report::Percentiles)> =
        report.probes.iter().filter_map(|p| p.latency_us.get(script).map(|l| (rate(p), l))).collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pick = |f: fn(&crate::report::Percentiles) -> u64| -> Vec<(f64, f64)> {
        points.iter().map(|(x, l)| (*x, ms(f(l)))).collect()
    };
    let mut lines = vec![
        Line::dots("p50", PALETTE[0], pick(|l| l.p50)),
        Line::dots("p99", PALETTE[1], pick(|l| l.p99)),
        Line::dots("p99.9", PALETTE[3], pick(|l| l.p999)),
    ];
    let bars: Vec<Vec<(f64, f64)>> = points
        .iter()
        .filter_map(|(x, l)| {
            let b = &l.intervals.p99;
            Some(vec![(*x, ms(b.lo_us?)), (*x, ms(b.hi_us?))])
        })
        .collect();
    if !bars.is_empty() {
        lines.push(Line { label: "p99's 95 % interval".into(), color: PALETTE[1], segments: bars, dots: false });
    }
    let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    let (x0, x1) = (0.0, xs.iter().copied().fold(report.sustainable_rate.unwrap_or(0.0), f64::max) * 1.05 + 1.0);
    let ys: Vec<f64> =
        lines.iter().flat_map(|l| l.segments.iter().flatten().map(|p| p.1)).filter(|y| *y > 0.0).collect();
    let (y0, y1) = ys.iter().fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(*y), b.max(*y)));
    for (k, slo) in report.slos.iter().filter_map(|s| crate::capacity::Slo::parse(s).ok()).enumerate() {
        if slo.script == script {
            let y = slo.limit_us / 1000.0;
            lines.push(Line::from_points(
                format!("objective {}", slo.text),
                PALETTE[4 + k % 2],
                [Some((x0, y)), Some((x1, y))],
            ));
        }
    }
    if let Some(r) = report.sustainable_rate.filter(|_| y0 <= y1) {
        lines.push(Line::from_points(
            format!("sustained rate {r:.0} jobs/s"),
            PALETTE[2],
            [Some((r, y0.min(1e-3).max(y0 / 2.0))), Some((r, y1 * 2.0))],
        ));
    }
    (Chart { y_label: "latency, ms (log)", x: XAxis::Throughput(x0, x1, desc), log_y: true, lines, shade: &[] }, desc)
}

fn probes_table(out: &mut String, report: &CapacityReport) {
    out.push_str(
        "<h2>Probes</h2><table><tr><th>#</th><th>offered/s</th><th>achieved/s</th><th>finished/s</th><th>step</th>\
         <th>steady</th><th>client-bound</th><th>objectives (value [95 % interval]; share of calls over the limit [95 % interval, seconds as units])</th><th>outcome</th><th>why</th><th>folder</th></tr>",
    );
    for p in &report.probes {
        let slos: Vec<String> = p
            .slos
            .iter()
            .map(|r| {
                let class = match r.decision {
                    SloDecision::Holds => "pass",
                    SloDecision::Violated => "fail",
                    SloDecision::Undecided => "",
                };
                format!("<span class=\"{class}\">{} {}</span>", esc(&r.slo), esc(&r.figures()))
            })
            .collect();
        let (outcome, class) = match p.outcome {
            Some(ProbeOutcome::Sustained) => ("sustained", "pass"),
            Some(ProbeOutcome::NotSustained) => ("not sustained", "fail"),
            Some(ProbeOutcome::ClientBound) => ("client-bound (not counted)", "note"),
            None => ("undecided", ""),
        };
        let steady = match p.steady {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        let client = if p.client_bound { "<span class=\"fail\">bound</span>" } else { "no" };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{steady}</td><td>{client}</td><td>{}</td>\
             <td class=\"{class}\">{outcome}</td><td class=\"note\">{}</td><td><a href=\"{}/report.html\">{}</a></td></tr>",
            p.index,
            p.rate,
            p.achieved_per_sec,
            p.completed_per_sec,
            p.step.name(),
            slos.join("<br>"),
            esc(&p.reasons.join("; ")),
            esc(&p.folder),
            esc(&p.folder),
        );
    }
    out.push_str("</table>");
}

/// Writes `dir/capacity.html` for `report`, atomically.
///
/// # Errors
/// [`ReportError::Io`] naming the file.
pub fn write_capacity_html(dir: &Path, report: &CapacityReport) -> Result<(), ReportError> {
    crate::report::write_text(&dir.join(CAPACITY_HTML), &render(report))
}

/// Re-renders `dir/capacity.html` from `dir/capacity.json`; returns the page's path.
///
/// # Errors
/// [`ReportError::Io`] / [`ReportError::Read`] naming capacity.json, or the write's.
pub fn rewrite_capacity_html(dir: &Path) -> Result<std::path::PathBuf, ReportError> {
    let path = dir.join(crate::capacity::CAPACITY_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| ReportError::Io { path: path.clone(), source })?;
    let report: CapacityReport =
        serde_json::from_str(&text).map_err(|e| ReportError::Read { path: path.clone(), message: e.to_string() })?;
    write_capacity_html(dir, &report)?;
    Ok(dir.join(CAPACITY_HTML))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{RateInterval, SearchEnd, Step};

    fn probe(index: usize, rate: f64, achieved: f64, finished: f64) -> ProbeRecord {
        let latency = crate::report::Percentiles { p50: 300, p99: 900, p999: 1_500, ..Default::default() };
        ProbeRecord {
            index,
            rate,
            step: Step::Bracket,
            folder: format!("probe-{index:02}"),
            measured_secs: 8.0,
            achieved_per_sec: achieved,
            completed_per_sec: finished,
            steady: Some(true),
            not_steady: Vec::new(),
            trends_not_binding: Vec::new(),
            slos: Vec::new(),
            passed: true,
            failures: Vec::new(),
            violations: 0,
            latency_us: [("enqueue".to_string(), latency), ("claim".to_string(), latency)].into_iter().collect(),
            client_bound: false,
            outcome: Some(ProbeOutcome::Sustained),
            reasons: Vec::new(),
        }
    }

    fn report(probes: Vec<ProbeRecord>) -> CapacityReport {
        CapacityReport {
            schema_version: 1,
            tool: "emq-bench test".into(),
            scenario: "producers".into(),
            target: "redis://127.0.0.1:1/0".into(),
            protocol: "echomq-v1".into(),
            slos: vec!["enqueue.p99 < 2ms".into(), "claim.p99 < 5ms".into()],
            workload: "producers only".into(),
            criteria: crate::capacity::criteria(false),
            sustainable_rate: None,
            interval: RateInterval { lo: Some(400.0), hi: None },
            tolerance: 0.05,
            ended: SearchEnd::Budget,
            binding: Vec::new(),
            probe_secs: 8.0,
            budget_secs: 60.0,
            elapsed_secs: 30.0,
            error: None,
            probes,
        }
    }

    #[test]
    fn each_script_is_plotted_against_the_rate_that_drives_it_and_no_axis_is_empty() {
        // Nobody finishes a job: enqueue against the enqueues sent, claim (no finished rate at
        // any probe) against the offered rate; never every point at x = 0.
        let r = report(vec![probe(1, 200.0, 198.0, 0.0), probe(2, 400.0, 397.0, 0.0)]);
        let (_, enqueue) = curve(&r, "enqueue");
        assert_eq!(enqueue, "enqueues sent per second");
        let (chart, claim) = curve(&r, "claim");
        assert_eq!(claim, "jobs offered per second");
        let XAxis::Throughput(x0, x1, _) = chart.x else { panic!("a rate axis") };
        assert!(x0 < x1 && x1 > 400.0, "{x0}..{x1}");
        let page = render(&r);
        assert!(page.contains("producers only: judged on objectives, rate_carried, steady.rate, steady.p99, verdict"));
        // With consumers, claim follows the jobs finished.
        let r = report(vec![probe(1, 200.0, 198.0, 197.0)]);
        assert_eq!(curve(&r, "claim").1, "jobs finished per second");
    }
}
