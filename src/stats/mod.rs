//! Pure statistics for comparing two sets of repeated measurements: descriptive summaries, the
//! normal distribution's tail, the Mann–Whitney U test and a bootstrap confidence interval; and
//! for reading one run: a percentile's order-statistic interval and a series' autocorrelation.
//!
//! A leaf, as criterion.rs's `stats` is, so it can be tested and trusted on its own: nothing else
//! from the crate is imported here, every function is deterministic (the bootstrap takes its seed),
//! and the tests check reference values computed with scipy.
//!
//! - [`describe`]: median, mean, sample standard deviation, coefficient of variation, quantiles.
//! - [`normal`]: `erfc` and the standard normal upper tail, for the U test's approximation.
//! - [`mann_whitney`]: the one-sided Mann–Whitney U test (Mann & Whitney 1947), exact or normal.
//! - [`bootstrap`]: the percentile bootstrap interval of a ratio of medians (Efron 1979), and of
//!   a median of paired ratios.
//! - [`sign`]: the one-sided sign test for paired ratios.
//! - [`poisson`]: the exact interval of a Poisson rate (Garwood) and the exact conditional test
//!   that two rates differ, for counts of violations per injected fault.
//! - [`ratio`]: a share of events over units of time with an interval that treats the units,
//!   not the events, as independent.
//! - [`trend`]: the Mann–Kendall trend test, corrected for autocorrelation, and the Theil–Sen slope.
//! - [`autocorrelation`]: the lag-1 autocorrelation of a series and the effective sample size
//!   it leaves, for intervals that assume independent samples.
//! - [`quantile_interval`]: the distribution-free interval of a quantile from order statistics
//!   (the ranks, and the value at a rank of an HdrHistogram).
//! - [`sequence`]: a confidence sequence for a median (the order-statistic interval with α
//!   spent over looks), valid however often a gate looks and whenever it stops.

pub mod autocorrelation;
pub mod bootstrap;
pub mod describe;
pub mod mann_whitney;
pub mod normal;
pub mod poisson;
pub mod quantile_interval;
pub mod ratio;
pub mod sequence;
pub mod sign;
pub mod trend;

pub use autocorrelation::{effective_sample_size, lag1_autocorrelation};
pub use bootstrap::{median_ci, ratio_of_medians_ci, Interval};
pub use describe::{coefficient_of_variation, mean, median, quantile_sorted, std_dev};
pub use mann_whitney::{mann_whitney_u, mann_whitney_u_with, min_exact_p_value, Alternative, Method, UTest};
pub use normal::{erfc, normal_sf};
pub use poisson::{poisson_rate_interval, poisson_rates_test};
pub use quantile_interval::{rank_interval, samples_for_upper_bound, value_at_rank, RankInterval};
pub use sequence::{alpha_at_look, median_sequence_interval};
pub use sign::{min_sign_p_value, sign_test};
