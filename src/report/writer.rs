//! The one seam every results file goes through: a [`Writer`] per file, all reading one
//! finished model, fanned out by [`write_all`] (hyperfine's `ExportManager` and criterion's
//! `Report` fan-out are the shape). A new format is a new `Writer`, not edits in every command.
//!
//! Every writer writes atomically (`crate::atomic`: `<file>.tmp` and a rename, the `.tmp`
//! removed on failure); [`write_all`] tries every file in order and returns one line per file
//! that could not be written, so a full disk loses only what does not fit.

use super::ReportError;
use std::path::Path;

/// One file of a results folder, written from the model `M`.
pub trait Writer<M: ?Sized> {
    /// The file's name inside the folder, e.g. `summary.json`.
    fn file(&self) -> &'static str;

    /// Writes the file at `path` from `model`, atomically.
    ///
    /// # Errors
    /// A [`ReportError`] naming `path`.
    fn write(&self, path: &Path, model: &M) -> Result<(), ReportError>;
}

/// Writes every writer's file into `dir` from `model`, in the order given; returns one line
/// (`cannot write <path>: <why>`) per file that failed. Every file is attempted.
pub fn write_all<M: ?Sized>(dir: &Path, model: &M, writers: &[&dyn Writer<M>]) -> Vec<String> {
    writers.iter().filter_map(|w| w.write(&dir.join(w.file()), model).err().map(|e| e.to_string())).collect()
}

/// The file names of `writers`, in order (what a folder holds once they all ran).
pub fn files<M: ?Sized>(writers: &[&dyn Writer<M>]) -> Vec<&'static str> {
    writers.iter().map(|w| w.file()).collect()
}
