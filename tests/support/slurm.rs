//! A one-node Slurm cluster for the tests that submit a fleet through a real scheduler: munged
//! (unless one already answers on its socket), slurmctld and slurmd in the foreground, with a
//! generated `slurm.conf` in a temporary folder (its state, spool and logs there too), ports
//! chosen free on 127.0.0.1. Dropping it cancels every job, stops the daemons it started and
//! kills whatever of its jobs is left, so nothing outlives the test.
//!
//! Slurm needs root here (`SlurmUser=root`, munged run as user `munge`) and Debian's packages
//! (`scripts/setup` installs them as root). Without them [`Slurm::start`] says "skipped: no
//! Slurm" and returns `None`, except under `CI=true`, where it fails: CI can install them.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The tests of one binary share the node's CPUs and munged's socket: one cluster at a time.
/// True while a cluster runs; a flag, not a held guard, so the cluster may move between threads.
static BUSY: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// This test's turn to run a cluster; the next one's starts when it is dropped.
struct Turn;

impl Turn {
    fn take() -> Turn {
        let (busy, freed) = &BUSY;
        let mut busy = busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while *busy {
            busy = freed.wait(busy).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        *busy = true;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (busy, freed) = &BUSY;
        *busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = false;
        freed.notify_one();
    }
}

/// munged's socket, where Debian's `munge` and Slurm's auth/munge look for it.
const MUNGE_SOCKET: &str = "/run/munge/munge.socket.2";

/// One job's (or array task's) end: its array task index (`None` outside an array), its state
/// (`COMPLETED`, `FAILED`, `CANCELLED`, ...), its exit code and the signal that ended it.
pub type TaskEnd = (Option<u32>, String, i32, i32);

/// The running cluster; dropping it stops everything it started.
pub struct Slurm {
    dir: tempfile::TempDir,
    conf: PathBuf,
    /// slurmd then slurmctld: stopped in this order.
    daemons: Vec<(&'static str, Child)>,
    /// munged, when this cluster started it (another one may serve the socket already).
    munged: Option<Child>,
    _turn: Turn,
}

/// A Slurm program: on PATH, else where Debian puts it (`/usr/sbin` is not on every PATH).
fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Says why Slurm cannot run here; fails the test under `CI=true`.
fn skip<T>(why: &str) -> Option<T> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "no Slurm under CI: {why} (scripts/setup installs it as root)"
    );
    eprintln!(
        "skipped: no Slurm: {why} (scripts/setup installs Debian's slurmctld, slurmd, slurm-client, munge as root)"
    );
    None
}

/// A free port on 127.0.0.1 (bound, read and released: the daemons bind it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A user's uid and gid, from `id`.
fn ids(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

/// True when a munged answers on [`MUNGE_SOCKET`] (`munge -n` encodes a credential).
fn munge_answers(munge: &Path) -> bool {
    Command::new(munge)
        .args(["-n", "-S", MUNGE_SOCKET])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Polls `done` every 100 ms for up to `limit`; true once it holds.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// SIGTERM, then SIGKILL after 5 s: a daemon that ignores the first still ends.
fn stop(child: &mut Child) {
    // SAFETY: kill(2) on a pid this process started and has not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    if !wait_for(Duration::from_secs(5), || child.try_wait().ok().flatten().is_some()) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Slurm {
    /// Starts munged (when none answers), slurmctld and slurmd, and waits until the node is
    /// idle. `None` when Slurm cannot run on this machine (said on stderr).
    pub fn start() -> Option<Slurm> {
        let turn = Turn::take();
        let needed = ["slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "munged", "munge", "mungekey"];
        let Some(found) = needed.iter().map(|name| program(name)).collect::<Option<Vec<PathBuf>>>() else {
            return skip("slurmctld, slurmd, sbatch, squeue, scancel, scontrol or munged is missing");
        };
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return skip("not root (the test cluster runs as SlurmUser=root and munged as user munge)");
        }
        let Some((munge_uid, munge_gid)) = ids("munge") else {
            return skip("no user munge (Debian's munge package creates it)");
        };
        let [slurmctld, slurmd, .., munged, munge, mungekey] = &found[..] else { unreachable!() };
        let dir = tempfile::Builder::new().prefix("emq-slurm-").tempdir().unwrap();
        let munged = if munge_answers(munge) {
            None
        } else {
            Some(Self::start_munged(dir.path(), munged, munge, mungekey, munge_uid, munge_gid)?)
        };
        let host = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout).unwrap();
        let host = host.trim().to_owned();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, Self::conf_text(dir.path(), &host)).unwrap();
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let mut slurm = Slurm { conf: conf.clone(), daemons: Vec::new(), munged, dir, _turn: turn };
        // -D: in the foreground, so the Child is the daemon itself; -i: no state from an
        // earlier cluster. SLURM_CONF in their environment also marks every process they start
        // (slurmstepd, the jobs), which the drop finds and kills if any is left.
        for (name, bin, args) in
            [("slurmctld", slurmctld, &["-D", "-i"][..]), ("slurmd", slurmd, &["-D", "-N", host.as_str()][..])]
        {
            let log = std::fs::File::create(slurm.dir.path().join(format!("log/{name}.out"))).unwrap();
            let child = Command::new(bin)
                .args(args)
                .arg("-f")
                .arg(&conf)
                .env("SLURM_CONF", &conf)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("start {name}: {e}"));
            slurm.daemons.insert(0, (name, child));
        }
        let idle = wait_for(Duration::from_secs(30), || {
            let out = slurm.command("sinfo").args(["-h", "-o", "%T"]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        assert!(idle, "the Slurm node never became idle:\n{}", slurm.logs());
        Some(slurm)
    }

    /// munged as user munge in the foreground, its socket in `/run/munge` (owned by munge),
    /// its log, pid and seed files in a folder of `dir` it owns; the key created if missing.
    fn start_munged(dir: &Path, munged: &Path, munge: &Path, mungekey: &Path, uid: u32, gid: u32) -> Option<Child> {
        let key = Path::new("/etc/munge/munge.key");
        if !key.exists() {
            let made = Command::new(mungekey).args(["--create", "--keyfile"]).arg(key).uid(uid).gid(gid).status();
            if !made.is_ok_and(|s| s.success()) {
                return skip("mungekey could not create /etc/munge/munge.key");
            }
        }
        let own = |path: &Path| {
            std::fs::create_dir_all(path).unwrap();
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        };
        own(Path::new("/run/munge"));
        let home = dir.join("munge");
        own(&home);
        let mut child = Command::new(munged)
            .arg("-F")
            .arg(format!("--socket={MUNGE_SOCKET}"))
            .arg(format!("--log-file={}", home.join("munged.log").display()))
            .arg(format!("--pid-file={}", home.join("munged.pid").display()))
            .arg(format!("--seed-file={}", home.join("munged.seed").display()))
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.join("munged.out")).unwrap())
            .spawn()
            .expect("start munged");
        if !wait_for(Duration::from_secs(10), || munge_answers(munge)) {
            stop(&mut child);
            panic!(
                "munged did not answer on {MUNGE_SOCKET}: {}",
                std::fs::read_to_string(home.join("munged.out")).unwrap()
            );
        }
        Some(child)
    }

    /// The cluster's configuration: one node named after the host with 8 CPUs declared (more
    /// than this VM's, which `config_overrides` allows: one per shard and more), no cgroups
    /// (process tracking by parent pid, no task plugin, no accounting), every daemon on
    /// 127.0.0.1.
    fn conf_text(dir: &Path, host: &str) -> String {
        let d = dir.display();
        format!(
            "ClusterName=emqtest\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld}\n\
             SlurmdPort={slurmd}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             SlurmdParameters=config_overrides\n\
             SchedulerParameters=sched_interval=1\n\
             ReturnToService=2\n\
             MpiDefault=none\n\
             KillWait=5\n\
             InactiveLimit=0\n\
             MinJobAge=600\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN\n\
             PartitionName=emq Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
            ctld = free_port(),
            slurmd = free_port(),
        )
    }

    /// The generated slurm.conf.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// A Slurm client command (`sbatch`, `squeue`, `scancel`, `scontrol`, `sinfo`) against
    /// this cluster.
    pub fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(program(name).unwrap_or_else(|| PathBuf::from(name)));
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// `sbatch --parsable ARGS` with `env` added to the environment it passes to the job; the
    /// job's id.
    pub fn sbatch(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let mut cmd = self.command("sbatch");
        cmd.arg("--parsable").args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for (key, value) in env {
            cmd.env(key, value);
        }
        let out = cmd.output().expect("run sbatch");
        assert!(out.status.success(), "sbatch {args:?}: {}", text(&out));
        let id = String::from_utf8_lossy(&out.stdout);
        id.trim().split(';').next().unwrap().to_owned()
    }

    /// Waits until `job` (a job, an array or one task `<array>_<i>`) has left the queue, up to
    /// `limit`; false when it is still there.
    pub fn wait_gone(&self, job: &str, limit: Duration) -> bool {
        wait_for(limit, || {
            let out = self.command("squeue").args(["-h", "-o", "%i", "-j", job]).output().unwrap();
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim().is_empty()
        })
    }

    /// Waits until `job` is running, up to `limit`.
    pub fn wait_running(&self, job: &str, limit: Duration) -> bool {
        wait_for(limit, || {
            let out = self.command("squeue").args(["-h", "-t", "R", "-o", "%i", "-j", job]).output().unwrap();
            !String::from_utf8_lossy(&out.stdout).trim().is_empty()
        })
    }

    /// `job`'s end as `scontrol` keeps it (for `MinJobAge` after it ends): one `(array task
    /// index, state, exit code, signal)` per task, the task index `None` outside an array.
    pub fn ends(&self, job: &str) -> Vec<TaskEnd> {
        let out = self.command("scontrol").args(["-o", "show", "job", job]).output().unwrap();
        assert!(out.status.success(), "scontrol show job {job}: {}", text(&out));
        let mut ends: Vec<_> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                let field = |name: &str| {
                    line.split_whitespace().find_map(|f| f.strip_prefix(name)).unwrap_or_default().to_owned()
                };
                let (code, signal) = field("ExitCode=")
                    .split_once(':')
                    .map_or((-1, -1), |(c, s)| (c.parse().unwrap_or(-1), s.parse().unwrap_or(-1)));
                (field("ArrayTaskId=").parse().ok(), field("JobState="), code, signal)
            })
            .collect();
        ends.sort();
        ends
    }

    /// Every daemon's log, for a failure's message.
    pub fn logs(&self) -> String {
        ["log/slurmctld.out", "log/slurmd.out", "log/slurmctld.log", "log/slurmd.log"]
            .iter()
            .map(|f| format!("--- {f}\n{}", std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default()))
            .collect()
    }

    /// Processes whose environment names this cluster's slurm.conf: the daemons' children
    /// (slurmstepd, each job's script and what it runs), the client commands excepted.
    fn leftovers(&self) -> Vec<i32> {
        let mark = format!("SLURM_CONF={}", self.conf.display()).into_bytes();
        let own = std::process::id() as i32;
        let daemons: Vec<i32> = self.daemons.iter().map(|(_, c)| c.id() as i32).collect();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid != own && !daemons.contains(pid))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == mark.as_slice()))
            })
            .collect()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Every job first, through the scheduler, so the jobs end as Slurm ends them; then the
        // daemons; then anything of ours that survived them, by its mark; munged last, which
        // the others authenticate with until they stop.
        let _ = self.command("scancel").args(["--partition", "emq"]).output();
        let _ = wait_for(Duration::from_secs(10), || {
            let out = self.command("squeue").args(["-h", "-o", "%i"]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim().is_empty())
        });
        for (_, child) in &mut self.daemons {
            stop(child);
        }
        for pid in self.leftovers() {
            // SAFETY: kill(2) on a process that carries this cluster's mark: one this test made.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(child) = &mut self.munged {
            stop(child);
        }
    }
}

/// An output's stdout and stderr, for a failure's message.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
