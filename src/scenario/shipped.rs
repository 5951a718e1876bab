//! The shipped scenarios, built into the binary from `scenarios/` when it is compiled:
//! `emq-bench run smoke` runs `scenarios/smoke.toml` from any directory. A path that exists
//! is always read from disk first.

/// `(name, text)` of every shipped scenario; the name is the file's, without `.toml`.
pub const SHIPPED: [(&str, &str); 12] = [
    ("bullmq-fencing-soak", include_str!("../../scenarios/bullmq-fencing-soak.toml")),
    ("bullmq-smoke", include_str!("../../scenarios/bullmq-smoke.toml")),
    ("bullmq-throughput", include_str!("../../scenarios/bullmq-throughput.toml")),
    ("failover", include_str!("../../scenarios/failover.toml")),
    ("fencing-soak", include_str!("../../scenarios/fencing-soak.toml")),
    ("nemesis", include_str!("../../scenarios/nemesis.toml")),
    ("open-loop", include_str!("../../scenarios/open-loop.toml")),
    ("opts-mix", include_str!("../../scenarios/opts-mix.toml")),
    ("ramp", include_str!("../../scenarios/ramp.toml")),
    ("regress", include_str!("../../scenarios/regress.toml")),
    ("smoke", include_str!("../../scenarios/smoke.toml")),
    ("throughput", include_str!("../../scenarios/throughput.toml")),
];

/// The text of the shipped scenario `name` (`smoke`, or `smoke.toml`), if there is one.
pub fn shipped(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".toml").unwrap_or(name);
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The shipped scenarios' names, for a message that lists them.
pub fn names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(n, _)| *n).collect()
}
