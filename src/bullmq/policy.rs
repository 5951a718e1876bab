//! Which script a failed attempt runs: BullMQ's clients decide it, not a script (`job.py`
//! `moveToFailed`, `backoffs.py`; docs/bullmq-mapping.md 3.4). A pure function, so the load
//! driver can name the script it will time before it sends anything.

use crate::lua::Script;

/// A job's retry delay, as BullMQ's client normalises `opts.backoff` (`Backoffs.normalize`):
/// packed into the job's `opts` at add time and used when an attempt fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backoff {
    /// No backoff (`opts.backoff` nil): a retry goes straight back to wait.
    #[default]
    None,
    /// `{"type": "fixed", "delay": ms}`: every retry waits `ms` milliseconds.
    Fixed(u64),
    /// `{"type": "exponential", "delay": ms}`: the n-th failure waits `2^(n-1) × ms`.
    Exponential(u64),
}

impl Backoff {
    /// BullMQ's `type` name, `None` for no backoff.
    pub fn type_name(self) -> Option<&'static str> {
        match self {
            Backoff::None => None,
            Backoff::Fixed(_) => Some("fixed"),
            Backoff::Exponential(_) => Some("exponential"),
        }
    }

    /// The `delay` of the options (ms), 0 for no backoff.
    pub fn base_ms(self) -> u64 {
        match self {
            Backoff::None => 0,
            Backoff::Fixed(ms) | Backoff::Exponential(ms) => ms,
        }
    }

    /// The delay (ms) before the retry that follows a failure when `attempts_made` attempts
    /// had finished before it (the `atm` the claim read): `Backoffs.calculate` with attempts
    /// made `atm + 1`, i.e. fixed → `ms`, exponential → `round(2^atm × ms)` (saturating).
    pub fn delay_ms(self, attempts_made: u32) -> u64 {
        match self {
            Backoff::None => 0,
            Backoff::Fixed(ms) => ms,
            Backoff::Exponential(ms) => 1u64.checked_shl(attempts_made).map_or(u64::MAX, |f| f.saturating_mul(ms)),
        }
    }
}

/// What a failed attempt does next, and with it which script runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailStep {
    /// Attempts remain and the backoff is 0: `retryJob`, back to wait (or prioritized).
    Retry,
    /// Attempts remain with a backoff: `moveToDelayed`, due after this many ms.
    Delay(u64),
    /// No attempt remains (or the claim carried a deferred failure): `moveToFinished` `failed`.
    Fail,
}

impl FailStep {
    /// The script the step runs (the metric key of the failure call).
    pub fn script(self) -> Script {
        match self {
            FailStep::Retry => Script::RetryJob,
            FailStep::Delay(_) => Script::MoveToDelayed,
            FailStep::Fail => Script::MoveToFinished,
        }
    }
}

/// The step of a failure as BullMQ's client decides it (`job.py` `moveToFailed`): a retry
/// while `attempts_made + 1 < max_attempts` (`attempts_made` = the claim's `atm`, the
/// attempts finished before this one), by moveToDelayed when the backoff's delay is positive,
/// by retryJob when it is 0; else the final failure.
///
/// A claim with a deferred failure (`defa`, [`BullClaimed::deferred_failure`]) is failed
/// for good whatever this says (the worker raises an UnrecoverableError): see
/// [`BullClaimed::fail_step`].
///
/// [`BullClaimed::deferred_failure`]: super::BullClaimed::deferred_failure
/// [`BullClaimed::fail_step`]: super::BullClaimed::fail_step
pub fn fail_step(attempts_made: u32, max_attempts: u32, backoff: Backoff) -> FailStep {
    if u64::from(attempts_made) + 1 >= u64::from(max_attempts) {
        return FailStep::Fail;
    }
    match backoff.delay_ms(attempts_made) {
        0 => FailStep::Retry,
        ms => FailStep::Delay(ms),
    }
}

/// [`fail_step`] for a claim that read `attempts_made` (`atm`) and carried a deferred failure
/// (`defa`) or not: a deferred failure is final whatever the attempts (the worker's
/// UnrecoverableError).
pub fn claim_fail_step(attempts_made: u32, deferred: bool, max_attempts: u32, backoff: Backoff) -> FailStep {
    if deferred {
        FailStep::Fail
    } else {
        fail_step(attempts_made, max_attempts, backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_follows_bullmqs_client() {
        // attempts 3: the 1st and 2nd failures retry, the 3rd is final.
        assert_eq!(fail_step(0, 3, Backoff::None), FailStep::Retry);
        assert_eq!(fail_step(1, 3, Backoff::None), FailStep::Retry);
        assert_eq!(fail_step(2, 3, Backoff::None), FailStep::Fail);
        assert_eq!(fail_step(0, 1, Backoff::Fixed(100)), FailStep::Fail);
        assert_eq!(fail_step(0, 0, Backoff::None), FailStep::Fail, "attempts 0 = one attempt");
        assert_eq!(fail_step(1, 5, Backoff::Fixed(100)), FailStep::Delay(100));
        assert_eq!(fail_step(0, 5, Backoff::Fixed(0)), FailStep::Retry, "a 0 ms backoff is no delay");
        // exponential: delay, 2·delay, 4·delay for the 1st, 2nd, 3rd failure.
        let exp = Backoff::Exponential(100);
        assert_eq!([0, 1, 2].map(|atm| fail_step(atm, 5, exp)), [100, 200, 400].map(FailStep::Delay));
        assert_eq!(exp.delay_ms(70), u64::MAX, "saturates");
        assert_eq!(FailStep::Delay(1).script(), Script::MoveToDelayed);
        assert_eq!(FailStep::Retry.script(), Script::RetryJob);
        assert_eq!(FailStep::Fail.script(), Script::MoveToFinished);
    }
}
