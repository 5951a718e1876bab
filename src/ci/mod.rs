//! What CI reads of a run, a comparison or a cost measurement, beside the exit code:
//!
//! | file | module | read by |
//! | --- | --- | --- |
//! | `junit.xml` (every results folder) | [`junit`], [`run`], [`compare`] | Jenkins, GitLab, GitHub test reporters |
//! | `summary.md` (a run's folder) | [`summary_md`] | `$GITHUB_STEP_SUMMARY`, a PR comment |
//! | `--export-bmf FILE` | [`bmf`] | Bencher (`bencher run --adapter json`) |
//! | `--export-gab FILE` | [`gab`] | github-action-benchmark (`tool: customSmallerIsBetter`) |
//!
//! Every file is written atomically and read only from the finished results model.

pub mod bmf;
pub mod compare;
pub mod gab;
pub mod junit;
pub mod run;
pub mod summary_md;

pub use run::Exports;
