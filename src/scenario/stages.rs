//! `[[stages]]`: a load shape, the open-loop rate as a schedule of constant stretches and
//! linear ramps, resolved into [`Stages`], a piecewise-linear rate function λ(t) of the load
//! phase and its integral Λ(t) (intended jobs by t), both of which the schedule and the
//! per-second files read.
//!
//! ```text
//! rate  5000 |          ________
//!  jobs/s    |         /
//!       1000 |________/
//!            0    5 s      15 s   20 s   (t since the load phase starts, warmup included)
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bounds::{MAX_RATE, MAX_RUN, MAX_STAGES};
use super::context::Ctx;
use super::error::ScenarioError;
use super::units::HumanDuration;

/// One `[[stages]]` entry as written.
///
/// ```toml
/// [[stages]]
/// duration = "10s"   # > 0; the stages together last at most 7 days
/// rate = 5000        # jobs/s over all producers at the stage's end, 0..=1e7
/// ramp = true        # linear from the previous stage's rate (0 for the first); default false
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// How long the stage lasts.
    pub duration: HumanDuration,
    /// Jobs/s over all producers: held for the whole stage, or reached at its end with `ramp`.
    pub rate: f64,
    /// True: the rate moves linearly from the previous stage's (0 before the first) to `rate`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ramp: bool,
}

/// One stage resolved: the rate moves linearly from `rate_from` to `rate_to` (jobs/s over
/// all producers, both finite and >= 0; equal for a constant stage) over `duration` (> 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StagePlan {
    /// The stage's length.
    pub duration: Duration,
    /// Jobs/s at the stage's start.
    pub rate_from: f64,
    /// Jobs/s at the stage's end.
    pub rate_to: f64,
}

impl StagePlan {
    /// Jobs intended in the stage's first `tau_s` seconds (0 <= `tau_s` <= its duration):
    /// ∫₀^τ λ = r₀τ + (r₁ − r₀)τ²/2d.
    pub fn jobs_within(&self, tau_s: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        self.rate_from * tau_s + (self.rate_to - self.rate_from) * tau_s * tau_s / (2.0 * d)
    }

    /// The time into the stage, seconds, by which `jobs` (0 <= `jobs` <= the stage's jobs)
    /// are intended: the inverse of [`jobs_within`](Self::jobs_within). The root of
    /// a·τ² + r₀·τ − jobs = 0 (a = (r₁ − r₀)/2d) is taken as 2·jobs / (r₀ + √(r₀² + 4·a·jobs)),
    /// which holds for a rising, a falling and a constant rate alike, and loses no precision
    /// when the ramp is nearly flat.
    pub fn time_for(&self, jobs: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        if jobs <= 0.0 {
            return 0.0;
        }
        let a = (self.rate_to - self.rate_from) / (2.0 * d);
        let root = (self.rate_from * self.rate_from + 4.0 * a * jobs).max(0.0).sqrt();
        let denominator = self.rate_from + root;
        if denominator <= 0.0 {
            return d;
        }
        (2.0 * jobs / denominator).clamp(0.0, d)
    }
}

/// A stage and where it stands in the load phase.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Piece {
    plan: StagePlan,
    /// Its start, s after the load phase's.
    from_s: f64,
    /// Its length, s.
    len_s: f64,
    /// Jobs intended before it (Λ at its start).
    jobs_before: f64,
    /// Jobs intended within it.
    jobs: f64,
}

/// The resolved load shape: the stages in order (at least one), with their starts and
/// cumulative jobs computed once. Shared (an `Arc`) by every producer's schedule. Past the
/// last stage the rate holds at its final value, so a schedule drawn beyond the load phase's
/// end stays finite (a last rate of 0 intends nothing more).
#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    pieces: Arc<[Piece]>,
    total: Duration,
}

impl Stages {
    /// The shape of `plans` in order.
    ///
    /// # Panics
    /// When `plans` is empty or a stage has a zero duration ([`stages`] refuses both).
    pub fn new(plans: &[StagePlan]) -> Stages {
        assert!(!plans.is_empty(), "a load shape has at least one stage");
        let (mut from_s, mut jobs_before, mut total) = (0.0, 0.0, Duration::ZERO);
        let pieces = plans
            .iter()
            .map(|&plan| {
                assert!(!plan.duration.is_zero(), "a stage lasts > 0");
                let len_s = plan.duration.as_secs_f64();
                let jobs = plan.jobs_within(len_s);
                let piece = Piece { plan, from_s, len_s, jobs_before, jobs };
                // Starts are summed as `Duration`s, exact to the nanosecond, not as floats.
                total += plan.duration;
                from_s = total.as_secs_f64();
                jobs_before += jobs;
                piece
            })
            .collect();
        Stages { pieces, total }
    }

    /// The stages, in order.
    pub fn plans(&self) -> impl ExactSizeIterator<Item = StagePlan> + '_ {
        self.pieces.iter().map(|p| p.plan)
    }

    /// How many stages (>= 1).
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Always false: a shape has at least one stage.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The stages' summed length: the load phase's, warmup included.
    pub fn total(&self) -> Duration {
        self.total
    }

    /// Jobs intended over all the stages, Λ(total).
    pub fn jobs(&self) -> f64 {
        self.pieces.last().map_or(0.0, |p| p.jobs_before + p.jobs)
    }

    /// The mean rate over the stages, jobs/s: intended jobs / total length.
    pub fn mean_rate(&self) -> f64 {
        self.jobs() / self.total.as_secs_f64()
    }

    /// The highest rate any stage reaches, jobs/s.
    pub fn peak_rate(&self) -> f64 {
        self.plans().map(|p| p.rate_from.max(p.rate_to)).fold(0.0, f64::max)
    }

    /// The same shape with every rate multiplied by `factor` (a shard's share of the fleet's).
    pub fn scaled(&self, factor: f64) -> Stages {
        let plans: Vec<StagePlan> = self
            .plans()
            .map(|p| StagePlan { rate_from: p.rate_from * factor, rate_to: p.rate_to * factor, ..p })
            .collect();
        Stages::new(&plans)
    }

    /// The shape cut at `length` (a ramp cut midway ends at the rate it reached), or held past
    /// its end at the last stage's final rate up to `length` (`--duration`). `length` > 0.
    pub fn cut_or_hold(&self, length: Duration) -> Stages {
        let mut plans = Vec::with_capacity(self.len() + 1);
        let mut at = Duration::ZERO;
        for p in self.plans() {
            if at >= length {
                break;
            }
            let left = length - at;
            if p.duration <= left {
                plans.push(p);
            } else {
                let f = left.as_secs_f64() / p.duration.as_secs_f64();
                plans.push(StagePlan { duration: left, rate_to: p.rate_from + (p.rate_to - p.rate_from) * f, ..p });
            }
            at += p.duration;
        }
        if length > self.total {
            let last = self.pieces.last().expect("at least one stage").plan.rate_to;
            plans.push(StagePlan { duration: length - self.total, rate_from: last, rate_to: last });
        }
        Stages::new(&plans)
    }

    /// The stages as a file writes them: a stage whose rate moves is a ramp (its start is the
    /// stage before's end by construction), any other a constant stage.
    pub fn specs(&self) -> Vec<StageSpec> {
        self.plans()
            .map(|p| StageSpec {
                duration: HumanDuration::from_duration(p.duration),
                rate: p.rate_to,
                ramp: p.rate_from != p.rate_to,
            })
            .collect()
    }

    /// The index of the stage under way `t_s` seconds into the load phase (`None` before 0 and
    /// from the last stage's end on).
    pub fn stage_at(&self, t_s: f64) -> Option<usize> {
        if !(0.0..self.total.as_secs_f64()).contains(&t_s) {
            return None;
        }
        Some(self.pieces.partition_point(|p| p.from_s <= t_s).saturating_sub(1))
    }

    /// Λ(t): jobs intended in the first `t_s` seconds of the load phase (0 before it; past the
    /// last stage the final rate holds).
    pub fn jobs_until(&self, t_s: f64) -> f64 {
        if t_s <= 0.0 {
            return 0.0;
        }
        let k = self.pieces.partition_point(|p| p.from_s <= t_s).saturating_sub(1);
        let p = &self.pieces[k];
        let into = t_s - p.from_s;
        if into >= p.len_s {
            // Past the last stage's end.
            return p.jobs_before + p.jobs + p.plan.rate_to * (into - p.len_s);
        }
        p.jobs_before + p.plan.jobs_within(into)
    }

    /// The mean intended rate, jobs/s, over `from_s..to_s` (s into the load phase) clipped to
    /// the stages (`None` when nothing of the span is within them): what a second of the
    /// per-second files should have seen enqueued.
    pub fn rate_over(&self, from_s: f64, to_s: f64) -> Option<f64> {
        let (from, to) = (from_s.max(0.0), to_s.min(self.total.as_secs_f64()));
        (to > from).then(|| (self.jobs_until(to) - self.jobs_until(from)) / (to - from))
    }

    /// Λ⁻¹: the time, s into the load phase, by which `jobs` are intended (`f64::INFINITY`
    /// when never: the last stage ends at rate 0 with fewer). `cursor` is the caller's stage
    /// index, starting at 0, which only moves forward: `jobs` never decreases between calls
    /// with one cursor, so a lookup is O(1) amortised. A zero-rate stretch is skipped: the
    /// next job is intended where the rate rises again.
    #[inline]
    pub fn time_of(&self, jobs: f64, cursor: &mut usize) -> f64 {
        let pieces = &self.pieces[..];
        while *cursor < pieces.len() && jobs >= pieces[*cursor].jobs_before + pieces[*cursor].jobs {
            *cursor += 1;
        }
        match pieces.get(*cursor) {
            Some(p) => p.from_s + p.plan.time_for(jobs - p.jobs_before),
            None => {
                let last = pieces.last().expect("at least one stage");
                let rate = last.plan.rate_to;
                if rate > 0.0 {
                    last.from_s + last.len_s + (jobs - last.jobs_before - last.jobs) / rate
                } else {
                    f64::INFINITY
                }
            }
        }
    }
}

/// Resolves `[[stages]]` (`None` when there are none): at most [`MAX_STAGES`] stages, each
/// longer than 0 with a rate in 0..=[`MAX_RATE`], together at most [`MAX_RUN`] long and
/// intending at least one job.
///
/// # Errors
/// [`ScenarioError::Invalid`] naming `stages[i].field`, what was found and what was expected.
pub(crate) fn stages(cx: &Ctx, specs: &[StageSpec]) -> Result<Option<Stages>, ScenarioError> {
    if specs.is_empty() {
        return Ok(None);
    }
    if specs.len() > MAX_STAGES {
        let found = format!("{} stages", specs.len());
        return Err(cx.err("stages", found, format!("at most {MAX_STAGES} [[stages]]")));
    }
    let mut plans = Vec::with_capacity(specs.len());
    let (mut before, mut total) = (0.0, Duration::ZERO);
    for (i, s) in specs.iter().enumerate() {
        let field = |name: &str| format!("stages[{i}].{name}");
        if s.duration.get().is_zero() {
            return Err(cx.err(&field("duration"), format!("{:?}", s.duration.as_str()), "a stage longer than 0"));
        }
        if !(s.rate.is_finite() && (0.0..=MAX_RATE).contains(&s.rate)) {
            let expected = format!("a rate in jobs/s from 0 to {MAX_RATE} (the bound of producers.rate)");
            return Err(cx.err(&field("rate"), s.rate, expected));
        }
        total = total.saturating_add(s.duration.get());
        if total > MAX_RUN {
            let expected = format!("stages lasting at most {} together", humantime::format_duration(MAX_RUN));
            return Err(cx.err(&field("duration"), format!("{:?}", s.duration.as_str()), expected));
        }
        let rate_from = if s.ramp { before } else { s.rate };
        plans.push(StagePlan { duration: s.duration.get(), rate_from, rate_to: s.rate });
        before = s.rate;
    }
    let shape = Stages::new(&plans);
    if shape.jobs() < 1.0 {
        let found = format!("{:.3} jobs intended", shape.jobs());
        return Err(cx.err("stages", found, "stages that intend at least one job (a rate > 0 somewhere)"));
    }
    Ok(Some(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(secs: f64, rate_from: f64, rate_to: f64) -> StagePlan {
        StagePlan { duration: Duration::from_secs_f64(secs), rate_from, rate_to }
    }

    /// 1 s at 300/s, a 2 s ramp to 1500/s, 1 s at 1500/s.
    fn three() -> Stages {
        Stages::new(&[stage(1.0, 300.0, 300.0), stage(2.0, 300.0, 1500.0), stage(1.0, 1500.0, 1500.0)])
    }

    #[test]
    fn the_integral_follows_constant_stretches_and_ramps() {
        let s = three();
        assert_eq!(s.total(), Duration::from_secs(4));
        assert_eq!(s.jobs(), 300.0 + 1800.0 + 1500.0);
        assert_eq!(s.mean_rate(), 3600.0 / 4.0);
        assert_eq!(s.peak_rate(), 1500.0);
        assert_eq!(s.jobs_until(0.5), 150.0);
        // Half of the ramp: 300 s⁻¹ × 1 s + 600 s⁻² × 1 s² / 2.
        assert!((s.jobs_until(2.0) - (300.0 + 600.0)).abs() < 1e-9);
        assert_eq!(s.jobs_until(5.0), 3600.0 + 1500.0, "the last rate holds past the end");
        assert_eq!(
            (s.stage_at(0.0), s.stage_at(0.999), s.stage_at(1.0), s.stage_at(3.5)),
            (Some(0), Some(0), Some(1), Some(2))
        );
        assert_eq!((s.stage_at(4.0), s.stage_at(-0.1)), (None, None));
        assert_eq!(
            (s.rate_over(0.0, 1.0), s.rate_over(3.5, 4.5), s.rate_over(4.0, 5.0)),
            (Some(300.0), Some(1500.0), None)
        );
        assert!((s.rate_over(1.0, 2.0).unwrap() - 600.0).abs() < 1e-9, "the ramp's first second averages 600/s");
    }

    #[test]
    fn time_of_inverts_the_integral_with_a_forward_cursor() {
        let s = Stages::new(&[
            stage(1.0, 0.0, 1000.0),
            stage(1.0, 500.0, 500.0),
            stage(1.0, 0.0, 0.0),
            stage(2.0, 2000.0, 100.0),
        ]);
        let mut cursor = 0;
        let mut last = 0.0;
        for j in 0..(s.jobs() as u32) {
            let t = s.time_of(f64::from(j), &mut cursor);
            assert!(t >= last, "times never go back ({t} < {last})");
            assert!((s.jobs_until(t) - f64::from(j)).abs() < 1e-6, "Λ(Λ⁻¹({j})) = {}", s.jobs_until(t));
            assert!(!(2.0..3.0).contains(&t), "nothing is intended in the zero-rate stage: {t}");
            last = t;
        }
        let ends_at_zero = Stages::new(&[stage(1.0, 10.0, 10.0), stage(1.0, 0.0, 0.0)]);
        assert_eq!(ends_at_zero.time_of(11.0, &mut 0), f64::INFINITY);
    }

    #[test]
    fn a_cut_ends_a_ramp_where_it_stood_and_a_hold_keeps_the_last_rate() {
        let s = three();
        let cut = s.cut_or_hold(Duration::from_secs(2));
        assert_eq!(cut.plans().collect::<Vec<_>>(), [stage(1.0, 300.0, 300.0), stage(1.0, 300.0, 900.0)]);
        let held = s.cut_or_hold(Duration::from_secs(6));
        assert_eq!(held.len(), 4);
        assert_eq!(held.plans().last(), Some(stage(2.0, 1500.0, 1500.0)));
        let specs = cut.specs();
        assert_eq!((specs[0].rate, specs[0].ramp, specs[1].rate, specs[1].ramp), (300.0, false, 900.0, true));
    }
}
