//! The sequential rule of a paired comparison: looked at after every round of pairs, it stops
//! a metric as soon as its interval decides, and its error stays what it says however often
//! it looks.
//!
//! The interval is [`crate::stats::median_sequence_interval`] of the pairs' ratios new/base: the
//! order-statistic interval of their median at look k at confidence 1 − α/(k(k+1)), α = 1 −
//! the options' confidence, so all looks' intervals cover the median ratio at once with
//! probability ≥ 1 − α. At each look, as a ratio new/base:
//! - **regressed** when the whole interval lies beyond the noise band in the worse direction,
//!   **improved** in the better one (the sign test at that look's α is then significant too:
//!   an interval wholly above 1 means more ratios above 1 than its rank allows by chance);
//! - **no change** when the whole interval lies inside the band;
//! - else undecided ([`InconclusiveCause::CrossesBand`]), or too few pairs for this look's
//!   ranks ([`InconclusiveCause::FewPairsForLook`]): measure more.
//!
//! A verdict taken at the first look that decides is wrong with probability at most α (for a
//! true change exactly at the band's edge; far less away from it), because that look's interval
//! covers the true median ratio unless an event of probability ≤ α happened.

use super::cause::InconclusiveCause;
use super::metric::{Better, Metric};
use super::options::CompareOptions;
use super::verdict::{paired_figures, Decision, MetricComparison, MetricVerdict};
use crate::stats::{self, Interval};

/// Judges `metric` at look `look` (1-based: the rounds of pairs measured so far) from every
/// pair measured by then (`pairs`: (base, new) values taken back to back, the order
/// alternating), by the module's rule. Pairs whose base is not above 0 are dropped. `change` is
/// the median ratio − 1, `ci` the sequence's interval at this look, `p_worse`/`p_better` the
/// one-sided sign test over all pairs (reported; the interval decides).
pub fn compare_sequential(
    metric: Metric,
    pairs: &[(f64, f64)],
    look: u32,
    options: &CompareOptions,
) -> MetricComparison {
    let (mut out, ratios) = paired_figures(metric, pairs, options, |ratios| {
        stats::median_sequence_interval(ratios, 1.0 - options.confidence, look)
    });
    let (better, noise, ci) = (out.better, out.noise, out.ci);
    let decision = match ci {
        None => Decision::Inconclusive(InconclusiveCause::FewPairsForLook { pairs: ratios.len(), look }),
        Some(ci) => decide(ci, better, noise, look, options),
    };
    out.settle(decision, options);
    out
}

/// The band decision on the look's interval `ci` of new/base.
fn decide(ci: Interval, better: Better, noise: f64, look: u32, o: &CompareOptions) -> Decision {
    let (above, below) = (ci.lo > 1.0 + noise, ci.hi < 1.0 - noise);
    let (worse, improved) = match better {
        Better::Lower => (above, below),
        Better::Higher => (below, above),
    };
    let pct = noise * 100.0;
    let what = format!("the whole look-{look} interval of a {:.0}% confidence sequence", o.confidence * 100.0);
    let side = |up: bool| if up { format!("above +{pct:.0}%") } else { format!("below -{pct:.0}%") };
    if worse {
        Decision::Decided(MetricVerdict::Regressed, format!("{what} {}", side(above)))
    } else if improved {
        Decision::Decided(MetricVerdict::Improved, format!("{what} {}", side(above)))
    } else if ci.lo >= 1.0 - noise && ci.hi <= 1.0 + noise {
        Decision::Decided(MetricVerdict::NoChange, format!("{what} inside the noise band ±{pct:.0}%"))
    } else {
        Decision::Inconclusive(InconclusiveCause::CrossesBand { lo: ci.lo - 1.0, hi: ci.hi - 1.0, band: noise })
    }
}

/// Roughly how many pairs in all an undecided metric would need: its interval's half-width
/// shrinks as 1/√pairs (the slower growth of each look's confidence left out, so it is an
/// estimate from below), and it decides once that half-width is smaller than the distance from
/// the median ratio to the nearer edge of the band. `None` when the median ratio sits on an
/// edge (no number of pairs is likely enough), or without a median or interval.
pub fn pairs_needed(c: &MetricComparison, pairs: usize) -> Option<usize> {
    let (ci, change) = (c.ci?, c.change?);
    let ratio = 1.0 + change;
    let half = (ratio - ci.lo).max(ci.hi - ratio);
    let margin = (ratio - (1.0 + c.noise)).abs().min((ratio - (1.0 - c.noise)).abs());
    if margin <= 1e-9 * ratio.abs().max(1.0) || half <= 0.0 || pairs == 0 {
        return None;
    }
    let needed = (pairs as f64 * (half / margin).powi(2)).ceil();
    (needed < 1e9).then(|| (needed as usize).max(pairs))
}

#[cfg(test)]
#[path = "sequential_tests.rs"]
mod tests;
