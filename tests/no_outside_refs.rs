//! The repository stands on its own: no tracked file names a document that lives outside it.
//! The wire contract is `docs/protocol.md`, and a comment says its reason itself rather than
//! citing a style guide kept elsewhere. `.ci/` is the machinery around the repository and is
//! left out.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What no file may name. Built with `concat!` so this file does not name them itself.
const NEEDLES: [&str; 3] = [concat!("../", "shared"), concat!("PROTOCOL", ".md"), concat!("STYLE", ".md")];

/// Folders the tree walk skips when git is absent: git's own, the build's, what
/// `scripts/setup` fetches, the results of runs (all ignored by `.gitignore`), and `.ci/`.
const SKIPPED_DIRS: [&str; 5] = [".git", "target", ".tools", "results", ".ci"];

/// The repository's files, relative to `root`: `git ls-files` when git answers, else every file
/// under `root` outside [`SKIPPED_DIRS`]. Either way nothing under `.ci/`.
fn files(root: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git").arg("-C").arg(root).args(["ls-files", "-z"]).output();
    let mut files: Vec<PathBuf> = match listed {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|b| *b == 0)
            .filter(|name| !name.is_empty())
            .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
            .collect(),
        _ => walk(root),
    };
    files.retain(|path| !path.starts_with(".ci"));
    files
}

/// Every file under `root`, relative to it, outside [`SKIPPED_DIRS`] at the top level.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else { continue };
        for entry in entries.flatten() {
            let rel = dir.join(entry.file_name());
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                let top_skipped = dir.as_os_str().is_empty()
                    && entry.file_name().to_str().is_some_and(|name| SKIPPED_DIRS.contains(&name));
                if !top_skipped {
                    dirs.push(rel);
                }
            } else if kind.is_file() {
                found.push(rel);
            }
        }
    }
    found.sort();
    found
}

/// `file:line: needle` for every line of `files` (relative to `root`) that names a needle. A
/// file listed but gone from the work tree is skipped.
fn offending(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut hits = Vec::new();
    for rel in files {
        let Ok(bytes) = std::fs::read(root.join(rel)) else { continue };
        for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
            for needle in NEEDLES {
                if line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    hits.push(format!("{}:{}: {needle}", rel.display(), n + 1));
                }
            }
        }
    }
    hits
}

#[test]
fn no_tracked_file_names_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = files(root);
    assert!(files.iter().any(|f| f == Path::new("Cargo.toml")), "the file list misses Cargo.toml: {files:?}");
    let hits = offending(root, &files);
    assert!(
        hits.is_empty(),
        "{} line(s) name a document outside the repository (point at docs/protocol.md, or say the reason):\n{}",
        hits.len(),
        hits.join("\n")
    );
}

#[test]
fn the_scan_names_file_and_line_and_leaves_ci_and_skipped_folders_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for dir in ["src", ".ci", "target", "docs"] {
        std::fs::create_dir(root.join(dir)).unwrap();
    }
    let needle = NEEDLES[1];
    std::fs::write(root.join("src/a.rs"), format!("// fine\n// see {needle}\n")).unwrap();
    std::fs::write(root.join("docs/b.md"), "docs/protocol.md only\n").unwrap();
    std::fs::write(root.join(".ci/run"), format!("{}\n", NEEDLES[0])).unwrap();
    std::fs::write(root.join("target/c.rs"), format!("{}\n", NEEDLES[2])).unwrap();
    // No git repository here: the walk decides what is listed.
    let mut listed = walk(root);
    listed.retain(|path| !path.starts_with(".ci"));
    assert_eq!(listed, vec![PathBuf::from("docs/b.md"), PathBuf::from("src/a.rs")]);
    assert_eq!(offending(root, &listed), vec![format!("src/a.rs:2: {needle}")]);
}
