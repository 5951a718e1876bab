//! The harness's host while a run loads it: the process's CPU, the host's run queue (load
//! average, and `/proc/pressure/cpu` where the kernel has it) and a load thread's wait for a
//! CPU (`/proc/thread-self/schedstat`). What `report::client` judges "client-bound" on: a
//! latency measured by a client that waited for a CPU is the client's scheduling, not the
//! deployment's.
//!
//! Every reading is a few small `/proc` reads, taken at the load phase's start and end (and
//! per load thread once at each), never per request.

use std::time::Instant;

/// One reading of the host and of this process, to be subtracted from a later one.
#[derive(Debug, Clone, Copy)]
pub struct HostReading {
    /// When it was read.
    pub at: Instant,
    /// This process's user + system CPU so far, s.
    pub process_cpu_s: f64,
    /// `/proc/pressure/cpu`'s `some total`: µs during which at least one runnable task of the
    /// host waited for a CPU, since boot (`None` without PSI).
    pub cpu_pressure_us: Option<u64>,
}

impl HostReading {
    /// Reads the host and this process now.
    pub fn now() -> HostReading {
        let (user, sys) = super::cpu::cpu_seconds(super::cpu::CpuOf::Process);
        let cpu_pressure_us = std::fs::read_to_string("/proc/pressure/cpu").ok().and_then(|t| psi_some_total(&t));
        HostReading { at: Instant::now(), process_cpu_s: user + sys, cpu_pressure_us }
    }

    /// What happened between `self` and the later `end`.
    pub fn until(&self, end: &HostReading) -> HostWindow {
        let secs = end.at.duration_since(self.at).as_secs_f64();
        let pressure = match (self.cpu_pressure_us, end.cpu_pressure_us) {
            (Some(a), Some(b)) if secs > 0.0 => Some((b.saturating_sub(a) as f64 / 1e6 / secs).clamp(0.0, 1.0)),
            _ => None,
        };
        HostWindow {
            secs,
            process_cpu_s: (end.process_cpu_s - self.process_cpu_s).max(0.0),
            cpu_pressure: pressure,
            load_avg_1m: load_avg_1m(),
            cores: cores(),
        }
    }
}

/// The host and this process over a window (the load phase).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostWindow {
    /// The window's length, s.
    pub secs: f64,
    /// This process's CPU over it, s.
    pub process_cpu_s: f64,
    /// The share of it during which some runnable task of the host waited for a CPU
    /// (`/proc/pressure/cpu` `some`), 0..1; `None` without PSI.
    pub cpu_pressure: Option<f64>,
    /// The host's 1-minute load average at its end (`/proc/loadavg`); `None` unreadable.
    pub load_avg_1m: Option<f64>,
    /// The CPUs this process may run on (affinity and cgroup quota).
    pub cores: usize,
}

/// The CPUs this process may run on: its affinity mask and cgroup quota (at least 1).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The host's 1-minute load average, `None` when `/proc/loadavg` cannot be read.
pub fn load_avg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The calling thread's time spent runnable but waiting for a CPU so far, s (the second field
/// of `/proc/thread-self/schedstat`); `None` where the kernel does not keep it.
pub fn thread_run_delay_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// `some ... total=N` of a `/proc/pressure/cpu` text, µs.
fn psi_some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("total="))?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_reads_the_some_line_total() {
        let text = "some avg10=12.34 avg60=3.11 avg300=4.88 total=5468558549\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(psi_some_total(text), Some(5_468_558_549));
        assert_eq!(psi_some_total("full avg10=0.00 total=7\n"), None);
    }

    #[test]
    fn a_window_measures_this_process_and_the_host() {
        let start = HostReading::now();
        // Some CPU of this process to measure.
        let mut x = 0u64;
        while start.at.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let w = start.until(&HostReading::now());
        assert!(w.secs >= 0.03 && w.process_cpu_s > 0.0, "{w:?}");
        assert!(w.cores >= 1);
        assert!(w.cpu_pressure.is_none_or(|p| (0.0..=1.0).contains(&p)), "{w:?}");
        assert!(thread_run_delay_s().is_none_or(|d| d >= 0.0));
    }
}
