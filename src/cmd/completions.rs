//! `emq-bench completions SHELL` and `emq-bench man`: generated from the one clap definition
//! ([`crate::cli::Cli`]), so they name exactly the flags the binary takes.

use crate::cli::help::{ManArgs, Shell};
use crate::cli::Cli;
use crate::error::AppError;
use clap::CommandFactory;
use std::path::PathBuf;

/// The binary's name, as completions register it and the man pages are titled.
const BIN: &str = "emq-bench";

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut out);
    let script = String::from_utf8(out).expect("clap_complete writes UTF-8");
    match shell {
        // clap_complete's bash script spells a hyphenated binary's subcommand states two ways
        // (the loop `emq__bench__subcmd__run`, the case arms `emq__subcmd__bench__subcmd__run`;
        // clap-rs/clap#6421), so nothing after a subcommand would complete: the arms take the
        // loop's spelling.
        Shell::Bash => script.replace("emq__subcmd__bench", "emq__bench"),
        _ => script,
    }
}

/// What `man` produced: the main page's text, or the pages written.
#[derive(Debug, Clone)]
pub enum ManOutput {
    /// The main page (roff), for stdout.
    Page(String),
    /// The files written under `--dir`, in name order.
    Written(Vec<PathBuf>),
}

/// The main man page (roff), or with `--dir` one page per command written there
/// (`emq-bench.1`, `emq-bench-run.1`, ...).
///
/// Errors: [`AppError::Io`] naming the folder or the page that could not be written.
pub fn man(args: &ManArgs) -> Result<ManOutput, AppError> {
    let command = Cli::command();
    let Some(dir) = &args.dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(command).render(&mut out).expect("rendering into memory cannot fail");
        return Ok(ManOutput::Page(String::from_utf8(out).expect("clap_mangen writes UTF-8")));
    };
    let io = |path: &std::path::Path, source| AppError::Io { path: path.display().to_string(), source };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    clap_mangen::generate_to(command, dir).map_err(|e| io(dir, e))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "1")
                && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(BIN))
        })
        .collect();
    pages.sort();
    Ok(ManOutput::Written(pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell] {
            let script = completions(shell);
            for sub in Cli::command().get_subcommands() {
                assert!(script.contains(sub.get_name()), "{shell}: no {}", sub.get_name());
            }
        }
    }

    /// What bash offers for the words typed so far (the last one being completed), with the
    /// script sourced as a user's shell would.
    fn bash_offers(words: &[&str]) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("emq-bench.bash");
        std::fs::write(&file, completions(Shell::Bash)).unwrap();
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let last = words.len() - 1;
        let script = format!(
            "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={last}\n_emq__bench emq-bench '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            quoted.join(" "),
            words[last],
            words[last - 1]
        );
        let out = std::process::Command::new("bash").arg("-c").arg(script).output().expect("bash runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
    }

    #[test]
    fn bash_completes_a_subcommands_flags() {
        assert_eq!(bash_offers(&["emq-bench", "capa"]), ["capacity"]);
        assert_eq!(bash_offers(&["emq-bench", "run", "--metrics-a"]), ["--metrics-addr"]);
        assert!(bash_offers(&["emq-bench", "check", "--hi"]).contains(&"--history".to_string()));
    }

    #[test]
    fn the_man_page_is_roff_and_the_folder_gets_a_page_per_command() {
        let ManOutput::Page(page) = man(&ManArgs { dir: None }).unwrap() else { panic!("a page") };
        assert!(page.starts_with(".ie") || page.contains(".TH emq-bench"), "{}", &page[..200.min(page.len())]);
        let tmp = tempfile::tempdir().unwrap();
        let ManOutput::Written(pages) = man(&ManArgs { dir: Some(tmp.path().join("man1")) }).unwrap() else {
            panic!("files")
        };
        let names: Vec<String> = pages.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for want in ["emq-bench.1", "emq-bench-run.1", "emq-bench-check.1", "emq-bench-completions.1"] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
    }
}
