//! Starting, probing and stopping one `valkey-server` process.

use super::{find_server_binary, ServerError};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to start the embedded server.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// The binary (`--server-bin`); `None` searches as [`find_server_binary`] documents.
    pub binary: Option<PathBuf>,
    /// Extra config directives, each passed as `--name value` after the defaults so they
    /// override them (e.g. `("save", "60 1000")` to turn snapshots back on).
    pub config: Vec<(String, String)>,
    /// A fixed loopback port (e.g. to restart a server where its clients expect it); `None`
    /// picks a free one.
    pub port: Option<u16>,
    /// The loopback address (in 127.0.0.0/8) the server listens on and connects from
    /// (`bind-source-addr`: its replication and cluster bus connections then come from it, so
    /// a firewall rule can tell the nodes apart); `None`: 127.0.0.1, and outgoing connections
    /// from whatever the kernel picks.
    pub host: Option<Ipv4Addr>,
}

/// A running `valkey-server` bound to a loopback address (127.0.0.1 unless told) on a free
/// port, with a private data directory. Dropping it kills the process and removes the directory.
pub struct EmbeddedServer {
    child: Child,
    host: Ipv4Addr,
    /// True when `host` was chosen (it is then also the source of the server's own connections).
    own_host: bool,
    port: u16,
    binary: PathBuf,
    dir: PathBuf,
    /// The config it was started with (a restart starts it the same way).
    config: Vec<(String, String)>,
}

/// How long the server gets to answer its first PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SIGTERMed server gets to save and exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl EmbeddedServer {
    /// Starts a server and waits until it answers PING. Call it from a thread that lives as
    /// long as the server should (see `die_with_parent`).
    ///
    /// Defaults: `--bind 127.0.0.1`, `--save ""`, `--appendonly no` (persistence off),
    /// `--loglevel warning`, then `options.config`. A port taken between probing and binding
    /// is retried with another port (three tries). Errors: [`ServerError`]; a `host` outside
    /// 127.0.0.0/8 is refused as [`ServerError::Spawn`].
    pub fn start(options: &ServerOptions) -> Result<EmbeddedServer, ServerError> {
        let binary = find_server_binary(options.binary.as_deref())?;
        if let Some(host) = options.host.filter(|h| !h.is_loopback()) {
            let source = std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the server's host {host} is no loopback address (127.0.0.0/8)"),
            );
            return Err(ServerError::Spawn { binary, source });
        }
        let mut last = None;
        for _ in 0..3 {
            match Self::start_once(&binary, &options.config, options.host, options.port) {
                Ok(server) => return Ok(server),
                Err(err @ ServerError::NotReady { .. }) => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.expect("three tries"))
    }

    fn start_once(
        binary: &Path,
        config: &[(String, String)],
        host: Option<Ipv4Addr>,
        port: Option<u16>,
    ) -> Result<EmbeddedServer, ServerError> {
        let spawn_err = |source| ServerError::Spawn { binary: binary.to_path_buf(), source };
        let (own_host, host) = (host.is_some(), host.unwrap_or(Ipv4Addr::LOCALHOST));
        let port = match port {
            Some(port) => port,
            None => free_port(host).map_err(spawn_err)?,
        };
        let dir = std::env::temp_dir().join(format!("emq-bench-valkey-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(spawn_err)?;
        let mut server = EmbeddedServer {
            child: spawn(binary, (host, own_host), port, &dir, config)?,
            host,
            own_host,
            port,
            binary: binary.to_path_buf(),
            dir,
            config: config.to_vec(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Stops the server with `SIGTERM` (`kill`: `SIGKILL`) and starts it again on the same
    /// port and data directory with the same config, waiting until it answers PING (after it
    /// loaded its data). Returns how long it was down. The new process is tied to the calling
    /// thread (see `die_with_parent`): call it from a thread that lives as long as the server.
    ///
    /// Errors: [`ServerError`] when it does not come up again.
    pub fn restart(&mut self, kill: bool) -> Result<Duration, ServerError> {
        let began = Instant::now();
        let signal = if kill { libc::SIGKILL } else { libc::SIGTERM };
        self.signal(signal);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill();
        self.start_again()?;
        Ok(began.elapsed())
    }

    /// SIGKILL, and waits for the process to be gone; its data directory stays, for
    /// [`start_again`](Self::start_again). A stopped (frozen) process dies too.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on its port and data directory with its config (after
    /// [`kill`](Self::kill)), waiting until it answers PING. The new process is tied to the
    /// calling thread (see `die_with_parent`): call it from a thread that lives as long as the
    /// server.
    ///
    /// Errors: [`ServerError`] when it does not come up.
    pub fn start_again(&mut self) -> Result<(), ServerError> {
        self.child = spawn(&self.binary, (self.host, self.own_host), self.port, &self.dir, &self.config)?;
        self.wait_ready()
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): the server freezes (connections stay open,
    /// nothing is answered) or goes on.
    pub fn freeze(&self, frozen: bool) {
        self.signal(if frozen { libc::SIGSTOP } else { libc::SIGCONT });
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// The config directives the server was started with, after the defaults (e.g.
    /// `appendonly yes`).
    pub fn config(&self) -> &[(String, String)] {
        &self.config
    }

    fn wait_ready(&mut self) -> Result<(), ServerError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.not_ready(format!("it exited with {status}")));
            }
            if ping(self.host, self.port).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(format!("no PONG within {READY_TIMEOUT:?}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn not_ready(&self, reason: String) -> ServerError {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        let log = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        ServerError::NotReady { binary: self.binary.clone(), host: self.host, port: self.port, reason, log }
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The loopback address the server listens on (127.0.0.1 unless [`ServerOptions::host`]
    /// chose another).
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// `redis://<host>:<port>/`, the URL clients connect to.
    pub fn url(&self) -> String {
        format!("redis://{}:{}/", self.host, self.port)
    }

    /// The binary that was started.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// True when the process has ended (a fault killed it, or it crashed).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's process id (for CPU accounting from /proc, or pinning with taskset).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server now (SIGTERM, then SIGKILL after 2 s) and removes its directory.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // A frozen server would ignore SIGTERM until thawed.
            self.signal(libc::SIGCONT);
            // SIGTERM lets valkey exit cleanly; a stuck server is killed after a grace period.
            self.signal(libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Spawns `binary` on `host` (`own`: also the source of its own connections) and `port` with
/// its data in `dir`: the defaults, then `config`; its output goes to `dir/server.log`
/// (appended, so a restart keeps the earlier log).
fn spawn(
    binary: &Path,
    (host, own): (Ipv4Addr, bool),
    port: u16,
    dir: &Path,
    config: &[(String, String)],
) -> Result<Child, ServerError> {
    let spawn_err = |source| ServerError::Spawn { binary: binary.to_path_buf(), source };
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).map_err(spawn_err)?;
    let mut cmd = Command::new(binary);
    cmd.arg("--port").arg(port.to_string());
    let host = host.to_string();
    for (name, value) in [("bind", host.as_str()), ("save", ""), ("appendonly", "no"), ("loglevel", "warning")] {
        cmd.arg(format!("--{name}")).arg(value);
    }
    if own {
        cmd.arg("--bind-source-addr").arg(&host);
    }
    cmd.arg("--dir").arg(dir);
    for (name, value) in config {
        cmd.arg(format!("--{name}")).arg(value);
    }
    cmd.stdin(Stdio::null()).stdout(log.try_clone().map_err(spawn_err)?).stderr(log);
    // A process group of its own: a terminal's Ctrl-C, or timeout(1) in CI, signals the whole
    // foreground group, and a server that shut down with the harness would take the check and
    // the cleanup of the interrupted run with it. Ending the server is the harness's job.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    die_with_parent(&mut cmd);
    cmd.spawn().map_err(spawn_err)
}

/// A port the kernel just gave out on `host` (free now; `start` retries if it is taken).
fn free_port(host: Ipv4Addr) -> std::io::Result<u16> {
    Ok(TcpListener::bind((host, 0))?.local_addr()?.port())
}

/// One inline PING; Ok when the reply is `+PONG`.
fn ping(host: Ipv4Addr, port: u16) -> std::io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&(host, port).into(), Duration::from_millis(200))?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(b"PING\r\n")?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply)?;
    // A server started with `requirepass` (or a default user off) refuses any command before
    // AUTH, even while it loads: it is listening, and a server that holds nothing (the embedded
    // one) has nothing to load.
    if &reply == b"+PONG\r\n" || &reply == b"-NOAUTH" {
        Ok(())
    } else {
        Err(std::io::Error::other("not PONG (still loading?)"))
    }
}

/// Asks the kernel to SIGKILL the server if this process dies (even by SIGKILL), so a killed
/// test run or harness never leaves a server behind. SIGKILL, not SIGTERM: a server frozen by
/// the nemesis (SIGSTOP) would never act on a SIGTERM.
///
/// The kernel ties this to the *thread* that started the server, not the process: start a
/// server from a thread that outlives it (not a short-lived helper thread, not tokio's
/// blocking pool), or it dies when that thread exits.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
