//! `--export-bmf` and `--export-gab` of `run`, `compare` and `cost`: checked before any work
//! (a folder that does not exist is a usage error, exit 2, not a lost hour of load), written
//! after it through [`crate::ci::Exports`].

use crate::ci::Exports;
use crate::cli::export::ExportArgs;
use crate::error::AppError;
use std::path::Path;

/// The files `args` asks for.
pub fn of(args: &ExportArgs) -> Exports<'_> {
    Exports { bmf: args.export_bmf.as_deref(), gab: args.export_gab.as_deref() }
}

/// Checks that every export file's folder exists and that the file is not a folder.
///
/// Errors: [`AppError::Usage`] naming the flag and the file.
pub fn check(args: &ExportArgs) -> Result<(), AppError> {
    for (flag, path) in [("--export-bmf", &args.export_bmf), ("--export-gab", &args.export_gab)] {
        let Some(path) = path else { continue };
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(AppError::Usage(format!(
                "{flag} {}: its folder {} does not exist",
                path.display(),
                parent.display()
            )));
        }
        if path.is_dir() {
            return Err(AppError::Usage(format!("{flag} {}: is a folder; expected a file name", path.display())));
        }
    }
    Ok(())
}

/// Writes what `args` asks for, each file atomically; every file is attempted. Returns one
/// line per file not written (`cannot write <file>: <why>`): `run` prints each after `FAIL`
/// (exit 1, its folder still written), `compare` and `cost` end with them (exit 2, as a
/// `--out` not written).
pub fn write(
    args: &ExportArgs,
    bmf: impl FnOnce() -> crate::ci::bmf::Bmf,
    gab: impl FnOnce() -> Vec<crate::ci::gab::Entry>,
) -> Vec<String> {
    of(args).write(bmf, gab)
}
