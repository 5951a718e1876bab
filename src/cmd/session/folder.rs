//! The results folder: where it is, that it holds no earlier run's results, and the copy of
//! the scenario it keeps (its password masked).

use super::writers::run_writers;
use crate::error::AppError;
use crate::scenario;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a run, `--repeat` or `ab` writes into its folder besides the files of the
/// [`run_writers`] (`history.bin`, written as the run records it, among them): a folder that
/// holds any of them holds an earlier run's results, which a new run must not mix its own into.
pub(super) const OTHER_ENTRIES: [&str; 10] = [
    super::HISTORY_FILE,
    // A history's second segment: one left beside a new history.bin would be read as its own.
    "history.1.bin",
    "merged.json",
    "compare.json",
    "compare.md",
    "compare.html",
    "rep-001",
    "A",
    "B",
    "warmup",
];

/// Checks `--out` before any server is touched: it is created when missing (exit 2 when it
/// cannot be), and refused (exit 2) when it already holds an earlier run's results.
///
/// Errors: [`AppError::Usage`] naming the folder and what is in it.
pub fn check_out(out: Option<&Path>) -> Result<(), AppError> {
    let Some(dir) = out else { return Ok(()) };
    std::fs::create_dir_all(dir)
        .map_err(|e| AppError::Usage(format!("--out {}: cannot be created: {e}", dir.display())))?;
    let run_files = crate::report::writer::files(&run_writers());
    if let Some(found) = run_files.iter().chain(&OTHER_ENTRIES).find(|name| dir.join(name).exists()) {
        return Err(AppError::Usage(format!(
            "--out {}: it already holds an earlier run's results ({found}); choose an empty or new folder",
            dir.display()
        )));
    }
    Ok(())
}

/// `--out`, or `results/<UTC time>-<name>` (e.g. `results/20261130T054200Z-smoke`).
pub fn results_dir(out: Option<&Path>, name: &str) -> Result<PathBuf, AppError> {
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => {
            let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now())
                .to_string()
                .chars()
                .filter(|c| !matches!(c, '-' | ':'))
                .collect();
            Path::new("results").join(format!("{stamp}-{name}"))
        }
    };
    std::fs::create_dir_all(&dir).map_err(|source| AppError::Io { path: dir.display().to_string(), source })?;
    Ok(dir)
}

/// Copies the scenario file into the results folder, with the password of its `[target] url`
/// (if it has one) masked: a result file never holds a password. With `settings` (`--set`,
/// `--rate`) it is the scenario the run read, the settings written in and named in a first
/// comment line.
pub(super) fn copy_scenario(
    scenario: &Path,
    settings: &[scenario::settings::Setting],
    url: Option<&str>,
    dir: &Path,
) -> Result<(), AppError> {
    let io = |path: &Path, source| AppError::Io { path: path.display().to_string(), source };
    let mut text = scenario::read_text(scenario)?;
    if !settings.is_empty() {
        let given: Vec<String> = settings.iter().map(|s| format!("--set {}", s.text())).collect();
        let applied = scenario::settings::apply(&text, settings, scenario)?;
        text = format!("# {} with {}\n{applied}", scenario.display(), given.join(" "));
    }
    if let Some(url) = url {
        text = text.replace(url, &scenario::redact_url(url));
    }
    let to = dir.join("scenario.toml");
    std::fs::write(&to, text).map_err(|e| io(&to, e))?;
    Ok(())
}
