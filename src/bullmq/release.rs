//! Which published release a run's third-party scripts are: `scripts/setup` installs BullMQ's
//! scripts from a pinned PyPI wheel into `.tools/bullmq/<version>/` with a `VERSION` file and a
//! `MANIFEST` of each file's SHA-1 (`sha1sum` format, proven against SCRIPT LOAD by
//! `scripts/script-load-check`). A run records the version, and which of its scripts differ
//! from the release (a user's edited copy through `--lua-dir`).

use crate::resp::ScriptRegistry;
use serde::Serialize;
use std::path::Path;

/// Where `scripts/setup` links the pinned BullMQ release, relative to the working directory.
pub const BULLMQ_INSTALL: &str = ".tools/bullmq/current";

/// The BullMQ release a run's scripts were compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Release {
    /// The release's version (`VERSION`), e.g. `2.26.0`, the PyPI `bullmq` package's.
    pub version: String,
    /// The scripts whose SHA-1 is not the release's (empty: the run drove the release as
    /// published), by name.
    pub differs: Vec<String>,
}

/// The pinned BullMQ release installed under `install` compared with `registry`'s scripts;
/// `None` when no release is installed there (its `VERSION` or `MANIFEST` unreadable).
pub fn bullmq_release(registry: &ScriptRegistry, install: &Path) -> Option<Release> {
    let version = std::fs::read_to_string(install.join("VERSION")).ok()?.trim().to_string();
    let manifest = std::fs::read_to_string(install.join("MANIFEST")).ok()?;
    let pinned = |file: &str| {
        manifest.lines().find_map(|line| {
            let (sha, path) = line.split_once("  ")?;
            (path.rsplit('/').next() == Some(file)).then_some(sha)
        })
    };
    let differs = registry
        .scripts()
        .filter(|s| pinned(&s.file_name()) != Some(registry.sha(*s)))
        .map(|s| s.name().to_string())
        .collect();
    Some(Release { version, differs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::{Protocol, Script};

    #[test]
    fn the_installed_release_matches_its_own_scripts_and_names_an_edited_one() {
        let install = Path::new(env!("CARGO_MANIFEST_DIR")).join(BULLMQ_INSTALL);
        let registry = ScriptRegistry::for_protocol(Protocol::BullMq, &install.join("commands"))
            .expect("scripts/setup installs BullMQ's scripts");
        let release = bullmq_release(&registry, &install).expect("VERSION and MANIFEST");
        assert_eq!(release.version, "2.26.0");
        assert!(release.differs.is_empty(), "{:?}", release.differs);

        let copy = tempfile::tempdir().unwrap();
        for &script in Protocol::BullMq.scripts() {
            let mut source = std::fs::read_to_string(install.join("commands").join(script.file_name())).unwrap();
            if script == Script::ExtendLock {
                source.push_str("\n-- edited\n");
            }
            std::fs::write(copy.path().join(script.file_name()), source).unwrap();
        }
        let edited = ScriptRegistry::for_protocol(Protocol::BullMq, copy.path()).unwrap();
        assert_eq!(bullmq_release(&edited, &install).unwrap().differs, ["extendLock"]);
        assert_eq!(bullmq_release(&edited, copy.path()), None);
    }
}
