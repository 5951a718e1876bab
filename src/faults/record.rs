//! Faults a run rode through: the ones the nemesis injected on purpose and the ones the
//! harness saw (the target unreachable from the coordinator, load connections re-opened,
//! calls whose outcome is unknown), each with its time span, so latency and errors can be read
//! against it (*faults seen* are not an interruption: the checker and the thresholds judge
//! the run).

use crate::lua::{ErrorCode, Script};
use crate::metrics::{JobCounter, RunMetrics};
use crate::scenario::FaultKind;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a [`FaultSpan`] is: a fault the nemesis injected, or one the harness saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A `[[faults]]` entry the nemesis injected (or tried to: [`FaultSpan::applied`]).
    Injected(FaultKind),
    /// The nemesis could not inject at all (its own connections failed).
    Nemesis,
    /// The coordinator's depth reads failed: the target was unreachable.
    Unreachable,
    /// Load connections re-opened after a loss.
    Reconnects,
    /// Calls whose outcome is unknown (a timeout, a lost connection).
    UnknownOutcomes,
}

impl SpanKind {
    /// The name summary.json, intervals.csv and the table use: the scenario's spelling of an
    /// injected kind (`pause`, `failover`, ...), else `nemesis`, `unreachable`, `reconnects`,
    /// `unknown_outcomes`.
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::Injected(kind) => kind.name(),
            SpanKind::Nemesis => "nemesis",
            SpanKind::Unreachable => "unreachable",
            SpanKind::Reconnects => "reconnects",
            SpanKind::UnknownOutcomes => "unknown_outcomes",
        }
    }
}

impl SpanKind {
    /// The kind [`SpanKind::name`] spells `name`, if any.
    pub fn from_name(name: &str) -> Option<SpanKind> {
        let seen = [SpanKind::Nemesis, SpanKind::Unreachable, SpanKind::Reconnects, SpanKind::UnknownOutcomes];
        seen.into_iter().chain(FaultKind::ALL.into_iter().map(SpanKind::Injected)).find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for SpanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for SpanKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for SpanKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        SpanKind::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown fault span kind `{name}`: expected a fault kind, nemesis, unreachable, reconnects or unknown_outcomes"
            ))
        })
    }
}

/// One fault over a span of the run, injected or seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultSpan {
    /// What: an injected kind (`kill-connections`, `pause`, `script-flush`, `maxmemory`,
    /// `freeze`, `restart`, `failover`, `kill-primary`, `cluster-failover`; `nemesis` when the
    /// nemesis could not inject at all) or a seen one (`unreachable`, `reconnects`,
    /// `unknown_outcomes`).
    pub kind: SpanKind,
    /// False when an injected fault could not be applied or undone (`detail` says why, after
    /// `failed: `), and for the nemesis's own failure; true for everything else (and for
    /// folders written before it was recorded).
    #[serde(default = "applied")]
    pub applied: bool,
    /// Start, seconds since the run start.
    pub from_s: f64,
    /// End, seconds since the run start (equal to `from_s` for an instant fault; seen spans
    /// built from the per-second series end at the end of their last second).
    pub to_s: f64,
    /// How many: connections killed, reconnects, calls with an unknown outcome (0 when the
    /// fault is no count, e.g. a pause).
    #[serde(default)]
    pub count: u64,
    /// What happened, e.g. `CLIENT PAUSE 1000 WRITE on 127.0.0.1:6379`, or the error when a
    /// fault could not be applied, or why the target was unreachable.
    #[serde(default)]
    pub detail: String,
    /// What an injected fault did to the run, as the check and the history attribute it
    /// (the failover table); `None` for seen spans, and when the check did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<FaultEffects>,
    /// `kill-primary`, `cluster-failover` and `partition`: the queue whose primary the fault
    /// acted on, named as the run names it (a cluster run's `queues = N` are renamed to spread
    /// them over the primaries, so the scenario's `queue = "bench-K"`, the run's (K+1)-th queue,
    /// may be called otherwise here), with its place among the run's queues: `bench-2 (queue 1
    /// of 3)`. `None` for the other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// What one injected fault did, from its start until the next fault starts or the run ends:
/// how long the queues were without acknowledged enqueues, how long the cluster refused calls
/// with CLUSTERDOWN, and what the check found whose evidence falls in its window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultEffects {
    /// Per queue (the scenario's names), seconds from the fault's start until an enqueue into
    /// it was acknowledged again after the longest interruption the fault overlaps (a gap in
    /// acknowledged enqueues of at least [`OUTAGE_MIN`](crate::faults::record::OUTAGE_MIN_S)
    /// seconds); 0 when the queue's enqueues were not interrupted; `None` when none was
    /// acknowledged after the fault.
    pub answered_again_s: std::collections::BTreeMap<String, Option<f64>>,
    /// Seconds of the window in which the load waited out CLUSTERDOWN refusals (from any
    /// primary, the fault's shard or the others), from the first to the last such second.
    pub cluster_down_s: u64,
    /// Acknowledged enqueues whose job is gone (I7, no row left).
    pub lost_enqueues: u64,
    /// Tokens handed out to two holders or more (I5).
    pub reissued_tokens: u64,
    /// Fencing failures (I6): two terminal outcomes, a stale worker's call accepted, an
    /// "already completed" answer to another holder.
    pub fencing_violations: u64,
    /// Other violations whose evidence falls in the window.
    pub other_violations: u64,
    /// Calls sent in the window whose outcome is unknown (timeout, connection lost, WAIT short of its replicas).
    pub unknown_outcomes: u64,
    /// The jobs the violations above name, the first [`MAX_JOBS_NAMED`] of them.
    pub jobs: Vec<String>,
    /// Violations whose evidence carries no time (an end state that contradicts the history,
    /// e.g. "accepted with token 1 but token 2 was handed out"), by the effect they count in
    /// (`fencing_violations`: 2), each of a job whose finding of the same effect lies in this
    /// window: the same failure read a second time, judged with it (bounded when that effect
    /// has a threshold) and not counted again in the effects above.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub untimed_same_job: std::collections::BTreeMap<String, u64>,
}

/// The shortest gap in a queue's acknowledged enqueues that counts as an interruption, s.
pub const OUTAGE_MIN_S: f64 = 0.1;
/// At most this many job ids are listed per fault.
pub const MAX_JOBS_NAMED: usize = 10;

impl FaultEffects {
    /// `bench-0 3.92 s, bench-1 not interrupted, bench-2 never`: each queue's
    /// [`answered_again_s`](Self::answered_again_s) in words.
    pub fn answered_again(&self) -> String {
        let queues: Vec<String> = self
            .answered_again_s
            .iter()
            .map(|(q, s)| match s {
                Some(s) if *s > 0.0 => format!("{q} {s:.2} s"),
                Some(_) => format!("{q} not interrupted"),
                None => format!("{q} never"),
            })
            .collect();
        queues.join(", ")
    }

    /// `queues answered again after: bench-0 3.92 s, bench-1 0 s; CLUSTERDOWN for 3 s; lost
    /// acknowledged enqueues 112, tokens handed out twice 37, fencing violations 5, unknown
    /// outcomes 12 (jobs ...)`, as the table prints it under its fault.
    pub fn describe(&self) -> String {
        let mut out = format!("queues answered again after: {}", self.answered_again());
        if self.cluster_down_s > 0 {
            out.push_str(&format!("; CLUSTERDOWN for {} s", self.cluster_down_s));
        }
        out.push_str(&format!(
            "; lost acknowledged enqueues {}, tokens handed out twice {}, fencing violations {}, other violations {}, unknown outcomes {}",
            self.lost_enqueues, self.reissued_tokens, self.fencing_violations, self.other_violations, self.unknown_outcomes
        ));
        if !self.jobs.is_empty() {
            out.push_str(&format!(" (jobs {})", self.jobs.join(", ")));
        }
        out
    }
}

impl FaultSpan {
    /// `kind 3.0-4.0 s [on queue Q (queue K of N)] (count; detail)`, as the table's footer prints it.
    pub fn describe(&self) -> String {
        let mut out = if self.to_s > self.from_s {
            format!("{} {:.1}-{:.1} s", self.kind, self.from_s, self.to_s)
        } else {
            format!("{} at {:.1} s", self.kind, self.from_s)
        };
        if let Some(queue) = &self.queue {
            out.push_str(&format!(" on queue {queue}"));
        }
        match (self.count, self.detail.is_empty()) {
            (0, true) => {}
            (0, false) => out.push_str(&format!(" ({})", self.detail)),
            (n, true) => out.push_str(&format!(" ({n})")),
            (n, false) => out.push_str(&format!(" ({n}; {})", self.detail)),
        }
        out
    }

    /// True when the span covers any part of `[from_s, to_s)` widened by `grace` after its end.
    fn touches(&self, from_s: f64, to_s: f64, grace: Duration) -> bool {
        self.from_s < to_s && self.to_s + grace.as_secs_f64() >= from_s
    }
}

fn applied() -> bool {
    true
}

/// Everything summary.json's `faults` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultsSeen {
    /// Faults the scenario's `[[faults]]` injected, in the order they began.
    pub injected: Vec<FaultSpan>,
    /// Faults the harness saw, by kind then time.
    pub seen: Vec<FaultSpan>,
    /// Load connections re-opened after a loss, over the whole run.
    pub reconnects: u64,
    /// Calls whose outcome is unknown (timeout, connection lost) over the measured part.
    pub unknown_outcomes: u64,
    /// Calls that failed on a lost connection, or on one that could not be opened (the
    /// scripts' `connection` errors), over the measured part: not `reconnects`, which counts
    /// connections opened again.
    pub connection_errors: u64,
}

impl FaultsSeen {
    /// Builds the record from the injected spans, the coordinator's unreachable spans and the
    /// run's per-second series (reconnects and unknown outcomes, one span per run of
    /// consecutive seconds that had any). `reconnects` is the whole run's count.
    pub fn build(
        injected: Vec<FaultSpan>,
        unreachable: Vec<FaultSpan>,
        metrics: &RunMetrics,
        reconnects: u64,
    ) -> FaultsSeen {
        let mut seen = unreachable;
        seen.extend(per_second_spans(metrics));
        let unknown_outcomes = metrics.scripts.iter().map(|s| unknown_of(&s.errors)).sum();
        let connection_errors = metrics.scripts.iter().map(|s| s.errors[ErrorCode::Connection.index()]).sum();
        FaultsSeen { injected, seen, reconnects, unknown_outcomes, connection_errors }
    }

    /// The reconnect and unknown-outcome spans computed again from `metrics`' series: what a
    /// run whose series was streamed during the load (and read back after it) calls once the
    /// series is whole. Injected faults and unreachable spans stay as they are.
    pub fn spans_again(&mut self, metrics: &RunMetrics) {
        self.seen.retain(|s| !matches!(s.kind, SpanKind::Reconnects | SpanKind::UnknownOutcomes));
        self.seen.extend(per_second_spans(metrics));
    }

    /// True when nothing was injected or seen.
    pub fn is_empty(&self) -> bool {
        self.injected.is_empty() && self.seen.is_empty() && self.reconnects == 0
    }

    /// Per script, the failed calls an injected fault explains: the codes a fault causes
    /// (timeout, connection lost, OOM, LOADING, READONLY, BUSY, NOSCRIPT) in the seconds an
    /// injected fault touched, widened by `grace` after its end (calls in flight wait up to
    /// the reply timeout, then the reconnect backoff). Only injected faults explain errors:
    /// a seen one (a reconnect after a timeout, an unreachable span) may be the very failure
    /// under test, a slow script's. Protocol refusals (`EMQ*`), malformed replies and other
    /// server errors (a Lua runtime error) are never explained. Indexed by [`Script::index`].
    pub fn explained_errors(&self, metrics: &RunMetrics, grace: Duration) -> [u64; Script::COUNT] {
        let mut out = [0; Script::COUNT];
        for rec in &metrics.intervals {
            let from = rec.start_us as f64 / 1e6;
            let to = from + rec.duration_us as f64 / 1e6;
            if !self.injected.iter().any(|w| w.touches(from, to, grace)) {
                continue;
            }
            for s in &rec.scripts {
                out[s.script.index()] +=
                    ErrorCode::ALL.iter().filter(|c| c.is_fault_caused()).map(|c| s.errors[c.index()]).sum::<u64>();
            }
        }
        out
    }

    /// The kinds of the injected faults and unreachable spans that touched `[from_s, to_s)`,
    /// `;`-separated, each once (intervals.csv's `faults` column).
    pub fn active_in(&self, from_s: f64, to_s: f64) -> String {
        let mut kinds: Vec<&str> = Vec::new();
        let windows = self.injected.iter().chain(self.seen.iter().filter(|s| s.kind == SpanKind::Unreachable));
        for span in windows.filter(|s| s.touches(from_s, to_s, Duration::ZERO)) {
            if !kinds.contains(&span.kind.name()) {
                kinds.push(span.kind.name());
            }
        }
        kinds.join(";")
    }

    /// The table's footer lines (empty when there was no fault).
    pub fn footer(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut out = String::new();
        for span in &self.injected {
            out.push_str(&format!("fault injected: {}\n", span.describe()));
            if let Some(effects) = &span.effects {
                out.push_str(&format!("  its effects: {}\n", effects.describe()));
            }
        }
        let seen: Vec<String> = self.seen.iter().map(FaultSpan::describe).collect();
        if !seen.is_empty() {
            out.push_str(&format!("faults seen: {}\n", seen.join(", ")));
        }
        out.push_str(&format!(
            "faults total: {} reconnects (connections opened again after a loss), {} calls failed on a lost or \
             unopened connection (the `connection` errors), {} calls with an unknown outcome (timeout, connection \
             lost, or WAIT short of its replicas)\n",
            self.reconnects, self.connection_errors, self.unknown_outcomes
        ));
        if self.connection_errors > self.reconnects {
            out.push_str(
                "  (one lost connection fails every call in flight on it, and counts one reconnect only once it is \
                 opened again: a node gone for good, or a cluster's load that moved to the node that took over, \
                 reconnects nothing)\n",
            );
        }
        out
    }
}

fn unknown_of(errors: &[u64; ErrorCode::COUNT]) -> u64 {
    ErrorCode::ALL.iter().filter(|c| c.is_unknown_outcome()).map(|c| errors[c.index()]).sum()
}

/// The reconnect and unknown-outcome spans of `metrics`' per-second series: runs of seconds
/// with at least one, in time order, reconnects first.
fn per_second_spans(metrics: &RunMetrics) -> Vec<FaultSpan> {
    let mut seen = Vec::new();
    let per_second = |count: &dyn Fn(&crate::metrics::IntervalRecord) -> u64| {
        let mut spans: Vec<(u64, u64, u64)> = Vec::new(); // (first second, last second, count)
        for rec in &metrics.intervals {
            let n = count(rec);
            if n == 0 {
                continue;
            }
            match spans.last_mut() {
                Some(span) if span.1 + 1 == rec.index => {
                    span.1 = rec.index;
                    span.2 += n;
                }
                _ => spans.push((rec.index, rec.index, n)),
            }
        }
        spans
    };
    let reconnect_spans = per_second(&|rec| rec.jobs[JobCounter::Reconnects.index()]);
    let unknown_spans = per_second(&|rec| rec.scripts.iter().map(|s| unknown_of(&s.errors)).sum());
    for (kind, spans) in [(SpanKind::Reconnects, reconnect_spans), (SpanKind::UnknownOutcomes, unknown_spans)] {
        seen.extend(spans.into_iter().map(|(first, last, count)| FaultSpan {
            kind,
            applied: true,
            from_s: first as f64,
            to_s: (last + 1) as f64,
            count,
            detail: String::new(),
            effects: None,
            queue: None,
        }));
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(kind: SpanKind, from_s: f64, to_s: f64) -> FaultSpan {
        FaultSpan { kind, applied: true, from_s, to_s, count: 0, detail: String::new(), effects: None, queue: None }
    }

    #[test]
    fn spans_touch_the_seconds_they_overlap_and_the_grace_after() {
        let pause = span(SpanKind::Injected(FaultKind::Pause), 3.2, 4.2);
        assert!(!pause.touches(2.0, 3.0, Duration::ZERO));
        assert!(pause.touches(3.0, 4.0, Duration::ZERO));
        assert!(pause.touches(4.0, 5.0, Duration::ZERO));
        assert!(!pause.touches(5.0, 6.0, Duration::ZERO));
        assert!(pause.touches(5.0, 6.0, Duration::from_secs(1)));
        assert!(!pause.touches(6.0, 7.0, Duration::from_millis(1500)));
        let instant = span(SpanKind::Injected(FaultKind::KillConnections), 3.0, 3.0);
        assert!(instant.touches(3.0, 4.0, Duration::ZERO));
    }

    /// Only injected faults explain errors, and only the codes a fault causes: a timeout that
    /// made its own reconnect (a slow script) is no excuse, nor is a Lua runtime error.
    #[test]
    fn only_injected_faults_explain_and_only_fault_codes() {
        let mut run = crate::report::tests::sample_run();
        let second = run.intervals.iter_mut().find(|r| r.index == 2).expect("second 2");
        let complete = second.scripts.iter_mut().find(|s| s.script == Script::Complete).expect("complete");
        complete.errors[ErrorCode::Timeout.index()] = 5;
        complete.errors[ErrorCode::Server.index()] = 7;
        let complete = Script::Complete.index();
        let mut faults = FaultsSeen::default();
        faults.seen.push(span(SpanKind::Reconnects, 2.0, 3.0));
        faults.seen.push(span(SpanKind::Unreachable, 2.0, 3.0));
        assert_eq!(faults.explained_errors(&run, Duration::from_secs(5))[complete], 0, "seen faults explain nothing");
        faults.injected.push(span(SpanKind::Injected(FaultKind::Pause), 0.2, 0.5));
        assert_eq!(faults.explained_errors(&run, Duration::from_millis(500))[complete], 0, "outside its window");
        assert_eq!(faults.explained_errors(&run, Duration::from_secs(2))[complete], 5, "timeouts, not Lua errors");
    }

    #[test]
    fn footer_names_every_span() {
        let mut faults = FaultsSeen::default();
        assert_eq!(faults.footer(), "");
        faults.injected.push(FaultSpan {
            count: 9,
            detail: "CLIENT KILL".into(),
            ..span(SpanKind::Injected(FaultKind::KillConnections), 3.0, 3.0)
        });
        faults.seen.push(FaultSpan { count: 4, ..span(SpanKind::Reconnects, 3.0, 4.0) });
        faults.reconnects = 4;
        let footer = faults.footer();
        assert!(footer.contains("fault injected: kill-connections at 3.0 s (9; CLIENT KILL)"), "{footer}");
        assert!(footer.contains("faults seen: reconnects 3.0-4.0 s (4)"), "{footer}");
        assert!(footer.contains("4 reconnects (connections opened again after a loss), 0 calls failed"), "{footer}");
        assert!(!footer.contains("one lost connection fails"), "{footer}");
        faults.connection_errors = 5;
        faults.reconnects = 0;
        let footer = faults.footer();
        assert!(footer.contains("0 reconnects (connections opened again after a loss), 5 calls failed on a lost"));
        assert!(footer.contains("one lost connection fails every call in flight on it"), "{footer}");
    }
}
