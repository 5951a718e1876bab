//! The iptables rules behind `partition`, and the checks that keep them off the host.
//!
//! Rules are only ever added inside a network namespace of the run's own (`unshare --net`):
//! there they vanish with the namespace, and nothing else's traffic passes through them. The
//! host's namespace is recognised by comparing this process's `/proc/self/ns/net` with that of
//! pid 1 and of the kernel's `kthreadd` (pid 2, always in the initial namespace, and readable
//! where a sandbox hides pid 1); when neither can be read the answer is no.
//!
//! Every rule lives in one chain of the run's own, `EMQ-PARTITION-<pid>`, jumped to from
//! `INPUT`: on loopback every packet passes `INPUT` on its way in, and a packet dropped there
//! is silence to its sender (as a cut cable is), not the error a drop in `OUTPUT` returns to
//! the sending socket. Healing removes the jump, flushes and deletes the chain: exactly the
//! rules the run added, also when the fault ends early or its future is dropped.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The address the harness's own connections come from (the kernel's source for any
/// 127.0.0.0/8 destination; the embedded nodes connect from their own address instead).
pub(crate) const HARNESS: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// What to run instead when the fault is refused for the namespace.
const UNSHARE: &str = "run under `unshare --net` (with `ip link set lo up`)";

/// Why `partition` cannot run in this process, or `Ok` when it can: it needs root (euid 0),
/// an `iptables` binary, and a network namespace of its own (never the host's).
pub fn partition_refusal() -> Result<(), String> {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(format!("partition needs root to add iptables rules (euid is {euid}); {UNSHARE} as root"));
    }
    iptables()?;
    own_namespace()
}

/// Ok when this process's network namespace is not the host's (see the module's doc).
fn own_namespace() -> Result<(), String> {
    let inode = |path: &Path| std::fs::metadata(path).map(|m| m.ino()).ok();
    let Some(mine) = inode(Path::new("/proc/self/ns/net")) else {
        return Err("partition cannot read /proc/self/ns/net to tell which network namespace it is in".into());
    };
    let kthreadd = std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd");
    let mut host = vec![inode(Path::new("/proc/1/ns/net"))];
    if kthreadd {
        host.push(inode(Path::new("/proc/2/ns/net")));
    }
    let known: Vec<u64> = host.into_iter().flatten().collect();
    if known.is_empty() {
        return Err(format!(
            "partition cannot tell whether its network namespace is the host's (neither /proc/1/ns/net nor \
             kthreadd's /proc/2/ns/net can be read), and never adds rules to the host's; {UNSHARE}"
        ));
    }
    match known.contains(&mine) {
        true => Err(format!("partition needs a network namespace of its own: {UNSHARE}")),
        false => Ok(()),
    }
}

/// The `iptables` binary: on PATH, else in /usr/sbin or /sbin (a non-login PATH may lack them).
fn iptables() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin", "/sbin"].map(PathBuf::from));
    dirs.map(|d| d.join("iptables")).find(|p| p.is_file()).ok_or_else(|| {
        "partition needs the iptables binary (Debian: apt-get install iptables; scripts/setup installs it as root)"
            .to_string()
    })
}

/// The run's chain of DROP rules; dropping it removes every rule it added.
pub(crate) struct Firewall {
    binary: PathBuf,
    chain: String,
    /// How many DROP rules the chain holds.
    rules: usize,
    /// True while the chain exists (and `INPUT` jumps to it).
    up: bool,
}

impl Firewall {
    /// Creates the chain `EMQ-PARTITION-<pid>` and the jump to it from `INPUT`, after the
    /// checks of [`refusal`] (again: no rule is ever added in the host's namespace).
    pub(crate) fn new() -> Result<Firewall, String> {
        partition_refusal()?;
        let binary = iptables()?;
        let chain = format!("EMQ-PARTITION-{}", std::process::id());
        let mut firewall = Firewall { binary, chain, rules: 0, up: false };
        // A chain left by an earlier fault of this run (a heal that failed) is emptied and reused.
        if let Err(err) = firewall.iptables(&["-N", &firewall.chain.clone()]) {
            firewall.iptables(&["-F", &firewall.chain.clone()]).map_err(|_| err)?;
        }
        firewall.up = true;
        firewall.iptables(&["-I", "INPUT", "-j", &firewall.chain.clone()])?;
        Ok(firewall)
    }

    /// Drops every packet between `a` and `b`, both ways. Only 127.0.0.0/8 addresses.
    pub(crate) fn cut(&mut self, a: Ipv4Addr, b: Ipv4Addr) -> Result<(), String> {
        if !a.is_loopback() || !b.is_loopback() || a == b {
            return Err(format!("a partition cuts two different 127.0.0.0/8 addresses apart, not {a} and {b}"));
        }
        for (from, to) in [(a, b), (b, a)] {
            let (from, to) = (format!("{from}/32"), format!("{to}/32"));
            self.iptables(&["-A", &self.chain.clone(), "-s", &from, "-d", &to, "-j", "DROP"])?;
            self.rules += 1;
        }
        Ok(())
    }

    /// Removes the jump and the chain with its rules; how many DROP rules went with it.
    pub(crate) fn heal(mut self) -> Result<usize, String> {
        self.remove()
    }

    fn remove(&mut self) -> Result<usize, String> {
        if !self.up {
            return Ok(0);
        }
        let chain = self.chain.clone();
        // Each step is tried even when one before failed, so as much as possible is undone.
        let steps = [
            self.iptables(&["-D", "INPUT", "-j", &chain]),
            self.iptables(&["-F", &chain]),
            self.iptables(&["-X", &chain]),
        ];
        self.up = false;
        match steps.into_iter().find_map(Result::err) {
            Some(err) => Err(format!("the partition's rules were not all removed: {err}")),
            None => Ok(std::mem::take(&mut self.rules)),
        }
    }

    /// Runs `iptables -w <args>` (`-w`: waits for the xtables lock instead of failing).
    fn iptables(&self, args: &[&str]) -> Result<(), String> {
        let out = Command::new(&self.binary).arg("-w").args(args).output();
        let spelled = format!("iptables {}", args.join(" "));
        match out {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!("{spelled}: {} ({})", String::from_utf8_lossy(&out.stderr).trim(), out.status)),
            Err(err) => Err(format!("{spelled}: {} did not run: {err}", self.binary.display())),
        }
    }
}

impl Drop for Firewall {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}
