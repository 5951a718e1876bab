//! JUnit XML, the shape CI servers read (Jenkins, GitLab, GitHub test reporters, Buildkite):
//!
//! ```text
//! <testsuites name tests failures errors skipped time>
//!   <testsuite name tests failures errors skipped time>
//!     <testcase classname name time>
//!       <failure message type>text</failure>   (or <error .../>, <skipped message/>, nothing)
//!     </testcase>
//! ```
//!
//! The counts are computed from the cases when the document is written, so they always agree
//! with them. Times are seconds with 3 decimals. Every attribute and text is escaped
//! ([`escape_attr`], [`escape_text`]).

use crate::report::ReportError;
use std::fmt::Write as _;
use std::path::Path;

/// The file name every results folder's JUnit report has.
pub const JUNIT_FILE: &str = "junit.xml";

/// A whole JUnit document: `<testsuites>`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// The document's name, e.g. `emq-bench run smoke`.
    pub name: String,
    /// Wall time the document covers, s (a run's measured seconds).
    pub time_s: f64,
    /// The suites, in order.
    pub suites: Vec<Suite>,
}

/// One `<testsuite>`: a group of cases (the invariants, the thresholds, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Suite {
    /// The suite's name, e.g. `invariants`.
    pub name: String,
    /// Its cases, in order.
    pub cases: Vec<Case>,
}

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The group CI servers file it under, e.g. `emq-bench.smoke.invariants`.
    pub classname: String,
    /// What it checks, e.g. `I2 one-location`.
    pub name: String,
    /// How it came out.
    pub outcome: CaseOutcome,
}

/// How a case came out.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOutcome {
    /// It held.
    Passed,
    /// It did not hold: `<failure message type>text</failure>`.
    Failure(Reason),
    /// It could not be decided (an inconclusive comparison): `<error message type>text</error>`.
    Error(Reason),
    /// It was not checked, and why: `<skipped message/>`.
    Skipped(String),
}

/// Why a case failed or erred.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// A short machine word, e.g. `violation`, `threshold`, `regressed`, `inconclusive`.
    pub kind: String,
    /// The one line a CI server shows (the verdict's line).
    pub message: String,
    /// The evidence, any number of lines (the first violations, ...); may be empty.
    pub text: String,
}

impl Reason {
    /// A reason of `kind` saying `message`, with `text` as its evidence.
    pub fn new(kind: &str, message: impl Into<String>, text: impl Into<String>) -> Reason {
        Reason { kind: kind.to_string(), message: message.into(), text: text.into() }
    }
}

impl Case {
    /// A case of `classname` named `name` that came out as `outcome`.
    pub fn new(classname: &str, name: impl Into<String>, outcome: CaseOutcome) -> Case {
        Case { classname: classname.to_string(), name: name.into(), outcome }
    }
}

/// Counts of a set of cases: (tests, failures, errors, skipped).
fn counts<'a>(cases: impl Iterator<Item = &'a Case>) -> (usize, usize, usize, usize) {
    cases.fold((0, 0, 0, 0), |(t, f, e, s), case| match case.outcome {
        CaseOutcome::Passed => (t + 1, f, e, s),
        CaseOutcome::Failure(_) => (t + 1, f + 1, e, s),
        CaseOutcome::Error(_) => (t + 1, f, e + 1, s),
        CaseOutcome::Skipped(_) => (t + 1, f, e, s + 1),
    })
}

impl Report {
    /// Cases that failed or erred in all suites.
    pub fn failed(&self) -> usize {
        let (_, failures, errors, _) = counts(self.suites.iter().flat_map(|s| &s.cases));
        failures + errors
    }

    /// The document as text (UTF-8, with its XML declaration, ending in a newline).
    pub fn to_xml(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let (t, f, e, s) = counts(self.suites.iter().flat_map(|s| &s.cases));
        let _ = writeln!(
            out,
            "<testsuites name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{:.3}\">",
            escape_attr(&self.name),
            finite(self.time_s)
        );
        for suite in &self.suites {
            let (t, f, e, s) = counts(suite.cases.iter());
            // A suite's time is the document's: the cases are judged on one run, not timed apart.
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{:.3}\">",
                escape_attr(&suite.name),
                finite(self.time_s)
            );
            for case in &suite.cases {
                let head = format!(
                    "    <testcase classname=\"{}\" name=\"{}\" time=\"0.000\"",
                    escape_attr(&case.classname),
                    escape_attr(&case.name)
                );
                match &case.outcome {
                    CaseOutcome::Passed => {
                        let _ = writeln!(out, "{head}/>");
                    }
                    CaseOutcome::Skipped(why) => {
                        let _ = writeln!(
                            out,
                            "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                            escape_attr(why)
                        );
                    }
                    CaseOutcome::Failure(reason) | CaseOutcome::Error(reason) => {
                        let tag = if matches!(case.outcome, CaseOutcome::Failure(_)) { "failure" } else { "error" };
                        let _ = writeln!(
                            out,
                            "{head}>\n      <{tag} message=\"{}\" type=\"{}\">{}</{tag}>\n    </testcase>",
                            escape_attr(&reason.message),
                            escape_attr(&reason.kind),
                            escape_text(&reason.text)
                        );
                    }
                }
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }

    /// Writes the document to `path`, atomically.
    ///
    /// # Errors
    /// [`ReportError::Io`] naming `path`.
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        crate::report::write_text(path, &self.to_xml())
    }
}

/// A time that XML's `xs:decimal` accepts (a NaN or an infinity reads as 0).
fn finite(s: f64) -> f64 {
    if s.is_finite() && s >= 0.0 {
        s
    } else {
        0.0
    }
}

/// A character XML 1.0 allows in a document (its `Char` production; Rust strings hold no
/// surrogates): the C0 controls other than tab, newline and carriage return are not.
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')
}

/// `text` as XML character data: `&`, `<`, `>` as entities (`>` too, so `]]>` never appears),
/// and a character XML 1.0 does not allow as U+FFFD (an error message may carry any byte the
/// server sent).
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if allowed(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
    out
}

/// `text` as a double-quoted attribute value: as [`escape_text`], plus `"` and `'` as
/// entities, and tab, newline and carriage return as character references (a parser would
/// otherwise turn each into a space).
pub fn escape_attr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push_str(&escape_text(c.encode_utf8(&mut [0; 4]))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_are_escaped_in_text_and_attributes() {
        assert_eq!(escape_text(r#"a<b>&"c'"#), r#"a&lt;b&gt;&amp;"c'"#);
        assert_eq!(escape_attr(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape_text("]]>"), "]]&gt;");
        assert_eq!(escape_attr("two\nlines\tand\r"), "two&#10;lines&#9;and&#13;");
        assert_eq!(escape_text("bell\u{7} nul\u{0} ok\n"), "bell\u{FFFD} nul\u{FFFD} ok\n");
        assert_eq!(escape_text("µs ≥ 1"), "µs ≥ 1", "non-ASCII stays as it is (UTF-8)");
    }

    #[test]
    fn counts_follow_the_cases() {
        let case = |name: &str, outcome| Case::new("c", name, outcome);
        let report = Report {
            name: "r".into(),
            time_s: 1.5,
            suites: vec![Suite {
                name: "s".into(),
                cases: vec![
                    case("ok", CaseOutcome::Passed),
                    case("bad", CaseOutcome::Failure(Reason::new("threshold", "p99 <\"2ms\"", "x & y"))),
                    case("unsure", CaseOutcome::Error(Reason::new("inconclusive", "too noisy", ""))),
                    case("off", CaseOutcome::Skipped("not asked".into())),
                ],
            }],
        };
        let xml = report.to_xml();
        assert!(xml.contains(r#"<testsuites name="r" tests="4" failures="1" errors="1" skipped="1" time="1.500">"#));
        assert!(xml.contains(r#"<failure message="p99 &lt;&quot;2ms&quot;" type="threshold">x &amp; y</failure>"#));
        assert!(xml.contains(r#"<skipped message="not asked"/>"#));
        assert_eq!(report.failed(), 2);
    }
}
