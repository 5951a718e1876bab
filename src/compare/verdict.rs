//! The verdict of one metric, and of the whole comparison.
//!
//! criterion.rs's rule, made one-sided: a metric has **regressed** only when the change is
//! significant (one-sided Mann–Whitney p < α in the worse direction) **and** the whole bootstrap
//! interval of new/base lies beyond the noise band in that direction; **improved** likewise the
//! other way; **no change** only when the whole interval lies inside the band, and otherwise
//! **inconclusive** (the interval crosses the band's edge: a change beyond it is not ruled out). Before that, a metric is **inconclusive** when a side has
//! fewer than `min_repetitions` values, when the sizes cannot reach p < α at all (the smallest
//! exact p-value, `1 / C(n_b + n_n, n_b)`, is ≥ α: 3 + 3 repetitions give 0.05, 4 + 4 give
//! 0.014, so α = 0.01 needs 5 + 4 or more), or when a side's coefficient of variation exceeds
//! `max_cv`: a noisy machine says nothing either way, so it neither passes nor fails. Unless
//! the change dwarfs that noise: when the whole interval lies beyond three times the larger CV
//! (and the band), spread that size cannot have made it, and the rule above decides (a script
//! made three times slower on a noisy machine is a regression, not "inconclusive").
//!
//! Each gate that says "inconclusive" names itself as an [`InconclusiveCause`], the figures it
//! decided on included; the prose `reason` is rendered from that cause.

use serde::{Deserialize, Serialize};

use super::cause::{Arm, InconclusiveCause};
use super::metric::{Better, Metric};
use super::options::CompareOptions;
use crate::stats::{self, Alternative, Interval, Method};

/// The verdict of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricVerdict {
    /// Significantly worse, by more than the noise band.
    Regressed,
    /// Significantly better, by more than the noise band.
    Improved,
    /// Not significant, or within the noise band.
    NoChange,
    /// Too few repetitions or too much noise to tell; [`MetricComparison::cause`] says which.
    Inconclusive,
}

impl MetricVerdict {
    /// The word the outputs print: `regressed`, `improved`, `no change`, `inconclusive`.
    pub fn word(self) -> &'static str {
        match self {
            MetricVerdict::Regressed => "regressed",
            MetricVerdict::Improved => "improved",
            MetricVerdict::NoChange => "no change",
            MetricVerdict::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict of the whole comparison, and the exit code `main` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overall {
    /// No metric regressed or was inconclusive: exit 0.
    Pass,
    /// At least one metric regressed: exit 1.
    Regression,
    /// None regressed, at least one was inconclusive: exit 3.
    Inconclusive,
}

impl Overall {
    /// Regression if any metric regressed; else inconclusive if any was; else pass.
    pub fn of(verdicts: impl IntoIterator<Item = MetricVerdict>) -> Overall {
        let mut overall = Overall::Pass;
        for v in verdicts {
            match v {
                MetricVerdict::Regressed => return Overall::Regression,
                MetricVerdict::Inconclusive => overall = Overall::Inconclusive,
                MetricVerdict::Improved | MetricVerdict::NoChange => {}
            }
        }
        overall
    }

    /// The process exit code, which only `main` exits with: 0 pass, 1 regression, 3 inconclusive.
    pub fn exit_code(self) -> u8 {
        match self {
            Overall::Pass => 0,
            Overall::Regression => 1,
            Overall::Inconclusive => 3,
        }
    }

    /// The word the outputs print: `pass`, `regression`, `inconclusive`.
    pub fn word(self) -> &'static str {
        match self {
            Overall::Pass => "pass",
            Overall::Regression => "regression",
            Overall::Inconclusive => "inconclusive",
        }
    }
}

/// One side's values of a metric and their summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// One value per repetition that measured the metric (ops/s or µs), in repetition order.
    pub values: Vec<f64>,
    /// Their median (`None` when there is none).
    pub median: Option<f64>,
    /// Their coefficient of variation, a fraction (`None` below two values).
    pub cv: Option<f64>,
}

impl Side {
    pub(super) fn of(values: Vec<f64>) -> Side {
        Side { median: stats::median(&values), cv: stats::coefficient_of_variation(&values), values }
    }
}

/// The comparison of one metric: both sides, the statistics and the verdict with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    /// The metric.
    pub metric: Metric,
    /// Its label, e.g. `claim p99`.
    pub label: String,
    /// Which direction is better.
    pub better: Better,
    /// The base side.
    pub base: Side,
    /// The new side.
    pub new: Side,
    /// `median(new) / median(base) − 1` (0.2 = new is 20 % higher), `None` when undefined.
    pub change: Option<f64>,
    /// Bootstrap interval of `median(new) / median(base)` at the options' confidence (`None`
    /// with fewer than two values a side, a BASE value of 0 or below, or a value not finite).
    pub ci: Option<Interval>,
    /// One-sided Mann–Whitney p-value that new is worse than base.
    pub p_worse: Option<f64>,
    /// One-sided Mann–Whitney p-value that new is better than base.
    pub p_better: Option<f64>,
    /// How the p-values were computed (exact or normal approximation).
    pub test: Option<Method>,
    /// The noise band applied, a fraction of the base median.
    pub noise: f64,
    /// The verdict.
    pub verdict: MetricVerdict,
    /// Which gate made the verdict inconclusive: `Some` exactly when `verdict` is
    /// [`MetricVerdict::Inconclusive`]. (A `compare.json` or `cost.json` written before this field
    /// existed reads as `None`.)
    #[serde(default)]
    pub cause: Option<InconclusiveCause>,
    /// Why, in a few words (which condition decided); for an inconclusive verdict, `cause`
    /// in prose ([`InconclusiveCause::reason`]).
    pub reason: String,
}

/// What the rule decided: a verdict other than inconclusive with its reason, or the cause of
/// an inconclusive one (whose reason is rendered from it).
pub(super) enum Decision {
    /// Regressed, improved or no change (never [`MetricVerdict::Inconclusive`]), and why.
    Decided(MetricVerdict, String),
    /// Inconclusive, and which gate said so.
    Inconclusive(InconclusiveCause),
}

impl MetricComparison {
    /// The side named `arm`.
    pub fn side(&self, arm: Arm) -> &Side {
        match arm {
            Arm::Base => &self.base,
            Arm::New => &self.new,
        }
    }

    /// Sets `verdict`, `cause` and `reason` from one decision, so they always agree.
    pub(super) fn settle(&mut self, decision: Decision, o: &CompareOptions) {
        (self.verdict, self.cause, self.reason) = match decision {
            Decision::Decided(verdict, reason) => {
                debug_assert_ne!(verdict, MetricVerdict::Inconclusive, "an inconclusive verdict needs a cause");
                (verdict, None, reason)
            }
            Decision::Inconclusive(cause) => (MetricVerdict::Inconclusive, Some(cause), cause.reason(o)),
        };
    }
}

/// Compares one metric's values (`base`, `new`: one value per repetition) by the module's rule.
pub fn compare_metric(metric: Metric, base: Vec<f64>, new: Vec<f64>, options: &CompareOptions) -> MetricComparison {
    let better = metric.measure.better();
    let noise = options.noise(metric.measure);
    let (worse_alt, better_alt) = match better {
        Better::Higher => (Alternative::Less, Alternative::Greater),
        Better::Lower => (Alternative::Greater, Alternative::Less),
    };
    let p_worse = stats::mann_whitney_u(&new, &base, worse_alt);
    let p_better = stats::mann_whitney_u(&new, &base, better_alt);
    // One value a side has no spread to resample: no interval rather than a point.
    let ci = match base.len().min(new.len()) {
        0 | 1 => None,
        _ => stats::ratio_of_medians_ci(&base, &new, options.confidence, options.resamples, options.seed),
    };
    let (base, new) = (Side::of(base), Side::of(new));
    let change = match (base.median, new.median) {
        (Some(b), Some(n)) if b != 0.0 => Some(n / b - 1.0),
        _ => None,
    };
    let mut out = MetricComparison {
        label: metric.label(),
        metric,
        better,
        change,
        ci,
        p_worse: p_worse.map(|t| t.p_value),
        p_better: p_better.map(|t| t.p_value),
        test: p_worse.map(|t| t.method),
        noise,
        verdict: MetricVerdict::Inconclusive,
        cause: None,
        reason: String::new(),
        base,
        new,
    };
    let decision = decide(&out, options);
    out.settle(decision, options);
    out
}

/// The rule itself, on a filled-in comparison.
fn decide(m: &MetricComparison, o: &CompareOptions) -> Decision {
    let (nb, nn) = (m.base.values.len(), m.new.values.len());
    let count = |arm| m.side(arm).values.len();
    if let Some(side) = Arm::BOTH.into_iter().find(|&arm| count(arm) == 0) {
        return Decision::Inconclusive(InconclusiveCause::NotMeasured { side });
    }
    if let Some(side) = Arm::BOTH.into_iter().find(|&arm| count(arm) < o.min_repetitions) {
        return Decision::Inconclusive(InconclusiveCause::TooFewRepetitions { side, repetitions: count(side) });
    }
    let floor = stats::min_exact_p_value(nb, nn);
    if floor >= o.alpha {
        return Decision::Inconclusive(InconclusiveCause::CannotReachAlpha {
            base_repetitions: nb,
            new_repetitions: nn,
            smallest_p: floor,
        });
    }
    let spread = m.base.cv.unwrap_or(0.0).max(m.new.cv.unwrap_or(0.0));
    // In log space, so a fall counts as much as the rise it undoes (3x slower and 3x fewer ops/s).
    let dwarfs_noise = m.ci.is_some_and(|ci| ci.lo > 1.0 + 3.0 * spread || ci.hi < 1.0 / (1.0 + 3.0 * spread));
    for side in Arm::BOTH {
        if let Some(cv) = m.side(side).cv.filter(|cv| *cv > o.max_cv && !dwarfs_noise) {
            return Decision::Inconclusive(InconclusiveCause::Cv { side, cv });
        }
    }
    band_verdict(m, o)
}

/// A paired comparison's figures before its decision (verdict inconclusive, no reason yet), and
/// the ratios new/base of the pairs whose base is above 0: their median change, the interval
/// `ci` makes of them, both one-sided sign tests (1.0 with too few pairs, none without any), and
/// each side's values. What [`compare_paired`] and the sequential rule share.
pub(super) fn paired_figures(
    metric: Metric,
    pairs: &[(f64, f64)],
    options: &CompareOptions,
    ci: impl FnOnce(&[f64]) -> Option<Interval>,
) -> (MetricComparison, Vec<f64>) {
    let better = metric.measure.better();
    let ratios: Vec<f64> = pairs.iter().filter(|(b, _)| *b > 0.0).map(|(b, n)| n / b).collect();
    let sign = |above: bool| stats::sign_test(&ratios, above).or(Some(1.0).filter(|_| !ratios.is_empty()));
    let out = MetricComparison {
        label: metric.label(),
        noise: options.noise(metric.measure),
        metric,
        better,
        change: stats::median(&ratios).map(|r| r - 1.0),
        ci: ci(&ratios),
        p_worse: sign(better == Better::Lower),
        p_better: sign(better == Better::Higher),
        test: None,
        verdict: MetricVerdict::Inconclusive,
        cause: None,
        reason: String::new(),
        base: Side::of(pairs.iter().map(|p| p.0).collect()),
        new: Side::of(pairs.iter().map(|p| p.1).collect()),
    };
    (out, ratios)
}

/// The last step of the rule, shared by [`compare_metric`] and [`compare_paired`]: significant and the
/// whole interval beyond the noise band in one direction; no change when the whole interval lies
/// inside the band; else inconclusive ([`InconclusiveCause::CrossesBand`]).
fn band_verdict(m: &MetricComparison, o: &CompareOptions) -> Decision {
    let (Some(ci), Some(p_worse), Some(p_better)) = (m.ci, m.p_worse, m.p_better) else {
        return Decision::Inconclusive(InconclusiveCause::NoInterval);
    };
    // Beyond the band in the worse / better direction, as a ratio new/base.
    let (worse_beyond, better_beyond) = match m.better {
        Better::Lower => (ci.lo > 1.0 + m.noise, ci.hi < 1.0 - m.noise),
        Better::Higher => (ci.hi < 1.0 - m.noise, ci.lo > 1.0 + m.noise),
    };
    let pct = m.noise * 100.0;
    // Where a worse (or better) interval lies: above +band for latency, below −band for ops/s.
    let (worse_side, better_side) = match m.better {
        Better::Lower => (format!("above +{pct:.0}%"), format!("below -{pct:.0}%")),
        Better::Higher => (format!("below -{pct:.0}%"), format!("above +{pct:.0}%")),
    };
    let band = format!("±{pct:.0}%");
    // "No change" is a claim too: only an interval wholly inside the band makes it. One that
    // crosses the band's edge could hide a change beyond it (a +6 % change measured as
    // +1.2 %..+17.9 % is no "no change").
    let inside = ci.lo >= 1.0 - m.noise && ci.hi <= 1.0 + m.noise;
    let (verdict, reason) = if p_worse < o.alpha && worse_beyond {
        (MetricVerdict::Regressed, format!("p {p_worse:.2e} < {} and the whole CI {worse_side}", o.alpha))
    } else if p_better < o.alpha && better_beyond {
        (MetricVerdict::Improved, format!("p {p_better:.2e} < {} and the whole CI {better_side}", o.alpha))
    } else if !inside {
        return Decision::Inconclusive(InconclusiveCause::CrossesBand {
            lo: ci.lo - 1.0,
            hi: ci.hi - 1.0,
            band: m.noise,
        });
    } else if p_worse < o.alpha || p_better < o.alpha {
        (MetricVerdict::NoChange, format!("significant, but the whole CI lies inside the noise band {band}"))
    } else {
        (
            MetricVerdict::NoChange,
            format!("not significant at α = {}, and the whole CI lies inside the noise band {band}", o.alpha),
        )
    };
    Decision::Decided(verdict, reason)
}

/// Compares one metric measured in pairs (`pairs`: (base, new) values taken back to back, the
/// order alternating), for measurements whose level drifts more between pairs than within one
/// (`emq-bench cost` on a shared VM): the ratio new/base of each pair carries the change, and
/// the drift cancels in it.
///
/// The rule: at least `min_repetitions` pairs, and enough for the one-sided sign test to reach
/// `alpha`; the bootstrap interval of the median ratio no wider than `2 × max_cv` unless it lies
/// wholly beyond the noise band; then regressed (improved) when the sign test is significant
/// and that interval lies wholly beyond the noise band, as in [`compare_metric`]. The sides' values
/// and medians are reported as they are; `change` is the median ratio − 1.
pub fn compare_paired(metric: Metric, pairs: &[(f64, f64)], options: &CompareOptions) -> MetricComparison {
    let (mut out, ratios) = paired_figures(metric, pairs, options, |ratios| match ratios.len() {
        0 | 1 => None,
        _ => stats::median_ci(ratios, options.confidence, options.resamples, options.seed),
    });
    let noise = out.noise;
    let n = ratios.len();
    let floor = stats::min_sign_p_value(n);
    let decision = if n < options.min_repetitions.max(1) {
        Decision::Inconclusive(InconclusiveCause::TooFewPairs { pairs: n })
    } else if floor >= options.alpha {
        Decision::Inconclusive(InconclusiveCause::SignTestCannotReachAlpha { pairs: n, smallest_p: floor })
    } else {
        // The interval of the median ratio already shrinks with the number of pairs, so it is
        // its width, not the spread of single ratios, that says whether the pairs could tell.
        let beyond = out.ci.is_some_and(|ci| ci.lo > 1.0 + noise || ci.hi < 1.0 - noise);
        match out.ci {
            Some(ci) if !beyond && ci.hi - ci.lo > 2.0 * options.max_cv => {
                Decision::Inconclusive(InconclusiveCause::WideInterval { width: ci.hi - ci.lo })
            }
            _ => band_verdict(&out, options),
        }
    };
    out.settle(decision, options);
    out
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
