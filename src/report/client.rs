//! Whether the harness's own host was the bottleneck (summary.json `client`): a run whose
//! client had no CPU to spare measured the client's scheduling, and its latencies and rates
//! say nothing of the deployment.
//!
//! Two signs, each measured directly of the harness:
//!
//! - **its CPU**: the process used at least [`SATURATED`] of the CPUs it may run on, or a
//!   load thread was busy at least that share of the load phase (one thread drives its lanes
//!   on one core);
//! - **its wait for a CPU**: a load thread was runnable but waiting for a CPU for at least
//!   [`WAITED`] of the load phase (its run delay, `/proc/thread-self/schedstat`): the host's
//!   run queue held it back, whoever else was running. A reply read that late is late by that
//!   wait, and a p99 is made of such tails.
//!
//! Where the kernel keeps no per-thread run delay, the host's CPU pressure stands in for it:
//! `/proc/pressure/cpu` `some` at least [`PRESSURE`] of the load phase (or, without PSI, a
//! 1-minute load average of [`LOAD_PER_CORE`] per core) **and** at least [`LATE`] of the
//! sends late. Late sends alone are not a sign: a deployment that answers slowly fills the
//! producers' pipelines, and their sends wait for it.
//!
//! The host's load average, its CPU pressure, the send lag and the share of late sends are
//! reported either way, so a reader can judge a run near the thresholds.

use serde::{Deserialize, Serialize};

use crate::metrics::host::HostWindow;

/// The share of its CPUs (or of a load thread's time) at which the harness is saturated.
pub const SATURATED: f64 = 0.9;
/// The share of the load phase a load thread may wait for a CPU before the client counts as
/// bound: a quiet host keeps it near 2 %, a host whose every core runs another busy task
/// beside the harness puts it well above this.
pub const WAITED: f64 = 0.10;
/// Without a thread's run delay: the host's CPU pressure (`some`) that counts as contended.
pub const PRESSURE: f64 = 0.25;
/// Without PSI either: the 1-minute load average per core that counts as contended.
pub const LOAD_PER_CORE: f64 = 1.5;
/// Without a thread's run delay: the share of late sends that shows the contention hit the
/// schedule.
pub const LATE: f64 = 0.01;

/// The harness's host over the load phase, and whether the client was the bottleneck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientLoad {
    /// True when the client was saturated ([`ClientLoad::reasons`] say how): its latencies and
    /// rates are the client's scheduling, not the deployment's.
    pub client_bound: bool,
    /// Why it was client-bound, one line each (empty when it was not).
    pub reasons: Vec<String>,
    /// The load phase the figures cover, s.
    pub secs: f64,
    /// The CPUs the harness may run on (affinity and cgroup quota).
    pub cores: usize,
    /// The harness process's CPU over the load phase as a share of `cores`, 0..1.
    pub cpu_share: f64,
    /// The busiest load thread's CPU over its running time, 0..1.
    pub busiest_thread: f64,
    /// The most any load thread waited for a CPU while runnable, as a share of the load phase,
    /// 0..1; `null` where the kernel keeps no run delay.
    pub most_waited: Option<f64>,
    /// The host's CPU pressure over the load phase (`/proc/pressure/cpu` `some`), 0..1; `null`
    /// without PSI.
    pub cpu_pressure: Option<f64>,
    /// The host's 1-minute load average at the load phase's end.
    pub load_avg_1m: Option<f64>,
    /// Open loop: the share of sends that left later than `late_after`, 0..1.
    pub late_fraction: Option<f64>,
    /// Open loop: the producers' send lag p99 (intended to actual send), µs.
    pub send_lag_p99_us: Option<u64>,
}

/// What the run measured of its client, for [`ClientLoad::judge`].
#[derive(Debug, Clone, Default)]
pub struct ClientMeasures {
    /// The host and the process over the load phase.
    pub window: Option<HostWindow>,
    /// Each load thread's CPU share of its running time, 0..1.
    pub busy: Vec<f64>,
    /// Each load thread's wait for a CPU as a share of the load phase, 0..1 (`None`: not kept).
    pub waited: Vec<Option<f64>>,
    /// Open loop: the share of late sends.
    pub late_fraction: Option<f64>,
    /// Open loop: the send lag p99, µs.
    pub send_lag_p99_us: Option<u64>,
}

impl ClientLoad {
    /// Judges `m` by the rules of this module.
    pub fn judge(m: &ClientMeasures) -> ClientLoad {
        let cores = m.window.map_or(1, |w| w.cores.max(1));
        let secs = m.window.map_or(0.0, |w| w.secs);
        let cpu_share = m.window.filter(|w| w.secs > 0.0).map_or(0.0, |w| w.process_cpu_s / (w.secs * cores as f64));
        let (thread, busiest_thread) =
            m.busy.iter().copied().enumerate().fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        let kept = !m.waited.is_empty() && m.waited.iter().all(Option::is_some);
        let (waiter, most_waited) =
            m.waited.iter().map(|w| w.unwrap_or(0.0)).enumerate().fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        let most_waited = kept.then_some(most_waited);
        let cpu_pressure = m.window.and_then(|w| w.cpu_pressure);
        let load_avg_1m = m.window.and_then(|w| w.load_avg_1m);
        let mut reasons = Vec::new();
        if cpu_share >= SATURATED {
            reasons.push(format!("the harness used {:.0} % of its {cores} CPU(s)", cpu_share * 100.0));
        }
        if busiest_thread >= SATURATED {
            reasons.push(format!("load thread {thread} was busy {:.0} % of its time", busiest_thread * 100.0));
        }
        match most_waited {
            Some(w) if w >= WAITED => reasons.push(format!(
                "load thread {waiter} waited for a CPU {:.0} % of the load phase (the host's run queue; at most {:.0} \
                 % may be)",
                w * 100.0,
                WAITED * 100.0
            )),
            Some(_) => {}
            None => {
                let late = m.late_fraction.unwrap_or(0.0);
                let contended = match (cpu_pressure, load_avg_1m) {
                    (Some(p), _) if p >= PRESSURE => Some(format!("CPU pressure {:.0} %", p * 100.0)),
                    (None, Some(l)) if l >= LOAD_PER_CORE * cores as f64 => {
                        Some(format!("load average {l:.1} on {cores} CPU(s)"))
                    }
                    _ => None,
                };
                if let (Some(host), true) = (contended, late >= LATE) {
                    reasons.push(format!(
                        "the host was contended ({host}) and {:.1} % of the sends left late",
                        late * 100.0
                    ));
                }
            }
        }
        ClientLoad {
            client_bound: !reasons.is_empty(),
            reasons,
            secs,
            cores,
            cpu_share,
            busiest_thread,
            most_waited,
            cpu_pressure,
            load_avg_1m,
            late_fraction: m.late_fraction,
            send_lag_p99_us: m.send_lag_p99_us,
        }
    }

    /// The table's line: `client: 4 % of 2 CPUs, busiest load thread 12 %, waited for a CPU at
    /// most 1.2 %; host: CPU pressure 3 %, load average 0.8; sends: 0.01 % late, lag p99 0.050
    /// ms`, prefixed `CLIENT-BOUND (...)` when it was.
    pub fn line(&self) -> String {
        let pct = |x: f64| format!("{:.1} %", x * 100.0);
        let mut line = format!(
            "client: {} of {} CPU(s), busiest load thread {}",
            pct(self.cpu_share),
            self.cores,
            pct(self.busiest_thread)
        );
        if let Some(w) = self.most_waited {
            line.push_str(&format!(", waited for a CPU at most {}", pct(w)));
        }
        let mut host = Vec::new();
        if let Some(p) = self.cpu_pressure {
            host.push(format!("CPU pressure {}", pct(p)));
        }
        if let Some(l) = self.load_avg_1m {
            host.push(format!("load average {l:.2}"));
        }
        if !host.is_empty() {
            line.push_str(&format!("; host: {}", host.join(", ")));
        }
        if let (Some(late), Some(lag)) = (self.late_fraction, self.send_lag_p99_us) {
            line.push_str(&format!("; sends: {} late, lag p99 {} ms", pct(late), crate::report::ms3(lag)));
        }
        if self.client_bound {
            format!(
                "CLIENT-BOUND: {}: the figures are the harness's host's, not the deployment's\n{line}",
                self.reasons.join("; ")
            )
        } else {
            line
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(cpu_s: f64, pressure: Option<f64>, load: Option<f64>) -> HostWindow {
        HostWindow { secs: 10.0, process_cpu_s: cpu_s, cpu_pressure: pressure, load_avg_1m: load, cores: 2 }
    }

    fn quiet() -> ClientMeasures {
        ClientMeasures {
            window: Some(window(1.0, Some(0.03), Some(0.8))),
            busy: vec![0.1, 0.05],
            waited: vec![Some(0.02), Some(0.01)],
            late_fraction: Some(0.0001),
            send_lag_p99_us: Some(50),
        }
    }

    #[test]
    fn a_quiet_client_is_not_bound_and_its_figures_are_reported() {
        let c = ClientLoad::judge(&quiet());
        assert!(!c.client_bound, "{:?}", c.reasons);
        assert_eq!((c.cores, c.cpu_share, c.busiest_thread, c.most_waited), (2, 0.05, 0.1, Some(0.02)));
        assert_eq!(
            c.line(),
            "client: 5.0 % of 2 CPU(s), busiest load thread 10.0 %, waited for a CPU at most 2.0 %; host: CPU \
             pressure 3.0 %, load average 0.80; sends: 0.0 % late, lag p99 0.050 ms"
        );
    }

    #[test]
    fn a_saturated_process_or_thread_is_bound() {
        let c = ClientLoad::judge(&ClientMeasures { window: Some(window(18.5, None, None)), ..quiet() });
        assert!(c.client_bound);
        assert_eq!(c.reasons, ["the harness used 92 % of its 2 CPU(s)"]);
        let c = ClientLoad::judge(&ClientMeasures { busy: vec![0.3, 0.97], ..quiet() });
        assert_eq!(c.reasons, ["load thread 1 was busy 97 % of its time"]);
        assert!(c.line().starts_with("CLIENT-BOUND: load thread 1 was busy 97 %"), "{}", c.line());
    }

    #[test]
    fn a_thread_that_waited_for_a_cpu_is_bound_whatever_the_sends() {
        let c =
            ClientLoad::judge(&ClientMeasures { waited: vec![Some(0.02), Some(0.16)], late_fraction: None, ..quiet() });
        assert!(c.client_bound);
        assert!(c.reasons[0].starts_with("load thread 1 waited for a CPU 16 % of the load phase"), "{:?}", c.reasons);
        let c = ClientLoad::judge(&ClientMeasures { waited: vec![Some(0.09)], ..quiet() });
        assert!(!c.client_bound);
    }

    #[test]
    fn without_run_delay_the_host_pressure_and_late_sends_decide_together() {
        let blind = |pressure, load, late| ClientMeasures {
            window: Some(window(1.0, pressure, load)),
            waited: vec![None, None],
            late_fraction: Some(late),
            ..quiet()
        };
        let c = ClientLoad::judge(&blind(Some(0.6), None, 0.05));
        assert_eq!(c.most_waited, None);
        assert_eq!(c.reasons, ["the host was contended (CPU pressure 60 %) and 5.0 % of the sends left late"]);
        // Late sends alone are a slow deployment filling the pipelines; pressure alone did not
        // reach the schedule.
        assert!(!ClientLoad::judge(&blind(Some(0.05), None, 0.3)).client_bound);
        assert!(!ClientLoad::judge(&blind(Some(0.6), None, 0.001)).client_bound);
        // Without PSI the load average per CPU stands in.
        assert!(ClientLoad::judge(&blind(None, Some(4.0), 0.05)).client_bound);
        assert!(!ClientLoad::judge(&blind(None, Some(2.0), 0.05)).client_bound);
    }
}
