//! `cases/expectations.toml`: the cases we know do not pass, each with a
//! reason. Unknown keys are rejected so a typo cannot silently disable an
//! entry.

use crate::run_case::FailureKind;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A message fragment must say something about the failure: this many
/// characters at least, besides wildcards.
const MIN_FRAGMENT: usize = 6;

#[derive(Debug, Default)]
pub struct Expectations {
    /// Failures we know of. An entry with a `trial` lists trials that must
    /// fail that way; one without describes a runtime's limitation wherever
    /// it shows.
    pub expected_failure: Vec<Entry>,
    /// Trials that are not run (reported as ignored, with the reason).
    pub skip: Vec<Entry>,
    /// How many failures each expected failure explained in this run.
    used: Vec<AtomicUsize>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expected_failure: Vec<Entry>,
    #[serde(default)]
    skip: Vec<Entry>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A trial name, or a pattern where `*` matches any run of characters.
    /// Absent on an expected failure that applies to any trial.
    pub trial: Option<String>,
    /// For expected failures: which way the trial fails (required).
    pub failure: Option<FailureKind>,
    /// For expected failures: a pattern the failure message must contain
    /// (`*` wildcards; required).
    pub message: Option<String>,
    pub reason: String,
    /// The backend the entry applies to (default: "ours").
    #[serde(default = "ours")]
    pub backend: String,
    /// "debug" or "release": the entry applies only when the harness is
    /// built so (a runtime built with overflow checks panics elsewhere than
    /// one built without). Default: both.
    pub profile: Option<String>,
    /// For values failures: properties of the runtime's outputs
    /// (`onnx_conformance::observed::PROPERTIES`) that must all be seen
    /// for the entry to explain the failure, so that an entry describing
    /// what a runtime computes (double in float32) cannot also excuse
    /// another bug whose message looks alike.
    pub observed: Option<Vec<String>>,
}

/// The profile this harness was built with, as `profile` names it.
fn this_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn ours() -> String {
    "ours".to_string()
}

impl Entry {
    fn in_this_build(&self, backend: &str) -> bool {
        self.backend == backend && self.profile.as_deref().is_none_or(|p| p == this_profile())
    }

    fn applies_to(&self, trial: &str, backend: &str) -> bool {
        self.in_this_build(backend) && self.trial.as_deref().is_none_or(|p| glob(p, trial))
    }

    /// Whether this entry explains a failure of `kind` with `message`,
    /// whose outputs have the properties `seen`.
    fn explains(&self, kind: FailureKind, message: &str, seen: &[String]) -> bool {
        self.failure == Some(kind)
            && self
                .message
                .as_ref()
                .is_some_and(|m| glob(&format!("*{m}*"), message))
            && self
                .observed
                .iter()
                .flatten()
                .all(|property| seen.contains(property))
    }

    /// The entry as a reader of a failure message needs it.
    pub fn describe(&self) -> String {
        let kind = self.failure.map_or("?", FailureKind::name);
        let msg = self.message.as_deref().unwrap_or("?");
        let seen = match &self.observed {
            Some(p) => format!(" with outputs showing {}", p.join(", ")),
            None => String::new(),
        };
        match &self.trial {
            Some(t) => format!("{t}: {kind} failure containing {msg:?}{seen}"),
            None => format!("any trial: {kind} failure containing {msg:?}{seen}"),
        }
    }
}

/// The entry that explained a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    pub reason: String,
    /// As [`Expectations::ids`] lists it.
    pub id: String,
}

/// What the expectations say about one trial before it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// It must pass, unless a failure is explained by an entry for any trial.
    Pass,
    /// Entries list it by name: it must fail as one of them describes
    /// (their descriptions).
    Fail(Vec<String>),
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
        let f: File = toml::from_str(text)?;
        for entry in f.expected_failure.iter().chain(&f.skip) {
            let name = entry.trial.as_deref().unwrap_or("any trial");
            if entry.reason.trim().is_empty() {
                bail!("entry for '{name}' has an empty reason");
            }
            if let Some(p) = entry
                .profile
                .as_deref()
                .filter(|p| !["debug", "release"].contains(p))
            {
                bail!("entry for '{name}' has profile {p:?}; expected \"debug\" or \"release\"");
            }
        }
        for entry in &f.skip {
            let name = entry.trial.as_deref().unwrap_or("any trial");
            if entry.trial.is_none() {
                bail!("a skip entry needs a `trial`");
            }
            if entry.message.is_some() || entry.failure.is_some() {
                bail!("skip entry for '{name}' has a `message` or `failure`; skipped trials do not run");
            }
        }
        for entry in &f.expected_failure {
            let name = entry.trial.as_deref().unwrap_or("any trial");
            if entry.failure.is_none() {
                let kinds: Vec<_> = FailureKind::ALL.iter().map(|k| k.name()).collect();
                bail!(
                    "expected failure for '{name}' ({}) does not say which failure it expects: add `failure = ` one of {kinds:?}",
                    entry.reason
                );
            }
            if let Some(properties) = &entry.observed {
                if entry.failure != Some(FailureKind::Values) {
                    bail!(
                        "expected failure for '{name}' ({}) has `observed`, which only a values failure has",
                        entry.reason
                    );
                }
                let known = onnx_conformance::observed::PROPERTIES;
                if let Some(p) = properties.iter().find(|p| !known.contains(&p.as_str())) {
                    bail!(
                        "expected failure for '{name}' ({}) names the unknown property {p:?} in `observed`; known: {known:?}",
                        entry.reason
                    );
                }
                if properties.is_empty() {
                    bail!(
                        "expected failure for '{name}' ({}) has an empty `observed`: name a property or leave the key out",
                        entry.reason
                    );
                }
            }
            let fragment = entry.message.as_deref().unwrap_or("");
            if fragment.chars().filter(|&c| c != '*').count() < MIN_FRAGMENT {
                bail!(
                    "expected failure for '{name}' ({}) needs a `message`: a fragment of the failure message (at least {MIN_FRAGMENT} characters besides `*`)",
                    entry.reason
                );
            }
        }
        let used = f
            .expected_failure
            .iter()
            .map(|_| AtomicUsize::new(0))
            .collect();
        Ok(Expectations {
            expected_failure: f.expected_failure,
            skip: f.skip,
            used,
        })
    }

    pub fn lookup(&self, trial: &str, backend: &str) -> Expect {
        let named = |e: &&Entry| e.trial.is_some() && e.applies_to(trial, backend);
        if let Some(e) = self.skip.iter().find(named) {
            return Expect::Skip(e.reason.clone());
        }
        let listed: Vec<String> = self
            .expected_failure
            .iter()
            .filter(named)
            .map(Entry::describe)
            .collect();
        if listed.is_empty() {
            Expect::Pass
        } else {
            Expect::Fail(listed)
        }
    }

    /// The entry that explains this failure of `trial`, whose outputs have
    /// the properties `seen`, if any, counting it as used: its reason and
    /// id.
    pub fn explain(
        &self,
        trial: &str,
        backend: &str,
        kind: FailureKind,
        message: &str,
        seen: &[String],
    ) -> Option<Explained> {
        // An entry that lists the trial explains it before one for any
        // trial, so that the listing is what its failure is held to.
        let fits = |listed: bool| {
            self.expected_failure.iter().position(|e| {
                e.trial.is_some() == listed
                    && e.applies_to(trial, backend)
                    && e.explains(kind, message, seen)
            })
        };
        let k = fits(true).or_else(|| fits(false))?;
        self.used[k].fetch_add(1, Ordering::Relaxed);
        Some(Explained {
            reason: self.expected_failure[k].reason.clone(),
            id: self.id(k),
        })
    }

    /// Names expected failure `k` in records: its place in the file and
    /// what it describes, the same in every process of one build.
    fn id(&self, k: usize) -> String {
        let e = &self.expected_failure[k];
        format!(
            "expected_failure #{} ({}): {}",
            k + 1,
            e.backend,
            e.describe()
        )
    }

    /// The ids of the expected failures that apply to `backend` in this
    /// build: the ones a complete run must use.
    pub fn ids(&self, backend: &str) -> Vec<String> {
        (0..self.expected_failure.len())
            .filter(|&k| self.expected_failure[k].in_this_build(backend))
            .map(|k| self.id(k))
            .collect()
    }

    /// Entries for `backend` naming trials of which none exists (stale
    /// whatever the run's filter).
    pub fn unused<'a>(&'a self, trials: &[String], backend: &str) -> Vec<&'a Entry> {
        self.expected_failure
            .iter()
            .chain(&self.skip)
            .filter(|e| {
                e.in_this_build(backend)
                    && e.trial
                        .as_deref()
                        .is_some_and(|p| !trials.iter().any(|t| glob(p, t)))
            })
            .collect()
    }

    /// Expected failures for `backend` that explained no failure in this
    /// run: stale when the run was complete.
    pub fn unexplained(&self, backend: &str) -> Vec<&Entry> {
        self.expected_failure
            .iter()
            .zip(&self.used)
            .filter(|(e, n)| e.in_this_build(backend) && n.load(Ordering::Relaxed) == 0)
            .map(|(e, _)| e)
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
#[allow(unused_imports, dead_code)]
mod tests {
    use super::*;

    fn reason(x: Option<Explained>) -> Option<String> {
        x.map(|x| x.reason)
    }

    #[test]
    fn unknown_keys_and_empty_reasons_are_rejected() {
        assert!(
            Expectations::parse("[[skip]]\ntrial = \"a\"\nreason = \"r\"\nwhy = \"x\"\n").is_err()
        );
        assert!(Expectations::parse("[[skips]]\ntrial = \"a\"\nreason = \"r\"\n").is_err());
        assert!(Expectations::parse("[[skip]]\ntrial = \"a\"\nreason = \" \"\n").is_err());
        assert!(Expectations::parse("[[skip]]\ntrial = \"a\"\n").is_err());
        assert!(Expectations::parse("[[skip]]\nreason = \"r\"\n").is_err());
    }

    #[test]
    fn expected_failures_say_which_failure() {
        let ok = "[[expected_failure]]\ntrial = \"a\"\nfailure = \"values\"\nmessage = \"values differ\"\nreason = \"r\"\n";
        assert!(Expectations::parse(ok).is_ok());
        let no_kind =
            "[[expected_failure]]\ntrial = \"a\"\nmessage = \"values differ\"\nreason = \"r\"\n";
        let e = Expectations::parse(no_kind).unwrap_err();
        assert!(format!("{e:#}").contains("which failure"), "{e:#}");
        let no_message =
            "[[expected_failure]]\ntrial = \"a\"\nfailure = \"panic\"\nreason = \"r\"\n";
        assert!(format!("{:#}", Expectations::parse(no_message).unwrap_err()).contains("message"));
        let vague = "[[expected_failure]]\ntrial = \"a\"\nfailure = \"error\"\nmessage = \"*x*\"\nreason = \"r\"\n";
        assert!(Expectations::parse(vague).is_err());
        let bad_kind = "[[expected_failure]]\ntrial = \"a\"\nfailure = \"wrong\"\nmessage = \"values differ\"\nreason = \"r\"\n";
        assert!(Expectations::parse(bad_kind).is_err());
        let skip_with_kind = "[[skip]]\ntrial = \"a\"\nfailure = \"panic\"\nreason = \"r\"\n";
        assert!(Expectations::parse(skip_with_kind).is_err());
    }

    #[test]
    fn lookup_by_pattern_and_backend() {
        let e = Expectations::parse(
            "[[expected_failure]]\ntrial = \"node/test_conv_*\"\nfailure = \"error\"\nmessage = \"no Conv here\"\nreason = \"no Conv yet\"\n\n\
             [[skip]]\ntrial = \"node/test_x\"\nreason = \"slow\"\nbackend = \"tract\"\n",
        )
        .unwrap();
        match e.lookup("node/test_conv_a", "ours") {
            Expect::Fail(listed) => assert!(listed[0].contains("no Conv here"), "{listed:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(e.lookup("node/test_conv_a", "tract"), Expect::Pass);
        assert_eq!(
            e.lookup("node/test_x", "tract"),
            Expect::Skip("slow".into())
        );
        assert_eq!(e.unused(&["node/test_y".into()], "ours").len(), 1);
        assert_eq!(e.unused(&["node/test_conv_b".into()], "ours").len(), 0);
    }

    #[test]
    fn a_listed_trial_is_excused_only_by_the_failure_it_names() {
        let e = Expectations::parse(
            "[[expected_failure]]\ntrial = \"node/a\"\nfailure = \"values\"\nmessage = \"output 0 'y'\"\nreason = \"known\"\n",
        )
        .unwrap();
        let values = "case node/a: output 0 'y' (tensor(float)): 1 of 4 values differ";
        assert_eq!(e.unexplained("ours").len(), 1);
        // Another kind, or the same kind with another message, is not it.
        assert_eq!(
            reason(e.explain("node/a", "ours", FailureKind::Error, values, &[])),
            None
        );
        assert_eq!(
            reason(e.explain(
                "node/a",
                "ours",
                FailureKind::Values,
                "output 1 'z' differs",
                &[]
            )),
            None
        );
        assert_eq!(
            reason(e.explain("node/b", "ours", FailureKind::Values, values, &[])),
            None
        );
        assert_eq!(e.unexplained("ours").len(), 1, "no match is no use");
        assert_eq!(
            reason(e.explain("node/a", "ours", FailureKind::Values, values, &[])),
            Some("known".into())
        );
        assert!(e.unexplained("ours").is_empty());
    }

    #[test]
    fn an_entry_asking_for_a_property_explains_only_outputs_that_show_it() {
        let e = Expectations::parse(
            "[[expected_failure]]\nbackend = \"rten\"\nfailure = \"values\"\nmessage = \"(tensor(double)\"\nobserved = [\"float_arithmetic\"]\nreason = \"double in float32\"\n",
        )
        .unwrap();
        let values = "output 0 'y' (tensor(double), shape [4]): 4 of 4 values differ";
        let float = ["float_arithmetic".to_string()];
        // The same message from outputs that are not float32 arithmetic
        // (a shifted window, say) is another bug.
        assert_eq!(
            reason(e.explain("node/a", "rten", FailureKind::Values, values, &[])),
            None
        );
        assert_eq!(e.unexplained("rten").len(), 1);
        assert_eq!(
            reason(e.explain("node/a", "rten", FailureKind::Values, values, &float)),
            Some("double in float32".into())
        );
        assert!(e.unexplained("rten").is_empty());
        assert!(e.expected_failure[0]
            .describe()
            .ends_with("with outputs showing float_arithmetic"));
    }

    #[test]
    fn committed_values_entries_for_any_trial_name_what_the_outputs_show() {
        // Listed by trial, an entry is held to those trials; for any
        // trial, a values entry matched by its message alone would excuse
        // every wrong output whose message reads alike.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/expectations.toml");
        let e = Expectations::load(&path).unwrap();
        for entry in &e.expected_failure {
            if entry.trial.is_none() && entry.failure == Some(FailureKind::Values) {
                assert!(
                    entry.observed.as_ref().is_some_and(|p| !p.is_empty()),
                    "{}: {}",
                    entry.describe(),
                    entry.reason
                );
            }
        }
    }

    #[test]
    fn observed_properties_are_known_names_on_values_failures() {
        let entry = |failure: &str, observed: &str| {
            Expectations::parse(&format!(
                "[[expected_failure]]\nfailure = \"{failure}\"\nmessage = \"values differ\"\nobserved = {observed}\nreason = \"r\"\n"
            ))
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
        };
        assert_eq!(entry("values", "[\"float_arithmetic\"]"), Ok(()));
        let unknown = entry("values", "[\"float_arithmetc\"]").unwrap_err();
        assert!(
            unknown.contains("unknown property \"float_arithmetc\""),
            "{unknown}"
        );
        let empty = entry("values", "[]").unwrap_err();
        assert!(empty.contains("empty `observed`"), "{empty}");
        let error = entry("error", "[\"float_arithmetic\"]").unwrap_err();
        assert!(error.contains("only a values failure"), "{error}");
    }

    #[test]
    fn message_patterns_explain_failures_anywhere_and_go_stale_unused() {
        let e = Expectations::parse(
            "[[expected_failure]]\nbackend = \"onnxruntime\"\nfailure = \"error\"\nmessage = \"Could not find an implementation for Pad(*)\"\nreason = \"no kernel\"\n",
        )
        .unwrap();
        assert_eq!(e.lookup("node/x", "onnxruntime"), Expect::Pass);
        assert_eq!(e.unexplained("onnxruntime").len(), 1);
        assert!(e.unexplained("ours").is_empty());
        let msg =
            "onnxruntime rejected the model: Could not find an implementation for Pad(1) node";
        assert_eq!(
            reason(e.explain("node/x", "onnxruntime", FailureKind::Panic, msg, &[])),
            None
        );
        assert_eq!(
            reason(e.explain("node/x", "onnxruntime", FailureKind::Error, msg, &[])),
            Some("no kernel".into())
        );
        assert_eq!(
            reason(e.explain(
                "node/x",
                "onnxruntime",
                FailureKind::Error,
                "values differ",
                &[]
            )),
            None
        );
        assert_eq!(
            reason(e.explain("node/x", "ours", FailureKind::Error, msg, &[])),
            None
        );
        assert!(e.unused(&[], "onnxruntime").is_empty());
        assert!(e.unexplained("onnxruntime").is_empty());
    }

    #[test]
    fn a_listing_is_used_before_an_entry_for_any_trial() {
        let e = Expectations::parse(
            "[[expected_failure]]\nbackend = \"tract\"\nfailure = \"panic\"\nmessage = \"tract panicked\"\nreason = \"any\"\n\n\
             [[expected_failure]]\nbackend = \"tract\"\ntrial = \"d/x*\"\nfailure = \"panic\"\nmessage = \"overflow\"\nreason = \"listed\"\n",
        )
        .unwrap();
        let m = "tract panicked: attempt to add with overflow";
        assert_eq!(
            reason(e.explain("d/x@Pad-11", "tract", FailureKind::Panic, m, &[])),
            Some("listed".into())
        );
        assert_eq!(
            e.unexplained("tract").len(),
            1,
            "the entry for any trial is unused"
        );
        assert_eq!(
            reason(e.explain("d/y", "tract", FailureKind::Panic, m, &[])),
            Some("any".into())
        );
        assert!(e.unexplained("tract").is_empty());
    }

    #[test]
    fn entries_of_the_other_build_profile_neither_apply_nor_go_stale() {
        let other = if cfg!(debug_assertions) {
            "release"
        } else {
            "debug"
        };
        let text = format!(
            "[[expected_failure]]\nfailure = \"panic\"\nmessage = \"broadcast\"\nreason = \"r\"\nprofile = \"{other}\"\n"
        );
        let e = Expectations::parse(&text).unwrap();
        assert_eq!(
            reason(e.explain("a", "ours", FailureKind::Panic, "broadcast", &[])),
            None
        );
        assert!(e.unexplained("ours").is_empty());
        assert!(Expectations::parse(&text.replace(other, "fast")).is_err());
    }

    #[test]
    fn an_explanation_names_its_entry_as_the_listing_of_the_backend_does() {
        let e = Expectations::parse(
            "[[expected_failure]]\nbackend = \"tract\"\nfailure = \"panic\"\nmessage = \"tract panicked\"\nreason = \"any\"\n\n\
             [[expected_failure]]\nbackend = \"rten\"\nfailure = \"error\"\nmessage = \"no kernel\"\nreason = \"r\"\n",
        )
        .unwrap();
        assert_eq!(
            e.ids("tract"),
            ["expected_failure #1 (tract): any trial: panic failure containing \"tract panicked\""]
        );
        assert_eq!(e.ids("rten").len(), 1);
        assert!(e.ids("ours").is_empty());
        let x = e
            .explain(
                "d/x",
                "tract",
                FailureKind::Panic,
                "tract panicked: no",
                &[],
            )
            .unwrap();
        assert_eq!(x.id, e.ids("tract")[0]);
    }

    #[test]
    fn glob_matches() {
        assert!(glob("test_*Pad2d", "test_ReflectionPad2d"));
        assert!(glob("a*", "a"));
        assert!(!glob("a*b", "acbd"));
        assert!(glob("a?c", "abc"));
    }
}
