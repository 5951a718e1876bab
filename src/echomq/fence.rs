//! What an EchoMQ fenced call presents: the claim's fencing token and, from v1.2, its holder.

use crate::queue::Holder;
use crate::resp::request::Request;

/// The fence of one claim: `token` is the job's `attempts` after the claim (1 on the first), and
/// `holder` the value the claim was made with (docs/protocol.md "The holder (v1.2)"). A fenced
/// call sends the token, then the holder as its last argument when there is
/// one; without one the scripts fence by the token alone, as v1.1's do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence {
    /// The fencing token the claim handed out.
    pub token: u64,
    /// The claim's holder; `None` for a claim made without one (a v1.1 client).
    pub holder: Option<Holder>,
}

impl From<u64> for Fence {
    /// The fence of a claim made without a holder: the token alone.
    fn from(token: u64) -> Fence {
        Fence { token, holder: None }
    }
}

impl Fence {
    /// Appends the token to `cmd`: the argument that follows the id in every fenced verb.
    pub(super) fn push_token(&self, cmd: &mut Request) {
        cmd.arg(self.token);
    }

    /// Appends the holder, when there is one, as the call's last argument.
    pub(super) fn push_holder(&self, cmd: &mut Request) {
        if let Some(holder) = &self.holder {
            cmd.arg(&holder.as_bytes()[..]);
        }
    }
}
