//! `run --set KEY=VALUE` and `--rate R`: any scenario key from the command line. Each setting is
//! written into the file's TOML before the scenario is read, so its value is checked exactly as
//! the file's own would be (its type, its unit, its bounds, an unknown key refused), and a
//! sweep needs no hand-edited copies of a scenario.

use super::error::ScenarioError;
use std::path::Path;

/// Most `--set`s one run takes.
pub const MAX_SETTINGS: usize = 64;

/// One `--set KEY=VALUE`: a dotted key (`producers.rate`) and its value as TOML reads it (`200`,
/// `"5ms"`, `{ fixed = "5ms" }`; a bare word that is no TOML value is a string: `work=2ms`).
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The key's path, table by table (`["producers", "rate"]`).
    pub key: Vec<String>,
    /// The value.
    pub value: toml::Value,
}

impl Setting {
    /// Reads `KEY=VALUE` (what `--set` takes).
    ///
    /// # Errors
    /// A message naming what is wrong: no `=`, an empty key or key segment, a segment that is not
    /// a bare TOML key (`[A-Za-z0-9_-]`).
    pub fn parse(text: &str) -> Result<Setting, String> {
        // The errors name the key only: a value may be a URL with its password.
        let Some((key, value)) = text.split_once('=') else {
            return Err("expected KEY=VALUE, e.g. producers.rate=2000 (no `=` found)".to_owned());
        };
        let key: Vec<String> = key.trim().split('.').map(str::to_owned).collect();
        let bare = |s: &String| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if let Some(bad) = key.iter().find(|s| !bare(s)) {
            return Err(format!(
                "key {:?}: segment {bad:?}: expected a scenario key of [A-Za-z0-9_-], dotted by table \
                 (producers.rate)",
                key.join(".")
            ));
        }
        let value = value.trim();
        let value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
            Ok(mut table) => table.remove("v").expect("the one key parsed"),
            Err(_) => toml::Value::String(value.to_owned()),
        };
        Ok(Setting { key, value })
    }

    /// `KEY=VALUE` as TOML writes the value.
    pub fn text(&self) -> String {
        format!("{}={}", self.key.join("."), self.value)
    }
}

/// The scenario `text` (of `path`) with every setting written into it, in order, as TOML text:
/// what [`super::parse`] reads instead of the file.
///
/// # Errors
/// [`ScenarioError::Syntax`] when the file is no TOML; [`ScenarioError::Override`] naming
/// `--set` when more than [`MAX_SETTINGS`] are given, or when a key goes through a value of the
/// file as if it were a table (`producers.rate.x`).
pub fn apply(text: &str, settings: &[Setting], path: &Path) -> Result<String, ScenarioError> {
    let refuse = |found: String, expected: String| ScenarioError::Override {
        path: path.to_owned(),
        flag: "--set".to_owned(),
        found,
        expected,
    };
    if settings.len() > MAX_SETTINGS {
        return Err(refuse(format!("{} settings", settings.len()), format!("at most {MAX_SETTINGS}")));
    }
    let mut table: toml::Table = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
        path: path.to_owned(),
        line: e.span().map(|s| text[..s.start].matches('\n').count() + 1),
        message: e.to_string().trim_end().to_owned(),
    })?;
    for setting in settings {
        let (last, tables) = setting.key.split_last().expect("a parsed key has a segment");
        let mut at = &mut table;
        for (depth, segment) in tables.iter().enumerate() {
            let entry = at.entry(segment.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            at = match entry {
                toml::Value::Table(inner) => inner,
                other => {
                    return Err(refuse(
                        setting.key.join("."),
                        format!(
                            "a key inside a table, but {} holds a value of type {} in the scenario",
                            setting.key[..=depth].join("."),
                            other.type_str()
                        ),
                    ))
                }
            };
        }
        at.insert(last.clone(), setting.value.clone());
    }
    Ok(toml::to_string(&table).expect("a TOML table writes as TOML"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(texts: &[&str]) -> Vec<Setting> {
        texts.iter().map(|t| Setting::parse(t).unwrap()).collect()
    }

    #[test]
    fn values_read_as_toml_and_bare_words_as_strings() {
        let s = Setting::parse("producers.rate=2000.5").unwrap();
        assert_eq!((s.key.join("."), s.value.clone()), ("producers.rate".into(), toml::Value::Float(2000.5)));
        assert_eq!(Setting::parse("consumers.work=2ms").unwrap().value, toml::Value::String("2ms".into()));
        assert_eq!(Setting::parse("duration=\"5s\"").unwrap().value, toml::Value::String("5s".into()));
        let table = Setting::parse("consumers.backoff={ fixed = \"5ms\" }").unwrap().value;
        assert!(table.as_table().is_some_and(|t| t["fixed"].as_str() == Some("5ms")), "{table:?}");
        for bad in ["rate", "=1", "producers..rate=1", "producers.ra te=1"] {
            assert!(Setting::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_land_in_their_tables_and_a_value_is_no_table() {
        let path = Path::new("s.toml");
        let text = "name = \"s\"\n[producers]\ncount = 2\n";
        let out = apply(text, &set(&["producers.count=4", "consumers.count=3", "seed=9"]), path).unwrap();
        let table: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(table["producers"]["count"].as_integer(), Some(4));
        assert_eq!(table["consumers"]["count"].as_integer(), Some(3), "a table the file lacks is made");
        assert_eq!(table["seed"].as_integer(), Some(9));
        let err = apply(text, &set(&["producers.count.x=1"]), path).unwrap_err().to_string();
        assert!(
            err.contains("--set = producers.count.x,") && err.contains("producers.count holds a value of type integer"),
            "{err}"
        );
        let many: Vec<Setting> = (0..=MAX_SETTINGS).map(|i| Setting::parse(&format!("seed={i}")).unwrap()).collect();
        assert!(apply(text, &many, path).unwrap_err().to_string().contains("at most 64"));
    }
}
