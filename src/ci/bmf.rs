//! Bencher Metric Format (BMF), what `bencher run --adapter json` reads:
//! `{"<benchmark>": {"<measure>": {"value": v, "lower_value": lo, "upper_value": hi}}}`.
//!
//! The measures, by slug (Bencher creates a custom one on first sight):
//! - `throughput`: ok calls per second (Bencher's built-in measure, operations/s); no bounds
//!   for one run (a rate over one window has no interval here), the lowest and highest
//!   repetition for `compare`;
//! - `latency-p50`, `latency-p99`, `latency-p99-9`: the percentile in **nanoseconds** (the unit
//!   of Bencher's built-in `latency`), its 95 % distribution-free interval as the bounds
//!   (`report::percentile_bounds`) for a run, the lowest and highest repetition for `compare`;
//! - `server-us-per-call`, `server-cpu-us-per-call`: `cost`'s figures, µs (median of the
//!   blocks; bounds the lowest and highest block).
//!
//! A bound is left out when there is none (too few samples for an upper bound), and every
//! bound written holds `lower_value ≤ value ≤ upper_value`.

use crate::report::ReportError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One measure of one benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The figure, in its measure's unit.
    pub value: f64,
    /// The lower end of its interval, when there is one (≤ `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_value: Option<f64>,
    /// The upper end of its interval, when there is one (≥ `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_value: Option<f64>,
}

impl Metric {
    /// `value` with the bounds given, widened to take `value` in (a percentile is its bucket's
    /// top and a bound a recorded sample's bucket, so the two can differ by a bucket's
    /// rounding). `None` when `value` is not finite: BMF has no NaN.
    pub fn new(value: f64, lower: Option<f64>, upper: Option<f64>) -> Option<Metric> {
        value.is_finite().then(|| Metric {
            value,
            lower_value: lower.filter(|v| v.is_finite()).map(|lo| lo.min(value)),
            upper_value: upper.filter(|v| v.is_finite()).map(|hi| hi.max(value)),
        })
    }
}

/// A whole BMF document: benchmark → measure slug → metric, in name order.
pub type Bmf = BTreeMap<String, BTreeMap<String, Metric>>;

/// The measure slug of a latency percentile (`p50`, `p99`, `p99.9`): `latency-p50`, ...,
/// `latency-p99-9` (a slug has no dot).
pub fn latency_slug(percentile: &str) -> String {
    format!("latency-{}", percentile.replace('.', "-"))
}

/// Writes `bmf` to `path` as JSON, atomically.
///
/// # Errors
/// [`ReportError`] naming `path`.
pub fn write(path: &Path, bmf: &Bmf) -> Result<(), ReportError> {
    crate::report::write_json(path, bmf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_take_the_value_in_and_non_finite_values_are_left_out() {
        let m = Metric::new(100.0, Some(101.0), Some(99.0)).unwrap();
        assert_eq!((m.lower_value, m.upper_value), (Some(100.0), Some(100.0)));
        assert_eq!(Metric::new(f64::NAN, None, None), None);
        let m = Metric::new(5.0, None, Some(f64::INFINITY)).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"value":5.0}"#);
        assert_eq!(latency_slug("p99.9"), "latency-p99-9");
    }
}
