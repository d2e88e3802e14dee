//! `cases/expectations.toml`: the cases we know do not pass, each with a
//! reason. Unknown keys are rejected so a typo cannot silently disable an
//! entry.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// Trials that run and must fail; one that passes fails the run.
    #[serde(default)]
    pub expected_failure: Vec<Entry>,
    /// Trials that are not run (reported as ignored, with the reason).
    #[serde(default)]
    pub skip: Vec<Entry>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A trial name, or a pattern where `*` matches any run of characters.
    #[serde(default = "any")]
    pub trial: String,
    /// For expected failures: a pattern the failure message must match
    /// (`*` wildcards; the pattern is searched anywhere in the message).
    /// Such entries describe a runtime's known limitation wherever it shows,
    /// so a matching trial that passes is simply a pass.
    pub message: Option<String>,
    pub reason: String,
    /// The backend the entry applies to (default: "ours").
    #[serde(default = "ours")]
    pub backend: String,
}

fn ours() -> String {
    "ours".to_string()
}

fn any() -> String {
    "*".to_string()
}

/// What the expectations say about one trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    Pass,
    Fail(String),
    Skip(String),
}

impl Expectations {
    pub fn load(path: &Path) -> Result<Expectations> {
        if !path.exists() {
            return Ok(Expectations::default());
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Expectations> {
        let e: Expectations = toml::from_str(text)?;
        for entry in e.expected_failure.iter().chain(&e.skip) {
            if entry.reason.trim().is_empty() {
                bail!("entry for '{}' has an empty reason", entry.trial);
            }
        }
        for entry in &e.skip {
            if entry.message.is_some() {
                bail!("skip entry for '{}' has a message pattern; only expected failures match messages", entry.trial);
            }
        }
        Ok(e)
    }

    pub fn lookup(&self, trial: &str, backend: &str) -> Expect {
        let hit = |list: &[Entry]| {
            list.iter()
                .find(|e| e.backend == backend && e.message.is_none() && glob(&e.trial, trial))
                .map(|e| e.reason.clone())
        };
        if let Some(r) = hit(&self.skip) {
            return Expect::Skip(r);
        }
        if let Some(r) = hit(&self.expected_failure) {
            return Expect::Fail(r);
        }
        Expect::Pass
    }

    /// The reason of a message-pattern entry that explains this failure.
    pub fn known_failure(&self, trial: &str, backend: &str, message: &str) -> Option<String> {
        self.expected_failure
            .iter()
            .find(|e| {
                e.backend == backend
                    && glob(&e.trial, trial)
                    && e.message
                        .as_ref()
                        .is_some_and(|m| glob(&format!("*{m}*"), message))
            })
            .map(|e| e.reason.clone())
    }

    /// Trial-name entries for `backend` that match none of `trials` (stale entries).
    pub fn unused<'a>(&'a self, trials: &[String], backend: &str) -> Vec<&'a Entry> {
        self.expected_failure
            .iter()
            .chain(&self.skip)
            .filter(|e| {
                e.backend == backend
                    && e.message.is_none()
                    && !trials.iter().any(|t| glob(&e.trial, t))
            })
            .collect()
    }
}

/// Matches `text` against `pattern`, where `*` matches any run of characters
/// (including none) and `?` any one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

// The conformance target compiles with cfg(test) but without libtest, so
// these tests run from the harness-unit target.
#[cfg(test)]
#[allow(unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_empty_reasons_are_rejected() {
        assert!(
            Expectations::parse("[[skip]]\ntrial = \"a\"\nreason = \"r\"\nwhy = \"x\"\n").is_err()
        );
        assert!(Expectations::parse("[[skips]]\ntrial = \"a\"\nreason = \"r\"\n").is_err());
        assert!(Expectations::parse("[[skip]]\ntrial = \"a\"\nreason = \" \"\n").is_err());
        assert!(Expectations::parse("[[skip]]\ntrial = \"a\"\n").is_err());
    }

    #[test]
    fn lookup_by_pattern_and_backend() {
        let e = Expectations::parse(
            "[[expected_failure]]\ntrial = \"node/test_conv_*\"\nreason = \"no Conv yet\"\n\n\
             [[skip]]\ntrial = \"node/test_x\"\nreason = \"slow\"\nbackend = \"tract\"\n",
        )
        .unwrap();
        assert_eq!(
            e.lookup("node/test_conv_a", "ours"),
            Expect::Fail("no Conv yet".into())
        );
        assert_eq!(e.lookup("node/test_conv_a", "tract"), Expect::Pass);
        assert_eq!(
            e.lookup("node/test_x", "tract"),
            Expect::Skip("slow".into())
        );
        assert_eq!(e.unused(&["node/test_y".into()], "ours").len(), 1);
    }

    #[test]
    fn message_patterns_explain_failures_only() {
        let e = Expectations::parse(
            "[[expected_failure]]\nbackend = \"onnxruntime\"\nmessage = \"Could not find an implementation for Pad(*)\"\nreason = \"no kernel\"\n",
        )
        .unwrap();
        assert_eq!(e.lookup("node/x", "onnxruntime"), Expect::Pass);
        let msg =
            "onnxruntime rejected the model: Could not find an implementation for Pad(1) node";
        assert_eq!(
            e.known_failure("node/x", "onnxruntime", msg),
            Some("no kernel".into())
        );
        assert_eq!(
            e.known_failure("node/x", "onnxruntime", "values differ"),
            None
        );
        assert_eq!(e.known_failure("node/x", "ours", msg), None);
        assert!(e.unused(&[], "onnxruntime").is_empty());
        assert!(Expectations::parse("[[skip]]\nmessage = \"x\"\nreason = \"r\"\n").is_err());
    }

    #[test]
    fn glob_matches() {
        assert!(glob("test_*Pad2d", "test_ReflectionPad2d"));
        assert!(glob("a*", "a"));
        assert!(!glob("a*b", "acbd"));
        assert!(glob("a?c", "abc"));
    }
}
