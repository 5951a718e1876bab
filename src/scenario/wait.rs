//! `[target] wait = { replicas = 1, timeout = "100ms" }`: when a state-changing call counts as
//! acknowledged. Every script call of the load is then followed by `WAIT <replicas> <timeout>`
//! on its connection, and counts only when the `WAIT` reports enough replicas; see
//! [`Durability`] for what that bounds, and `resp::pipe` for how it travels.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bounds::{MAX_WAIT_REPLICAS, MAX_WAIT_TIMEOUT};
use super::context::Ctx;
use super::error::ScenarioError;
use super::target::TargetTable;
use super::units::HumanDuration;
use crate::net::Durability;

/// The raw `wait` table of `[target]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitTable {
    /// Replicas that must acknowledge each call (1..=16; default 1).
    #[serde(default = "one_replica")]
    pub replicas: u64,
    /// `WAIT`'s timeout (1 ms..=60 s; default 100 ms). `"0ms"` is refused: to Valkey it
    /// means wait forever, which would hang a run on the first replica that falls behind.
    #[serde(default = "default_timeout")]
    pub timeout: HumanDuration,
}

fn one_replica() -> u64 {
    1
}

fn default_timeout() -> HumanDuration {
    HumanDuration::parse("100ms").expect("a valid duration")
}

/// `target.wait`, checked: [`Durability::Primary`] when absent.
///
/// # Errors
/// [`ScenarioError::Invalid`] naming `target.wait.replicas` or `target.wait.timeout` with the
/// bound it breaks.
pub(crate) fn durability(cx: &Ctx, t: &TargetTable) -> Result<Durability, ScenarioError> {
    let Some(w) = &t.wait else { return Ok(Durability::Primary) };
    if !(1..=MAX_WAIT_REPLICAS).contains(&w.replicas) {
        let expected = format!("1..={MAX_WAIT_REPLICAS} replicas that must acknowledge each call");
        return Err(cx.err("target.wait.replicas", w.replicas, expected));
    }
    let timeout = w.timeout.get();
    if timeout < Duration::from_millis(1) || timeout > MAX_WAIT_TIMEOUT {
        let expected = "1ms..=60s (WAIT's timeout; 0 would wait forever)";
        return Err(cx.err("target.wait.timeout", format!("{:?}", w.timeout.as_str()), expected));
    }
    // WAIT takes whole milliseconds: a sub-millisecond part would be sent as less than given.
    if timeout.subsec_nanos() % 1_000_000 != 0 {
        let expected = "a whole number of milliseconds (WAIT's unit)";
        return Err(cx.err("target.wait.timeout", format!("{:?}", w.timeout.as_str()), expected));
    }
    Ok(Durability::Wait { replicas: w.replicas as u32, timeout })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;
    use std::path::Path;

    const BASE: &str = "name = \"t\"\nseed = 1\nduration = \"1s\"\n[target]\n";

    fn durability_of(wait: &str) -> Result<Durability, String> {
        parse(&format!("{BASE}{wait}"), Path::new("w.toml")).map(|p| p.durability).map_err(|e| e.to_string())
    }

    fn refused(wait: &str, needles: &[&str]) {
        let err = durability_of(wait).expect_err(wait);
        assert!(err.starts_with("w.toml"), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{needle:?} missing from: {err}");
        }
    }

    #[test]
    fn a_wait_table_resolves_with_its_defaults_and_its_absence_is_the_primary_alone() {
        let ms = Duration::from_millis;
        assert_eq!(durability_of(""), Ok(Durability::Primary));
        let wait = |replicas, timeout| Ok(Durability::Wait { replicas, timeout });
        assert_eq!(durability_of("wait = { replicas = 1, timeout = \"100ms\" }"), wait(1, ms(100)));
        assert_eq!(durability_of("wait = { replicas = 2 }"), wait(2, ms(100)));
        assert_eq!(durability_of("wait = {}"), wait(1, ms(100)));
        assert_eq!(durability_of("wait = { replicas = 16, timeout = \"60s\" }"), wait(16, ms(60_000)));
        assert_eq!(durability_of("wait = { timeout = \"1ms\" }"), wait(1, ms(1)));
        let url = "url = \"redis://127.0.0.1:7000\"\nwait = { replicas = 1 }";
        assert_eq!(durability_of(url), wait(1, ms(100)), "a deployment's replicas are waited for too");
    }

    #[test]
    fn a_wait_out_of_bounds_or_with_an_unknown_key_is_refused_naming_the_field() {
        refused("wait = { replicas = 0 }", &["target.wait.replicas = 0", "1..=16"]);
        refused("wait = { replicas = 17 }", &["target.wait.replicas = 17", "1..=16"]);
        refused("wait = { timeout = \"0ms\" }", &["target.wait.timeout = \"0ms\"", "1ms..=60s", "forever"]);
        refused("wait = { timeout = \"61s\" }", &["target.wait.timeout = \"61s\"", "1ms..=60s"]);
        refused("wait = { timeout = \"1500us\" }", &["target.wait.timeout", "whole number of milliseconds"]);
        refused("wait = { replicas = 1, timout = \"5ms\" }", &["unknown field `timout`"]);
        refused("wait = { timeout = 100 }", &["duration string"]);
    }

    #[test]
    fn a_set_writes_the_wait_table_or_one_of_its_keys() {
        use crate::scenario::settings::{apply, Setting};
        let path = Path::new("w.toml");
        let text = format!("{BASE}server = {{}}\n");
        let read = |settings: &[&str]| {
            let settings: Vec<Setting> = settings.iter().map(|s| Setting::parse(s).unwrap()).collect();
            parse(&apply(&text, &settings, path).unwrap(), path).map(|p| p.durability)
        };
        let whole = read(&["target.wait={ replicas = 1, timeout = \"50ms\" }"]).unwrap();
        assert_eq!(whole, Durability::Wait { replicas: 1, timeout: Duration::from_millis(50) });
        let keys = read(&["target.wait.replicas=2", "target.wait.timeout=20ms"]).unwrap();
        assert_eq!(keys, Durability::Wait { replicas: 2, timeout: Duration::from_millis(20) });
        assert!(read(&["target.wait.replicas=0"]).unwrap_err().to_string().contains("target.wait.replicas"));
    }
}
