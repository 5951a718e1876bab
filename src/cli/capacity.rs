//! `emq-bench capacity`'s flags.

use super::RunArgs;

/// `emq-bench capacity SCENARIO --slo "claim.p99 < 5ms" [--slo ...]`: the run's flags (target,
/// `--lua-dir`, `--out`, threads, ...) and the search's own.
#[derive(Debug, Clone, clap::Args)]
pub struct CapacityArgs {
    /// A latency objective, `<script>.p<N> < <limit>` (or `<=`), N above 0 and below 100 (p50,
    /// p95, p99, p99.9, ...), e.g. "claim.p99 < 5ms"; repeatable: every one must hold.
    #[arg(env = "EMQ_SLO", long = "slo", value_name = "OBJECTIVE", required = true, value_delimiter = ';')]
    pub slos: Vec<String>,
    /// The whole search's wall-time budget; it stops with what it knows when the next probe
    /// would not fit (exit 3 unless the answer was reached).
    #[arg(env = "EMQ_BUDGET", long, value_parser = super::parse_run_length, default_value = "5m")]
    pub budget: std::time::Duration,
    /// The base probe's measured length (after the scenario's warmup); near the answer a probe
    /// lasts twice as long, the re-check three times. At least 8 s: steadiness needs 8 points.
    #[arg(env = "EMQ_PROBE", long, value_parser = parse_probe, default_value = "8s")]
    pub probe: std::time::Duration,
    /// The first rate offered, jobs/s (default: the scenario's `producers.rate`, else 1000).
    #[arg(env = "EMQ_START_RATE", long, value_name = "JOBS_PER_S")]
    pub start_rate: Option<f64>,
    /// Done when the bracket around the answer is narrower than this share of its low end.
    #[arg(env = "EMQ_TOLERANCE", long, default_value_t = 0.05, value_parser = parse_tolerance)]
    pub tolerance: f64,
    /// The scenario, target and run flags, as `run` takes them (`--rate`, `--duration`,
    /// `--repeat` and `--shards` are the search's to set, and refused).
    #[command(flatten)]
    pub run: RunArgs,
}

fn parse_probe(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))?;
    if d < std::time::Duration::from_secs(8) || d > std::time::Duration::from_secs(3600) {
        return Err(format!("{s:?}: expected 8s to 1h (a steadiness check needs 8 whole seconds)"));
    }
    Ok(d)
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if (0.005..=0.5).contains(&t) => Ok(t),
        _ => Err(format!("{s:?}: expected a share between 0.005 and 0.5 (0.05: 5 %)")),
    }
}
