//! `cost`'s outputs: the terminal table and the Markdown (cost.md), from the finished report.
//!
//! With two arms each row gives the per-arm medians of the blocks' µs per call ("median A",
//! "median B") beside the change, and a footnote says what the change is: measured now, the
//! median of the paired blocks' ratios B/A (each pair back to back, so a drift of the machine
//! cancels within it), which is not the ratio of the two medians; against a stored baseline,
//! which has no pairs, the ratio of the medians.

use std::fmt::Write as _;

use super::{CostReport, ScriptCosts};
use crate::compare::verdict::MetricComparison;
use crate::compare::CompareOptions;
use crate::stats;

/// The table: one row per script, the median µs per call of each arm (and its CV), and with
/// two arms the change, its interval and the verdict, the footnote on the change, then the
/// overall verdict.
pub(super) fn table(report: &CostReport, options: &CompareOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "server cost per call, medians over the blocks of {} round(s) on valkey {} (µs inside the script; CPU = script + I/O):",
        report.repeat, report.server_version
    );
    let cv =
        |xs: &[f64]| stats::coefficient_of_variation(xs).map_or("-".to_string(), |cv| format!("{:.1}%", cv * 100.0));
    match report.lua_dirs.as_slice() {
        [dir] => {
            let _ = writeln!(out, "{dir}\n");
            let _ = writeln!(out, "{:<16} {:>8} {:>10} {:>6} {:>10}", "script", "calls", "µs/call", "cv", "CPU µs");
            for s in &report.scripts {
                let _ = writeln!(
                    out,
                    "{:<16} {:>8} {:>10.2} {:>6} {:>10.2}",
                    s.script,
                    s.calls,
                    med(&s.us_per_call[0]),
                    cv(&s.us_per_call[0]),
                    med(&s.cpu_us_per_call[0])
                );
            }
            if let [cycle] = report.cycle_cpu_us[..] {
                let _ = writeln!(out, "\njob cycle (enqueue + claim + complete): server CPU {cycle:.2} µs per job");
            }
        }
        [base, new] => {
            let _ = writeln!(out, "A (BASE) {base}\nB (NEW)  {new}\n");
            let _ = writeln!(
                out,
                "{:<16} {:>10} {:>10} {:>8} {:>18} {:>8} {:>7} {:>6}  verdict",
                "script", "median A", "median B", "change", "95% CI", "p", "blocks", "s"
            );
            for s in &report.scripts {
                let Some(c) = &s.comparison else { continue };
                let (change, ci) = change_and_ci(c);
                let p = c.p_worse.zip(c.p_better).map_or("-".to_string(), |(w, b)| format!("{:.3}", w.min(b)));
                let (blocks, secs) = s
                    .stop
                    .as_ref()
                    .map_or(("-".into(), "-".into()), |t| (t.blocks.to_string(), format!("{:.0}", t.seconds)));
                let _ = writeln!(
                    out,
                    "{:<16} {:>10.2} {:>10.2} {:>8} {:>18} {:>8} {:>7} {:>6}  {} ({})",
                    s.script,
                    med(&s.us_per_call[0]),
                    med(&s.us_per_call[1]),
                    change,
                    ci,
                    p,
                    blocks,
                    secs,
                    c.verdict.word(),
                    c.reason
                );
            }
            if let Some(line) = gate_line(report) {
                let _ = writeln!(out, "\n{line}");
            }
            if let Some(note) = change_note(report) {
                let _ = writeln!(out, "\n{note}");
            }
            if let [base, new] = report.cycle_cpu_us[..] {
                let _ = writeln!(
                    out,
                    "\njob cycle (enqueue + claim + complete): server CPU {base:.2} -> {new:.2} µs per job ({:+.1}%)",
                    (new / base - 1.0) * 100.0
                );
            }
            if let Some(verdict) = report.verdict {
                let _ = writeln!(
                    out,
                    "\nverdict: {} (noise band {:.0}%, alpha {})",
                    verdict.word(),
                    options.noise_cost * 100.0,
                    options.alpha
                );
            }
        }
        _ => {}
    }
    out
}

/// The Markdown: per script the cost before and after, the change with its interval and the
/// verdict; with two arms, largest change first.
pub(super) fn markdown(report: &CostReport, options: &CompareOptions) -> String {
    let mut out = String::new();
    let Some(verdict) = report.verdict else {
        let _ = writeln!(out, "### Server cost per call ({}, valkey {})\n", report.lua_dirs[0], report.server_version);
        let _ = writeln!(out, "| script | µs/call | CPU µs/call |\n|---|---:|---:|");
        for s in &report.scripts {
            let _ =
                writeln!(out, "| {} | {:.2} | {:.2} |", s.script, med(&s.us_per_call[0]), med(&s.cpu_us_per_call[0]));
        }
        return out;
    };
    let _ = writeln!(
        out,
        "### Script cost gate: **{}**\n\nA (BASE) `{}`, B (NEW) `{}`; valkey {}; noise band {:.0}%, α {}; server µs \
         per call inside the script, median A and median B over each arm's blocks.\n",
        verdict.word(),
        report.lua_dirs[0],
        report.lua_dirs[1],
        report.server_version,
        options.noise_cost * 100.0,
        options.alpha
    );
    let _ = writeln!(
        out,
        "| script | median A µs | median B µs | change | 95% CI | verdict | blocks | s |\n|---|---:|---:|---:|---|---|---:|---:|"
    );
    let mut rows: Vec<&ScriptCosts> = report.scripts.iter().filter(|s| s.comparison.is_some()).collect();
    let size = |s: &ScriptCosts| s.comparison.as_ref().and_then(|c| c.change).map_or(0.0, f64::abs);
    rows.sort_by(|a, b| size(b).total_cmp(&size(a)));
    for s in rows {
        let c = s.comparison.as_ref().expect("filtered");
        let (change, ci) = change_and_ci(c);
        let word = match c.verdict {
            crate::compare::verdict::MetricVerdict::Regressed => "**regressed**".to_string(),
            v => v.word().to_string(),
        };
        let (blocks, secs) =
            s.stop.as_ref().map_or(("-".into(), "-".into()), |t| (t.blocks.to_string(), format!("{:.0}", t.seconds)));
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {change} | {ci} | {word} | {blocks} | {secs} |",
            s.script,
            med(&s.us_per_call[0]),
            med(&s.us_per_call[1]),
        );
    }
    if let Some(note) = change_note(report) {
        let _ = writeln!(out, "\n{note}");
    }
    if let Some(line) = gate_line(report) {
        let _ = writeln!(out, "\n{line}");
    }
    out
}

/// With a sequential gate: how long it measured against its budget, and the scripts still
/// undecided with roughly the blocks each would need; None otherwise. "blocks" and "s" in the
/// rows are each script's blocks and seconds when its verdict was reached.
fn gate_line(report: &CostReport) -> Option<String> {
    let budget = report.budget_s?;
    let undecided: Vec<String> = report
        .scripts
        .iter()
        .filter_map(|s| s.stop.as_ref().filter(|t| !t.decided).map(|t| (s, t)))
        .map(|(s, t)| match t.more_blocks {
            Some(more) => format!("{} (about {more} more blocks)", s.script),
            None => {
                format!("{} (its change sits on the band's edge: no number of blocks is likely to decide)", s.script)
            }
        })
        .collect();
    let head = format!(
        "gate: {} round(s) in {:.0} s of a {:.0} s budget; blocks and s per script: when its verdict was reached",
        report.repeat, report.seconds, budget
    );
    Some(if undecided.is_empty() {
        format!("{head}; every script decided")
    } else {
        format!("{head}; undecided when it stopped: {}", undecided.join(", "))
    })
}

/// True when `c` compares pairs of blocks ([`compare_paired`](crate::compare::verdict::compare_paired),
/// a sign test: no rank-test method), false for two unpaired samples (a stored baseline).
fn is_paired(c: &MetricComparison) -> bool {
    c.test.is_none()
}

/// The footnote on what "change" means, after a two-arm table; None without a comparison.
fn change_note(report: &CostReport) -> Option<&'static str> {
    let c = report.scripts.iter().find_map(|s| s.comparison.as_ref())?;
    Some(if is_paired(c) {
        "change: the median of the paired blocks' ratios B/A (each pair run back to back), with its interval from a \
         95% confidence sequence at the round that decided (valid however many rounds were looked at); not median B / \
         median A, which the machine's drift between blocks moves"
    } else {
        "change: median B / median A (a stored baseline has no pairs), with the bootstrap 95% interval of that ratio"
    })
}

/// A comparison's change and interval as the outputs print them: `+12.3%`, `+9.0% .. +15.1%`.
fn change_and_ci(c: &MetricComparison) -> (String, String) {
    let pct = |ratio: f64| format!("{:+.1}%", (ratio - 1.0) * 100.0);
    let change = c.change.map_or("-".into(), |x| pct(x + 1.0));
    (change, c.ci.map_or("-".into(), |ci| format!("{} .. {}", pct(ci.lo), pct(ci.hi))))
}

/// The median the outputs print (NaN, printed `NaN`, for no values).
fn med(xs: &[f64]) -> f64 {
    stats::median(xs).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::verdict::{compare_metric, compare_paired, Overall};
    use crate::compare::{Measure, Metric};

    /// A two-arm report of one script whose blocks are `base` and `new`, compared paired or not.
    fn report(paired: bool) -> CostReport {
        let base: Vec<f64> = (0..10).map(|i| 10.0 + f64::from(i)).collect();
        let new: Vec<f64> = base.iter().map(|b| b * 1.1).collect();
        let options = CompareOptions::default();
        let metric = Metric::script("fail", Measure::ServerUs);
        let comparison = if paired {
            let pairs: Vec<(f64, f64)> = base.iter().copied().zip(new.iter().copied()).collect();
            compare_paired(metric, &pairs, &options)
        } else {
            compare_metric(metric, base.clone(), new.clone(), &options)
        };
        let verdict = Some(Overall::of([comparison.verdict]));
        CostReport {
            lua_dirs: vec!["lua".into(), "lua-new".into()],
            server_version: "8.1.0".into(),
            repeat: 1,
            scripts: vec![ScriptCosts {
                script: "fail".into(),
                calls: 1000,
                us_per_call: vec![base, new],
                cpu_us_per_call: vec![vec![20.0; 10], vec![22.0; 10]],
                comparison: Some(comparison),
                stop: None,
            }],
            verdict,
            cycle_cpu_us: vec![],
            budget_s: None,
            seconds: 1.0,
        }
    }

    #[test]
    fn both_outputs_put_the_arms_medians_beside_the_paired_change_and_say_what_it_is() {
        let (r, options) = (report(true), CompareOptions::default());
        let text = table(&r, &options);
        assert!(text.contains("median A") && text.contains("median B"), "{text}");
        // Medians 14.50 and 15.95, the change +10.0 %: the median of the ratios.
        let row = text.lines().find(|l| l.starts_with("fail")).unwrap();
        assert!(row.contains("14.50") && row.contains("15.95") && row.contains("+10.0%"), "{row}");
        assert!(
            text.contains("the median of the paired blocks' ratios B/A") && text.contains("not median B / median A")
        );
        let md = markdown(&r, &options);
        assert!(md.contains("| script | median A µs | median B µs | change |"), "{md}");
        assert!(md.contains("| fail | 14.50 | 15.95 | +10.0% |"), "{md}");
        assert!(md.contains("| verdict | blocks | s |"), "{md}");
        assert!(md.contains("the median of the paired blocks' ratios B/A"), "{md}");
    }

    #[test]
    fn a_stored_baseline_says_its_change_is_the_ratio_of_the_medians() {
        let text = table(&report(false), &CompareOptions::default());
        assert!(text.contains("change: median B / median A (a stored baseline has no pairs)"), "{text}");
        assert!(!text.contains("paired blocks"), "{text}");
    }
}
