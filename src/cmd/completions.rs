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
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let Some(dir) = &args.dir else {
        return Ok(ManOutput::Page(String::from_utf8(page(&command)).expect("roff is UTF-8")));
    };
    let io = |path: &std::path::Path, source| AppError::Io { path: path.display().to_string(), source };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut pages = Vec::new();
    let mut commands = vec![command];
    while let Some(command) = commands.pop() {
        commands.extend(command.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let path = dir.join(clap_mangen::Man::new(command.clone()).get_filename());
        std::fs::write(&path, page(&command)).map_err(|e| io(&path, e))?;
        pages.push(path);
    }
    pages.sort();
    Ok(ManOutput::Written(pages))
}

/// One command's page: clap_mangen's sections, then the help's epilogue as sections of a man
/// page's own (EXAMPLES and EXIT STATUS, unfilled so that commands stay whole and copyable;
/// the prose as NOTES) where clap_mangen would print it as one filled EXTRA section.
fn page(command: &clap::Command) -> Vec<u8> {
    let man = clap_mangen::Man::new(command.clone());
    let mut out = Vec::new();
    let rendered = (|| -> std::io::Result<()> {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        if command.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut out)?;
        }
        if command.get_subcommands().any(|s| !s.is_hide_set()) {
            man.render_subcommands_section(&mut out)?;
        }
        Ok(())
    })();
    rendered.expect("rendering into memory cannot fail");
    if let Some(epilogue) = command.get_after_help() {
        out.extend_from_slice(epilogue_roff(&epilogue.to_string()).as_bytes());
    }
    if command.get_version().is_some() {
        man.render_version_section(&mut out).expect("rendering into memory cannot fail");
    }
    // Each section rendered alone opens with the quote string's definition: once is enough.
    let text = String::from_utf8(out).expect("roff is UTF-8");
    let mut seen = std::collections::HashSet::new();
    let mut page = String::with_capacity(text.len());
    for line in text.lines() {
        if (line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq")) && !seen.insert(line) {
            continue;
        }
        page.push_str(line);
        page.push('\n');
    }
    page.into_bytes()
}

/// The `--help` epilogue as roff: a paragraph headed `Examples:` becomes EXAMPLES, one headed
/// `Exit codes...:` EXIT STATUS (their lines unfilled), any other heading its own section, and
/// unheaded paragraphs NOTES.
fn epilogue_roff(text: &str) -> String {
    // No hyphenation: a flag broken over two lines is no longer one a user can copy.
    let mut out = String::from(".nh\n");
    let mut section = "";
    for paragraph in text.split("\n\n") {
        let mut lines = paragraph.lines();
        let first = lines.clone().next().unwrap_or_default();
        let heading = (!first.starts_with(' ') && first.ends_with(':')).then(|| first.trim_end_matches(':'));
        match heading {
            Some(heading) => {
                lines.next();
                let name = match heading {
                    "Examples" => "EXAMPLES".to_string(),
                    h if h.starts_with("Exit codes") => "EXIT STATUS".to_string(),
                    h => h.to_uppercase(),
                };
                out.push_str(&format!(".SH \"{name}\"\n.nf\n"));
                for line in lines {
                    out.push_str(&roff_text(line));
                    out.push('\n');
                }
                out.push_str(".fi\n");
                section = "";
            }
            None => {
                if section != "NOTES" {
                    out.push_str(".SH NOTES\n");
                    section = "NOTES";
                }
                out.push_str(".PP\n");
                for line in lines {
                    out.push_str(&roff_text(line.trim_start()));
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// A line of text as roff: backslashes, hyphens and quotes escaped (`\-` and `\(aq` print the
/// ASCII minus and apostrophe a command needs, never a typographic hyphen or curly quote), a
/// leading `.` or `'` kept from reading as a request.
fn roff_text(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-").replace('\'', "\\(aq").replace('`', "\\(ga");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
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
    fn a_page_has_examples_and_exit_status_unfilled_and_renders_with_groff() {
        let ManOutput::Page(page) = man(&ManArgs { dir: None }).unwrap() else { panic!("a page") };
        for want in [".SH \"EXAMPLES\"\n.nf\n", ".SH \"EXIT STATUS\"\n.nf\n", "emq\\-bench run smoke"] {
            assert!(page.contains(want), "no {want:?} in:\n{page}");
        }
        assert!(!page.contains("EXTRA"), "{page}");
        assert_eq!(page.matches(".ds Aq").count(), 2, "the quote string defined once:\n{page}");
        let tmp = tempfile::tempdir().unwrap();
        let ManOutput::Written(pages) = man(&ManArgs { dir: Some(tmp.path().to_path_buf()) }).unwrap() else {
            panic!("files")
        };
        let check = pages.iter().find(|p| p.ends_with("emq-bench-check.1")).expect("check's page");
        let roff = std::fs::read_to_string(check).unwrap();
        assert!(roff.contains(".SH NOTES") && roff.contains(".SH \"EXIT STATUS\""), "{roff}");
        // groff (Debian's man) renders it: the example lines whole, options with ASCII minus.
        let Ok(out) = std::process::Command::new("groff").args(["-man", "-Tutf8", "-P-c"]).arg(check).output() else {
            eprintln!("no groff: the rendering of the page is not checked");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines()
                .any(|l| l.trim() == "emq-bench check --url redis://127.0.0.1:6379 --history results/kept/history.bin"),
            "{text}"
        );
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
