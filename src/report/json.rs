//! Pretty JSON files (summary.json is assembled by the caller from [`ScriptSummary`](super::ScriptSummary)s).

use std::path::Path;

use serde::Serialize;

use super::{write_atomic, ReportError};

/// Write `value` as pretty JSON to `path`, atomically (`<path>.tmp`, then rename).
///
/// # Errors
/// [`ReportError::Json`] if encoding fails, [`ReportError::Io`] if the file cannot be written; both
/// carry `path`.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), ReportError> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, value)
            .map_err(|source| ReportError::Json { path: path.to_path_buf(), source })?;
        std::io::Write::write_all(w, b"\n").map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
    })
}
