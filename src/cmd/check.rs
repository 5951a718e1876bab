//! `emq-bench check`: scan the given queues of a server, check what the server state
//! alone can prove (see [`crate::check::structural`]) and, given the run's `--history`, every
//! invariant against it (see [`crate::check::history`]); print the first violations (or the
//! JSON report) and fail on any.

use super::CommandOutcome;
use crate::check::{self, InvariantsReport};
use crate::cli::CheckArgs;
use crate::error::AppError;
use crate::history::{self, HistoryParts};
use crate::keyspace::{QueueKeys, QueueName};
use crate::lua::Protocol;
use crate::net::{ConnectOptions, Connector, Endpoint};
use crate::plane::{Plane, PlaneError};
use std::path::Path;
use std::time::{Duration, Instant};

/// What a check found, for `main` to print.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The `invariants.json` document (also written under `--out`).
    pub report: InvariantsReport,
    /// The terminal output: the table of the first violations and a summary line.
    pub table: String,
    /// [`CommandOutcome::Failed`] when any invariant is broken, or the history's run left a backlog
    /// (it had consumers and did not drain); else [`CommandOutcome::Success`].
    pub outcome: CommandOutcome,
}

/// The positions of `wanted` in the history's queue list.
///
/// Errors: a queue the run did not use ([`AppError::Usage`], naming the run's queues).
fn queue_indices(run: &[String], wanted: &[String], path: &std::path::Path) -> Result<Vec<u16>, AppError> {
    wanted
        .iter()
        .map(|name| {
            run.iter().position(|q| q == name).map(|i| i as u16).ok_or_else(|| {
                AppError::Usage(format!(
                    "--queue {name}: not a queue of the run in {} (its queues: {})",
                    path.display(),
                    run.join(", ")
                ))
            })
        })
        .collect()
}

/// True when a file can be created in `dir` (a results folder copied read-only cannot take the
/// history's part files).
fn is_writable(dir: &Path) -> bool {
    tempfile::tempfile_in(dir).is_ok()
}

/// How long a check's read may take: one reply may carry 100 000 set members; allow it time
/// on a loaded machine (`check`, and a `shared` fleet's merge).
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the check of `args`. Timings of the scan and the check go to stderr.
///
/// Errors (exit 2): a malformed URL or TLS setting, an ill-formed queue name, an unreadable
/// or corrupt `--history`, an unreachable server or a failed read ([`AppError::Plane`]). A failed
/// `invariants.json` write is [`AppError::Io`] / [`AppError::Report`] (exit 1).
pub async fn check(args: CheckArgs) -> Result<CheckResult, AppError> {
    let flags = args.target.flags();
    let connector = Connector::new(Endpoint::resolve(&args.url, &flags, |name| std::env::var(name).ok())?)?;
    let history = match &args.history {
        Some(path) => {
            // Part files go beside the history (its folder has room for it), else to the temp dir.
            let beside = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let spill_dir = if is_writable(beside) { beside.to_path_buf() } else { std::env::temp_dir() };
            let mut parts = HistoryParts::read(path, args.check_memory.saturating_mul(1 << 20), &spill_dir)
                .map_err(|e| AppError::Usage(e.to_string()))?;
            if !parts.header().complete {
                eprintln!(
                    "emq-bench: {}: the run ended without its final header (killed): its events end about a second \
                     before the kill, and every call after them counts as an unknown outcome (rows they left are \
                     excused, not lost)",
                    path.display()
                );
            }
            if parts.count() > 1 {
                eprintln!(
                    "emq-bench: {}: checked in {} parts by job number (more than --check-memory {} MiB at once{})",
                    path.display(),
                    parts.count(),
                    args.check_memory,
                    if parts.count() == history::parts::MAX_PARTS {
                        "; the most parts there are: each may take more than that"
                    } else {
                        ""
                    }
                );
            }
            if !args.queues.is_empty() {
                // A subset of the run's queues: the other queues' jobs are not lost, just not
                // looked at.
                let indices = queue_indices(&parts.header().queues, &args.queues, path)?;
                parts.keep_queues(&indices);
            }
            Some(parts)
        }
        None => None,
    };
    // Without --queue, the queues the history's run used.
    let names = match (&history, args.queues.is_empty()) {
        (Some(h), true) => h.header().queues.clone(),
        _ => args.queues.clone(),
    };
    let protocol = args.protocol.or(history.as_ref().map(|h| h.header().protocol)).unwrap_or_default();
    let mut queues: Vec<QueueKeys> = Vec::with_capacity(names.len());
    for name in &names {
        let name = QueueName::new(name).map_err(|e| AppError::Usage(format!("--queue: {e}")))?;
        let keys = QueueKeys::for_protocol(name, protocol);
        if !queues.contains(&keys) {
            queues.push(keys);
        }
    }
    let opts = ConnectOptions { response_timeout: RESPONSE_TIMEOUT, ..ConnectOptions::default() };
    // On a cluster each queue is read on the node that owns its slot.
    let plane = Plane::open(&connector, opts).await?;

    let started = Instant::now();
    let names: Vec<QueueName> = queues.iter().map(|q| q.queue.clone()).collect();
    let mut state = match protocol {
        Protocol::EchoMqV1 => check::scan(&plane, &queues).await,
        Protocol::BullMq => check::bullmq::scan_bullmq(&plane, &names).await,
    }
    .map_err(PlaneError::Call)?;
    let scanned = started.elapsed();
    // A history checked against a server that holds none of its queues' keys finds every job
    // lost: true of a deployment that lost everything, but far more often the wrong server
    // (an embedded one ends with its run), so the table says which.
    let no_key_at_all = history.is_some()
        && !state.queues.is_empty()
        && state.queues.iter().all(|q| q.rows.is_empty() && q.members.is_empty());
    if history.is_none() {
        // Nothing to check is no proof of anything: most likely a typo in the queue name.
        if let Some(empty) = state.queues.iter().find(|q| q.rows.is_empty() && q.members.is_empty()) {
            return Err(AppError::Usage(format!(
                "--queue {}: the server has no key {}, so there is nothing to check; is the name (or --protocol) right?",
                empty.queue,
                queues.iter().find(|q| q.queue.as_str() == empty.queue).map_or(String::new(), |q| q.scan_pattern())
            )));
        }
    }
    // A history whose run had consumers but did not drain left a backlog: no violation (the
    // check judges loss, not speed), but no pass either, as the run itself said.
    let backlog = history.as_ref().filter(|h| h.header().must_finish && !h.header().drained).map(|_| {
        state
            .queues
            .iter()
            .map(|q| q.rows.values().filter(|row| row.state.unfinished().is_some()).count())
            .sum::<usize>()
    });
    let violations = check::outcome::violations(protocol, &mut state, history.as_ref())
        .map_err(|e| AppError::Usage(format!("the history could not be read back: {e}")))?;
    let report = InvariantsReport::new(check::checked_jobs(&state), violations);
    let checked = started.elapsed() - scanned;
    eprintln!(
        "emq-bench: scanned {} jobs in {:.3} s, checked in {:.3} s",
        report.checked_jobs,
        scanned.as_secs_f64(),
        checked.as_secs_f64()
    );
    drop(state);

    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
        crate::report::write_json(&dir.join(check::report::INVARIANTS_FILE), &report)?;
    }
    let names: Vec<&str> = queues.iter().map(|q| q.queue.as_str()).collect();
    let mut table = format!(
        "{}{}\n",
        check::format_violations(&report.violations, args.out.is_some()),
        report.summary_line(&names)
    );
    if no_key_at_all && !report.is_clean() {
        let patterns: Vec<String> = queues.iter().map(QueueKeys::scan_pattern).collect();
        table.push_str(&format!(
            "note: the server holds no key of the history's queues ({}): every job the history \
             acknowledges is missing. Is --url the run's server? An embedded server ends with its run; \
             a killed run is checked against a server that outlives it (run --url).\n",
            patterns.join(", ")
        ));
    }
    let backlog = backlog.filter(|&jobs| jobs > 0);
    if let Some(jobs) = backlog {
        table.push_str(&format!(
            "drain incomplete: the history's run did not drain, and {jobs} of its jobs are still unfinished \
             (pending, delayed or active)\n"
        ));
    }
    let outcome = if report.is_clean() && backlog.is_none() { CommandOutcome::Success } else { CommandOutcome::Failed };
    Ok(CheckResult { report, table, outcome })
}
