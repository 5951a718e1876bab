//! A latency objective (`claim.p99 < 5ms`) and its decision on one probe: a statistical test
//! on the 95 % interval of the recorded percentile, never the point value alone.

use serde::{Deserialize, Serialize};

use crate::report::ScriptSummary;

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
    /// Its 95 % interval's bounds, µs (`null`: no finite bound with this many calls).
    pub lo_us: Option<u64>,
    /// See `lo_us`.
    pub hi_us: Option<u64>,
    /// The decision.
    pub decision: SloDecision,
}

impl Slo {
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
        if limit.is_zero() {
            return Err(bad("the limit must be above zero"));
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

    /// The reading of this objective on a probe whose scripts are `scripts`: it holds when the
    /// interval's upper bound meets the limit, is violated when its lower bound misses it (or
    /// the script had no ok call), and is undecided otherwise.
    pub fn read(&self, scripts: &[ScriptSummary]) -> SloReading {
        let Some(s) = scripts.iter().find(|s| s.script == self.script && s.ok > 0) else {
            return SloReading {
                slo: self.text.clone(),
                value_us: None,
                lo_us: None,
                hi_us: None,
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
        let decision = match (bound.lo_us, bound.hi_us) {
            (_, Some(hi)) if self.meets(hi as f64) => SloDecision::Holds,
            (Some(lo), _) if !self.meets(lo as f64) => SloDecision::Violated,
            _ => SloDecision::Undecided,
        };
        SloReading { slo: self.text.clone(), value_us: Some(value), lo_us: bound.lo_us, hi_us: bound.hi_us, decision }
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
            ("claim.p99 < 0ms", "above zero"),
        ] {
            let err = Slo::parse(text).unwrap_err();
            assert!(err.contains(says) && err.contains(text), "{text}: {err}");
        }
    }
}
