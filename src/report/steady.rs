//! Whether a run reached a steady state, and the system's rate beside the producers': a rate
//! the producers sent is not a rate the deployment sustains when the consumers fall behind and
//! the backlog grows, and a percentile of a run whose p99 still climbs describes no rate at all.
//!
//! Read over the measured part of the load phase (after warmup, before the drain), one point
//! per whole second. Each series is tested with Mann–Kendall corrected for autocorrelation
//! ([`crate::stats::trend`]) and judged by a significance **and** a size: a trend too small to
//! matter (a p99 up 3 % over the window) is not a finding however significant, and a large
//! change that the noise explains is not one either.

use serde::{Deserialize, Serialize};

use crate::metrics::{JobCounter, RunMetrics};
use crate::stats::trend::{mann_kendall_binned as mann_kendall, TrendTest, MIN_POINTS};

use super::rates::ProducerRates;
use super::results::DepthSample;

/// The p-value below which a trend is significant: 1 %, so a stationary run is called trending
/// about once in a hundred per series tested.
pub const TREND_P: f64 = 0.01;
/// A backlog growing by more than this share of the arrival rate is not steady: the consumers
/// finish fewer jobs than arrive.
pub const BACKLOG_SHARE: f64 = 0.02;
/// A throughput changing by more than this share of its median over the window is not steady.
pub const THROUGHPUT_CHANGE: f64 = 0.10;
/// A p99 rising by more than this share of its median over the window is not steady.
pub const P99_CHANGE: f64 = 0.25;
/// A second needs this many ok calls of a script for its p99 to be a point of that script's
/// series (below it the second's p99 is its maximum, and noise).
pub const P99_MIN_CALLS: u64 = 20;

/// The system's rate over the measured load phase: what arrived, what finished, what waited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SystemRates {
    /// Whole measured seconds of the load phase the figures cover.
    pub window_secs: u64,
    /// Jobs enqueued per second over the window.
    pub arrivals_per_sec: f64,
    /// Jobs finished (completed, or failed for good) per second over the same window: the rate
    /// the deployment sustained.
    pub completed_per_sec: f64,
    /// The backlog at the window's first and last second, jobs.
    pub backlog_start: Option<u64>,
    /// See `backlog_start`.
    pub backlog_end: Option<u64>,
    /// The backlog's Theil–Sen slope, jobs per second (positive: growing).
    pub backlog_slope_per_sec: Option<f64>,
    /// What the backlog is: `pending` (the server's pending sets, read each second) or
    /// `in_system` (enqueued less finished, from the run's counters, when the server's depths
    /// could not be read).
    pub backlog_source: String,
}

impl SystemRates {
    /// The table's line: `system: 20 000 jobs/s arrived, 5 400 finished (27.0 %); backlog
    /// (pending) 12 → 131 400, +14 600 jobs/s`.
    pub fn line(&self) -> String {
        let share =
            if self.arrivals_per_sec > 0.0 { self.completed_per_sec / self.arrivals_per_sec * 100.0 } else { 100.0 };
        let mut line = format!(
            "system over {} s of load: {:.0} jobs/s arrived, {:.0} finished ({share:.1} %)",
            self.window_secs, self.arrivals_per_sec, self.completed_per_sec
        );
        if let (Some(a), Some(b)) = (self.backlog_start, self.backlog_end) {
            line.push_str(&format!("; backlog ({}) {a} -> {b}", self.backlog_source));
            if let Some(slope) = self.backlog_slope_per_sec {
                line.push_str(&format!(", {slope:+.1} jobs/s"));
            }
        }
        line
    }
}

/// One series' verdict on steadiness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyCheck {
    /// What was tested: `rate` (the intended rate was held), `backlog`, `throughput` (jobs
    /// finished per second) or `p99 <script>`.
    pub name: String,
    /// True when this series shows no trend of the size that matters.
    pub steady: bool,
    /// The trend test, where one was run (`rate` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend: Option<TrendStatistic>,
    /// One line a user reads: the figure and the statistic.
    pub detail: String,
}

/// A trend test's figures, as summary.json records them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrendStatistic {
    /// Seconds in the series.
    pub n: usize,
    /// The Mann–Kendall normal score (autocorrelation-corrected).
    pub z: f64,
    /// Its two-sided p-value.
    pub p_value: f64,
    /// Theil–Sen slope, the series' unit per second.
    pub slope_per_sec: f64,
    /// The slope over the window as a share of the series' median (0.1: +10 %).
    pub change: f64,
    /// Hamed–Rao's variance factor (1: no autocorrelation found).
    pub variance_factor: f64,
}

/// Whether the run was steady, with every check and its statistic (summary.json `steady`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SteadyState {
    /// `true` steady, `false` not, `null` too short to tell (fewer than 8 whole measured seconds
    /// of load, and the rate held).
    pub steady: Option<bool>,
    /// Whole measured seconds of the load phase tested.
    pub seconds: usize,
    /// Each check, in order: rate, backlog, throughput, then p99 per script.
    pub checks: Vec<SteadyCheck>,
    /// Why the trends were not tested, when they were not (a run whose `[[stages]]` change the
    /// rate on purpose); `steady` is then `null` unless the rate was not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_tested: Option<String>,
    /// The criteria the run's workload admits, in the checks' names (`rate`, `backlog`,
    /// `throughput`, `p99`): see [`criteria`]. Empty in older folders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub criteria: Vec<String>,
}

/// What a run's steadiness is judged on, given its workload: `rate` (the intended rate held,
/// open loop only), `backlog` and `throughput` (only with consumers: without them nobody drains
/// the backlog, so it grows by every job sent and nothing finishes, by design), and `p99` (each
/// script's per-second p99 trend). A `shaped` run (`[[stages]]`) is judged on its rate alone.
pub fn criteria(open_loop: bool, consumers: bool, shaped: bool) -> Vec<&'static str> {
    let mut names = Vec::new();
    if open_loop {
        names.push("rate");
    }
    if !shaped {
        if consumers {
            names.extend(["backlog", "throughput"]);
        }
        names.push("p99");
    }
    names
}

impl SteadyState {
    /// The checks that failed, as one line each (`backlog: grows 14 600 jobs/s ...`).
    pub fn failures(&self) -> Vec<String> {
        self.checks.iter().filter(|c| !c.steady).map(|c| format!("{}: {}", c.name, c.detail)).collect()
    }

    /// The table's line: `steady: yes (8 checks over 27 s)`, `steady: NO: backlog: ...; ...`,
    /// or `steady: too short to tell (5 s of load measured; 8 needed)`.
    pub fn line(&self) -> String {
        match self.steady {
            Some(true) => format!("steady: yes ({} checks over {} s of load)", self.checks.len(), self.seconds),
            Some(false) => format!("steady: NO: {}", self.failures().join("; ")),
            None if self.not_tested.is_some() => {
                format!("steady: not tested ({})", self.not_tested.as_deref().unwrap_or_default())
            }
            None => {
                format!("steady: too short to tell ({} s of load measured; a trend needs {MIN_POINTS})", self.seconds)
            }
        }
    }
}

/// The per-second series a steadiness judgment reads, over the measured load phase.
#[derive(Debug, Clone, Default)]
pub struct LoadSeries {
    /// Jobs enqueued in each second.
    pub arrivals: Vec<f64>,
    /// Jobs finished (completed or failed for good) in each second.
    pub finished: Vec<f64>,
    /// The backlog at each second's end (see [`SystemRates::backlog_source`]).
    pub backlog: Vec<f64>,
    /// `pending` or `in_system`.
    pub backlog_source: &'static str,
    /// Per script: the p99 of each second with at least [`P99_MIN_CALLS`] ok calls, µs.
    pub p99_us: Vec<(String, Vec<f64>)>,
}

impl LoadSeries {
    /// The series of `run`'s whole measured seconds before `load_secs` (the load phase's end,
    /// s since the start), the backlog from `depths` (pending, the last reading within each
    /// second) when every one of those seconds has a reading, else from the counters.
    pub fn of(run: &RunMetrics, depths: &[DepthSample], load_secs: f64) -> LoadSeries {
        let first = run.warmup_intervals;
        let end = load_secs.max(0.0).floor() as u64;
        let seconds: Vec<_> =
            run.intervals.iter().filter(|r| r.index >= first && r.index < end && r.duration_us >= 1_000_000).collect();
        let job = |r: &crate::metrics::IntervalRecord, c: JobCounter| r.jobs[c.index()] as f64;
        let arrivals: Vec<f64> = seconds.iter().map(|r| job(r, JobCounter::Enqueued)).collect();
        let finished: Vec<f64> =
            seconds.iter().map(|r| job(r, JobCounter::Completed) + job(r, JobCounter::Failed)).collect();
        let read: Vec<Option<f64>> = seconds
            .iter()
            .map(|r| {
                let from = r.index as f64;
                depths.iter().rev().find(|d| d.t_s >= from && d.t_s < from + 1.0).map(|d| d.depths.pending as f64)
            })
            .collect();
        let (backlog, backlog_source) = if !read.is_empty() && read.iter().all(Option::is_some) {
            (read.into_iter().flatten().collect(), "pending")
        } else {
            let mut in_system = 0.0;
            let b = arrivals
                .iter()
                .zip(&finished)
                .map(|(a, f)| {
                    in_system += a - f;
                    in_system
                })
                .collect();
            (b, "in_system")
        };
        let mut p99_us = Vec::new();
        for totals in run.scripts.iter().filter(|t| t.was_called()) {
            let series: Vec<f64> = seconds
                .iter()
                .filter_map(|r| r.scripts.iter().find(|s| s.script == totals.script))
                .filter(|s| s.ok >= P99_MIN_CALLS)
                .map(|s| s.p99_us as f64)
                .collect();
            if series.len() >= MIN_POINTS {
                p99_us.push((totals.script.name().to_string(), series));
            }
        }
        LoadSeries { arrivals, finished, backlog, backlog_source, p99_us }
    }

    /// The system's rates over these seconds.
    pub fn system_rates(&self) -> SystemRates {
        let n = self.arrivals.len();
        let per_sec = |xs: &[f64]| if n == 0 { 0.0 } else { xs.iter().sum::<f64>() / n as f64 };
        SystemRates {
            window_secs: n as u64,
            arrivals_per_sec: per_sec(&self.arrivals),
            completed_per_sec: per_sec(&self.finished),
            backlog_start: self.backlog.first().map(|b| b.max(0.0) as u64),
            backlog_end: self.backlog.last().map(|b| b.max(0.0) as u64),
            backlog_slope_per_sec: mann_kendall(&self.backlog).map(|t| t.slope),
            backlog_source: self.backlog_source.to_string(),
        }
    }
}

/// Judges the steadiness of `series`, with the open loop's `rates` (`None` in closed loop).
///
/// Not steady when any of: the intended rate was not held ([`ProducerRates::held`]); the
/// backlog grows significantly by more than [`BACKLOG_SHARE`] of the arrival rate; the jobs
/// finished per second trend significantly by more than [`THROUGHPUT_CHANGE`] of their median
/// over the window; a script's per-second p99 rises significantly by more than [`P99_CHANGE`].
///
/// `shaped`: the run's rate follows `[[stages]]`, so its throughput, backlog and p99 change on
/// purpose: only the rate is judged, and the trends are reported as not tested. `consumers`:
/// the scenario has consumers; without them the backlog and throughput are not judged (see
/// [`criteria`]).
pub fn judge(series: &LoadSeries, rates: Option<&ProducerRates>, shaped: bool, consumers: bool) -> SteadyState {
    let seconds = series.arrivals.len();
    let mut checks = Vec::new();
    if let Some(r) = rates {
        let share = if r.requested_per_sec > 0.0 { r.achieved_per_sec / r.requested_per_sec } else { 1.0 };
        checks.push(SteadyCheck {
            name: "rate".into(),
            steady: r.held,
            trend: None,
            detail: format!(
                "achieved {:.0} of {:.0} jobs/s ({:.1} %), {} intended sends never sent",
                r.achieved_per_sec,
                r.requested_per_sec,
                share * 100.0,
                r.never_sent
            ),
        });
    }
    let too_short = seconds < MIN_POINTS;
    if !too_short && !shaped {
        let arrivals = crate::stats::mean(&series.arrivals).unwrap_or(0.0);
        let backlog = if consumers { mann_kendall(&series.backlog) } else { None };
        if let Some(t) = backlog {
            let share = if arrivals > 0.0 { t.slope / arrivals * 100.0 } else { 0.0 };
            let trend = t.p_value < TREND_P && t.slope > BACKLOG_SHARE * arrivals && t.slope > 0.0;
            // A size check that needs no significance: a short window whose backlog grew by
            // more than the allowed share of what arrived, while fewer finished than arrived
            // by as much, fell behind however noisy the series.
            let window = series.backlog.len().saturating_sub(1) as f64;
            let grown = series.backlog.last().unwrap_or(&0.0) - series.backlog.first().unwrap_or(&0.0);
            let (arrived, finished) = (series.arrivals.iter().sum::<f64>(), series.finished.iter().sum::<f64>());
            let behind = window > 0.0
                && grown > BACKLOG_SHARE * arrivals * window
                && arrived - finished > BACKLOG_SHARE * arrived;
            let grows = trend || behind;
            let size = if behind && !trend {
                format!(
                    "; grew {grown:.0} jobs over {window:.0} s while {:.1} % of the arrivals finished",
                    finished / arrived.max(1.0) * 100.0
                )
            } else {
                String::new()
            };
            checks.push(SteadyCheck {
                name: "backlog".into(),
                steady: !grows,
                trend: Some(statistic(&t, &series.backlog)),
                detail: format!(
                    "{} {:+.1} jobs/s ({share:.1} % of the {arrivals:.0} arriving per s; {}){size}",
                    if grows { "grows" } else { "slope" },
                    t.slope,
                    test_words(&t)
                ),
            });
        }
        let finished = if consumers { mann_kendall(&series.finished) } else { None };
        if let Some(t) = finished {
            let s = statistic(&t, &series.finished);
            let trends = t.p_value < TREND_P && s.change.abs() > THROUGHPUT_CHANGE;
            checks.push(SteadyCheck {
                name: "throughput".into(),
                steady: !trends,
                trend: Some(s),
                detail: format!(
                    "jobs finished per s {} {:+.1} % over the window ({})",
                    if trends { "trend" } else { "change" },
                    s.change * 100.0,
                    test_words(&t)
                ),
            });
        }
        for (script, p99) in &series.p99_us {
            if let Some(t) = mann_kendall(p99) {
                let s = statistic(&t, p99);
                let rises = t.p_value < TREND_P && s.change > P99_CHANGE;
                checks.push(SteadyCheck {
                    name: format!("p99 {script}"),
                    steady: !rises,
                    trend: Some(s),
                    detail: format!(
                        "per-second p99 {} {:+.1} % over the window ({})",
                        if rises { "rises" } else { "changes" },
                        s.change * 100.0,
                        test_words(&t)
                    ),
                });
            }
        }
    }
    let failed = checks.iter().any(|c| !c.steady);
    let steady = if failed {
        Some(false)
    } else if too_short || shaped {
        None
    } else {
        Some(true)
    };
    let not_tested = shaped.then(|| "the [[stages]] change the rate on purpose; only the rate held is judged".into());
    let criteria = criteria(rates.is_some(), consumers, shaped).into_iter().map(String::from).collect();
    SteadyState { steady, seconds, checks, not_tested, criteria }
}

fn statistic(t: &TrendTest, xs: &[f64]) -> TrendStatistic {
    let median = crate::stats::median(xs).unwrap_or(0.0);
    let over_window = t.slope * (t.n.saturating_sub(1)) as f64;
    let change = if median.abs() > 0.0 { over_window / median.abs() } else { 0.0 };
    TrendStatistic {
        n: t.n,
        z: t.z,
        p_value: t.p_value,
        slope_per_sec: t.slope,
        change,
        variance_factor: t.variance_factor,
    }
}

fn test_words(t: &TrendTest) -> String {
    let p = if t.p_value < 1e-6 {
        "p < 1e-6".to_string()
    } else if t.p_value < 0.001 {
        format!("p = {:.1e}", t.p_value)
    } else {
        format!("p = {:.3}", t.p_value)
    };
    format!("Mann-Kendall z = {:.1}, {p}, n = {} s", t.z, t.n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn noisy(n: usize, level: f64, spread: f64, seed: u64) -> Vec<f64> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        (0..n).map(|_| level + spread * (rng.random::<f64>() - 0.5)).collect()
    }

    fn stationary(seed: u64) -> LoadSeries {
        LoadSeries {
            arrivals: noisy(30, 1000.0, 60.0, seed),
            finished: noisy(30, 1000.0, 60.0, seed + 1),
            backlog: noisy(30, 40.0, 30.0, seed + 2),
            backlog_source: "pending",
            p99_us: vec![("claim".into(), noisy(30, 900.0, 200.0, seed + 3))],
        }
    }

    fn held(held: bool) -> ProducerRates {
        ProducerRates {
            requested_per_sec: 1000.0,
            achieved_per_sec: if held { 999.0 } else { 700.0 },
            held,
            never_sent: if held { 0 } else { 9000 },
            ..ProducerRates::default()
        }
    }

    #[test]
    fn a_stationary_run_is_steady() {
        for seed in 0..20 {
            let s = judge(&stationary(seed * 10), Some(&held(true)), false, true);
            assert_eq!(s.steady, Some(true), "seed {seed}: {:?}", s.failures());
            assert_eq!(s.checks.len(), 4);
        }
    }

    #[test]
    fn a_growing_backlog_is_not_steady() {
        let mut s = stationary(1);
        // Consumers finish 730 of 1000 a second: the backlog grows 270 a second.
        s.backlog = s.backlog.iter().enumerate().map(|(i, b)| b + 270.0 * i as f64).collect();
        let j = judge(&s, Some(&held(true)), false, true);
        assert_eq!(j.steady, Some(false));
        let failures = j.failures();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("backlog: grows +27"), "{failures:?}");
        assert!(j.line().starts_with("steady: NO: backlog"), "{}", j.line());
    }

    #[test]
    fn a_backlog_that_grew_by_more_than_the_share_is_not_steady_without_significance() {
        let mut s = stationary(6);
        // 9 s of noisy growth, +794 a second on average, 3 % of the arrivals left unfinished:
        // too noisy for the trend test at 1 %, too large to be steady.
        s.arrivals = vec![20_000.0; 10];
        s.finished = vec![19_400.0; 10];
        s.backlog = vec![80.0, 4_000.0, 200.0, 5_000.0, 300.0, 5_500.0, 900.0, 6_000.0, 1_500.0, 7_226.0];
        s.p99_us.clear();
        let j = judge(&s, None, false, true);
        assert_eq!(j.steady, Some(false), "{:?}", j.checks);
        assert!(j.failures()[0].contains("while 97.0 % of the arrivals finished"), "{:?}", j.failures());
    }

    #[test]
    fn a_trending_p99_is_not_steady_and_a_falling_one_is() {
        let mut s = stationary(2);
        s.p99_us[0].1 = s.p99_us[0].1.iter().enumerate().map(|(i, p)| p + 40.0 * i as f64).collect();
        let j = judge(&s, None, false, true);
        assert_eq!(j.steady, Some(false));
        assert!(j.failures()[0].starts_with("p99 claim: per-second p99 rises"), "{:?}", j.failures());
        s.p99_us[0].1.reverse();
        assert_eq!(judge(&s, None, false, true).steady, Some(true));
    }

    #[test]
    fn falling_throughput_is_not_steady() {
        let mut s = stationary(3);
        s.finished = s.finished.iter().enumerate().map(|(i, f)| f - 15.0 * i as f64).collect();
        let j = judge(&s, None, false, true);
        assert_eq!(j.steady, Some(false));
        assert!(j.failures()[0].starts_with("throughput:"), "{:?}", j.failures());
    }

    #[test]
    fn a_shortfall_is_not_steady_even_when_too_short_to_test_trends() {
        let mut s = stationary(4);
        let j = judge(&s, Some(&held(false)), false, true);
        assert_eq!(j.steady, Some(false));
        assert!(j.failures()[0].starts_with("rate: achieved 700 of 1000"), "{:?}", j.failures());
        s.arrivals.truncate(5);
        s.finished.truncate(5);
        s.backlog.truncate(5);
        assert_eq!(judge(&s, Some(&held(false)), false, true).steady, Some(false));
        let short = judge(&s, Some(&held(true)), false, true);
        assert_eq!(short.steady, None);
        assert!(short.line().contains("too short"), "{}", short.line());
    }

    #[test]
    fn a_shaped_run_judges_only_its_rate() {
        let mut s = stationary(5);
        s.backlog = s.backlog.iter().enumerate().map(|(i, b)| b + 270.0 * i as f64).collect();
        let j = judge(&s, Some(&held(true)), true, true);
        assert_eq!((j.steady, j.checks.len()), (None, 1));
        assert!(j.line().starts_with("steady: not tested ("), "{}", j.line());
        assert_eq!(judge(&s, Some(&held(false)), true, true).steady, Some(false));
    }

    #[test]
    fn without_consumers_the_backlog_and_throughput_are_not_judged() {
        // Nobody drains: the backlog grows by every job sent and nothing finishes.
        let mut s = stationary(7);
        s.finished = vec![0.0; 30];
        s.backlog = (0..30).map(|i| 1000.0 * i as f64).collect();
        assert_eq!(judge(&s, Some(&held(true)), false, true).steady, Some(false));
        let j = judge(&s, Some(&held(true)), false, false);
        assert_eq!(j.steady, Some(true), "{:?}", j.failures());
        assert_eq!(j.checks.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["rate", "p99 claim"]);
        assert_eq!(j.criteria, ["rate", "p99"]);
        // The rate and the p99 trend still decide.
        assert_eq!(judge(&s, Some(&held(false)), false, false).steady, Some(false));
        s.p99_us[0].1 = s.p99_us[0].1.iter().enumerate().map(|(i, p)| p + 40.0 * i as f64).collect();
        assert_eq!(judge(&s, Some(&held(true)), false, false).steady, Some(false));
    }

    #[test]
    fn the_criteria_follow_the_workload() {
        assert_eq!(criteria(true, true, false), ["rate", "backlog", "throughput", "p99"]);
        assert_eq!(criteria(false, true, false), ["backlog", "throughput", "p99"]);
        assert_eq!(criteria(true, false, false), ["rate", "p99"]);
        assert_eq!(criteria(true, true, true), ["rate"]);
    }

    #[test]
    fn the_system_rate_is_what_finished_beside_what_arrived() {
        let s = LoadSeries {
            arrivals: vec![20_000.0; 10],
            finished: vec![5_400.0; 10],
            backlog: (0..10).map(|i| 14_600.0 * i as f64).collect(),
            backlog_source: "pending",
            p99_us: Vec::new(),
        };
        let r = s.system_rates();
        assert_eq!((r.window_secs, r.arrivals_per_sec, r.completed_per_sec), (10, 20_000.0, 5_400.0));
        assert_eq!((r.backlog_start, r.backlog_end), (Some(0), Some(131_400)));
        assert_eq!(r.backlog_slope_per_sec, Some(14_600.0));
    }

    #[test]
    fn series_of_a_run_use_the_counters_when_depths_are_missing() {
        let run = crate::report::tests::sample_run();
        let series = LoadSeries::of(&run, &[], 3.0);
        assert_eq!(series.backlog_source, "in_system");
        assert_eq!(series.arrivals.len(), series.backlog.len());
    }
}
