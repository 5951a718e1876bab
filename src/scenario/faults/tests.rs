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
