//! `run`'s metrics endpoint flags.

use clap::Args;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Longest `--metrics-linger`: a few scrape intervals of any usual Prometheus setup.
pub const MAX_METRICS_LINGER: Duration = Duration::from_secs(600);

/// The Prometheus endpoint of a run (`--metrics-addr`, `--metrics-linger`).
#[derive(Debug, Clone, Default, Args)]
pub struct MetricsArgs {
    /// Serve the run's figures as Prometheus text at http://HOST:PORT/metrics while it lasts
    /// (calls, errors by code, latency histograms, job counters, queue depths, rates, faults,
    /// the server's CPU and memory). Port 0 picks a free port; the address bound is printed on
    /// stderr. Off by default.
    #[arg(env = "EMQ_METRICS_ADDR", long, value_name = "HOST:PORT", value_parser = parse_metrics_addr)]
    pub metrics_addr: Option<SocketAddr>,
    /// How long the endpoint keeps serving the final figures after the run (e.g. `15s`: one
    /// scrape interval, so the last scrape sees the final counters). A stop signal cuts it short.
    #[arg(env = "EMQ_METRICS_LINGER", long, value_name = "DURATION", value_parser = parse_metrics_linger, default_value = "0s")]
    pub metrics_linger: Duration,
}

/// `--metrics-addr`: HOST:PORT, the host a name or an address (IPv6 in brackets).
///
/// # Errors
/// A message for clap (exit 2) naming the expected shape, or why the host did not resolve.
pub(crate) fn parse_metrics_addr(text: &str) -> Result<SocketAddr, String> {
    if text.rsplit_once(':').is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err()) {
        return Err("expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:0 (port 0 picks a free one)".into());
    }
    let mut addrs = text.to_socket_addrs().map_err(|e| format!("cannot resolve {text}: {e}"))?;
    addrs.next().ok_or_else(|| format!("{text} resolves to no address"))
}

/// `--metrics-linger`: a duration of at most [`MAX_METRICS_LINGER`].
///
/// # Errors
/// A message for clap (exit 2) naming the accepted shape or the bound.
fn parse_metrics_linger(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("expected a duration such as 15s: {e}"))?;
    if d > MAX_METRICS_LINGER {
        return Err(format!("at most {}", humantime::format_duration(MAX_METRICS_LINGER)));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_needs_a_host_and_a_port() {
        assert_eq!(parse_metrics_addr("127.0.0.1:0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_metrics_addr("[::1]:9464").unwrap(), "[::1]:9464".parse().unwrap());
        for bad in ["9464", ":9464", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"] {
            assert!(parse_metrics_addr(bad).unwrap_err().contains("HOST:PORT"), "{bad}");
        }
    }

    #[test]
    fn a_linger_is_bounded() {
        assert_eq!(parse_metrics_linger("3s").unwrap(), Duration::from_secs(3));
        assert!(parse_metrics_linger("11m").is_err());
        assert!(parse_metrics_linger("soon").is_err());
    }
}
