//! Per-script summaries (the `scripts` array of summary.json, the rows of scripts.csv and the table).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::percentile_bounds::PercentileIntervals;
use crate::lua::{ErrorCode, Script};
use crate::metrics::RunMetrics;
use crate::stats::{effective_sample_size, lag1_autocorrelation};

/// Fewest measured seconds with an ok call for a lag-1 autocorrelation worth reporting.
const MIN_SECONDS_FOR_CORRELATION: usize = 8;

/// Latency percentiles of one histogram, µs (mean as f64 µs). All zero for an empty histogram.
///
/// Read from a merged HdrHistogram (`value_at_quantile`: the highest value equivalent to the
/// quantile's bucket, within 0.1 %); never an average of per-task percentiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Percentiles {
    /// Lowest recorded value, µs (bucket bottom).
    pub min: u64,
    /// Median, µs.
    pub p50: u64,
    /// 90th percentile, µs.
    pub p90: u64,
    /// 99th percentile, µs.
    pub p99: u64,
    /// 99.9th percentile, µs.
    pub p999: u64,
    /// 99.99th percentile, µs.
    pub p9999: u64,
    /// Highest recorded value, µs, as HdrHistogram reports it: the top of its bucket, so up to
    /// 0.1 % above the raw sample (3000 µs reads 3001).
    pub max: u64,
    /// Arithmetic mean, µs.
    pub mean: f64,
    /// The 95 % distribution-free interval of p50..p99.99 (order statistics; independent
    /// samples assumed, see [`ScriptSummary::effective_samples`]).
    pub intervals: PercentileIntervals,
}

impl Percentiles {
    /// The percentiles of `h` (µs), with their intervals (a rank search per percentile: run
    /// once per script at the end, never on the hot path).
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
            mean: h.mean(),
            intervals: PercentileIntervals::of(h),
        }
    }
}

/// One called script over the measured part of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScriptSummary {
    /// Script name (`Script::name`).
    pub script: String,
    /// Calls made: `ok` plus every error.
    #[serde(default)]
    pub calls: u64,
    /// Calls that succeeded.
    #[serde(default)]
    pub ok: u64,
    /// Failed calls by code name (`ErrorCode::name`), only codes that occurred.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// Ok calls per second of `window` (errors are never throughput).
    pub ops_per_sec: f64,
    /// The window of `ops_per_sec`: `measured` (warmup to the end: load and drain, what
    /// consumers and maintenance run in) or `load` (warmup to the end of the load phase: the
    /// producers' scripts, which send nothing during the drain).
    #[serde(default = "measured")]
    pub window: String,
    /// The window's length, s.
    #[serde(default)]
    pub window_secs: f64,
    /// Ok-call latency from the intended send, µs (coordinated-omission free, as wrk2).
    pub latency_us: Percentiles,
    /// Ok-call service time from the actual send, µs.
    #[serde(default)]
    pub service_us: Percentiles,
    /// Failed calls (timeouts included), µs from the intended send: kept apart so a fast
    /// refusal cannot make a script look faster and a timeout cannot hide.
    #[serde(default)]
    pub error_latency_us: Percentiles,
    /// Open-loop sends, µs from the intended to the actual send: how well the harness held its
    /// schedule (all zero in closed loop).
    #[serde(default)]
    pub send_lag_us: Percentiles,
    /// Open-loop sends later than the scenario's `late_after` behind their intended time, in
    /// the measured part (warmup excluded, as `calls`).
    #[serde(default)]
    pub late: u64,
    /// `late` over `calls`, 0..1 (0.0 with no call): the share of sends that fell behind, which
    /// only overload should raise.
    #[serde(default)]
    pub late_fraction: f64,
    /// Lag-1 autocorrelation of the per-second ok-latency p99 over the measured seconds with an
    /// ok call, −1..1; None with fewer than 8 such seconds (or a summary that predates it).
    #[serde(default)]
    pub lag1_autocorrelation: Option<f64>,
    /// Ok calls discounted for that correlation, n·(1 − ρ)/(1 + ρ) clamped to 1..=n (n when
    /// ρ ≤ 0): roughly how many independent calls the latency intervals are worth. None as
    /// `lag1_autocorrelation`.
    #[serde(default)]
    pub effective_samples: Option<u64>,
}

impl ScriptSummary {
    /// A summary with only its counts set: `calls`, `ok` and `errors` by code (the unit tests
    /// of the gates and of the judge; a killed run's report, for a script its last summary
    /// rewrite did not have yet).
    pub(crate) fn with_counts(name: &str, calls: u64, ok: u64, errors: &[(&str, u64)]) -> ScriptSummary {
        ScriptSummary {
            script: name.into(),
            calls,
            ok,
            errors: errors.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            ops_per_sec: 0.0,
            window: "measured".into(),
            window_secs: 0.0,
            latency_us: Default::default(),
            service_us: Default::default(),
            error_latency_us: Default::default(),
            send_lag_us: Default::default(),
            late: 0,
            late_fraction: 0.0,
            lag1_autocorrelation: None,
            effective_samples: None,
        }
    }

    /// Total failed calls (all codes).
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The line under the scripts table (terminal and report.html) when any call failed: each
/// script's errors by code, then, when any was a stale worker's call refused
/// ([`ErrorCode::is_stale`]: fencing at work, which invariant I6 requires wherever a scenario
/// plants stalls or zombies), how many of all errors were, and how many others there were.
/// `None` when no call failed.
///
/// Shapes: `errors: complete EMQFENCE 4 EMQSTATE 31, extend EMQSTATE 3; stale workers' calls
/// refused (fencing, invariant I6): 38 of 38`; with other errors too, `...: 5 of 9; other
/// errors: 4`; with none stale, only `errors: enqueue timeout 4`.
pub fn errors_line(scripts: &[ScriptSummary]) -> Option<String> {
    use std::fmt::Write as _;
    let (mut total, mut stale) = (0u64, 0u64);
    let mut line = String::from("errors:");
    for s in scripts.iter().filter(|s| s.error_total() > 0) {
        let sep = if total == 0 { " " } else { ", " };
        let _ = write!(line, "{sep}{}", s.script);
        for (code, n) in &s.errors {
            let _ = write!(line, " {code} {n}");
            total += n;
            if ErrorCode::from_name(code).is_some_and(ErrorCode::is_stale) {
                stale += n;
            }
        }
    }
    if total == 0 {
        return None;
    }
    if stale > 0 {
        let _ = write!(line, "; stale workers' calls refused (fencing, invariant I6): {stale} of {total}");
        if stale < total {
            let _ = write!(line, "; other errors: {}", total - stale);
        }
    }
    Some(line)
}

fn measured() -> String {
    "measured".to_string()
}

/// Rates the producers' scripts ([`Script::is_enqueue`](crate::lua::Script::is_enqueue):
/// EchoMQ's and BullMQ's) over the load phase's measured part, `load_secs` (after warmup): they
/// send nothing during the drain, so dividing by load + drain understated them (a 1 000/s run
/// with a 2 s drain read 718 ops/s).
pub fn over_load_phase(scripts: &mut [ScriptSummary], load_secs: f64) {
    if load_secs <= 0.0 {
        return;
    }
    for s in scripts
        .iter_mut()
        .filter(|s| crate::lua::Script::from_name(&s.script).is_some_and(crate::lua::Script::is_enqueue))
    {
        s.ops_per_sec = s.ok as f64 / load_secs;
        s.window = "load".to_string();
        s.window_secs = load_secs;
    }
}

/// One summary per script that was called (or sent late) in the measured part, in `Script` order.
///
/// `ops_per_sec` is `ok / RunMetrics::measured_secs()`, 0.0 when nothing was measured.
pub fn summarize(run: &RunMetrics) -> Vec<ScriptSummary> {
    let secs = run.measured_secs();
    run.scripts
        .iter()
        .filter(|t| t.was_called())
        .map(|t| {
            let (lag1_autocorrelation, effective_samples) = correlation(run, t.script, t.ok);
            ScriptSummary {
                script: t.script.name().to_owned(),
                calls: t.calls(),
                ok: t.ok,
                errors: ErrorCode::ALL
                    .into_iter()
                    .filter(|c| t.errors[c.index()] > 0)
                    .map(|c| (c.name().to_owned(), t.errors[c.index()]))
                    .collect(),
                ops_per_sec: if secs > 0.0 { t.ok as f64 / secs } else { 0.0 },
                window: measured(),
                window_secs: secs,
                latency_us: Percentiles::of(&t.latency),
                service_us: Percentiles::of(&t.service),
                error_latency_us: Percentiles::of(&t.error_latency),
                send_lag_us: Percentiles::of(&t.send_lag),
                late: t.late,
                late_fraction: if t.calls() > 0 { t.late as f64 / t.calls() as f64 } else { 0.0 },
                lag1_autocorrelation,
                effective_samples,
            }
        })
        .collect()
}

/// The lag-1 autocorrelation of `script`'s per-second p99 (seconds with an ok call, in order)
/// and the effective number of its `ok` calls; both None below
/// [`MIN_SECONDS_FOR_CORRELATION`] seconds.
fn correlation(run: &RunMetrics, script: Script, ok: u64) -> (Option<f64>, Option<u64>) {
    let p99s: Vec<f64> = run
        .intervals
        .iter()
        .filter_map(|r| r.scripts.iter().find(|s| s.script == script && s.ok > 0))
        .map(|s| s.p99_us as f64)
        .collect();
    if p99s.len() < MIN_SECONDS_FOR_CORRELATION {
        return (None, None);
    }
    let rho = lag1_autocorrelation(&p99s);
    (rho, rho.map(|r| effective_sample_size(ok, r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    #[test]
    fn the_errors_line_tells_stale_refusals_from_failures() {
        let mut s = summarize(&sample_run());
        assert_eq!(s[1].errors.len(), 1, "the sample's complete has EMQFENCE only");
        s[1].errors.insert("EMQSTATE".into(), 3);
        s[0].errors.insert("timeout".into(), 4);
        assert_eq!(
            errors_line(&s).unwrap(),
            "errors: enqueue timeout 4, complete EMQFENCE 2 EMQSTATE 3; stale workers' calls refused \
             (fencing, invariant I6): 5 of 9; other errors: 4"
        );
        // No stale refusal: the line does not speak of fencing.
        s[1].errors.clear();
        assert_eq!(errors_line(&s).unwrap(), "errors: enqueue timeout 4");
        for x in &mut s {
            x.errors.clear();
        }
        assert_eq!(errors_line(&s), None);
    }

    #[test]
    fn summaries_count_only_ok_calls_as_throughput() {
        let run = sample_run();
        let s = summarize(&run);
        let names: Vec<&str> = s.iter().map(|s| s.script.as_str()).collect();
        assert_eq!(names, ["enqueue", "complete"]);
        let complete = &s[1];
        assert_eq!((complete.calls, complete.ok), (12, 10));
        assert_eq!(complete.errors.len(), 1);
        assert_eq!(complete.errors["EMQFENCE"], 2);
        assert_eq!(complete.ops_per_sec, 5.0, "10 ok over 2 measured seconds");
        assert_eq!(complete.latency_us.max, 2_000);
        assert!(s[0].errors.is_empty());
    }

    /// EchoMQ's and BullMQ's enqueue scripts are rated over the load phase; the others keep
    /// the measured window (load + drain).
    #[test]
    fn producers_scripts_of_both_protocols_use_the_load_window() {
        let mut s = summarize(&sample_run());
        let mut bull = s[0].clone();
        bull.script = "addStandardJob".into();
        s.push(bull);
        let mut claim = s[1].clone();
        claim.script = "moveToActive".into();
        s.push(claim);
        over_load_phase(&mut s, 4.0);
        let windows: Vec<(&str, &str)> = s.iter().map(|x| (x.script.as_str(), x.window.as_str())).collect();
        assert_eq!(
            windows,
            [("enqueue", "load"), ("complete", "measured"), ("addStandardJob", "load"), ("moveToActive", "measured")]
        );
        assert_eq!(s[2].ops_per_sec, s[2].ok as f64 / 4.0);
        assert_eq!(s[2].window_secs, 4.0);
    }

    /// Ten seconds whose p99 drifts slowly: strongly correlated, so the calls are worth fewer.
    #[test]
    fn a_drifting_per_second_p99_discounts_the_samples() {
        let mut run = sample_run();
        let second = run.intervals[0].clone();
        run.intervals = (0..10u64)
            .map(|k| {
                let mut r = second.clone();
                r.index = 1 + k;
                r.scripts.iter_mut().for_each(|s| s.p99_us = 1_000 + 100 * k.min(9 - k));
                r
            })
            .collect();
        let s = summarize(&run);
        let rho = s[0].lag1_autocorrelation.unwrap();
        assert!(rho > 0.5, "{rho}");
        let ess = s[0].effective_samples.unwrap();
        assert!(ess >= 1 && ess < s[0].ok / 3, "{ess} of {}", s[0].ok);
        // Two seconds are too few to say.
        let short = summarize(&sample_run());
        assert_eq!((short[0].lag1_autocorrelation, short[0].effective_samples), (None, None));
    }

    #[test]
    fn a_summary_without_intervals_still_reads() {
        let old = r#"{"script":"enqueue","ops_per_sec":1.0,"latency_us":{"p50":5,"p99":9}}"#;
        let s: ScriptSummary = serde_json::from_str(old).unwrap();
        assert_eq!((s.latency_us.p99, s.latency_us.intervals.samples), (9, 0));
        assert_eq!(s.effective_samples, None);
    }

    #[test]
    fn summary_round_trips_through_json() {
        let s = summarize(&sample_run());
        let text = serde_json::to_string(&s).unwrap();
        let back: Vec<ScriptSummary> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
}
