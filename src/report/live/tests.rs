use super::readback::restore_series;
use super::spill::{SecondsSpill, SpilledSecond, SECONDS_PREFIX};
use super::*;
use crate::lua::{ErrorCode, Script};
use crate::metrics::{CompactHistogram, IntervalScript, JobCounter, Recorder, Reporter, INTERVAL_US};
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

/// A run whose reporter streams its seconds: the reporter finishes with no series,
/// latency.hlog and intervals.csv hold every second, and the series read back is the one
/// recorded (counts, errors, histograms per second; the last second cut at the run's end).
#[test]
fn streamed_seconds_read_back_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let live = LiveFolder::start(dir.path(), RunSummary::at_start("t", 1, None, Default::default()), None);
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let (mut reporter, sink) = Reporter::new(start, Duration::from_secs(1));
    reporter.tap_closed(live.intervals().unwrap());
    let mut rec = Recorder::new(&sink);
    rec.record_ok(Script::Claim, 50, 50);
    rec.maybe_flush(at(1_000));
    for i in 1..=20 {
        rec.record_ok(Script::Enqueue, i * 100, i * 50);
    }
    rec.maybe_flush(at(2_000));
    for i in 1..=7 {
        rec.record_ok(Script::Enqueue, i * 1_000, 10);
    }
    rec.record_error(Script::Enqueue, ErrorCode::Timeout, 40);
    drop(rec);
    reporter.drain();
    let mut metrics = reporter.finish(at(2_500));
    assert!(metrics.intervals.is_empty(), "the reporter keeps no second once streamed");
    assert!(live.finish(&mut metrics).is_empty());
    let seconds: Vec<(u64, u64, u64, u64, u64, u64)> = metrics
        .intervals
        .iter()
        .flat_map(|r| r.scripts.iter().map(move |s| (r, s)))
        .map(|(r, s)| {
            let h = s.latency.decode().unwrap();
            (r.index, r.duration_us, s.ok, s.error_total(), h.len(), h.max())
        })
        .collect();
    assert_eq!(
        seconds,
        vec![(1, 1_000_000, 20, 0, 20, 2_000), (2, 500_000, 7, 1, 7, 7_003)],
        "counts, errors and histograms read back; the last second cut at the end"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().starts_with(SECONDS_PREFIX)), "{left:?}");
    // A line cut by a kill is left out, not an unreadable log.
    let hlog = dir.path().join("latency.hlog");
    let mut cut = std::fs::read(&hlog).unwrap();
    cut.extend_from_slice(b"Tag=enqueue,3.000,1.000,7.003,HISTFAAAA");
    std::fs::write(&hlog, cut).unwrap();
    assert_eq!(super::super::hlog::read_log(&hlog).unwrap().len(), 2);
    let rows = std::fs::read_to_string(dir.path().join("intervals.csv")).unwrap();
    assert_eq!(rows.lines().count(), 3, "a header and one row per second:\n{rows}");
    let summary: RunSummary =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    assert!(summary.running);
    assert_eq!(summary.scripts.iter().map(|s| (s.script.as_str(), s.ok)).collect::<Vec<_>>(), [("enqueue", 27)]);
}

/// Data merged into a second after it closed (a stalled task) is added to what the second
/// streamed: counts summed, a script new to the second inserted in order, the late
/// histogram kept for the read-back of latency.hlog; a late second never streamed stays.
#[test]
fn late_data_adds_to_the_streamed_second() {
    let script = |script: Script, ok: u64, p99_us: u64| IntervalScript {
        script,
        ok,
        errors: [0; ErrorCode::COUNT],
        late: 0,
        p50_us: p99_us,
        p99_us,
        max_us: p99_us,
        latency: CompactHistogram::default(),
    };
    let second = |index: u64, scripts: Vec<IntervalScript>| IntervalRecord {
        index,
        start_us: index * INTERVAL_US,
        duration_us: INTERVAL_US,
        scripts,
        jobs: [1; JobCounter::COUNT],
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seconds.jsonl");
    let mut streamed = second(3, vec![script(Script::Claim, 10, 700)]);
    streamed.scripts[0].errors[ErrorCode::Fence.index()] = 2;
    let lines = [SpilledSecond::of(&streamed), SpilledSecond::of(&second(4, vec![script(Script::Claim, 1, 9)]))];
    let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
    std::fs::write(&path, text).unwrap();
    let mut late = second(3, vec![script(Script::Enqueue, 5, 300), script(Script::Claim, 1, 900)]);
    let mut h = crate::metrics::new_histogram();
    h.record(900).unwrap();
    late.scripts[1].latency = CompactHistogram::encode(&h);
    let mut metrics = RunMetrics {
        start_wall: std::time::SystemTime::now(),
        warmup_intervals: 3,
        measured_us: 1_250_000,
        scripts: Vec::new(),
        intervals: vec![late, second(9, vec![script(Script::Complete, 2, 50)])],
        jobs: [0; JobCounter::COUNT],
        warmup_jobs: [0; JobCounter::COUNT],
    };
    assert_eq!(restore_series(&mut metrics, &path, Vec::new()).unwrap(), 0);
    type Second = (u64, u64, Vec<(Script, u64, u64, u64)>);
    let got: Vec<Second> = metrics
        .intervals
        .iter()
        .map(|r| {
            (r.index, r.duration_us, r.scripts.iter().map(|s| (s.script, s.ok, s.error_total(), s.p99_us)).collect())
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (3, 1_000_000, vec![(Script::Enqueue, 5, 0, 300), (Script::Claim, 11, 2, 700)]),
            (4, 250_000, vec![(Script::Claim, 1, 0, 9)]),
            (9, 1_000_000, vec![(Script::Complete, 2, 0, 50)]),
        ]
    );
    assert_eq!(metrics.intervals[0].jobs, [2; JobCounter::COUNT]);
    assert_eq!(metrics.intervals[0].scripts[1].latency.decode().unwrap().len(), 1, "the late histogram kept");
}

/// A write cut short (a full disk) spoils only its own line: the seconds around it read
/// back, the cut one comes from memory, and the unreadable line is counted.
#[test]
fn a_cut_line_spoils_no_other_second() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seconds.jsonl");
    let second = |index: u64| IntervalRecord {
        index,
        start_us: index * INTERVAL_US,
        duration_us: INTERVAL_US,
        scripts: Vec::new(),
        jobs: [index; JobCounter::COUNT],
    };
    let mut spill = SecondsSpill { file: File::create(&path).unwrap(), path: path.clone(), broken: false };
    spill.append(&second(1)).unwrap();
    // Half of second 2's line reached the file before the write failed.
    let line = serde_json::to_string(&SpilledSecond::of(&second(2))).unwrap();
    spill.file.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
    spill.broken = true;
    spill.append(&second(3)).unwrap();
    let mut metrics = RunMetrics {
        start_wall: std::time::SystemTime::now(),
        warmup_intervals: 1,
        measured_us: 3 * INTERVAL_US,
        scripts: Vec::new(),
        intervals: Vec::new(),
        jobs: [0; JobCounter::COUNT],
        warmup_jobs: [0; JobCounter::COUNT],
    };
    assert_eq!(restore_series(&mut metrics, &path, vec![second(2)]).unwrap(), 1, "one unreadable line");
    let got: Vec<(u64, u64)> = metrics.intervals.iter().map(|r| (r.index, r.jobs[0])).collect();
    assert_eq!(got, [(1, 1), (2, 2), (3, 3)]);
}
