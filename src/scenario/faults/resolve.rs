//! Resolving the `[[faults]]` entries against the rest of the scenario: each key checked
//! against its kind, every refusal naming `faults[i].<key>`, what was found and what was
//! expected.

use super::{modes, FaultKind, FaultPlan, FaultSpec, ModeSpec, PartitionSide, TargetShape, MAX_FAULTS};
use crate::scenario::context::Ctx;
use crate::scenario::error::ScenarioError;
use crate::scenario::units::HumanDuration;
use std::time::Duration;

/// The shortest `every`: faults closer than this would be one long fault.
const MIN_EVERY: Duration = Duration::from_millis(100);
/// The longest fault `duration` (a pause or freeze longer than this is an outage, which
/// `--give-up` handles).
const MAX_FAULT_DURATION: Duration = Duration::from_secs(600);
/// The shortest `lag`.
const MIN_LAG: Duration = Duration::from_millis(1);
/// The longest `lag`: longer, and the frozen replicas would be failed by the cluster (any
/// sane `cluster-node-timeout` is shorter), which is another fault.
const MAX_LAG: Duration = Duration::from_secs(60);

/// What the faults are checked against: the rest of the scenario, resolved.
pub(crate) struct Within<'a> {
    /// The load phase's length when the run is time-bounded.
    pub load_for: Option<Duration>,
    /// The target the scenario names.
    pub target: TargetShape,
    /// The scenario's queue names, in order.
    pub queues: &'a [String],
}

/// Resolves the `[[faults]]` entries against the rest of the scenario.
pub(crate) fn faults(cx: &Ctx, specs: &[FaultSpec], within: &Within) -> Result<Vec<FaultPlan>, ScenarioError> {
    if specs.len() > MAX_FAULTS {
        return Err(cx.err("faults", specs.len(), format!("at most {MAX_FAULTS} [[faults]] entries")));
    }
    specs.iter().enumerate().map(|(i, spec)| fault(cx, i, spec, within)).collect()
}

fn fault(cx: &Ctx, i: usize, spec: &FaultSpec, within: &Within) -> Result<FaultPlan, ScenarioError> {
    let field = |name: &str| format!("faults[{i}].{name}");
    let kind = spec.kind;
    let every = spec.every.as_ref().map(HumanDuration::get);
    if let Some(e) = every.filter(|e| *e < MIN_EVERY) {
        let expected = format!("at least {} between two faults", humantime::format_duration(MIN_EVERY));
        return Err(cx.err(&field("every"), humantime::format_duration(e), expected));
    }
    let first = match (spec.at.as_ref().map(HumanDuration::get), every) {
        (Some(at), _) => at,
        (None, Some(every)) => every,
        (None, None) => {
            return Err(cx.err(&field("at"), "neither at nor every", "at = \"3s\", every = \"5s\" or both"))
        }
    };
    if let Some(load) = within.load_for.filter(|load| first >= *load) {
        let expected = format!("a time within the load phase (duration = {})", humantime::format_duration(load));
        return Err(cx.err(&field("at"), humantime::format_duration(first), expected));
    }
    if spec.restart.is_some() && kind != FaultKind::KillPrimary {
        let found = format!("{:?}", spec.restart.unwrap_or_default());
        return Err(cx.err(&field("restart"), found, "restart only for kind = \"kill-primary\""));
    }
    let restart = spec.restart.unwrap_or(false);
    let duration = duration(cx, &field("duration"), spec, kind.lasts() || restart)?;
    if let Some(e) = every.filter(|e| duration >= *e) {
        let expected = format!("a duration shorter than every ({})", humantime::format_duration(e));
        return Err(cx.err(&field("duration"), humantime::format_duration(duration), expected));
    }
    let modes = modes::resolve(kind, spec.mode)
        .map_err(|expected| cx.err(&field("mode"), spec.mode.map_or("", ModeSpec::name), expected))?;
    if spec.signal.is_some() && kind != FaultKind::Restart {
        return Err(cx.err(&field("signal"), format!("{:?}", spec.signal), "signal only for kind = \"restart\""));
    }
    if spec.side.is_some() && kind != FaultKind::Partition {
        let found = spec.side.map_or("", PartitionSide::name);
        return Err(cx.err(&field("side"), found, "side only for kind = \"partition\""));
    }
    let (queue, lag) = on_a_queue(cx, i, spec, within.queues)?;
    let plan = FaultPlan {
        kind,
        first,
        every,
        duration,
        mode: modes.pause,
        failover: modes.failover,
        signal: spec.signal.unwrap_or_default(),
        queue,
        lag,
        restart,
        side: spec.side.unwrap_or_default(),
    };
    if let Err(expected) = plan.fits(within.target) {
        let found = match plan.needs_field() {
            "lag" => spec.lag.as_ref().map_or("", HumanDuration::as_str).to_string(),
            _ => kind.name().to_string(),
        };
        return Err(cx.err(&field(plan.needs_field()), found, expected));
    }
    Ok(plan)
}

/// `duration`, required when the fault lasts (`lasts`), refused otherwise.
fn duration(cx: &Ctx, field: &str, spec: &FaultSpec, lasts: bool) -> Result<Duration, ScenarioError> {
    let kind = spec.kind;
    match (lasts, spec.duration.as_ref().map(HumanDuration::get)) {
        (true, None) if kind == FaultKind::KillPrimary => {
            Err(cx.err(field, "none", "how long the killed node stays down before restart = true starts it again"))
        }
        (true, None) => Err(cx.err(field, "none", format!("how long the {} lasts", kind.name()))),
        (true, Some(d)) if d.is_zero() || d > MAX_FAULT_DURATION => {
            let expected = format!("more than 0 and at most {}", humantime::format_duration(MAX_FAULT_DURATION));
            Err(cx.err(field, humantime::format_duration(d), expected))
        }
        (true, Some(d)) => Ok(d),
        (false, Some(_)) => {
            let expected = match kind {
                FaultKind::KillPrimary => "no duration without restart = true (how long the node stays down)".into(),
                _ => format!("no duration: a {} is instant", kind.name()),
            };
            Err(cx.err(field, spec.duration.as_ref().map_or("", |d| d.as_str()), expected))
        }
        (false, None) => Ok(Duration::ZERO),
    }
}

/// `queue` (its index in `queues`, default 0) and `lag`, for the kinds that act on a queue's
/// primary; refused for the others.
fn on_a_queue(
    cx: &Ctx,
    i: usize,
    spec: &FaultSpec,
    queues: &[String],
) -> Result<(usize, Option<Duration>), ScenarioError> {
    let field = |name: &str| format!("faults[{i}].{name}");
    if let Some(lag) = spec.lag.as_ref().filter(|_| !spec.kind.takes_lag()) {
        let expected = "lag only for kind = \"kill-primary\" or \"cluster-failover\"";
        return Err(cx.err(&field("lag"), lag.as_str(), expected));
    }
    if !spec.kind.on_a_queue() {
        if let Some(queue) = &spec.queue {
            let expected = "queue only for kind = \"kill-primary\", \"cluster-failover\" or \"partition\"";
            return Err(cx.err(&field("queue"), format!("{queue:?}"), expected));
        }
        return Ok((0, None));
    }
    let queue = match &spec.queue {
        None => 0,
        Some(name) => queues.iter().position(|q| q == name).ok_or_else(|| {
            cx.err(
                &field("queue"),
                format!("{name:?}"),
                format!("one of the scenario's queues ({})", queues.join(", ")),
            )
        })?,
    };
    let lag = spec.lag.as_ref().map(HumanDuration::get);
    if let Some(l) = lag.filter(|l| !(MIN_LAG..=MAX_LAG).contains(l)) {
        let expected =
            format!("a lag of {} to {}", humantime::format_duration(MIN_LAG), humantime::format_duration(MAX_LAG));
        return Err(cx.err(&field("lag"), humantime::format_duration(l), expected));
    }
    Ok((queue, lag))
}
