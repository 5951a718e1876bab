//! A latency objective (`claim.p99 < 5ms`) and its decision on one probe: a statistical test,
//! never the point value alone.
//!
//! `p99 < 5 ms` is the same statement as "fewer than 1 % of the calls take 5 ms or more". The
//! decision tests that share with the **seconds** as the independent units
//! ([`crate::stats::ratio`]): calls of one second share its server state, and an interval that
//! counted them as independent (the percentile's order-statistic interval) is far narrower
//! than the probe-to-probe spread. The order-statistic interval must also clear the limit: it
//! is the within-probe precision, and says when the calls are too few for the percentile at
//! all (p99.9 needs 3 688).

use serde::{Deserialize, Serialize};

use crate::metrics::RunMetrics;
use crate::report::ScriptSummary;
use crate::stats::ratio::share_interval;

/// The percentiles an objective may name, with their quantiles (the ones every summary carries
/// with an interval).
const PERCENTILES: [(&str, f64); 5] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999)];

/// One latency objective: a script's percentile below a limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// As written, e.g. `claim.p99 < 5ms`.
    pub text: String,
    /// The script's name.
    pub script: String,
    /// The percentile's name: `p50`, `p90`, `p99`, `p99.9` or `p99.99`.
    pub percentile: String,
    /// The limit, µs.
    pub limit_us: f64,
    /// True for `<=`, false for `<`.
    pub inclusive: bool,
}

/// What one probe says of one objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloDecision {
    /// The whole 95 % interval of the percentile meets the limit.
    Holds,
    /// The whole interval misses it (or the script had no ok call).
    Violated,
    /// The interval straddles the limit, or has no finite upper bound with this many calls:
    /// a longer probe may decide.
    Undecided,
}

/// One objective's reading on one probe (capacity.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloReading {
    /// The objective as written.
    pub slo: String,
    /// The percentile's value, µs (`null`: no ok call).
    pub value_us: Option<u64>,
    /// Its 95 % order-statistic interval's bounds, µs (`null`: no finite bound with this many
    /// calls).
    pub lo_us: Option<u64>,
    /// See `lo_us`.
    pub hi_us: Option<u64>,
    /// The share of ok calls at or over the limit (`null`: no ok call).
    pub over_limit: Option<f64>,
    /// Its 95 % interval with the seconds as units (`null`: fewer than 4 seconds with calls).
    pub over_limit_lo: Option<f64>,
    /// See `over_limit_lo`.
    pub over_limit_hi: Option<f64>,
    /// The share the objective allows: 1 − the percentile's quantile (0.01 for p99).
    pub allowed: f64,
    /// Seconds with ok calls the share's interval rests on.
    pub seconds: usize,
    /// The decision.
    pub decision: SloDecision,
}

impl SloReading {
    /// The reading's figures: `4.963 [4.947, 4.971] ms, 0.93 % over the limit [0.41, 1.46] %`
    /// (the percentile with its order-statistic interval, then the share of calls at or over
    /// the limit with its interval, seconds as units; `∞` or `?` where there is none).
    pub fn figures(&self) -> String {
        let ms = |us: Option<u64>| us.map_or("∞".to_string(), |v| format!("{:.3}", v as f64 / 1000.0));
        let pct = |x: Option<f64>| x.map_or("?".to_string(), |v| format!("{:.2}", v * 100.0));
        format!(
            "{} [{}, {}] ms, {} % over the limit [{}, {}] %",
            ms(self.value_us),
            ms(self.lo_us),
            ms(self.hi_us),
            pct(self.over_limit),
            pct(self.over_limit_lo),
            pct(self.over_limit_hi)
        )
    }

    /// One line: the objective, [`SloReading::figures`], and the seconds and share allowed.
    pub fn describe(&self) -> String {
        format!("{}: {} over {} s ({:.2} % allowed)", self.slo, self.figures(), self.seconds, self.allowed * 100.0)
    }
}

impl Slo {
    /// The percentile's quantile (0.99 for p99).
    pub fn quantile(&self) -> f64 {
        PERCENTILES.iter().find(|(name, _)| *name == self.percentile).map_or(0.99, |(_, q)| *q)
    }

    /// Parses `<script>.<percentile> <|<= <duration>`, e.g. `claim.p99 < 5ms`.
    ///
    /// # Errors
    /// A message naming the text and what was expected (an unknown script, a percentile other
    /// than p50/p90/p99/p99.9/p99.99, an operator other than `<`/`<=`, a limit without a unit).
    pub fn parse(text: &str) -> Result<Slo, String> {
        let bad = |what: &str| format!("--slo {text:?}: {what}");
        let (key, rest) = match text.find(['<', '>', '=']) {
            Some(at) => (text[..at].trim(), text[at..].trim()),
            None => return Err(bad("expected `<script>.<percentile> < <limit>`, e.g. \"claim.p99 < 5ms\"")),
        };
        let (inclusive, limit) = if let Some(l) = rest.strip_prefix("<=") {
            (true, l)
        } else if let Some(l) = rest.strip_prefix('<') {
            (false, l)
        } else {
            return Err(bad("the operator must be < or <= (an objective is an upper limit on latency)"));
        };
        let (script, percentile) =
            key.split_once('.').ok_or_else(|| bad("expected `<script>.<percentile>` before the operator"))?;
        let script = crate::lua::Script::from_name(script)
            .ok_or_else(|| bad(&format!("{script:?} is not a script name")))?
            .name()
            .to_string();
        if !PERCENTILES.iter().any(|(name, _)| *name == percentile) {
            return Err(bad(&format!("{percentile:?}: expected one of p50, p90, p99, p99.9, p99.99")));
        }
        let limit = humantime::parse_duration(limit.trim())
            .map_err(|_| bad(&format!("{:?}: expected a duration with a unit, e.g. 5ms or 750us", limit.trim())))?;
        if limit < std::time::Duration::from_micros(1) {
            return Err(bad("the limit must be at least 1us, the latency histograms' resolution"));
        }
        Ok(Slo {
            text: text.trim().to_string(),
            script,
            percentile: percentile.to_string(),
            limit_us: limit.as_secs_f64() * 1e6,
            inclusive,
        })
    }

    /// Whether a latency of `us` meets the limit.
    pub fn meets(&self, us: f64) -> bool {
        if self.inclusive {
            us <= self.limit_us
        } else {
            us < self.limit_us
        }
    }

    /// The reading of this objective on a probe whose scripts are `scripts` and per-second
    /// series `run`. It **holds** when the share of calls at or over the limit is below the
    /// allowed share (1 − q) over the whole 95 % interval of that share (seconds as units) and
    /// the percentile's order-statistic interval lies under the limit; it is **violated** when
    /// the share's whole interval is at or above the allowed share, or the script had no ok
    /// call; else **undecided** (too few calls or seconds, or an interval across the line).
    pub fn read(&self, scripts: &[ScriptSummary], run: &RunMetrics) -> SloReading {
        let allowed = 1.0 - self.quantile();
        let Some(s) = scripts.iter().find(|s| s.script == self.script && s.ok > 0) else {
            return SloReading {
                slo: self.text.clone(),
                value_us: None,
                lo_us: None,
                hi_us: None,
                over_limit: None,
                over_limit_lo: None,
                over_limit_hi: None,
                allowed,
                seconds: 0,
                decision: SloDecision::Violated,
            };
        };
        let l = &s.latency_us;
        let i = &l.intervals;
        let (value, bound) = match self.percentile.as_str() {
            "p50" => (l.p50, &i.p50),
            "p90" => (l.p90, &i.p90),
            "p99" => (l.p99, &i.p99),
            "p99.9" => (l.p999, &i.p999),
            _ => (l.p9999, &i.p9999),
        };
        let (over, calls) = self.over_limit_per_second(run);
        let share = share_interval(&over, &calls, 0.95);
        let rank_holds = bound.hi_us.is_some_and(|hi| self.meets(hi as f64));
        let decision = match share {
            Some(sh) if sh.lo >= allowed => SloDecision::Violated,
            Some(sh) if sh.hi < allowed && rank_holds => SloDecision::Holds,
            _ => SloDecision::Undecided,
        };
        let total: f64 = calls.iter().sum();
        SloReading {
            slo: self.text.clone(),
            value_us: Some(value),
            lo_us: bound.lo_us,
            hi_us: bound.hi_us,
            over_limit: (total > 0.0).then(|| over.iter().sum::<f64>() / total),
            over_limit_lo: share.map(|sh| sh.lo),
            over_limit_hi: share.map(|sh| sh.hi),
            allowed,
            seconds: share.map_or(0, |sh| sh.units),
            decision,
        }
    }

    /// Per measured second: the script's ok calls that missed the limit, and its ok calls.
    fn over_limit_per_second(&self, run: &RunMetrics) -> (Vec<f64>, Vec<f64>) {
        // A latency misses `< L` from ceil(L) µs on, and `<= L` from floor(L) + 1 µs on.
        let from = if self.inclusive { self.limit_us.floor() as u64 + 1 } else { self.limit_us.ceil() as u64 };
        let mut over = Vec::new();
        let mut calls = Vec::new();
        for second in &run.intervals {
            let Some(s) = second.scripts.iter().find(|s| s.script.name() == self.script && s.ok > 0) else {
                continue;
            };
            let Ok(h) = s.latency.decode() else { continue };
            let missed = if h.max() >= from { h.count_between(from, h.max()) } else { 0 };
            over.push(missed as f64);
            calls.push(h.len() as f64);
        }
        (over, calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse_with_their_limit_in_microseconds() {
        let s = Slo::parse("claim.p99 < 5ms").unwrap();
        assert_eq!(
            (s.script.as_str(), s.percentile.as_str(), s.limit_us, s.inclusive),
            ("claim", "p99", 5000.0, false)
        );
        let s = Slo::parse(" enqueue.p99.9<=750us ").unwrap();
        assert_eq!((s.percentile.as_str(), s.limit_us, s.inclusive), ("p99.9", 750.0, true));
        assert!(s.meets(750.0) && !s.meets(750.5));
    }

    #[test]
    fn bad_objectives_say_what_was_expected() {
        for (text, says) in [
            ("claim.p99", "expected `<script>.<percentile> < <limit>`"),
            ("claim.p99 > 5ms", "the operator must be < or <="),
            ("clam.p99 < 5ms", "\"clam\" is not a script name"),
            ("claim.p95 < 5ms", "expected one of p50"),
            ("claim.max < 5ms", "expected one of p50"),
            ("claim.p99 < 5", "expected a duration with a unit"),
            ("claim.p99 < 0ms", "at least 1us"),
            ("claim.p99 < 1ns", "at least 1us"),
        ] {
            let err = Slo::parse(text).unwrap_err();
            assert!(err.contains(says) && err.contains(text), "{text}: {err}");
        }
    }
}
