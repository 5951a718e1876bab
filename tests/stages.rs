//! `[[stages]]` end to end against a real embedded server: a three-stage ramp's per-second
//! enqueue rates follow the schedule, each second of intervals.csv names its stage, and
//! `--rate` beside stages is refused before anything starts.

mod support;

use emq_bench::cmd::run::run;
use emq_bench::cmd::CommandOutcome;
use std::path::Path;

/// 1 s at 300 jobs/s, a 2 s ramp to 1500 jobs/s, 1 s at 1500 jobs/s: 300, 600, 1200 and
/// 1500 jobs in its four seconds, 3600 in all (small enough for a loaded CI box).
const RAMP: &str = r#"
name = "stages-test"
seed = 11
drain = "10s"
[producers]
count = 2
pipeline = 16
arrival = "uniform"
[consumers]
count = 2
pipeline = 4
batch = 16
[[stages]]
duration = "1s"
rate = 300
[[stages]]
duration = "2s"
rate = 1500
ramp = true
[[stages]]
duration = "1s"
rate = 1500
"#;

fn write_scenario(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("stages.toml");
    std::fs::write(&path, RAMP).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_stage_ramp_enqueues_at_the_rate_of_each_second() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    let out = tmp.path().join("out");
    let result = run(support::run_args(&scenario, &out), std::future::pending()).await.unwrap();
    assert_eq!(result.outcome, CommandOutcome::Success, "{:?}", result.failures);
    let rates = result.summary.producers.as_ref().expect("an open loop reports its rates");
    assert_eq!(rates.requested_per_sec, 900.0, "the requested rate is the stages' mean");

    let mut reader = csv::Reader::from_path(out.join("intervals.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}"));
    let (t, script, ok, stage, intended) =
        (column("t_s"), column("script"), column("ok"), column("stage"), column("intended_rate"));
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let enqueue: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[script] == "enqueue").collect();
    let want = [(0, "0", 300.0), (1, "1", 600.0), (2, "1", 1200.0), (3, "2", 1500.0)];
    let mut total = 0;
    for (k, want_stage, want_rate) in want {
        let row = enqueue.iter().find(|r| r[t] == k.to_string()).unwrap_or_else(|| panic!("no second {k}"));
        assert_eq!(&row[stage], want_stage, "second {k}'s stage");
        let planned: f64 = row[intended].parse().unwrap();
        assert!((planned - want_rate).abs() < 0.1, "second {k} intends {planned} jobs/s, not {want_rate}");
        let got: f64 = row[ok].parse().unwrap();
        assert!(
            (got - want_rate).abs() <= 0.25 * want_rate,
            "second {k}: {got} enqueued, the stage intends {want_rate}"
        );
        total += got as u64;
    }
    // Every row of a second carries its stage; a second after the stages carries none.
    for r in &rows {
        let k: u64 = r[t].parse().unwrap();
        let expected = match k {
            0 => "0",
            1 | 2 => "1",
            3 => "2",
            _ => "",
        };
        assert_eq!(&r[stage], expected, "{} at second {k}", &r[script]);
    }
    let enqueued = result.summary.jobs["enqueued"];
    assert!(enqueued.abs_diff(3600) <= 360, "{enqueued} enqueued over the stages, 3600 intended");
    assert!(total.abs_diff(3600) <= 360, "{total} enqueued in the four seconds, 3600 intended");
    let queue = std::fs::read_to_string(out.join("queue.csv")).unwrap();
    assert!(queue.lines().next().unwrap().ends_with(",stage"), "{queue}");
    assert!(queue.lines().nth(2).is_some_and(|l| l.starts_with("1,") && l.ends_with(",1")), "{queue}");
}

#[tokio::test]
async fn a_rate_beside_stages_is_refused_as_bad_usage() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    let args = emq_bench::cli::RunArgs { rate: Some(2000.0), ..support::run_args(&scenario, &tmp.path().join("out")) };
    let Err(err) = run(args, std::future::pending()).await else { panic!("--rate beside [[stages]] ran") };
    let message = err.to_string();
    assert_eq!(err.exit_code(), 2, "{message}");
    assert!(
        message.contains("stages.toml") && message.contains("--rate") && message.contains("[[stages]]"),
        "{message}"
    );
}
