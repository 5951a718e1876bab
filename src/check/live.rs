//! The live check: the invariants a job's history alone shows, checked while the run goes, one
//! job at a time as its history closes, so a violation is known minutes (or hours) before the
//! run ends, and its memory holds the open jobs only.
//!
//! The history writer hands each chunk it wrote to a thread of its own ([`LiveCheck::spawn`]).
//! A job's history closes when its last event can be told: when `clean` retired it (with
//! retention), else at its terminal outcome (an accepted `complete`, a final `fail`). The other
//! load threads hand over their chunks at least once a second, so the job is checked
//! [`SETTLE`] after that, with every event recorded by then, and forgotten. A call that comes
//! later (a stale worker's, after the settle) is checked by the end check only, which reads
//! the whole history as before: the live check finds a subset of what the end check finds,
//! sooner.
//!
//! Findings go to [`LiveFindings`]: a counter per invariant (the metrics endpoint's
//! `emq_violations_total`), a line on stderr each (the first [`PRINTED`]), `invariants.json`
//! rewritten with those found so far (at most once a second; the end check writes it whole),
//! and the first one to a callback (`--fail-fast` stops the run there).

use super::history::{history_findings, passes_strictly};
use super::report::{InvariantsReport, INVARIANTS_FILE};
use super::violation::{Invariant, Violation};
use crate::history::buffer::{decode_version, encode_events};
use crate::history::spool::{ChunkFilter, ChunkTap};
use crate::history::{Event, History, HistoryHeader, Kind, Outcome, UNKNOWN_JOB};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long after a job's history closes it is checked: the load threads hand over their
/// chunks at least once a second, so by then every event recorded before the close has come.
pub const SETTLE: Duration = Duration::from_secs(5);

/// How long a job that cannot close is kept without a new event: the late calls of a job
/// already checked and forgotten, an enqueue refused (the end check judges them).
const IDLE: Duration = Duration::from_secs(60);

/// How long any job is kept without a new event: one that never closes (a job `reap` failed
/// for good, with no call of ours; one stuck) is the end check's.
const IDLE_OPEN: Duration = Duration::from_secs(600);

/// After a chunk was skipped, how long jobs first seen are not checked: their events may have
/// been in it (a thread's chunk holds up to a second of its events; the others' come within
/// a second or two).
const BLIND: Duration = Duration::from_secs(3);

/// Chunks waiting for the live check: at 1 MiB each, what it may lag by before it skips some.
const CHUNKS_QUEUED: usize = 64;

/// Violations printed on stderr as they are found; the rest are counted (and in the file).
pub const PRINTED: usize = 20;

/// Violations kept for `invariants.json` while the run goes; the end check writes them all.
const KEPT: usize = 1000;

/// What is called with the first violation found (`--fail-fast`'s stop).
type OnFirst = Box<dyn FnOnce(&Violation) + Send>;

/// What the live check found so far, shared with the run (the metrics endpoint reads the
/// counts, `--fail-fast` the first).
pub struct LiveFindings {
    counts: [AtomicU64; 8],
    kept: Mutex<Vec<Violation>>,
    first: OnceLock<Violation>,
    on_first: Mutex<Option<OnFirst>>,
    checked: AtomicU64,
    skipped: Arc<AtomicU64>,
    folder: Option<PathBuf>,
}

impl std::fmt::Debug for LiveFindings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFindings")
            .field("counts", &self.counts())
            .field("checked", &self.checked())
            .field("skipped", &self.skipped())
            .finish_non_exhaustive()
    }
}

impl LiveFindings {
    /// No findings yet; `folder` is the results folder whose `invariants.json` is rewritten as
    /// they come (none: no file).
    pub fn new(folder: Option<PathBuf>) -> LiveFindings {
        LiveFindings {
            counts: Default::default(),
            kept: Mutex::new(Vec::new()),
            first: OnceLock::new(),
            on_first: Mutex::new(None),
            checked: AtomicU64::new(0),
            skipped: Arc::new(AtomicU64::new(0)),
            folder,
        }
    }

    /// Calls `then` with the first violation found (at once when one was found already).
    pub fn on_first(&self, then: impl FnOnce(&Violation) + Send + 'static) {
        if let Some(first) = self.first.get() {
            then(first);
        } else {
            *self.on_first.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(then));
            // Found between the test and the store: the callback must still run.
            if let Some(first) = self.first.get() {
                if let Some(then) = self.on_first.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    then(first);
                }
            }
        }
    }

    /// Violations found so far, per invariant (every invariant, in [`Invariant::ALL`] order).
    pub fn counts(&self) -> [(Invariant, u64); 8] {
        std::array::from_fn(|i| (Invariant::ALL[i], self.counts[i].load(Ordering::Relaxed)))
    }

    /// Violations found so far, over every invariant.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The first violation found, if any.
    pub fn first(&self) -> Option<&Violation> {
        self.first.get()
    }

    /// Jobs whose closed history was checked.
    pub fn checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// Chunks the live check skipped because it was behind (their jobs are checked at the end
    /// only).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    fn report(&self, v: Violation) {
        let index = Invariant::ALL.iter().position(|i| *i == v.invariant).unwrap_or(0);
        let seen = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>();
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        if seen < PRINTED as u64 {
            let job = v.job.as_deref().unwrap_or("-");
            eprintln!(
                "emq-bench: violation {} ({}) in queue {}, job {job}: expected {}; found {}",
                v.invariant.id(),
                v.invariant.name(),
                v.queue,
                v.expected,
                v.found
            );
        } else if seen == PRINTED as u64 {
            eprintln!("emq-bench: more violations: counted in emq_violations_total, listed in invariants.json");
        }
        if self.first.set(v.clone()).is_ok() {
            if let Some(then) = self.on_first.lock().unwrap_or_else(|p| p.into_inner()).take() {
                then(&v);
            }
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < KEPT {
            kept.push(v);
        }
    }

    /// Rewrites the folder's `invariants.json` with the violations kept so far (atomically: a
    /// reader sees the old file or the new one). A failed write is left to the end check's.
    fn write(&self) {
        let Some(folder) = &self.folder else { return };
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let report = InvariantsReport::new(self.checked() as usize, kept);
        let _ = (|| -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(folder)?;
            serde_json::to_writer_pretty(&mut file, &report)?;
            file.persist(folder.join(INVARIANTS_FILE))?;
            Ok(())
        })();
    }
}

/// Hands what the check found to its findings, and rewrites `invariants.json` at most once a
/// second while there is something new.
struct Reporting {
    findings: Arc<LiveFindings>,
    written: Instant,
    dirty: bool,
}

impl Reporting {
    fn new(findings: Arc<LiveFindings>) -> Reporting {
        Reporting { findings, written: Instant::now(), dirty: false }
    }

    fn report(&mut self, (violations, jobs): (Vec<Violation>, u64), now: Instant) {
        self.findings.checked.fetch_add(jobs, Ordering::Relaxed);
        self.dirty |= !violations.is_empty();
        violations.into_iter().for_each(|v| self.findings.report(v));
        if self.dirty && now.duration_since(self.written) >= Duration::from_secs(1) {
            self.findings.write();
            (self.written, self.dirty) = (now, false);
        }
    }

    fn flush(&mut self) {
        if self.dirty {
            self.findings.write();
            self.dirty = false;
        }
    }
}

/// The live check inside the history writer (`--keep-history violations`): what it is given
/// of each chunk is what the history keeps ([`LiveCheck::keeping`]).
pub struct KeptHistory {
    check: LiveCheck,
    reporting: Reporting,
}

impl ChunkFilter for KeptHistory {
    fn chunk(&mut self, chunk: Vec<u8>, now: Instant) -> Vec<Vec<u8>> {
        match decode_version(&chunk, self.check.run.header.event_version) {
            Ok(events) => self.check.feed(events, now),
            // Kept as it came: the end check names what does not decode.
            Err(_) => return vec![chunk],
        }
        self.check.take_kept()
    }

    fn tick(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let found = self.check.due(now);
        self.reporting.report(found, now);
        self.check.take_kept()
    }

    fn finish(&mut self) -> Vec<Vec<u8>> {
        let now = Instant::now();
        let found = self.check.close_all(now);
        self.reporting.report(found, now);
        self.reporting.flush();
        self.check.take_kept()
    }
}

/// One job of the live check: its events so far.
struct OpenJob {
    events: Vec<Event>,
    /// Its history closed: it is queued for its check.
    closing: bool,
    /// Some of its events may be in a skipped chunk: it is not checked.
    partial: bool,
    /// When its last event came.
    last: Instant,
}

/// The live check's state, owned by its thread.
pub struct LiveCheck {
    /// The run's header, no events: what the checks read of the run.
    run: History,
    jobs: HashMap<u32, OpenJob>,
    closing: VecDeque<(Instant, u32)>,
    last_sweep: Instant,
    /// Jobs first seen before this are not checked (a chunk was skipped).
    blind_until: Option<Instant>,
    /// With `--keep-history violations`: the events to write, those of every job not passed
    /// and retired (its jobs close at their retirement, not at their terminal outcome).
    kept: Option<Vec<Event>>,
}

impl LiveCheck {
    /// A check of the run whose history has `header` (what its writer starts the file with).
    pub fn new(header: HistoryHeader) -> LiveCheck {
        LiveCheck {
            run: History { header, events: Vec::new(), encoded_bytes: 0 },
            jobs: HashMap::new(),
            closing: VecDeque::new(),
            last_sweep: Instant::now(),
            blind_until: None,
            kept: None,
        }
    }

    /// A check that also decides what the history keeps (`--keep-history violations`): a job
    /// closes when `clean` retires it, and is dropped once it passed; the events of every other
    /// job (a finding, no enqueue seen, never retired, a late call of a job dropped, a call
    /// whose outcome is unknown) are handed back by [`take_kept`](Self::take_kept).
    pub fn keeping(header: HistoryHeader) -> LiveCheck {
        LiveCheck { kept: Some(Vec::new()), ..LiveCheck::new(header) }
    }

    /// The events to write so far (see [`keeping`](Self::keeping)), encoded as streams; none
    /// for a check that keeps nothing.
    pub fn take_kept(&mut self) -> Vec<Vec<u8>> {
        self.kept.as_mut().map_or_else(Vec::new, |kept| encode_events(&std::mem::take(kept)))
    }

    /// The run's last chunk came: every closed job is checked now (nothing more can come), and
    /// every job still open is kept whole. Returns the violations found and the jobs checked.
    pub fn close_all(&mut self, now: Instant) -> (Vec<Violation>, u64) {
        let found = self.due(now + SETTLE);
        if let Some(kept) = self.kept.as_mut() {
            self.jobs.drain().for_each(|(_, job)| kept.extend(job.events));
        }
        found
    }

    /// A chunk was skipped at `now`: no job open now, nor any first seen within [`BLIND`], is
    /// checked (any may miss events, and a check of part of a history can accuse a correct run).
    pub fn skipped(&mut self, now: Instant) {
        self.jobs.values_mut().for_each(|job| job.partial = true);
        self.blind_until = Some(now + BLIND);
    }

    /// Starts the check's thread: it reads the chunks the history writer hands to the returned
    /// tap, reports to `findings`, and ends when the writer does.
    ///
    /// Errors: the thread could not be started.
    pub fn spawn(mut self, findings: Arc<LiveFindings>) -> std::io::Result<(ChunkTap, JoinHandle<()>)> {
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(CHUNKS_QUEUED);
        let tap = ChunkTap { tx, skipped: findings.skipped.clone() };
        let thread = std::thread::Builder::new().name("live-check".into()).spawn(move || {
            let mut reporting = Reporting::new(findings.clone());
            let mut seen_skipped = 0;
            loop {
                match rx.recv_timeout(Duration::from_millis(250)) {
                    Ok(chunk) => match decode_version(&chunk, self.run.header.event_version) {
                        Ok(events) => self.feed(events, Instant::now()),
                        Err(_) => {
                            findings.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                let now = Instant::now();
                // The writer counts what it could not hand over; a chunk lost either way blinds.
                let skipped = findings.skipped();
                if skipped > seen_skipped {
                    seen_skipped = skipped;
                    self.skipped(now);
                }
                reporting.report(self.due(now), now);
            }
            reporting.flush();
        })?;
        Ok((tap, thread))
    }

    /// The check as the history writer's filter (`--keep-history violations`), reporting to
    /// `findings`: it runs in the writer's thread and sees every chunk (none is skipped).
    /// Make it with [`keeping`](Self::keeping).
    pub fn into_filter(self, findings: Arc<LiveFindings>) -> KeptHistory {
        KeptHistory { check: self, reporting: Reporting::new(findings) }
    }

    /// Takes in one chunk's events, which came at `now`.
    pub fn feed(&mut self, events: Vec<Event>, now: Instant) {
        let blind = self.blind_until.is_some_and(|until| now < until);
        let keeping = self.kept.is_some();
        for e in events {
            if e.job == UNKNOWN_JOB {
                self.kept.iter_mut().for_each(|kept| kept.push(e));
                continue;
            }
            // A retirement names a job checked and forgotten, unless it came within the settle.
            if e.kind == Kind::Retire && !self.jobs.contains_key(&e.job) {
                self.kept.iter_mut().for_each(|kept| kept.push(e));
                continue;
            }
            let job = self.jobs.entry(e.job).or_insert_with(|| OpenJob {
                events: Vec::new(),
                closing: false,
                partial: blind,
                last: now,
            });
            job.last = now;
            let closes = match keeping {
                // Dropped only once retired: the end check needs a job's events while its row
                // may be on the server.
                true => e.kind == Kind::Retire && e.outcome == Outcome::Ok,
                false => {
                    (e.kind == Kind::Complete && e.outcome == Outcome::Ok)
                        || (e.kind == Kind::Fail && e.outcome == Outcome::Alt)
                }
            };
            if closes && !job.closing {
                job.closing = true;
                self.closing.push_back((now + SETTLE, e.job));
            }
            job.events.push(e);
        }
    }

    /// Checks and forgets every job whose history closed [`SETTLE`] before `now`; returns the
    /// violations found and the jobs checked. Jobs of which no enqueue was seen (late calls of
    /// a job already forgotten) and jobs that may miss events (a chunk skipped) are not
    /// checked. Jobs that cannot close are dropped once idle for [`IDLE`], any job once idle for
    /// [`IDLE_OPEN`].
    pub fn due(&mut self, now: Instant) -> (Vec<Violation>, u64) {
        let mut found = Vec::new();
        let mut checked = 0;
        while let Some(&(at, number)) = self.closing.front() {
            if at > now {
                break;
            }
            self.closing.pop_front();
            let Some(mut job) = self.jobs.remove(&number) else { continue };
            let enqueued = job.events.iter().any(|e| matches!(e.kind, Kind::Enqueue | Kind::EnqueueDup));
            if !enqueued || job.partial {
                self.kept.iter_mut().for_each(|kept| kept.extend(&job.events));
                continue;
            }
            job.events.sort_unstable_by_key(|e| (e.sent_us, e.done_us));
            let findings = history_findings(&job.events, &self.run);
            // Dropped only when the end check's stricter reading passes it too: what it could
            // find must stay in the history.
            if !findings.is_empty() || (self.kept.is_some() && !passes_strictly(&job.events, &self.run)) {
                self.kept.iter_mut().for_each(|kept| kept.extend(&job.events));
            }
            found.extend(findings);
            checked += 1;
        }
        if now.duration_since(self.last_sweep) >= IDLE {
            let kept = &mut self.kept;
            self.jobs.retain(|_, job| {
                let idle = now.duration_since(job.last);
                let accepted = job.events.iter().any(|e| e.kind == Kind::Enqueue && e.outcome.accepted());
                let held = job.closing || idle < IDLE || (accepted && idle < IDLE_OPEN);
                if !held {
                    kept.iter_mut().for_each(|kept| kept.extend(&job.events));
                }
                held
            });
            self.last_sweep = now;
        }
        (found, checked)
    }

    /// Jobs held (open, or closed and waiting for their check).
    pub fn open_jobs(&self) -> usize {
        self.jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(job: u32, kind: Kind, outcome: Outcome, token: u32, sent_us: u64, worker: u32) -> Event {
        Event::for_tests(job, kind, outcome, token, sent_us, worker)
    }

    /// A job whose stale worker's complete is accepted after the next token was handed out
    /// (the events split over two chunks, out of order) is found once its history closes and
    /// the settle passed, then forgotten; a clean job beside it is checked and forgotten too.
    #[test]
    fn a_stale_complete_is_found_after_the_settle_and_the_job_forgotten() {
        let mut live = LiveCheck::new(HistoryHeader::for_tests(2));
        let t0 = Instant::now();
        live.feed(
            vec![
                event(1, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(1, Kind::Claim, Outcome::Ok, 1, 100, 1),
                event(1, Kind::Complete, Outcome::Ok, 1, 10_000, 1),
                event(2, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(2, Kind::Claim, Outcome::Ok, 1, 100, 1),
                event(2, Kind::Complete, Outcome::Ok, 1, 200, 1),
            ],
            t0,
        );
        live.feed(
            vec![event(1, Kind::Claim, Outcome::Ok, 2, 5_000, 2), event(1, Kind::Complete, Outcome::Ok, 2, 5_100, 2)],
            t0 + Duration::from_secs(1),
        );
        assert_eq!(live.due(t0 + Duration::from_secs(1)), (Vec::new(), 0), "nothing before the settle");
        let (found, checked) = live.due(t0 + SETTLE);
        assert_eq!(checked, 2);
        assert!(found.iter().all(|v| v.invariant == Invariant::I6), "{found:#?}");
        assert!(found.iter().any(|v| v.found.contains("2 accepted")), "{found:#?}");
        assert_eq!(live.open_jobs(), 0);
    }

    /// A retirement that comes within the settle is checked with the job (a stale call refused
    /// EMQNOJOB after it is no finding, a second stale call is); one after the check is dropped.
    #[test]
    fn a_retirement_within_the_settle_is_checked_with_its_job() {
        let mut live = LiveCheck::new(HistoryHeader::for_tests(2));
        let t0 = Instant::now();
        let nojob = Outcome::Refused(crate::lua::ErrorCode::NoJob);
        live.feed(
            vec![
                event(0, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(0, Kind::Claim, Outcome::Ok, 1, 100, 1),
                event(0, Kind::Complete, Outcome::Ok, 1, 200, 1),
            ],
            t0,
        );
        live.feed(
            vec![
                event(0, Kind::Claim, Outcome::Ok, 2, 150, 2),
                event(0, Kind::Retire, Outcome::Ok, 0, 300, 0),
                event(0, Kind::Complete, nojob, 1, 400, 3),
            ],
            t0 + Duration::from_secs(1),
        );
        let (found, checked) = live.due(t0 + SETTLE);
        assert_eq!(checked, 1);
        // The token-1 complete after token 2 was handed out: found; the refusal is not.
        assert!(found.iter().all(|v| !v.found.contains("EMQNOJOB")), "{found:#?}");
        assert!(found.iter().any(|v| v.found.contains("after token 2 was handed out")), "{found:#?}");
        live.feed(vec![event(0, Kind::Retire, Outcome::Ok, 0, 300, 0)], t0 + SETTLE);
        assert_eq!(live.open_jobs(), 0, "a late retirement is dropped");
    }

    /// After a skipped chunk the jobs open then, and those first seen within BLIND, are not
    /// checked: a history cut by the skip must not accuse a correct run.
    #[test]
    fn a_skipped_chunk_leaves_its_jobs_unchecked() {
        let mut live = LiveCheck::new(HistoryHeader::for_tests(3));
        let t0 = Instant::now();
        live.feed(vec![event(1, Kind::Enqueue, Outcome::Ok, 7, 0, 0)], t0);
        live.skipped(t0);
        // Job 1's claim was in the skipped chunk; job 2's enqueue too.
        live.feed(
            vec![
                event(1, Kind::Complete, Outcome::Ok, 1, 200, 1),
                event(2, Kind::Claim, Outcome::Ok, 1, 100, 1),
                event(2, Kind::Complete, Outcome::Ok, 1, 200, 1),
            ],
            t0 + Duration::from_secs(1),
        );
        live.feed(vec![event(2, Kind::Enqueue, Outcome::Ok, 7, 0, 0)], t0 + Duration::from_secs(2));
        assert_eq!(live.due(t0 + SETTLE * 2), (Vec::new(), 0));
        // Past the blind window a job is checked again.
        let later = t0 + BLIND + Duration::from_secs(1);
        live.feed(
            vec![
                event(3, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(3, Kind::Claim, Outcome::Ok, 1, 100, 1),
                event(3, Kind::Complete, Outcome::Ok, 1, 200, 1),
            ],
            later,
        );
        assert_eq!(live.due(later + SETTLE), (Vec::new(), 1));
    }

    /// The jobs `streams` hold events of, in order.
    fn decoded(streams: Vec<Vec<u8>>) -> Vec<u32> {
        let mut jobs: Vec<u32> =
            streams.iter().flat_map(|s| crate::history::buffer::decode(s).unwrap()).map(|e| e.job).collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// Keeping only violations: a job retired and passed is dropped; one with a finding, one
    /// never retired (kept at the end), a call whose outcome is unknown and a late call of a
    /// dropped job are kept; jobs close at their retirement, not at their completion.
    #[test]
    fn keeping_violations_drops_only_the_jobs_retired_and_passed() {
        let mut live = LiveCheck::keeping(HistoryHeader::for_tests(4));
        let t0 = Instant::now();
        let finished = |job: u32, token: u32| {
            vec![
                event(job, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(job, Kind::Claim, Outcome::Ok, token, 100, 1),
                event(job, Kind::Complete, Outcome::Ok, token, 200, 1),
            ]
        };
        let mut events = finished(1, 1);
        events.extend(finished(2, 1));
        // Job 2 completed twice: a finding.
        events.push(event(2, Kind::Complete, Outcome::Ok, 1, 250, 2));
        events.extend(finished(3, 1));
        events.push(event(UNKNOWN_JOB, Kind::Claim, Outcome::Unknown, 0, 300, 1));
        live.feed(events, t0);
        assert_eq!(decoded(live.take_kept()), [UNKNOWN_JOB], "only the unknown call, at once");
        assert_eq!(live.due(t0 + SETTLE), (Vec::new(), 0), "completion does not close a job here");
        let retire = |job| event(job, Kind::Retire, Outcome::Ok, 0, 1_000, 0);
        live.feed(vec![retire(1), retire(2)], t0 + Duration::from_secs(1));
        let (found, checked) = live.due(t0 + Duration::from_secs(1) + SETTLE);
        assert_eq!(checked, 2);
        assert!(!found.is_empty());
        assert_eq!(decoded(live.take_kept()), [2], "the job with a finding is kept whole");
        // A late stale call of job 1, checked and dropped, is kept on its own.
        live.feed(vec![event(1, Kind::Complete, Outcome::Ok, 1, 2_000, 3)], t0 + Duration::from_secs(8));
        live.due(t0 + Duration::from_secs(20));
        // Job 3, never retired, is kept at the end; job 1's remnant with it.
        let (found, _) = live.close_all(t0 + Duration::from_secs(21));
        assert!(found.is_empty());
        assert_eq!(decoded(live.take_kept()), [1, 3]);
        assert_eq!(live.open_jobs(), 0);
    }

    /// A job the lenient live reading passes but the end check's strict one would not (its
    /// first token never seen handed out: only a claim of unknown outcome explains it) is kept,
    /// not dropped, and no finding is reported for it live.
    #[test]
    fn keeping_violations_keeps_a_job_only_the_strict_reading_would_fail() {
        let mut live = LiveCheck::keeping(HistoryHeader::for_tests(1));
        let t0 = Instant::now();
        live.feed(
            vec![
                event(1, Kind::Enqueue, Outcome::Ok, 7, 0, 0),
                event(1, Kind::Claim, Outcome::Ok, 2, 100, 1),
                event(1, Kind::Complete, Outcome::Ok, 2, 200, 1),
                event(1, Kind::Retire, Outcome::Ok, 0, 1_000, 0),
            ],
            t0,
        );
        let (found, checked) = live.due(t0 + SETTLE);
        assert_eq!((found.len(), checked), (0, 1), "{found:#?}");
        assert_eq!(decoded(live.take_kept()), [1]);
    }

    /// The callback sees the first violation once; the counts follow every report.
    #[test]
    fn the_first_finding_is_handed_over_once_and_counted() {
        let findings = Arc::new(LiveFindings::new(None));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        findings.on_first(move |v| into.lock().unwrap().push(v.found.clone()));
        let v = |found: &str| Violation {
            invariant: Invariant::I6,
            queue: "q".into(),
            job: None,
            expected: "e".into(),
            found: found.into(),
            at_us: None,
        };
        findings.report(v("one"));
        findings.report(v("two"));
        assert_eq!(*seen.lock().unwrap(), ["one"]);
        assert_eq!(findings.total(), 2);
        assert_eq!(findings.counts()[5], (Invariant::I6, 2));
    }
}
