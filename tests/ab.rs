//! `emq-bench ab` end to end: `lua/` against a copy whose enqueue.lua does measurable extra
//! work reports enqueue regressed (or inconclusive, never passed over), and claim/complete
//! at most a far smaller rise; `lua/` against itself reports no regression. Real embedded
//! server, real repetitions.

mod support;

use emq_bench::cli::ServerArgs;
use emq_bench::cmd::ab::{ab, AbArgs};
use emq_bench::cmd::compare::CompareFlags;
use emq_bench::compare::{InconclusiveCause, LatencyKind, Measure, MetricComparison, MetricVerdict, Overall};
use std::path::{Path, PathBuf};

fn args(a: PathBuf, b: PathBuf, out: &Path) -> AbArgs {
    AbArgs {
        scenario: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/regress.toml"),
        lua_dirs: vec![a, b],
        repeat: 5,
        warmup_runs: 1,
        out: Some(out.to_path_buf()),
        duration: None,
        seed: None,
        url: None,
        target: Default::default(),
        force: false,
        quiet: true,
        threads: 1,
        transport: emq_bench::net::Transport::Pipe,
        compare: CompareFlags { latency: LatencyKind::Intended, ..CompareFlags::default() },
        server: ServerArgs { server_bin: None, server_config: Vec::new() },
    }
}

/// A copy of `lua/` whose enqueue.lua runs `extra` more EXISTS calls before its work.
fn slower_enqueue(dir: &Path, extra: u32) -> PathBuf {
    let extra_work = format!("for _ = 1, {extra} do redis.call('EXISTS', KEYS[1]) end\n");
    support::lua_copy(dir, "lua-slower", "enqueue", |source| extra_work + &source)
}

// One test, two comparisons in turn: two A/B series at once on a 2-core machine would be
// each other's noise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ab_reports_a_slower_enqueue_as_an_enqueue_regression_and_itself_as_none() {
    let tmp = tempfile::tempdir().unwrap();
    let same = ab(args(support::lua_dir(), support::lua_dir(), &tmp.path().join("same")), std::future::pending())
        .await
        .unwrap();
    assert!(same.failures.is_empty(), "{:?}", same.failures);
    let same = same.compare;
    eprintln!("{}", same.output);
    assert_ne!(same.verdict, Overall::Regression);
    assert!(same.comparison.metrics.iter().all(|m| m.verdict != MetricVerdict::Regressed));

    // 60 EXISTS: ~70 µs more per enqueue, a clear enqueue regression (p50 ~100 µs), while the
    // server is only ~7% busier at 1 000/s. 200 (~240 µs, 24% busier) queued the other scripts
    // behind it: with precise pacing their p50 (~80 µs) rose 13%, a real effect, not noise.
    let slower = slower_enqueue(tmp.path(), 60);
    let result = ab(args(support::lua_dir(), slower, &tmp.path().join("out")), std::future::pending()).await.unwrap();
    assert!(result.failures.is_empty(), "{:?}", result.failures);
    let result = result.compare;
    eprintln!("{}", result.output);
    let metric = |script: &str, measure: Measure| {
        let m = result
            .comparison
            .metrics
            .iter()
            .find(|m| m.metric.script.as_deref() == Some(script) && m.metric.measure == measure);
        m.expect("metric compared")
    };
    // Inconclusive for the spread: the rule's cause is the CV gate, and the side it names has,
    // on its own values, a CV above the limit; or the last gate, an interval that crosses the
    // noise band's edge (any other gate, e.g. too few repetitions, fails here).
    let options = &result.comparison.options;
    let assert_over_cv = |m: &MetricComparison| match m.cause {
        Some(InconclusiveCause::Cv { side, .. }) => {
            let cv = emq_bench::stats::coefficient_of_variation(&m.side(side).values);
            assert!(
                cv.is_some_and(|cv| cv > options.max_cv),
                "{}: the CV gate named {side:?}, whose values' CV is {cv:?}: {}",
                m.label,
                m.reason
            );
        }
        Some(InconclusiveCause::CrossesBand { lo, hi, band }) => {
            let inside = lo >= -band && hi <= band;
            assert!(!inside && lo <= hi, "{}: said to cross ±{band} with {lo}..{hi}: {}", m.label, m.reason);
        }
        other => panic!("{} inconclusive for another cause, {other:?}: {}", m.label, m.reason),
    };
    // The planted change is never passed over: "regressed", or "inconclusive" when a side's
    // CV is above the limit, and the change points the planted way. Only that is certain on a
    // loaded CI box: there the repetitions' p50 spread 22-25% (CV) on identical arms, so
    // p < 0.01 is not reached every time (CI seen on 33f1050: +47%, p 0.028, CV 22%). How
    // often the rule names it is measured by `scripts/bench-ab-power`; `tests/cost.rs` proves
    // the paired cost rule names a planted change every time.
    let enqueue = metric("enqueue", Measure::P50);
    match enqueue.verdict {
        MetricVerdict::Regressed => assert_eq!(result.verdict, Overall::Regression),
        MetricVerdict::Inconclusive => {
            assert_over_cv(enqueue);
            assert_ne!(result.verdict, Overall::Pass);
        }
        other => panic!("enqueue p50 {other:?}: {}", enqueue.reason),
    }
    // Which way the medians moved is certain unless their spread is what made the verdict
    // inconclusive: while this VM stalled (2026-12-02, twice in one half hour) the
    // repetitions' enqueue p50 ran 101-1 555 µs on both arms (CV 71-77%), and the medians
    // then fell either way. A spread under the CV limit leaves the planted rise visible.
    let noisy = enqueue.verdict == MetricVerdict::Inconclusive;
    if !noisy {
        assert!(enqueue.change.is_some_and(|c| c > 0.0), "enqueue p50 did not rise: {enqueue:?}");
    }
    // Claims and completions run the same scripts in both arms, and their rate is the open
    // loop's: ops/s is never named changed. It can be inconclusive: a VM stall stretches one
    // repetition's measured time, which lowers both scripts' ops/s in it (CI on b774f6f saw
    // claim ops/s CV 48-62%), and a claim's count also includes empty polls (~230/s of the
    // ~1 200/s here), whose number is the consumer's timing. Their p50 is not certain to stay
    // put: the slower enqueue
    // keeps the one server busier, and on a slow or loaded box the claims queue behind it
    // (CI on a66417e: claim +13.2%, complete +15.9%, both "regressed" at p < 0.01, while the
    // enqueue rose ~5x as much). What is certain is that the planted script stands out: any
    // rise of theirs stays well below the enqueue's.
    let planted = enqueue.change.unwrap_or_default();
    for script in ["claim", "complete"] {
        let ops = metric(script, Measure::OpsPerSec);
        match ops.verdict {
            MetricVerdict::NoChange => {}
            MetricVerdict::Inconclusive => assert_over_cv(ops),
            other => panic!("{script} ops/s {other:?}: {}", ops.reason),
        }
        let p50 = metric(script, Measure::P50);
        if p50.verdict == MetricVerdict::Regressed && !noisy {
            let change = p50.change.expect("a regressed metric has a change");
            assert!(
                change < planted / 2.0,
                "{script} p50 {change:+.3} against enqueue's {planted:+.3}: {}",
                p50.reason
            );
        }
    }
    assert!(tmp.path().join("out/compare.json").is_file());
    // compare.html: both arms' spectra per script and the per-repetition dots, offline.
    let html = support::assert_offline_page(&tmp.path().join("out/compare.html"));
    assert!(html.contains("<h2>enqueue</h2>") && html.contains("latency spectrum"), "no enqueue spectrum");
    let named = metric("enqueue", Measure::P50).verdict.word();
    assert!(html.contains(named), "the verdict table shows enqueue p50 {named}");
    // Every script has both arms' spectra drawn (a percentile measured on too few calls to be
    // compared has no per-repetition dots, and the page says so).
    for section in html.split("<h2>").skip(2) {
        assert!(
            section.contains("all repetitions merged (ms, log)</figcaption><svg"),
            "no spectrum: {}",
            &section[..40]
        );
    }
    for arm in ["A", "B"] {
        support::assert_offline_page(&tmp.path().join("out").join(arm).join("rep-001/report.html"));
    }
}
