//! The Kubernetes manifests of `deploy/k8s/` read as text, for `tests/k8s_manifest.rs`.
//!
//! No YAML crate: a line parser reads only the shapes these manifests use, and says so when a
//! file leaves them:
//! - a comment runs from a `#` at the start of a line or after a space to the end of the line
//!   (no value in these files holds ` #`); blank lines are skipped;
//! - `key: value` is a scalar wherever it stands (after a `- ` too); its value is bare,
//!   `"double-quoted"` (JSON escapes) or `'single-quoted'`; a key a test reads once must occur
//!   once in the file;
//! - `args:` is one line holding a flow sequence of double-quoted strings, which is JSON;
//! - `env:` is a block sequence of `- name: N` items, each with `value: V` or `valueFrom:` and
//!   one `...Ref:` child (`secretKeyRef:`, `configMapKeyRef:`, ...) holding `name:`, `key:`,
//!   `optional:`; the block ends at the first line indented less than its items;
//! - `$(VAR)` in an env value (VAR defined earlier in the list) or in args (VAR anywhere in the
//!   list) is expanded as the kubelet does, `$$` being a literal `$`.

use std::collections::BTreeMap;
use std::path::Path;

/// One line of a manifest with its comment cut off: where it is and what it says.
#[derive(Debug, Clone)]
pub struct Line {
    /// 1-based, for messages.
    pub number: usize,
    /// Leading spaces.
    pub indent: usize,
    /// The rest, comment and trailing spaces cut.
    pub text: String,
}

impl Line {
    /// `key: value` of this line (after a leading `- `), the value unquoted; `None` for a line
    /// that is no mapping entry.
    pub fn entry(&self) -> Option<(&str, String)> {
        let text = self.text.strip_prefix("- ").unwrap_or(&self.text);
        let (key, value) = text.split_once(':')?;
        if key.contains(['"', '\'', '[', ' ']) {
            return None;
        }
        Some((key, unquote(value.trim())))
    }

    /// Whether this line starts a sequence item (`- ...`).
    pub fn is_item(&self) -> bool {
        self.text.starts_with("- ")
    }
}

/// A YAML scalar's text: `"..."` read as JSON, `'...'` with `''` as `'`, else as it stands.
fn unquote(value: &str) -> String {
    if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
        serde_json::from_str(value).unwrap_or_else(|e| panic!("{value}: not a double-quoted scalar: {e}"))
    } else if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
        value[1..value.len() - 1].replace("''", "'")
    } else {
        value.to_string()
    }
}

/// Where an env variable's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `value: V`.
    Literal(String),
    /// `valueFrom:` with one `kind:` child (`secretKeyRef`, `configMapKeyRef`, `fieldRef`, ...)
    /// and its fields (`name`, `key`, `optional`, ...).
    From { kind: String, fields: BTreeMap<String, String> },
}

/// One `- name:` item of a container's `env:`.
#[derive(Debug, Clone)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value or where the kubelet takes it from.
    pub source: Source,
}

/// A manifest of `deploy/k8s/` (or the Dockerfile), read as lines.
pub struct Manifest {
    /// `deploy/k8s/<name>`, for messages.
    pub path: String,
    /// Its non-blank lines, comments cut.
    pub lines: Vec<Line>,
}

impl Manifest {
    /// Reads `deploy/k8s/<name>`.
    pub fn read(name: &str) -> Manifest {
        Manifest::from_file(&format!("deploy/k8s/{name}"))
    }

    /// Reads `path`, relative to the repository's root.
    pub fn from_file(path: &str) -> Manifest {
        let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
        Manifest::parse(path, &text)
    }

    /// Splits `text` into lines, comments cut; `path` names it in messages.
    pub fn parse(path: &str, text: &str) -> Manifest {
        let lines = text
            .lines()
            .enumerate()
            .filter_map(|(i, raw)| {
                let cut =
                    if raw.trim_start().starts_with('#') { "" } else { raw.find(" #").map_or(raw, |at| &raw[..at]) };
                let text = cut.trim_end();
                let indent = text.len() - text.trim_start().len();
                (!text.trim().is_empty()).then(|| Line { number: i + 1, indent, text: text.trim_start().to_string() })
            })
            .collect();
        Manifest { path: path.to_string(), lines }
    }

    /// Every value of `key` in the file, in order.
    pub fn values(&self, key: &str) -> Vec<String> {
        self.lines.iter().filter_map(|l| l.entry().filter(|(k, _)| *k == key).map(|(_, v)| v)).collect()
    }

    /// The one value of `key`; panics when the file has none or several.
    pub fn scalar(&self, key: &str) -> String {
        match self.values(key).as_slice() {
            [one] => one.clone(),
            [] => panic!("{}: no `{key}:`", self.path),
            many => panic!("{}: `{key}:` {} times ({many:?}); the test expects it once", self.path, many.len()),
        }
    }

    /// The lines under the one line `key:` (those indented more, or sequence items at its own
    /// indentation, YAML's compact form).
    pub fn block(&self, key: &str) -> &[Line] {
        let heads: Vec<usize> =
            (0..self.lines.len()).filter(|&i| self.lines[i].text.strip_prefix(key) == Some(":")).collect();
        let [head] = heads.as_slice() else {
            panic!("{}: {} `{key}:` lines starting a block; the test expects one", self.path, heads.len())
        };
        let indent = self.lines[*head].indent;
        let end = self.lines[head + 1..]
            .iter()
            .position(|l| l.indent < indent || (l.indent == indent && !l.is_item()))
            .map_or(self.lines.len(), |n| head + 1 + n);
        &self.lines[head + 1..end]
    }

    /// The container's `args:`, one line of JSON strings, `$(VAR)` not yet expanded.
    pub fn args(&self) -> Vec<String> {
        let lines: Vec<&Line> = self.lines.iter().filter(|l| l.text.starts_with("args:")).collect();
        let [line] = lines.as_slice() else {
            panic!("{}: {} `args:` lines; the test reads the one container's", self.path, lines.len())
        };
        let list = line.text["args:".len()..].trim();
        serde_json::from_str(list).unwrap_or_else(|e| {
            panic!(
                "{}:{}: args must stay one line of double-quoted strings, [\"run\", \"...\"], for this \
                 test to read them ({e})",
                self.path, line.number
            )
        })
    }

    /// The container's `env:` items, in order.
    pub fn env(&self) -> Vec<EnvVar> {
        let mut vars: Vec<EnvVar> = Vec::new();
        let mut in_value_from = false;
        for line in self.block("env") {
            let at = format!("{}:{}", self.path, line.number);
            let (key, value) = line.entry().unwrap_or_else(|| panic!("{at}: not `key: value`: {}", line.text));
            if line.is_item() {
                assert_eq!(key, "name", "{at}: an env item starts with `- name:`");
                let source = Source::Literal(String::new());
                vars.push(EnvVar { name: value, source });
                in_value_from = false;
                continue;
            }
            let var = vars.last_mut().unwrap_or_else(|| panic!("{at}: env entry before the first `- name:`"));
            match (key, value.is_empty(), &mut var.source) {
                ("value", _, source) => *source = Source::Literal(value),
                ("valueFrom", true, _) => in_value_from = true,
                (kind, true, source) if in_value_from => {
                    *source = Source::From { kind: kind.to_string(), fields: BTreeMap::new() }
                }
                (field, false, Source::From { fields, .. }) => {
                    fields.insert(field.to_string(), value);
                }
                _ => panic!("{at}: unexpected in env: {}", line.text),
            }
        }
        vars
    }
}

/// `$(VAR)` replaced by the literal value of VAR among `defined`, `$$` by `$`; a reference to
/// anything else stays as written (as the kubelet leaves it).
pub fn expand(text: &str, defined: &[EnvVar]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some((name, after)) = rest.strip_prefix("$(").and_then(|r| r.split_once(')')) {
            match defined.iter().find(|v| v.name == name).map(|v| &v.source) {
                Some(Source::Literal(value)) => out.push_str(value),
                _ => out.push_str(&rest[..name.len() + 3]),
            }
            rest = after;
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The env with each value's `$(VAR)` expanded against the variables before it.
pub fn expanded_env(manifest: &Manifest) -> Vec<EnvVar> {
    let mut done: Vec<EnvVar> = Vec::new();
    for var in manifest.env() {
        let source = match var.source {
            Source::Literal(value) => Source::Literal(expand(&value, &done)),
            other => other,
        };
        done.push(EnvVar { name: var.name, source });
    }
    done
}

/// The literal value of env variable `name`; panics naming the file when it is missing or not
/// a literal.
pub fn literal(env: &[EnvVar], name: &str, path: &str) -> String {
    match env.iter().find(|v| v.name == name).map(|v| &v.source) {
        Some(Source::Literal(value)) => value.clone(),
        Some(other) => panic!("{path}: {name} must be a literal value, not {other:?}"),
        None => panic!("{path}: no env {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes the module doc lists, in one small file (env in YAML's compact form).
    const SAMPLE: &str = r#"# a comment
spec:
  completions: 3 # a trailing comment
  env:
  - name: A
    value: "x"
  - name: B
    value: '$(A)/y'
  - name: C
    valueFrom:
      secretKeyRef:
        name: s
        key: k
        optional: false
  args: ["run", "$(B)", "$$(A)", "$(UNDEFINED)"]
after: 1
"#;

    /// A parser change that misreads a shape fails here, not as a puzzling message about a
    /// manifest.
    #[test]
    fn the_line_parser_reads_what_the_manifests_use() {
        let manifest = Manifest::parse("t.yaml", SAMPLE);
        assert_eq!(manifest.scalar("completions"), "3");
        let env = expanded_env(&manifest);
        assert_eq!(env.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["A", "B", "C"]);
        assert_eq!(env[1].source, Source::Literal("x/y".into()));
        let Source::From { kind, fields } = &env[2].source else { panic!("C: {:?}", env[2].source) };
        assert_eq!(kind, "secretKeyRef");
        assert_eq!(
            fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            ["key=k", "name=s", "optional=false"]
        );
        let args: Vec<String> = manifest.args().iter().map(|a| expand(a, &env)).collect();
        assert_eq!(args, ["run", "x/y", "$(A)", "$(UNDEFINED)"]);
    }
}
