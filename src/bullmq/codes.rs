//! BullMQ's refusals: the negative integer replies of its scripts (`error_code.py`,
//! docs/bullmq-mapping.md section 4) as emq-bench's [`ErrorCode`]s.

use crate::lua::{ErrorCode, Script};
use crate::resp::error::CallError;

/// The code of BullMQ's integer reply `n`, `None` for a value that is no refusal of the
/// pinned scripts (0 and positive replies, and `-8`, `-10`, `-11` of scripts never driven).
pub fn code_of(n: i64) -> Option<ErrorCode> {
    Some(match n {
        -1 => ErrorCode::Missing,
        -2 => ErrorCode::LockMissing,
        -3 => ErrorCode::NotInState,
        -4 => ErrorCode::PendingDependencies,
        -5 => ErrorCode::ParentMissing,
        -6 => ErrorCode::LockMismatch,
        -7 => ErrorCode::ParentNotReplaceable,
        -9 => ErrorCode::FailedChildren,
        _ => return None,
    })
}

/// The error of a refusal with `code`: a [`CallError::Emq`] with an empty message, so a
/// refusal allocates nothing (a stale worker's refusals are a measured path too).
pub fn refused(code: ErrorCode) -> CallError {
    CallError::Emq { code, message: String::new() }
}

/// Reads an integer reply of `script` that is `0` on success or a refusal: `Ok(())`, the
/// refusal as [`refused`], or [`CallError::Reply`] for any other value or shape.
pub(crate) fn zero_or_refusal(script: Script, value: &redis::Value) -> Result<(), CallError> {
    match value {
        redis::Value::Int(0) => Ok(()),
        redis::Value::Int(n) => match code_of(*n) {
            Some(code) => Err(refused(code)),
            None => Err(CallError::Reply(format!("{} replied {n}, expected 0 or a refusal", script.name()))),
        },
        other => Err(CallError::Reply(format!("{} replied {other:?}, expected an integer", script.name()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullmqs_codes_map_to_their_names() {
        for (n, name) in [
            (-1, "JobNotExist"),
            (-2, "JobLockNotExist"),
            (-3, "JobNotInState"),
            (-4, "JobPendingDependencies"),
            (-5, "ParentJobNotExist"),
            (-6, "JobLockMismatch"),
            (-7, "ParentJobCannotBeReplaced"),
            (-9, "JobHasFailedChildren"),
        ] {
            let code = code_of(n).unwrap();
            assert_eq!(code.name(), name);
            assert!(code.is_bullmq() && !code.is_unknown_outcome() && !code.is_fault_caused());
        }
        for n in [0, 1, -8, -10, -11] {
            assert_eq!(code_of(n), None);
        }
        assert!(ErrorCode::LockMissing.is_stale() && ErrorCode::LockMismatch.is_stale());
        assert!(ErrorCode::Fence.is_stale() && !ErrorCode::Missing.is_stale());
        assert!(!ErrorCode::Fence.is_bullmq() && ErrorCode::NotExtended.is_bullmq());
        // Indices are stored in histories: the first BullMQ code follows EchoMQ's fourteen.
        assert_eq!(ErrorCode::LockMissing.index(), 14);
        assert_eq!(ErrorCode::ALL.len(), ErrorCode::COUNT);
        assert!(ErrorCode::ALL.iter().enumerate().all(|(i, c)| c.index() == i));
    }
}
