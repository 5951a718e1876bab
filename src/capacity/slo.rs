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
use crate::report::percentile_bounds::PercentileBound;
use crate::stats::ratio::share_interval;

/// `"claimm" is not a script name`, with the close names and every one, by protocol.
fn not_a_script(name: &str) -> String {
    use crate::lua::Protocol;
    let all: Vec<&str> = crate::lua::Script::ALL.iter().map(|s| s.name()).collect();
    let close = crate::names::close(name, &all);
    let list = |p: Protocol| p.scripts().iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
    let mut out = format!("{name:?} is not a script name");
    if !close.is_empty() {
        out.push_str(&format!("; did you mean {}?", close.join(" or ")));
    }
    out.push_str(&format!(" (EchoMQ's scripts: {}; BullMQ's: {})", list(Protocol::EchoMqV1), list(Protocol::BullMq)));
    out
}

/// The most decimals a percentile may have (`p99.9999`): the merged histogram keeps three
/// significant digits of each latency, and no probe has the calls to tell a finer quantile.
const MAX_DECIMALS: usize = 4;

/// The quantile of percentile `name` (`p95` → 0.95, `p99.9` → 0.999): `p` then a number above
/// 0 and below 100, with at most [`MAX_DECIMALS`] decimals.
fn quantile_of(name: &str) -> Option<f64> {
    let number = name.strip_prefix('p')?;
    let (whole, decimals) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(decimals) || decimals.len() > MAX_DECIMALS {
        return None;
    }
    if number.ends_with('.') {
        return None;
    }
    let percent: f64 = number.parse().ok()?;
    (percent > 0.0 && percent < 100.0).then_some(percent / 100.0)
}

/// One latency objective: a script's percentile below a limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// As written, e.g. `claim.p99 < 5ms`.
    pub text: String,
    /// The script's name.
    pub script: String,
    /// The percentile's name: `p` and a number above 0 and below 100 (`p50`, `p95`, `p99.9`).
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
    /// The percentile's quantile (0.99 for p99, 0.95 for p95).
    pub fn quantile(&self) -> f64 {
        quantile_of(&self.percentile).unwrap_or(0.99)
    }

    /// Parses `<script>.<percentile> <|<= <duration>`, e.g. `claim.p99 < 5ms`.
    ///
    /// # Errors
    /// A message naming the text and what was expected (an unknown script, with the close
    /// names and every name; a percentile that is not `p` and a number in (0, 100); an
    /// operator other than `<`/`<=`; a limit without a unit).
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
        let script =
            crate::lua::Script::from_name(script).ok_or_else(|| bad(&not_a_script(script)))?.name().to_string();
        if quantile_of(percentile).is_none() {
            return Err(bad(&format!(
                "{percentile:?}: expected a percentile, `p` and a number above 0 and below 100 with at most \
                 {MAX_DECIMALS} decimals, e.g. p50, p95, p99, p99.9"
            )));
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

    /// The reading of this objective on a probe's measurement `run`: the percentile and its
    /// interval from the script's merged histogram, the share over the limit from its
    /// per-second series. It **holds** when the share of calls at or over the limit is below
    /// the allowed share (1 − q) over the whole 95 % interval of that share (seconds as units)
    /// and the percentile's order-statistic interval lies under the limit; it is **violated**
    /// when the share's whole interval is at or above the allowed share, or the script had no
    /// ok call; else **undecided** (too few calls or seconds, or an interval across the line).
    pub fn read(&self, run: &RunMetrics) -> SloReading {
        let q = self.quantile();
        let allowed = 1.0 - q;
        let totals = crate::lua::Script::from_name(&self.script).and_then(|script| run.script(script));
        let Some(latency) = totals.filter(|t| t.ok > 0 && !t.latency.is_empty()).map(|t| &t.latency) else {
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
        // The same histogram and rules summary.json's percentiles come from, at any quantile.
        let value = latency.value_at_quantile(q);
        let bound = PercentileBound::of(latency, q);
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
        let s = Slo::parse("claim.p95 < 5ms").unwrap();
        assert_eq!((s.percentile.as_str(), s.quantile()), ("p95", 0.95));
        let s = Slo::parse("claim.p99.95 < 5ms").unwrap();
        assert!((s.quantile() - 0.9995).abs() < 1e-12, "{}", s.quantile());
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
            ("claimm.p99 < 5ms", "\"claimm\" is not a script name; did you mean claim? (EchoMQ's scripts: enqueue, "),
            ("claim.p100 < 5ms", "expected a percentile"),
            ("claim.p0 < 5ms", "expected a percentile"),
            ("claim.p99.99999 < 5ms", "at most 4 decimals"),
            ("claim.p99. < 5ms", "expected a percentile"),
            ("claim.p-5 < 5ms", "expected a percentile"),
            ("claim.max < 5ms", "expected a percentile"),
            ("claim.p99 < 5", "expected a duration with a unit"),
            ("claim.p99 < 0ms", "at least 1us"),
            ("claim.p99 < 1ns", "at least 1us"),
        ] {
            let err = Slo::parse(text).unwrap_err();
            assert!(err.contains(says) && err.contains(text), "{text}: {err}");
        }
    }
}
