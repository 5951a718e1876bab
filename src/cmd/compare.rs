//! `emq-bench compare BASE NEW`: compare two results folders and give a verdict per metric and
//! overall (0 pass, 1 regression, 3 inconclusive; 2 for an unreadable folder or a bad option).

use std::path::Path;

pub use crate::cli::compare::{parse_fraction, CompareArgs, CompareFlags};
use crate::compare::{self, CompareOptions, Comparison, Overall};
use crate::error::AppError;
use crate::report::{write_all, ReportError, Writer};

/// What `compare` produced, for `main` to print and turn into an exit code.
#[derive(Debug, Clone)]
pub struct CompareResult {
    /// The whole comparison (what compare.json holds).
    pub comparison: Comparison,
    /// The text to print on stdout: the table, or the Markdown with `--markdown`.
    pub output: String,
    /// The overall verdict; [`Overall::exit_code`] gives 0, 1 or 3.
    pub verdict: Overall,
}

impl CompareArgs {
    /// The options: the flags given, [`CompareOptions::default`] for the rest, checked.
    /// Errors: [`AppError::Usage`] naming the option out of range.
    pub fn options(&self) -> Result<CompareOptions, AppError> {
        let d = CompareOptions::default();
        let options = CompareOptions {
            alpha: self.flags.alpha.unwrap_or(d.alpha),
            noise_throughput: self.flags.noise_throughput.unwrap_or(d.noise_throughput),
            noise_p50: self.flags.noise_p50.unwrap_or(d.noise_p50),
            noise_tail: self.flags.noise_tail.unwrap_or(d.noise_tail),
            max_cv: self.flags.max_cv.unwrap_or(d.max_cv),
            seed: self.seed.unwrap_or(d.seed),
            ..d
        };
        options.validate().map_err(|e| AppError::Usage(format!("compare: {e}")))?;
        Ok(options)
    }
}

/// Loads both folders, compares them, renders the output and writes `--out` files.
///
/// Errors, all [`AppError::Usage`] so that they exit 2 and never look like a regression (exit 1):
/// a bad option, a folder that is not a readable results folder (the message names the path),
/// or an `--out` folder that cannot be written.
pub fn compare(args: CompareArgs) -> Result<CompareResult, AppError> {
    let options = args.options()?;
    super::exports::check(&args.export)?;
    let load =
        |dir: &Path| compare::load_results_with(dir, args.flags.latency).map_err(|e| AppError::Usage(e.to_string()));
    let (base, new) = (load(&args.base)?, load(&args.new)?);
    let comparison = compare::compare_results(&base, &new, &options);
    if let Some(dir) = &args.out {
        write_outputs(dir, &comparison)?;
    }
    let errors = super::exports::write(
        &args.export,
        || crate::ci::compare::bmf(&comparison),
        || crate::ci::compare::gab(&comparison),
    );
    if !errors.is_empty() {
        return Err(AppError::Usage(errors.join("; ")));
    }
    let output = match args.flags.markdown {
        true => compare::format_markdown(&comparison),
        false => compare::format_table(&comparison),
    };
    Ok(CompareResult { verdict: comparison.verdict, comparison, output })
}

/// `compare.json`: the whole [`Comparison`], pretty.
struct CompareJson;
impl Writer<Comparison> for CompareJson {
    fn file(&self) -> &'static str {
        "compare.json"
    }
    fn write(&self, path: &Path, comparison: &Comparison) -> Result<(), ReportError> {
        crate::report::write_json(path, comparison)
    }
}

/// `compare.md`: the Markdown table.
struct CompareMd;
impl Writer<Comparison> for CompareMd {
    fn file(&self) -> &'static str {
        "compare.md"
    }
    fn write(&self, path: &Path, comparison: &Comparison) -> Result<(), ReportError> {
        crate::report::write_text(path, &compare::format_markdown(comparison))
    }
}

/// `compare.html`: the pictures.
struct CompareHtml;
impl Writer<Comparison> for CompareHtml {
    fn file(&self) -> &'static str {
        crate::html::compare::COMPARE_FILE
    }
    fn write(&self, path: &Path, comparison: &Comparison) -> Result<(), ReportError> {
        crate::html::compare::write_compare_html(path, comparison)
    }
}

/// `junit.xml`: a case per metric verdict (`ci::compare`).
struct CompareJunit;
impl Writer<Comparison> for CompareJunit {
    fn file(&self) -> &'static str {
        crate::ci::junit::JUNIT_FILE
    }
    fn write(&self, path: &Path, comparison: &Comparison) -> Result<(), ReportError> {
        crate::ci::compare::junit(comparison).write(path)
    }
}

/// Writes `compare.json`, `compare.md`, `compare.html` and `junit.xml` into `dir`, each
/// atomically; every file is attempted. Errors: [`AppError::Usage`] listing every file that
/// could not be written.
fn write_outputs(dir: &Path, comparison: &Comparison) -> Result<(), AppError> {
    std::fs::create_dir_all(dir).map_err(|e| AppError::Usage(format!("{}: {e}", dir.display())))?;
    let errors = write_all(dir, comparison, &[&CompareJson, &CompareMd, &CompareHtml, &CompareJunit]);
    match errors.is_empty() {
        true => Ok(()),
        false => Err(AppError::Usage(errors.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A minimal parser to check the flags as `main` will see them.
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CompareArgs,
    }

    fn write_run(dir: &Path, p50: u64) {
        std::fs::create_dir_all(dir).unwrap();
        let summary = serde_json::json!({
            "schema_version": 2, "interrupted": false, "measured_secs": 10.0,
            "jobs": {"completed": 1000},
            "scripts": [{"script": "claim", "ops_per_sec": 100.0,
                         "latency_us": {"p50": p50, "p99": 900, "p999": 1500}}],
        });
        std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
    }

    #[test]
    fn fractions_take_percent_or_decimal() {
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert_eq!(parse_fraction("0.15"), Ok(0.15));
        assert!(parse_fraction("5").unwrap_err().contains("5% or 0.05"));
        assert!(parse_fraction("x%").is_err());
    }

    #[test]
    fn flags_override_the_defaults_and_bad_values_are_usage_errors() {
        let cli = Cli::try_parse_from(["c", "a", "b", "--noise-tail", "20%", "--alpha", "0.05"]).unwrap();
        let o = cli.args.options().unwrap();
        assert_eq!((o.noise_tail, o.alpha, o.noise_p50), (0.2, 0.05, 0.05));
        let cli = Cli::try_parse_from(["c", "a", "b", "--alpha", "2"]).unwrap();
        assert!(matches!(cli.args.options(), Err(AppError::Usage(m)) if m.contains("alpha")));
    }

    #[test]
    fn single_runs_are_inconclusive_and_outputs_are_written() {
        let tmp = tempfile::tempdir().unwrap();
        let (base, new, out) = (tmp.path().join("base"), tmp.path().join("new"), tmp.path().join("out"));
        write_run(&base, 100);
        write_run(&new, 200);
        let cli = Cli::try_parse_from(["c", base.to_str().unwrap(), new.to_str().unwrap(), "--out"]);
        assert!(cli.is_err(), "--out needs a value");
        let args = Cli::try_parse_from([
            "c",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--markdown",
        ])
        .unwrap()
        .args;
        let result = compare(args).unwrap();
        assert_eq!(result.verdict, Overall::Inconclusive, "one run a side");
        assert!(result.comparison.metrics.iter().all(|m| m.reason.contains("fewer than 3")));
        assert!(result.output.starts_with("### emq-bench compare: inconclusive"), "{}", result.output);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
        assert_eq!(json["verdict"], "inconclusive");
        assert!(out.join("compare.md").is_file());
    }

    #[test]
    fn a_folder_without_summaries_is_a_usage_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let args = Cli::try_parse_from(["c", tmp.path().to_str().unwrap(), tmp.path().to_str().unwrap()]).unwrap().args;
        match compare(args) {
            Err(AppError::Usage(m)) => assert!(m.contains("no summary.json"), "{m}"),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }
}
