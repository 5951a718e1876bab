//! The page around the charts: header, verdict, tables, one section per script, the queue and
//! the server. Inline CSS only; no script, no URL.

use super::chart::{Chart, Line, XAxis, PALETTE};
use super::model::{RunView, ScriptView};
use super::parts::{esc, figure, open_page};
use crate::report::percentile_bounds::{grouped, range_ms, CONFIDENCE};
use crate::report::{ms3, PercentileBound, ScriptSummary};
use std::fmt::Write;

/// The whole page for `view`.
pub fn render(view: &RunView) -> String {
    let s = &view.summary;
    let mut out = String::with_capacity(256 * 1024);
    open_page(&mut out, &format!("emq-bench {}", s.name));
    let _ = write!(
        out,
        "<h1>emq-bench run: {}</h1><p class=\"note\">{} · results folder report</p>",
        esc(&s.name),
        esc(&s.tool)
    );
    header(&mut out, view);
    fleet_section(&mut out, view);
    scripts_table(&mut out, view);
    failover_table(&mut out, view);
    let shade: Vec<(f64, f64)> = view.faults.iter().map(|f| (f.from_s, f.to_s)).collect();
    let x = {
        let (a, b) = view.time_range();
        XAxis::Time(a, b)
    };
    for script in &view.scripts {
        script_section(&mut out, script, x, &shade);
    }
    queue_section(&mut out, view, x, &shade);
    server_section(&mut out, view, x, &shade);
    out.push_str("</body></html>\n");
    out
}

fn header(out: &mut String, view: &RunView) {
    let s = &view.summary;
    let nodes: Vec<String> = s
        .target
        .topology
        .nodes
        .iter()
        .map(|n| format!("{} ({}, {})", n.address, if n.role.is_empty() { "primary" } else { &n.role }, n.version))
        .collect();
    let rows = [
        ("scenario", s.name.clone()),
        ("seed", s.seed.to_string()),
        ("target", format!("{}{}", s.target.url, if s.target.embedded { " (embedded server)" } else { "" })),
        ("topology", format!("{}: {}", s.target.topology.kind, nodes.join(", "))),
        (
            "durability",
            if s.target.durability.is_empty() {
                "acknowledged by the primary alone".into()
            } else {
                s.target.durability.clone()
            },
        ),
        ("server version", s.server_version.clone().unwrap_or_else(|| "unknown".into())),
        ("started / ended", format!("{} / {}", s.started, s.ended)),
        ("measured", format!("{:.1} s (after {} s warmup)", s.measured_secs, s.warmup_secs)),
        ("keys", s.keys.as_ref().map_or_else(|| "not recorded".to_string(), |k| k.describe(s.cleanup.as_ref()))),
    ];
    out.push_str("<table class=\"facts\">");
    for (k, v) in rows {
        let _ = write!(out, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    // The verdict first, with every finding the terminal printed after FAIL; then what it
    // rests on: the check, the thresholds, the faults, an early end, files not written.
    match &s.verdict {
        Some(v) if v.passed => {
            let _ = write!(out, "<tr><td>verdict</td><td><span class=\"pass\">pass</span> (exit 0)</td></tr>");
        }
        Some(v) => {
            let findings: Vec<String> = v
                .findings
                .iter()
                .map(|f| format!("<li><span class=\"fail\">{}</span>: {}</li>", f.kind.name(), esc(&f.message)))
                .collect();
            let _ = write!(
                out,
                "<tr><td>verdict</td><td><span class=\"fail\">fail</span> (exit {})<ul class=\"findings\">{}</ul></td></tr>",
                v.exit_code,
                findings.join("")
            );
        }
        None => {}
    }
    if let Some(at) = view.killed_at_s {
        let _ = write!(
            out,
            "<tr><td>verdict</td><td><span class=\"fail\">ended without a summary: killed at about {at:.0} s</span> \
             (the figures are the seconds written before the kill, errors by code as of the last summary \
             rewrite; no check, no verdict)</td></tr>"
        );
    }
    let check = match &s.check {
        Some(c) if c.violations_total == 0 => {
            format!("<span class=\"pass\">pass</span>: {} jobs checked, no violation", c.checked_jobs)
        }
        Some(c) => format!(
            "<span class=\"fail\">{} violations</span> in {} jobs (invariants.json)",
            c.violations_total, c.checked_jobs
        ),
        None => "not run".into(),
    };
    let _ = write!(out, "<tr><td>invariants</td><td>{check}</td></tr>");
    if let Some(client) = &s.client {
        let class = if client.client_bound { "fail" } else { "note" };
        let _ = write!(
            out,
            "<tr><td>client</td><td class=\"{class}\">{}</td></tr>",
            esc(&client.line()).replace('\n', "<br>")
        );
    }
    let thresholds: Vec<String> = s
        .thresholds
        .iter()
        .map(|t| {
            let class = if t.passed { "pass" } else { "fail" };
            let value = t.value.map_or("not measured".to_string(), |v| format!("{v:.1}"));
            format!("<span class=\"{class}\">{} {}</span> ({value})", esc(&t.key), esc(&t.condition))
        })
        .collect();
    let thresholds = if thresholds.is_empty() { "none set".to_string() } else { thresholds.join(", ") };
    let _ = write!(out, "<tr><td>thresholds</td><td>{thresholds}</td></tr>");
    let faults: Vec<String> = view
        .faults
        .iter()
        .map(|f| format!("<span class=\"fault\">{} {:.1}–{:.1} s</span>", f.kind, f.from_s, f.to_s))
        .collect();
    let faults = if faults.is_empty() { "none".to_string() } else { faults.join(" ") };
    let _ = write!(out, "<tr><td>faults</td><td>{faults}</td></tr>");
    if let Some(reason) = &s.interrupt_reason {
        let _ = write!(out, "<tr><td>ended early</td><td class=\"fail\">{}</td></tr>", esc(reason));
    }
    for e in &s.write_errors {
        let _ = write!(out, "<tr><td>not written</td><td class=\"fail\">{}</td></tr>", esc(e));
    }
    let notes = s.target.unavailable.iter().chain(s.server_samples.iter().flat_map(|x| &x.unavailable));
    for note in notes {
        let _ = write!(out, "<tr><td>unavailable</td><td class=\"note\">{}</td></tr>", esc(note));
    }
    if !view.missing.is_empty() {
        let _ =
            write!(out, "<tr><td>not in the folder</td><td class=\"note\">{}</td></tr>", esc(&view.missing.join(", ")));
    }
    out.push_str("</table>");
}

/// A fleet's merged folder: how many shards were merged of how many, how far apart they
/// started, and each shard's row with its own verdict. Nothing for a run of one process.
fn fleet_section(out: &mut String, view: &RunView) {
    let Some(fleet) = &view.summary.fleet else { return };
    let missing: Vec<String> = fleet.missing.iter().map(u32::to_string).collect();
    let _ = write!(
        out,
        "<h2>Fleet {}</h2><p>{} of {} shards merged{}; they started within {:.1} ms of each other (server clock, \
         clock uncertainty included). Each shard's own folder has its report.</p>",
        esc(&fleet.group),
        fleet.merged.len(),
        fleet.shards,
        if missing.is_empty() {
            String::new()
        } else {
            format!(", <span class=\"fail\">shard(s) {} missing</span>", missing.join(", "))
        },
        fleet.start_spread_ms
    );
    out.push_str(
        "<table><tr><th>shard</th><th>folder</th><th>ran to its end</th><th>its verdict</th><th>enqueued</th>\
         <th>completed jobs</th><th>start offset ms</th><th>clock ± ms</th></tr>",
    );
    for r in &fleet.merged {
        let verdict = match r.passed {
            Some(true) => "<span class=\"pass\">pass</span>",
            Some(false) => "<span class=\"fail\">fail</span>",
            None => "none recorded",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{verdict}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td></tr>",
            r.shard.index,
            esc(&r.folder),
            if r.completed { "yes" } else { "<span class=\"fail\">no</span>" },
            r.enqueued,
            r.completed_jobs,
            r.shard.start_offset_ms,
            r.shard.clock_uncertainty_ms
        );
    }
    out.push_str("</table>");
}

/// The failover table: per injected fault with attributed effects (a run's check ran), its
/// window and what it did, each queue's time until its enqueues were acknowledged again,
/// CLUSTERDOWN seconds, and what the check attributes to its window. Nothing without one.
fn failover_table(out: &mut String, view: &RunView) {
    let with_effects: Vec<_> =
        view.summary.faults.injected.iter().filter_map(|f| f.effects.as_ref().map(|e| (f, e))).collect();
    if with_effects.is_empty() {
        return;
    }
    out.push_str(
        "<h2>Faults and their effects</h2><table><tr><th>fault</th><th>window s</th><th>what it did</th>\
         <th>queues answered again after</th><th>CLUSTERDOWN s</th><th>lost acknowledged enqueues (I7)</th>\
         <th>tokens handed out twice (I5)</th><th>fencing violations (I6)</th><th>other violations</th>\
         <th>unknown outcomes</th><th>jobs</th></tr>",
    );
    for (f, e) in with_effects {
        let bad = |n: u64| if n > 0 { format!("<span class=\"fail\">{n}</span>") } else { "0".into() };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.2}–{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.queue.as_ref().map_or_else(|| f.kind.to_string(), |q| format!("{} on queue {q}", f.kind))),
            f.from_s, f.to_s, esc(&f.detail), esc(&e.answered_again()), e.cluster_down_s,
            bad(e.lost_enqueues), bad(e.reissued_tokens), bad(e.fencing_violations), bad(e.other_violations),
            e.unknown_outcomes, esc(&e.jobs.join(", "))
        );
    }
    out.push_str(
        "</table><p class=\"note\">What the check attributes to a fault is the violations whose evidence (the \
         accepted call, the claim, the acknowledged enqueue) falls in its window, until the next fault; the jobs and \
         events are in invariants.json.</p>",
    );
}

fn scripts_table(out: &mut String, view: &RunView) {
    out.push_str("<h2>Scripts</h2><table><tr><th>script</th><th>calls</th><th>ok</th><th>errors</th><th>ops/s</th>\
        <th>p50 ms</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>service p50</th><th>service p99</th></tr>");
    for s in &view.summary.scripts {
        let (l, iv) = (&s.latency_us, &s.latency_us.intervals);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.script), s.calls, s.ok, s.calls.saturating_sub(s.ok), s.ops_per_sec,
            with_interval(l.p50, &iv.p50, iv.samples), with_interval(l.p90, &iv.p90, iv.samples),
            with_interval(l.p99, &iv.p99, iv.samples), with_interval(l.p999, &iv.p999, iv.samples),
            with_interval(l.p9999, &iv.p9999, iv.samples), ms3(l.max),
            service(s.service_us.p50, s.service_us.intervals.samples),
            service(s.service_us.p99, s.service_us.intervals.samples)
        );
    }
    let jobs: Vec<String> =
        view.summary.jobs.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
    out.push_str("</table>");
    let _ = write!(
        out,
        "<p class=\"note\">In brackets: the {:.0} % interval of each percentile, from order statistics (true for any \
         latency distribution if calls are independent; a tail percentile with too few calls has no finite upper \
         bound and says how many it needs).{}</p>",
        CONFIDENCE * 100.0,
        esc(&effective_note(&view.summary.scripts))
    );
    // The errors line before the jobs, as in the terminal.
    if let Some(errors) = crate::report::errors_line(&view.summary.scripts) {
        let _ = write!(out, "<p class=\"note\">{}</p>", esc(&errors));
    }
    let _ = write!(out, "<p class=\"note\">latency from the intended send (coordinated-omission free), service time from the actual send; jobs: {}</p>", esc(&jobs.join(", ")));
}

/// A service-time cell, ms; `–` when none was measured (a killed run's, whose service times
/// only the end writes).
fn service(us: u64, samples: u64) -> String {
    if samples == 0 {
        "–".to_string()
    } else {
        ms3(us)
    }
}

/// A percentile cell: `1.310 (1.280–1.350)`, or `1.310 needs ≥ 3 688 calls` with no finite
/// upper bound; the value alone without an ok call.
fn with_interval(value_us: u64, b: &PercentileBound, samples: u64) -> String {
    if samples == 0 {
        return ms3(value_us);
    }
    let interval = match (b.hi_us, b.needs_calls) {
        (None, Some(needs)) => format!("needs ≥ {} calls", grouped(needs)),
        _ => format!("({})", range_ms(b)),
    };
    format!("{} <span class=\"ci\">{}</span>", ms3(value_us), esc(&interval))
}

/// ` Per-second p99 correlated: enqueue worth 2 100 independent calls of 9 000 (lag-1 0.62).`
/// for the scripts whose correlation halves their calls; empty when none does.
fn effective_note(scripts: &[ScriptSummary]) -> String {
    let parts: Vec<String> = scripts
        .iter()
        .filter_map(|s| {
            let (ess, rho) = (s.effective_samples?, s.lag1_autocorrelation?);
            (ess.saturating_mul(2) < s.ok).then(|| {
                format!("{} worth {} independent calls of {} (lag-1 {rho:.2})", s.script, grouped(ess), grouped(s.ok))
            })
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" Per-second p99 correlated, so the intervals are too narrow: {}.", parts.join("; "))
    }
}

fn script_section(out: &mut String, script: &ScriptView, x: XAxis, shade: &[(f64, f64)]) {
    let _ = write!(out, "<h2>{}</h2><div class=\"grid\">", esc(&script.name));
    let at = |k: usize| move |s: &super::model::Second| s.latency.map(|l| (s.t_s, l[k]));
    // The max as dots: in a short or sparse second it equals p99.9, and a line over a line hides it.
    let mut lines: Vec<Line> = ["p50", "p99", "p99.9"]
        .iter()
        .enumerate()
        .map(|(k, label)| Line::from_points(*label, PALETTE[k], script.seconds.iter().map(at(k))))
        .collect();
    lines.push(Line::dots("max", PALETTE[3], script.seconds.iter().filter_map(at(3)).collect()));
    figure(out, "latency per second (ms, log)", &Chart { y_label: "ms", x, log_y: true, lines, shade }, ": no ok call");
    let lines = vec![
        Line::from_points("ok calls/s", PALETTE[0], script.seconds.iter().map(|s| Some((s.t_s, s.ok_per_s)))),
        Line::from_points("errors in the second", PALETTE[1], script.seconds.iter().map(|s| Some((s.t_s, s.errors)))),
    ];
    figure(out, "throughput and errors per second", &Chart { y_label: "calls/s", x, log_y: false, lines, shade }, "");
    let mut lines = Vec::new();
    lines.extend(super::parts::spectrum_lines("latency (intended send)", PALETTE[0], &script.latency));
    lines.extend(super::parts::spectrum_lines("service time (actual send)", PALETTE[2], &script.service));
    let chart = Chart { y_label: "ms", x: XAxis::Percentile, log_y: true, lines, shade: &[] };
    figure(out, "percentile spectrum, whole run (ms, log; as HdrHistogram plots it)", &chart, ": totals.hlog missing");
    out.push_str("<figure><figcaption>named percentiles, ms</figcaption><table><tr><th></th>");
    for m in &script.latency.marks {
        let _ = write!(out, "<th>{}</th>", m.0);
    }
    out.push_str("</tr>");
    for (label, s) in [("latency", &script.latency), ("service", &script.service)] {
        let _ = write!(out, "<tr><td>{label}</td>");
        for m in &s.marks {
            let _ = write!(out, "<td>{:.3}</td>", m.2);
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></figure></div>");
}

fn queue_section(out: &mut String, view: &RunView, x: XAxis, shade: &[(f64, f64)]) {
    out.push_str("<h2>Queue</h2><div class=\"grid\">");
    let q = &view.queue;
    let depth = |label: &str, k: usize, f: fn(&super::model::QueuePoint) -> Option<f64>| {
        Line::from_points(label, PALETTE[k], q.iter().map(move |p| f(p).map(|v| (p.t_s, v))))
    };
    let lines =
        vec![depth("pending", 0, |p| p.pending), depth("active", 1, |p| p.active), depth("delayed", 2, |p| p.delayed)];
    figure(
        out,
        "depths (jobs, all queues)",
        &Chart { y_label: "jobs", x, log_y: false, lines, shade },
        ": queue.csv missing",
    );
    let lines = vec![
        Line::from_points("reaped", PALETTE[3], q.iter().map(|p| Some((p.t_s, p.reaped)))),
        Line::from_points("stale completions refused", PALETTE[4], q.iter().map(|p| Some((p.t_s, p.stale_refused)))),
    ];
    figure(
        out,
        "reaps and stale completions per second",
        &Chart { y_label: "jobs/s", x, log_y: false, lines, shade },
        ": queue.csv missing",
    );
    out.push_str("</div>");
}

fn server_section(out: &mut String, view: &RunView, x: XAxis, shade: &[(f64, f64)]) {
    out.push_str("<h2>Server</h2><div class=\"grid\">");
    let mut nodes: Vec<&str> = view.server.iter().map(|p| p.node.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let several = nodes.len() > 1;
    let name = |what: &str, node: &str| if several { format!("{what} {node}") } else { what.to_string() };
    let series = |node: &str, f: fn(&super::model::ServerPoint) -> Option<f64>| {
        let node = node.to_string();
        view.server.iter().filter(move |p| p.node == node).map(move |p| f(p).map(|v| (p.t_s, v))).collect::<Vec<_>>()
    };
    let (mut cpu, mut mem, mut ops) = (Vec::new(), Vec::new(), Vec::new());
    for (i, node) in nodes.iter().enumerate() {
        let c = |k: usize| PALETTE[(i * 2 + k) % PALETTE.len()];
        cpu.push(Line::from_points(name("user", node), c(0), series(node, |p| p.cpu_user_pct)));
        cpu.push(Line::from_points(name("sys", node), c(1), series(node, |p| p.cpu_sys_pct)));
        let mb = |f: fn(&super::model::ServerPoint) -> Option<f64>| {
            series(node, f).into_iter().map(|p| p.map(|(t, v)| (t, v / 1e6)))
        };
        mem.push(Line::from_points(name("used_memory", node), PALETTE[(i * 3) % 6], mb(|p| p.used_memory)));
        mem.push(Line::from_points(name("rss", node), PALETTE[(i * 3 + 1) % 6], mb(|p| p.used_memory_rss)));
        mem.push(Line::from_points(name("Lua VM", node), PALETTE[(i * 3 + 2) % 6], mb(|p| p.used_memory_lua)));
        ops.push(Line::from_points(name("server commands/s", node), c(0), series(node, |p| p.ops_per_sec)));
    }
    // The harness's own view of the same seconds: ok calls of every script.
    let mut harness: Vec<(f64, f64)> = Vec::new();
    for s in view.scripts.iter().flat_map(|s| &s.seconds) {
        match harness.iter_mut().find(|h| (h.0 - s.t_s).abs() < 0.5) {
            Some(h) => h.1 += s.ok_per_s,
            None => harness.push((s.t_s, s.ok_per_s)),
        }
    }
    harness.sort_by(|a, b| a.0.total_cmp(&b.0));
    ops.push(Line::from_points("harness ok calls/s", PALETTE[4], harness.into_iter().map(Some)));
    let missing = ": server.csv missing or INFO not readable";
    figure(out, "server CPU (% of one core)", &Chart { y_label: "%", x, log_y: false, lines: cpu, shade }, missing);
    figure(out, "server memory (MB)", &Chart { y_label: "MB", x, log_y: false, lines: mem, shade }, missing);
    figure(
        out,
        "server commands/s beside the harness's calls/s",
        &Chart { y_label: "per s", x, log_y: false, lines: ops, shade },
        missing,
    );
    out.push_str("</div>");
}
