//! Invalid-input trials: a case folder with `expected_error.toml` holds
//! input that must be rejected. The trial passes when loading or running
//! it fails with the expected error kind and a message containing the
//! expected fragment; a run that succeeds, a different error, or a panic
//! fails it.
//!
//! Other runtimes cannot report our error kinds: for them the trial
//! passes on any error, and cases about this suite's own resource limits
//! (not ONNX rules) are not run.

use crate::discover::Case;
use crate::run_case::{self, Verdict};
use anyhow::{bail, Context, Result};
use onnx_conformance::backend::Backend;
use onnx_conformance::{graph, Error, Limits};
use serde::Deserialize;

/// The kinds `Error::kind` reports, plus the harness's own.
const KINDS: &[&str] = &[
    "decode",
    "unsupported",
    "external-data",
    "io",
    "limit",
    "no-kernel",
    "graph",
    "attribute",
    "input",
    "type",
    "invalid",
    "layout",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    /// The error kind (`Error::kind`).
    pub kind: String,
    /// A fragment the error message must contain.
    pub message: String,
    /// Why the input is invalid, for people reading failures.
    pub why: String,
    /// `ONNX_LIMITS`-style overrides to run the case under.
    #[serde(default)]
    pub limits: Option<String>,
}

impl ExpectedError {
    pub fn load(case: &Case) -> Result<ExpectedError> {
        let path = case
            .expected_error
            .as_ref()
            .context("the case has no expected_error.toml")?;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let e: ExpectedError =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if !KINDS.contains(&e.kind.as_str()) {
            bail!(
                "{}: unknown kind '{}'; known: {}",
                path.display(),
                e.kind,
                KINDS.join(", ")
            );
        }
        Ok(e)
    }

    /// Whether the case is about this suite's limits rather than ONNX rules.
    pub fn is_about_limits(&self) -> bool {
        self.kind == "limit" || self.limits.is_some()
    }

    fn limits(&self, base: Limits) -> Result<Limits> {
        match &self.limits {
            None => Ok(base),
            Some(spec) => base
                .with_overrides(spec)
                .map_err(|e| anyhow::anyhow!("limits = \"{spec}\": {e}")),
        }
    }
}

/// The kind of an error from preparing or running a case.
fn kind_of(e: &anyhow::Error) -> &'static str {
    match e.downcast_ref::<Error>() {
        Some(err) => err.kind(),
        None => "layout",
    }
}

/// Loads and runs an invalid case and judges the rejection.
pub fn check(case: &Case, backend: &dyn Backend, base: Limits) -> Verdict {
    let label = format!("case {} ({})", case.id(), case.dir.display());
    let fail = |m: String| Verdict {
        failure: Some(format!("{label}: {m}")),
        max_abs: f64::NAN,
        max_rel: f64::NAN,
        ..Verdict::default()
    };
    let expected = match ExpectedError::load(case) {
        Ok(e) => e,
        Err(e) => return fail(format!("{e:#}")),
    };
    let limits = match expected.limits(base) {
        Ok(l) => l,
        Err(e) => return fail(format!("{e:#}")),
    };
    let want = format!(
        "a '{}' error containing {:?} ({})",
        expected.kind, expected.message, expected.why
    );
    if case.data_sets.is_empty() {
        return fail("an invalid case needs a test_data_set_0 folder with its inputs".into());
    }
    let ours = backend.name() == "ours";
    let got: Result<usize, (&'static str, String)> = match run_case::prepare(case, 0, limits) {
        Err(e) => Err((kind_of(&e), format!("{e:#}"))),
        Ok(p) => {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if ours {
                    graph::run(&p.model, &p.inputs, limits).map_err(|e| (e.kind(), e.to_string()))
                } else {
                    backend
                        .run(&p.model, &p.bytes, &p.inputs)
                        .map_err(|e| ("runtime", e))
                }
            }));
            match run {
                Ok(r) => r.map(|outs| outs.len()),
                Err(_) => return fail(format!("{} panicked; expected {want}", backend.name())),
            }
        }
    };
    match got {
        Ok(n) => fail(format!(
            "{} accepted it and produced {n} outputs; expected {want}",
            backend.name()
        )),
        Err((_, _)) if !ours => Verdict::default(),
        Err((kind, message)) => {
            if kind == expected.kind && message.contains(&expected.message) {
                Verdict::default()
            } else {
                fail(format!("expected {want}; got a '{kind}' error: {message}"))
            }
        }
    }
}
