//! Render: the terminal's table of a finished run (stdout); the verdict's lines go to stderr
//! after `FAIL`, from `main`.

use crate::check::{format_violations, CheckOutcome};
use crate::metrics::JobCounter;
use crate::net;
use crate::report::format_table;
use crate::report::run_summary::RunSummary;
use crate::scenario::Plan;
use std::path::Path;

/// The terminal's table of a finished run: the target, one row per script, the jobs, the
/// redirects, the producers' rates, the faults, the check and the folder.
pub(super) fn render_table(summary: &RunSummary, plan: &Plan, checked: Option<&CheckOutcome>, dir: &Path) -> String {
    let jobs = jobs_array(&summary.jobs);
    let mut table = format!("target: {}, {}\n", summary.target.url, summary.target.topology.describe());
    if plan.durability != net::Durability::Primary {
        table.push_str(&format!("durability: each call {}\n", plan.durability));
    }
    table.push_str(&format_table(&summary.scripts, &jobs, summary.warmup_secs));
    let redirects = jobs[JobCounter::Redirects.index()];
    let (down, refused) = (jobs[JobCounter::ClusterDown.index()], jobs[JobCounter::RefusedWaited.index()]);
    if redirects + down + refused > 0 || summary.target.topology.kind == net::topology::Kind::Cluster {
        table.push_str(&format!(
            "cluster redirects followed (MOVED, ASK, TRYAGAIN): {redirects}; refusals waited out and resent: \
             CLUSTERDOWN {down}, LOADING or node unreachable {refused}\n"
        ));
    }
    if let Some(rates) = &summary.producers {
        table.push_str(&rates.line());
        table.push('\n');
    }
    if let Some(system) = &summary.system {
        table.push_str(&system.line());
        table.push('\n');
    }
    if let Some(client) = &summary.client {
        table.push_str(&client.line());
        table.push('\n');
    }
    if let Some(growth) = &summary.growth {
        table.push_str(&growth.line());
        table.push('\n');
    }
    if let Some(q) = &summary.time_in_queue_us {
        let ms = crate::report::ms3;
        table.push_str(&format!(
            "time in queue (at most: enqueue sent -> first claim read), ms: p50 {} p90 {} p99 {} p99.9 {} max {}\n",
            ms(q.p50),
            ms(q.p90),
            ms(q.p99),
            ms(q.p999),
            ms(q.max)
        ));
    }
    if let Some(steady) = &summary.steady {
        table.push_str(&steady.line());
        table.push('\n');
    }
    if let Some(node) = summary.server_samples.as_ref().and_then(|s| s.saturated()) {
        table.push_str(&format!(
            "server: {} at {:.0}% CPU on average ({:.0}% at most): its one core was the bottleneck\n",
            node.node, node.cpu_pct_mean, node.cpu_pct_max
        ));
    }
    for threshold in &summary.thresholds {
        table.push_str(&threshold.describe());
        table.push('\n');
    }
    table.push_str(&summary.faults.footer());
    if let Some(outcome) = checked {
        let names: Vec<&str> = plan.queues.iter().map(String::as_str).collect();
        table.push_str(&outcome.report.summary_line(&names));
        table.push('\n');
        if !outcome.report.is_clean() {
            table.push_str(&format_violations(&outcome.report.violations, true));
        }
    }
    table.push_str(&format!("results: {}\n", dir.display()));
    table
}

/// summary.json's job counters back in [`JobCounter`] order (absent ones 0).
pub(crate) fn jobs_array(jobs: &std::collections::BTreeMap<String, u64>) -> [u64; JobCounter::COUNT] {
    let mut out = [0; JobCounter::COUNT];
    for counter in JobCounter::ALL {
        out[counter.index()] = jobs.get(counter.name()).copied().unwrap_or(0);
    }
    out
}
