//! The `[[faults]]` entries' resolution: times, and every refusal naming its field.

use crate::scenario::{parse, FaultKind, ScenarioError};
use std::path::Path;
use std::time::Duration;

const BASE: &str = "name = \"f\"\nseed = 1\nduration = \"10s\"\n";

fn faults(text: &str) -> Result<Vec<crate::scenario::FaultPlan>, ScenarioError> {
    parse(&format!("{BASE}{text}"), Path::new("f.toml")).map(|plan| plan.faults)
}

fn refused(text: &str) -> String {
    faults(text).expect_err("refused").to_string()
}

#[test]
fn a_schedule_resolves_to_its_times_within_the_load_phase() {
    let plan = faults(
        "[[faults]]\nkind = \"pause\"\nevery = \"3s\"\nduration = \"500ms\"\nmode = \"all\"\n\
         [[faults]]\nkind = \"restart\"\nat = \"2s\"\nsignal = \"kill\"\n",
    )
    .unwrap();
    assert_eq!(plan[0].kind, FaultKind::Pause);
    assert_eq!(plan[0].times(Duration::from_secs(10), 100), [3, 6, 9].map(Duration::from_secs));
    assert_eq!(plan[0].count_before(Duration::from_secs(10)), 3);
    assert_eq!(plan[0].count_before(Duration::from_secs(9)), 2, "9 s is not before 9 s");
    assert_eq!(plan[1].count_before(Duration::from_secs(2)), 0);
    assert_eq!(plan[1].times(Duration::from_secs(10), 100), [Duration::from_secs(2)]);
    assert_eq!(plan[1].signal, crate::scenario::RestartSignal::Kill);
}

#[test]
fn every_bad_entry_names_its_field_and_what_was_expected() {
    let cases = [
        ("[[faults]]\nkind = \"pause\"\nduration = \"1s\"\n", "faults[0].at", "at = \"3s\", every"),
        ("[[faults]]\nkind = \"pause\"\nat = \"1s\"\n", "faults[0].duration", "how long the pause lasts"),
        ("[[faults]]\nkind = \"script-flush\"\nat = \"1s\"\nduration = \"1s\"\n", "faults[0].duration", "is instant"),
        (
            "[[faults]]\nkind = \"freeze\"\nevery = \"1s\"\nduration = \"2s\"\n",
            "faults[0].duration",
            "shorter than every",
        ),
        ("[[faults]]\nkind = \"kill-connections\"\nevery = \"10ms\"\n", "faults[0].every", "at least 100ms"),
        ("[[faults]]\nkind = \"kill-connections\"\nat = \"10s\"\n", "faults[0].at", "within the load phase"),
        (
            "[[faults]]\nkind = \"restart\"\nat = \"1s\"\nmode = \"all\"\n",
            "faults[0].mode",
            "only for kind = \"pause\"",
        ),
        (
            "[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nsignal = \"kill\"\n",
            "faults[0].signal",
            "only for kind = \"restart\"",
        ),
        ("[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"11m\"\n", "faults[0].duration", "at most 10m"),
    ];
    for (text, field, expected) in cases {
        let err = refused(text);
        assert!(err.contains(field) && err.contains(expected), "{text}: {err}");
    }
    let err = refused("[target]\nurl = \"redis://127.0.0.1:1/\"\n[[faults]]\nkind = \"failover\"\nat = \"1s\"\n");
    assert!(err.contains("faults[0].kind") && err.contains("embedded server"), "{err}");
    let err = refused("[[faults]]\nkind = \"reboot\"\nat = \"1s\"\n");
    assert!(err.contains("reboot") && err.contains("kill-connections"), "{err}");
    let many = "[[faults]]\nkind = \"script-flush\"\nat = \"1s\"\n".repeat(crate::scenario::faults::MAX_FAULTS + 1);
    assert!(refused(&many).contains("at most 64 [[faults]] entries"));
}

const CLUSTER: &str = "queues = 3\n[target]\ncluster = { primaries = 3, replicas = 1 }\n";

#[test]
fn cluster_faults_resolve_their_queue_lag_restart_and_mode() {
    let plan = faults(&format!(
        "{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"2s\"\nqueue = \"bench-2\"\nlag = \"300ms\"\n\
         restart = true\nduration = \"3s\"\n\
         [[faults]]\nkind = \"cluster-failover\"\nat = \"6s\"\nmode = \"takeover\"\nlag = \"1ms\"\n\
         [[faults]]\nkind = \"cluster-failover\"\nat = \"8s\"\n"
    ))
    .unwrap();
    assert_eq!(
        (plan[0].kind, plan[0].queue, plan[0].lag),
        (FaultKind::KillPrimary, 2, Some(Duration::from_millis(300)))
    );
    assert!(plan[0].restart);
    assert_eq!(plan[0].duration, Duration::from_secs(3));
    assert_eq!((plan[1].failover, plan[1].queue), (crate::scenario::FailoverMode::Takeover, 0));
    assert_eq!((plan[2].failover, plan[2].lag), (crate::scenario::FailoverMode::Default, None));
    assert_eq!(plan[2].needs(), crate::scenario::Needs::Cluster);
    assert_eq!(plan[1].needs(), crate::scenario::Needs::EmbeddedCluster);
    // Without a lag, a cluster failover is any cluster's, a url's included.
    faults("[target]\nurl = \"redis://127.0.0.1:1/\"\n[[faults]]\nkind = \"cluster-failover\"\nat = \"1s\"\nmode = \"force\"\n")
        .unwrap();
}

#[test]
fn cluster_fault_keys_are_refused_where_they_do_not_belong() {
    let url = "[target]\nurl = \"redis://127.0.0.1:1/\"\n";
    let cases = [
        (
            format!("{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\nqueue = \"jobs\"\n"),
            "faults[0].queue",
            "bench-0, bench-1, bench-2",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\nlag = \"61s\"\n"),
            "faults[0].lag",
            "1ms to 1m",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\nrestart = true\n"),
            "faults[0].duration",
            "stays down",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\nduration = \"1s\"\n"),
            "faults[0].duration",
            "without restart = true",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"cluster-failover\"\nat = \"1s\"\nrestart = true\n"),
            "faults[0].restart",
            "only for kind = \"kill-primary\"",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"cluster-failover\"\nat = \"1s\"\nmode = \"all\"\n"),
            "faults[0].mode",
            "\"default\", \"force\" or \"takeover\"",
        ),
        (
            "[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nmode = \"force\"\n".into(),
            "faults[0].mode",
            "\"write\" or \"all\"",
        ),
        (
            "[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nlag = \"1s\"\n".into(),
            "faults[0].lag",
            "only for kind = \"kill-primary\"",
        ),
        (
            "[[faults]]\nkind = \"script-flush\"\nat = \"1s\"\nqueue = \"bench\"\n".into(),
            "faults[0].queue",
            "only for kind",
        ),
        ("[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\n".into(), "faults[0].kind", "the embedded cluster"),
        ("[[faults]]\nkind = \"cluster-failover\"\nat = \"1s\"\n".into(), "faults[0].kind", "a Valkey Cluster"),
        (format!("{url}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\n"), "faults[0].kind", "the embedded cluster"),
        (
            format!("{url}[[faults]]\nkind = \"cluster-failover\"\nat = \"1s\"\nlag = \"300ms\"\n"),
            "faults[0].lag",
            "no lag here",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"freeze\"\nat = \"1s\"\nduration = \"1s\"\n"),
            "faults[0].kind",
            "one embedded server",
        ),
    ];
    for (text, field, expected) in cases {
        let err = refused(&text);
        assert!(err.contains(field) && err.contains(expected), "{text}: {err}");
    }
    let err = refused("[[faults]]\nkind = \"pause\"\nat = \"1s\"\nduration = \"1s\"\nmode = \"bogus\"\n");
    assert!(err.contains("bogus") && err.contains("takeover"), "{err}");
}

#[test]
fn every_kind_is_named_once_and_parses_from_its_name() {
    for kind in FaultKind::ALL {
        let parsed: FaultKind = serde_json::from_value(serde_json::json!(kind.name())).unwrap();
        assert_eq!(parsed, kind);
    }
    let mut names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
    names.dedup();
    assert_eq!(names.len(), FaultKind::ALL.len());
}

#[test]
fn a_partition_resolves_its_queue_duration_and_side_and_refuses_the_rest() {
    let plan = faults(&format!(
        "{CLUSTER}[[faults]]\nkind = \"partition\"\nat = \"2s\"\nqueue = \"bench-1\"\nduration = \"3s\"\n\
         [[faults]]\nkind = \"partition\"\nat = \"6s\"\nduration = \"1s\"\nside = \"majority\"\n"
    ))
    .unwrap();
    assert_eq!((plan[0].kind, plan[0].queue, plan[0].duration), (FaultKind::Partition, 1, Duration::from_secs(3)));
    assert_eq!(plan[0].side, crate::scenario::PartitionSide::Minority, "minority is the default");
    assert_eq!((plan[1].queue, plan[1].side), (0, crate::scenario::PartitionSide::Majority));
    assert_eq!(plan[0].needs(), crate::scenario::Needs::EmbeddedCluster);
    let cases = [
        (format!("{CLUSTER}[[faults]]\nkind = \"partition\"\nat = \"1s\"\n"), "faults[0].duration", "partition lasts"),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"partition\"\nat = \"1s\"\nduration = \"1s\"\nlag = \"1s\"\n"),
            "faults[0].lag",
            "only for kind = \"kill-primary\" or \"cluster-failover\"",
        ),
        (
            format!("{CLUSTER}[[faults]]\nkind = \"kill-primary\"\nat = \"1s\"\nside = \"majority\"\n"),
            "faults[0].side",
            "only for kind = \"partition\"",
        ),
        (
            "[[faults]]\nkind = \"partition\"\nat = \"1s\"\nduration = \"1s\"\n".into(),
            "faults[0].kind",
            "kill or partition a node it started",
        ),
    ];
    for (text, field, expected) in cases {
        let err = refused(&text);
        assert!(err.contains(field) && err.contains(expected), "{text}: {err}");
    }
    let err = refused(&format!(
        "{CLUSTER}[[faults]]\nkind = \"partition\"\nat = \"1s\"\nduration = \"1s\"\nside = \"left\"\n"
    ));
    assert!(err.contains("left") && err.contains("minority"), "{err}");
}
