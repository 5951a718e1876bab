//! `emq-bench report DIR`: re-renders the pictures of an existing results folder from its
//! files, so old results get new pictures without a re-run: `report.html` where the folder
//! has a `summary.json` (and in each `rep-NNN/`, `A/` and `B/` folder under it), `compare.html`
//! where it has a `compare.json`, `capacity.html` where it has a `capacity.json` (and the
//! report.html of each of its `probe-NN-RATE/` folders).

pub use crate::cli::report::ReportArgs;
use crate::error::AppError;
use std::path::{Path, PathBuf};

/// Renders every page `args.dir` has the data for; returns the files written.
///
/// Errors: [`AppError::Usage`] (exit 2) when the folder holds no results, or a results file
/// in it is malformed (naming the file).
pub fn report(args: ReportArgs) -> Result<Vec<PathBuf>, AppError> {
    let mut written = Vec::new();
    render(&args.dir, &mut written)?;
    if written.is_empty() {
        return Err(AppError::Usage(format!(
            "{}: no results to render (no summary.json, compare.json or capacity.json in it or its rep-NNN/, A/, B/, probe-NN-RATE/ folders)",
            args.dir.display()
        )));
    }
    Ok(written)
}

fn render(dir: &Path, written: &mut Vec<PathBuf>) -> Result<(), AppError> {
    let bad = |e: crate::report::ReportError| AppError::Usage(e.to_string());
    if dir.join("summary.json").is_file() {
        written.push(crate::html::write_report(dir).map_err(bad)?);
    }
    if dir.join("compare.json").is_file() {
        written.push(crate::html::compare::write_compare(dir).map_err(bad)?);
    }
    if dir.join(crate::capacity::CAPACITY_FILE).is_file() {
        written.push(crate::html::capacity::rewrite_capacity_html(dir).map_err(bad)?);
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut subs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            p.is_dir() && (name.starts_with("rep-") || name.starts_with("probe-") || name == "A" || name == "B")
        })
        .collect();
    subs.sort();
    for sub in subs {
        render(&sub, written)?;
    }
    Ok(())
}
