//! github-action-benchmark's custom JSON, tool `customSmallerIsBetter`:
//! `[{"name": .., "unit": .., "value": .., "range": .., "extra": ..}]`.
//!
//! The tool takes one direction per file, and every figure here is smaller-is-better:
//! latencies as they are (ms), and throughput as its inverse, the time per ok call
//! (`µs/op` = 10⁶ / ops/s, named `... time per op (1/throughput)`, the ops/s in `extra`), so a
//! fall in throughput alerts like a rise in latency. `range` is `± h`, the larger distance from
//! the value to an end of its interval (the interval itself in `extra`).

use crate::report::ReportError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One entry of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The benchmark's name, unique in the file, e.g. `smoke claim p99`.
    pub name: String,
    /// The value's unit, e.g. `ms`.
    pub unit: String,
    /// The figure (finite).
    pub value: f64,
    /// The spread the chart shows, e.g. `± 0.120`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// More detail the chart's tooltip shows (the interval, the samples, the verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
}

impl Entry {
    /// An entry of `value` (None when it is not finite), with the `± h` range of the interval
    /// `lo..hi` when both ends are known, and `extra`.
    pub fn new(name: String, unit: &str, value: f64, interval: Option<(f64, f64)>, extra: String) -> Option<Entry> {
        let range = interval
            .filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
            .map(|(lo, hi)| format!("± {:.3}", (value - lo).max(hi - value).max(0.0)));
        value.is_finite().then(|| Entry {
            name,
            unit: unit.to_string(),
            value,
            range,
            extra: (!extra.is_empty()).then_some(extra),
        })
    }
}

/// The time per ok call, µs, of a throughput in ops/s (None for no throughput).
pub fn us_per_op(ops_per_sec: f64) -> Option<f64> {
    (ops_per_sec > 0.0 && ops_per_sec.is_finite()).then(|| 1e6 / ops_per_sec)
}

/// Writes `entries` to `path` as JSON, atomically.
///
/// # Errors
/// [`ReportError`] naming `path`.
pub fn write(path: &Path, entries: &[Entry]) -> Result<(), ReportError> {
    crate::report::write_json(path, &entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_the_larger_half_width_and_throughput_inverts() {
        let e = Entry::new("x".into(), "ms", 1.0, Some((0.9, 1.5)), String::new()).unwrap();
        assert_eq!(e.range.as_deref(), Some("± 0.500"));
        assert_eq!(e.extra, None);
        assert_eq!(Entry::new("x".into(), "ms", f64::NAN, None, String::new()), None);
        assert_eq!(us_per_op(2000.0), Some(500.0));
        assert_eq!(us_per_op(0.0), None);
    }
}
