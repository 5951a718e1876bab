//! The harness's own CPU time, from getrusage(2): of the whole process (summary.json's
//! `harness`) or of the calling thread (a load thread's busy share, `report::rates`).

/// Whose CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuOf {
    /// The whole process (`RUSAGE_SELF`).
    Process,
    /// The calling thread only (`RUSAGE_THREAD`, Linux).
    Thread,
}

/// User and system CPU time of `of` so far, seconds.
pub fn cpu_seconds(of: CpuOf) -> (f64, f64) {
    let who = match of {
        CpuOf::Process => libc::RUSAGE_SELF,
        CpuOf::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: getrusage writes into the zeroed struct we own; no other precondition.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}
