//! A soak's growth: how fast the server's memory, the harness's memory and the results folder
//! grow over the load, as Theil–Sen slopes (robust to the steps a reap or a rotation makes) of
//! samples taken every [`EVERY_S`], and what a 24-hour soak at that rate needs. A flat run
//! shows slopes near 0; one that keeps every job shows the server's cost per job times the rate.

use crate::stats::trend::{mann_kendall_binned, MIN_POINTS};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Seconds between samples: a week of them is 120 960, about 3 MB.
pub const EVERY_S: f64 = 5.0;

/// One sample: what each measured thing held at `t_s` (s since the run start); `None` where it
/// could not be read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowthSample {
    /// Seconds since the run start.
    pub t_s: f64,
    /// The server's `used_memory`, bytes, summed over the nodes that answered.
    pub server_memory: Option<u64>,
    /// The harness's resident memory, bytes.
    pub client_rss: Option<u64>,
    /// The results folder's files, bytes.
    pub results: Option<u64>,
}

/// Takes a sample every [`EVERY_S`] of the run, from what the caller offers once a second.
#[derive(Debug, Default)]
pub struct GrowthSampler {
    next_s: f64,
    samples: Vec<GrowthSample>,
}

impl GrowthSampler {
    /// Takes the sample `take` makes when `t_s` (s since the run start) reached the next
    /// sampling time; otherwise does nothing (and does not call `take`).
    pub fn offer(&mut self, t_s: f64, take: impl FnOnce() -> GrowthSample) {
        if t_s >= self.next_s {
            self.samples.push(take());
            self.next_s = t_s + EVERY_S;
        }
    }

    /// The growth over the samples taken between `from_s` and `to_s` (the measured load);
    /// `None` when fewer than the trend test's minimum (8) fall there.
    pub fn growth(&self, from_s: f64, to_s: f64) -> Option<Growth> {
        let window: Vec<&GrowthSample> = self.samples.iter().filter(|s| s.t_s >= from_s && s.t_s <= to_s).collect();
        if window.len() < MIN_POINTS {
            return None;
        }
        let span_s = window.last()?.t_s - window.first()?.t_s;
        let slope = |value: fn(&GrowthSample) -> Option<u64>| -> Option<Rate> {
            let series: Vec<f64> = window.iter().filter_map(|s| value(s)).map(|b| b as f64).collect();
            if series.len() < MIN_POINTS {
                return None;
            }
            let step_s = span_s / (series.len() - 1) as f64;
            let trend = mann_kendall_binned(&series)?;
            let per_s = trend.slope / step_s.max(f64::MIN_POSITIVE);
            let end = *series.last()?;
            // What the run would hold at 24 h: where it ended, plus the slope over the rest.
            let at_24h = end + per_s.max(0.0) * (DAY_S - to_s).max(0.0);
            Some(Rate { mb_per_h: per_s * 3600.0 / 1e6, end_mb: end / 1e6, at_24h_mb: at_24h / 1e6 })
        };
        Some(Growth {
            window_s: span_s.round() as u64,
            samples: window.len(),
            server_memory: slope(|s| s.server_memory),
            client_rss: slope(|s| s.client_rss),
            results: slope(|s| s.results),
        })
    }
}

/// A day, s.
const DAY_S: f64 = 86_400.0;

/// summary.json's `growth`: each measured thing's rate over the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    /// Seconds between the first and the last sample used.
    pub window_s: u64,
    /// Samples used (one every 5 s).
    pub samples: usize,
    /// The server's `used_memory` (every node's, summed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_memory: Option<Rate>,
    /// The harness's resident memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_rss: Option<Rate>,
    /// The results folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Rate>,
}

/// One thing's growth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Theil–Sen slope, MB (10^6 bytes) per hour.
    pub mb_per_h: f64,
    /// The last sample, MB.
    pub end_mb: f64,
    /// What a 24-hour run would reach at this rate (the last sample plus the slope over the
    /// rest of the day; a falling slope counts as flat), MB.
    pub at_24h_mb: f64,
}

impl Growth {
    /// The table's line: `growth over 235 s: server memory +0.1 MB/h, harness RSS +13.5 MB/h,
    /// results +290.0 MB/h; a 24 h soak at these rates: server 14 MB, harness 40 MB, results
    /// 7 000 MB`.
    pub fn line(&self) -> String {
        let named =
            [("server memory", self.server_memory), ("harness RSS", self.client_rss), ("results", self.results)];
        let rates: Vec<String> =
            named.iter().filter_map(|(name, r)| r.map(|r| format!("{name} {:+.1} MB/h", r.mb_per_h))).collect();
        let day: Vec<String> = named
            .iter()
            .filter_map(|(name, r)| {
                r.map(|r| format!("{} {:.0} MB", name.split(' ').next().unwrap_or(name), r.at_24h_mb))
            })
            .collect();
        format!(
            "growth over {} s of load: {}; a 24 h soak at these rates: {}",
            self.window_s,
            rates.join(", "),
            day.join(", ")
        )
    }
}

/// The resident memory of this process, bytes (Linux `/proc/self/statm`); `None` elsewhere.
pub fn own_rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The bytes of the files in `dir` and in its folders (two levels down: the shard and part
/// folders a run writes); `None` when `dir` cannot be read.
pub fn folder_bytes(dir: &Path) -> Option<u64> {
    fn walk(dir: &Path, depth: u32) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
        entries
            .flatten()
            .map(|entry| match entry.metadata() {
                Ok(m) if m.is_file() => m.len(),
                Ok(m) if m.is_dir() && depth > 0 => walk(&entry.path(), depth - 1),
                _ => 0,
            })
            .sum()
    }
    std::fs::metadata(dir).ok()?;
    Some(walk(dir, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series rising by 1 MB a minute, another flat, sampled every 5 s over 4 minutes: the
    /// slopes are 60 and 0 MB/h, and the day's projection follows.
    #[test]
    fn the_slopes_are_per_hour_and_the_day_projected() {
        let mut sampler = GrowthSampler::default();
        for second in 0..=240 {
            let t_s = f64::from(second);
            sampler.offer(t_s, || GrowthSample {
                t_s,
                server_memory: Some(10_000_000 + (t_s * 1e6 / 60.0) as u64),
                client_rss: Some(25_000_000),
                results: None,
            });
        }
        let growth = sampler.growth(0.0, 240.0).unwrap();
        assert_eq!((growth.samples, growth.window_s), (49, 240));
        let server = growth.server_memory.unwrap();
        assert!((server.mb_per_h - 60.0).abs() < 0.1, "{server:?}");
        assert!((server.at_24h_mb - (14.0 + 60.0 * (24.0 - 4.0 / 60.0))).abs() < 1.0, "{server:?}");
        assert_eq!(growth.client_rss.unwrap().mb_per_h, 0.0);
        assert!(growth.results.is_none());
        assert!(growth.line().contains("server memory +60.0 MB/h, harness RSS +0.0 MB/h"), "{}", growth.line());
        assert!(sampler.growth(0.0, 30.0).is_none(), "7 samples are too few");
    }

    #[test]
    fn this_process_has_a_resident_size_and_a_folder_its_files() {
        assert!(own_rss().is_some_and(|b| b > 1 << 20));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        std::fs::create_dir(dir.path().join("shard-000")).unwrap();
        std::fs::write(dir.path().join("shard-000/b"), [0u8; 20]).unwrap();
        assert_eq!(folder_bytes(dir.path()), Some(120));
        assert_eq!(folder_bytes(&dir.path().join("none")), None);
    }
}
