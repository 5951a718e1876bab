//! `report.html`: one self-contained page per results folder (inline SVG and CSS, no script,
//! no URL of any kind), rendered from the folder's files ([`model`] reads them, [`chart`] draws
//! one plot, [`page`] lays them out); `compare.html` from a `compare.json` ([`compare`]).
pub mod capacity;
pub mod chart;
pub mod compare;
pub mod model;
pub mod page;
mod parts;

use crate::report::results::RunResults;
use crate::report::writer::Writer;
use crate::report::ReportError;
use std::path::{Path, PathBuf};

/// The page's file name.
pub const REPORT_FILE: &str = "report.html";

/// Renders report.html for the results folder `dir` from its files.
///
/// # Errors
/// As [`model::RunView::load`]: summary.json unreadable, or a file malformed.
pub fn render_dir(dir: &Path) -> Result<String, ReportError> {
    Ok(page::render(&model::RunView::load(dir)?))
}

/// Writes `dir/report.html` (atomically) from the folder's files; returns its path.
///
/// # Errors
/// As [`render_dir`], or the write's [`ReportError::Io`].
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let html = render_dir(dir)?;
    let path = dir.join(REPORT_FILE);
    crate::report::write_text(&path, &html)?;
    Ok(path)
}

/// `report.html` as a run's writer: it reads back the files written before it.
pub struct ReportHtml;
impl Writer<RunResults<'_>> for ReportHtml {
    fn file(&self) -> &'static str {
        REPORT_FILE
    }
    fn write(&self, path: &Path, _run: &RunResults) -> Result<(), ReportError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        write_report(dir).map(drop)
    }
}
