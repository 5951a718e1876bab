//! Why a metric's verdict is "inconclusive": one variant per gate of the rule in
//! [`super::verdict`] (unpaired, [`super::verdict::compare_metric`]), of its paired form for a
//! fixed number of pairs ([`super::verdict::compare_paired`]) and of the sequential rule
//! ([`super::sequential`], `emq-bench cost`'s gate).
//!
//! Each gate builds its cause with the figures it decided on, and the prose `reason` of
//! `compare.json` is rendered from that cause and the thresholds ([`InconclusiveCause::reason`]),
//! so the two cannot disagree. In JSON a cause is tagged as serde tags the crate's other enums
//! (externally, snake_case): `{"cv": {"side": "new", "cv": 0.23}}`, `"no_interval"`.

use serde::{Deserialize, Serialize};

use super::options::CompareOptions;

/// BASE or NEW: the side of a comparison a cause names (in `emq-bench ab`, arm A or B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The first folder (`compare BASE NEW`), arm A of `ab`.
    Base,
    /// The second folder, arm B of `ab`.
    New,
}

impl Arm {
    /// Both sides, BASE first: the order the gates check them in.
    pub const BOTH: [Arm; 2] = [Arm::Base, Arm::New];

    /// The word the outputs print: `BASE`, `NEW`.
    pub fn label(self) -> &'static str {
        match self {
            Arm::Base => "BASE",
            Arm::New => "NEW",
        }
    }
}

/// Which gate of the rule made a metric inconclusive, with the figures it decided on; the
/// thresholds it compared them with are the comparison's [`CompareOptions`].
///
/// The first gate that fails names the cause, in this order: unpaired `NotMeasured`,
/// `TooFewRepetitions`, `CannotReachAlpha`, `Cv`, `NoInterval`; paired `TooFewPairs`,
/// `SignTestCannotReachAlpha`, `WideInterval`, `NoInterval`; sequential `FewPairsForLook`;
/// all, last, `CrossesBand`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InconclusiveCause {
    /// A side has no value at all: the metric was not measured there (a script only the other
    /// side called, or a percentile measured on too few calls in every repetition).
    NotMeasured {
        /// The side without a value (BASE when both have none).
        side: Arm,
    },
    /// A side has fewer values than `min_repetitions` (but at least one).
    TooFewRepetitions {
        /// The side that has too few (BASE when both have).
        side: Arm,
        /// Its number of values, one per repetition.
        repetitions: usize,
    },
    /// Both sides have enough repetitions, but sizes this small cannot make the one-sided
    /// Mann–Whitney test significant: its smallest exact p-value, `1 / C(n_b + n_n, n_b)`
    /// ([`crate::stats::min_exact_p_value`]), is not below `alpha` (3 + 3 give 0.05).
    CannotReachAlpha {
        /// BASE's number of values.
        base_repetitions: usize,
        /// NEW's number of values.
        new_repetitions: usize,
        /// The smallest p-value these sizes can give, a probability.
        smallest_p: f64,
    },
    /// A side's coefficient of variation (sample standard deviation / |mean| of its values,
    /// [`crate::stats::coefficient_of_variation`]) exceeds
    /// `max_cv`, and the change is not large enough to dwarf it (the whole interval beyond
    /// three times the larger CV): spread that size could have made the change.
    Cv {
        /// The noisy side (BASE when both are).
        side: Arm,
        /// Its coefficient of variation, a fraction (0.23 = 23 %).
        cv: f64,
    },
    /// Past the other gates, there is no bootstrap interval of new/base (or no p-value) to
    /// decide on: a value is not finite, or (unpaired rule) a BASE value is 0 or below (the
    /// ratio needs a positive base; the paired rule drops such pairs before its gates, so
    /// they only lower its [`TooFewPairs`](Self::TooFewPairs) count).
    NoInterval,
    /// Paired rule: fewer usable pairs (base value above 0) than `min_repetitions`, or none.
    TooFewPairs {
        /// The number of usable pairs.
        pairs: usize,
    },
    /// Paired rule: the one-sided sign test cannot reach `alpha` with this many pairs: its
    /// smallest p-value, `0.5^n` ([`crate::stats::min_sign_p_value`]), is not below it (6 pairs
    /// give 0.016).
    SignTestCannotReachAlpha {
        /// The number of usable pairs.
        pairs: usize,
        /// The smallest p-value they can give, a probability.
        smallest_p: f64,
    },
    /// Paired rule: the bootstrap interval of the median ratio new/base is wider than
    /// `2 × max_cv` and does not lie wholly beyond the noise band: the pairs cannot tell.
    WideInterval {
        /// The interval's width, `hi − lo` of the ratio (0.25 = 25 percentage points).
        width: f64,
    },
    /// Sequential rule ([`crate::compare::sequential`]): too few pairs for the order-statistic
    /// interval at this look's confidence (1 − α/(k(k+1)) needs 0.5ⁿ ≤ α/(2k(k+1))).
    FewPairsForLook {
        /// The number of usable pairs.
        pairs: usize,
        /// The look (rounds measured so far).
        look: u32,
    },
    /// The last gate: the interval of the change is neither wholly beyond the noise band with
    /// a significant test (regressed, improved) nor wholly inside it (no change): it crosses
    /// the band's edge, so a change beyond the band is not ruled out.
    CrossesBand {
        /// The interval's low end as a change, a fraction (−0.02 = −2 %).
        lo: f64,
        /// Its high end as a change.
        hi: f64,
        /// The metric's noise band, a fraction (0.05 = ±5 %).
        band: f64,
    },
}

impl InconclusiveCause {
    /// The prose `reason` of an inconclusive metric: this cause, its figures and the thresholds
    /// of `o` in a few words, e.g. `CV 23.0% on NEW > 10.0%`.
    pub fn reason(&self, o: &CompareOptions) -> String {
        match *self {
            InconclusiveCause::NotMeasured { side } => format!("not measured on {}", side.label()),
            InconclusiveCause::TooFewRepetitions { side, repetitions } => {
                format!("{repetitions} repetition(s) on {}, fewer than {}", side.label(), o.min_repetitions)
            }
            InconclusiveCause::CannotReachAlpha { base_repetitions, new_repetitions, smallest_p } => format!(
                "{base_repetitions} + {new_repetitions} repetitions cannot reach p < {} (smallest possible p {smallest_p:.3})",
                o.alpha
            ),
            InconclusiveCause::Cv { side, cv } => {
                format!("CV {:.1}% on {} > {:.1}%", cv * 100.0, side.label(), o.max_cv * 100.0)
            }
            InconclusiveCause::NoInterval => {
                "no interval: a value is not finite, or (unpaired) a BASE value is 0 or below".to_owned()
            }
            InconclusiveCause::TooFewPairs { pairs } => format!("{pairs} pair(s), fewer than {}", o.min_repetitions),
            InconclusiveCause::SignTestCannotReachAlpha { pairs, smallest_p } => format!(
                "{pairs} pairs cannot reach p < {} in a sign test (smallest possible p {smallest_p:.3})",
                o.alpha
            ),
            InconclusiveCause::FewPairsForLook { pairs, look } => {
                format!("{pairs} pair(s) are too few for an interval at look {look} of the confidence sequence")
            }
            InconclusiveCause::CrossesBand { lo, hi, band } => format!(
                "the CI of the change, {:+.1}%..{:+.1}%, crosses the noise band ±{:.0}%: neither no change nor a change \
                 beyond it",
                lo * 100.0,
                hi * 100.0,
                band * 100.0
            ),
            InconclusiveCause::WideInterval { width } => format!(
                "the CI of the median ratio spans {:.1}% (more than 2 x {:.1}%)",
                width * 100.0,
                o.max_cv * 100.0
            ),
        }
    }
}
