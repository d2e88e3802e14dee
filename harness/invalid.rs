//! Invalid-input trials: a case folder with `expected_error.toml` holds
//! input that must be rejected. The trial passes when loading or running
//! it fails with the expected error kind and a message containing the
//! expected fragment; a run that succeeds, a different error, or a panic
//! fails it.
//!
//! Other runtimes cannot report our error kinds: for them the trial
//! passes on any rejection (a panic is a crash, a failure). When our loader
//! rejects the files, the runtime still gets them: the model file through
//! its own loader (`Backend::run_files`), the inputs decoded by ours; input
//! files our loader cannot decode cannot be handed to a runtime that takes
//! typed tensors, nor tensors of a type its API lacks, so those trials are
//! ignored ("cannot run"), never passed.
//! Cases about this suite's own resource limits (not ONNX rules) are not
//! run, and cases the spec leaves undefined (`undefined`) are recorded, not
//! judged, for other runtimes.
//!
//! `ONNX_AUDIT.toml` beside the case folders (written by
//! `xtask/src/audit_invalid.py`) says whether onnx itself accepts each case;
//! such a case must quote the spec text that forbids it (`spec`) or be
//! marked `undefined`, or its trial fails.

use crate::discover::{numbered, Case};
use crate::run_case::{self, FailureKind, Verdict};
use anyhow::{bail, Context, Result};
use onnx_conformance::backend::{Backend, RawRun};
use onnx_conformance::{graph, proto, Error, Limits, Tensor};
use serde::Deserialize;
use std::collections::BTreeMap;

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
    /// The spec text that forbids the input, where onnx's own tools accept it.
    #[serde(default)]
    pub spec: Option<String>,
    /// The spec text that leaves the behaviour undefined, or a statement
    /// that the spec does not address it: other runtimes are not judged.
    #[serde(default)]
    pub undefined: Option<String>,
}

/// What onnx says about one invalid case (`ONNX_AUDIT.toml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnnxAudit {
    pub checker: String,
    pub shape_inference: String,
    pub reference: String,
    /// The checker, strict shape inference and the reference all accept it.
    pub onnx_accepts: bool,
}

impl OnnxAudit {
    /// The audit of `case`, when its source folder has an `ONNX_AUDIT.toml`
    /// (folders made elsewhere need not); a case missing from a present
    /// audit is an error, since the audit would then be stale.
    pub fn of(case: &Case) -> Result<Option<OnnxAudit>> {
        let Some(root) = case.dir.parent() else {
            return Ok(None);
        };
        let path = root.join("ONNX_AUDIT.toml");
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut all: BTreeMap<String, OnnxAudit> =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        match all.remove(&case.name) {
            Some(a) => Ok(Some(a)),
            None => bail!(
                "{} has no entry for {}: run `cargo xtask fetch-cases`",
                path.display(),
                case.name
            ),
        }
    }
}

/// Why a case onnx accepts cannot stand as invalid input as written.
pub fn spec_problem(expected: &ExpectedError, audit: &OnnxAudit) -> Option<String> {
    if !audit.onnx_accepts
        || expected.spec.is_some()
        || expected.undefined.is_some()
        || expected.is_about_limits()
    {
        return None;
    }
    Some(format!(
        "onnx accepts this case (checker: {}; shape inference: {}; reference: {}): quote the spec text that forbids it (`spec = \"...\"` in expected_error.toml), mark it `undefined = \"...\"`, or make it a valid case",
        audit.checker, audit.shape_inference, audit.reference
    ))
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
        if e.spec.is_some() && e.undefined.is_some() {
            bail!(
                "{}: a case is either forbidden by the spec (`spec`) or undefined by it (`undefined`), not both",
                path.display()
            );
        }
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

/// What another runtime did with an invalid case.
pub enum Seen {
    Accepted(usize),
    Rejected(String),
    Panicked(String),
    /// The runtime's process died (judged like a panic).
    Crashed(String),
    TimedOut(String),
    CannotRun(String),
}

impl From<RawRun> for Seen {
    fn from(run: RawRun) -> Seen {
        match run {
            RawRun::Ran(outs) => Seen::Accepted(outs.len()),
            RawRun::Rejected(m) => Seen::Rejected(m),
            RawRun::CannotRun(m) => Seen::CannotRun(m),
            RawRun::Crashed(m) => Seen::Crashed(m),
            RawRun::TimedOut(m) => Seen::TimedOut(m),
        }
    }
}

impl Seen {
    /// How a judged trial fails when this is what it saw instead of a
    /// rejection.
    fn failure_kind(&self) -> FailureKind {
        match self {
            Seen::Accepted(_) => FailureKind::Accepted,
            Seen::Panicked(_) | Seen::Crashed(_) => FailureKind::Panic,
            Seen::TimedOut(_) => FailureKind::Timeout,
            Seen::Rejected(_) | Seen::CannotRun(_) => FailureKind::Error,
        }
    }

    pub fn describe(&self, runtime: &str) -> String {
        match self {
            Seen::Accepted(n) => format!("{runtime} accepted it and produced {n} outputs"),
            Seen::Rejected(m) => format!("{runtime} rejected it: {m}"),
            Seen::Panicked(m) => format!("{runtime} panicked: {m}"),
            Seen::Crashed(m) => format!("{runtime} crashed: {m}"),
            Seen::TimedOut(m) => format!("{runtime} timed out: {m}"),
            Seen::CannotRun(m) => format!("it cannot be run by {runtime}: {m}"),
        }
    }
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Decodes the data set's inputs with our loader, one by one.
fn decode_inputs(case: &Case, limits: Limits) -> Result<Vec<Tensor>, String> {
    let dir = case
        .data_sets
        .first()
        .ok_or("the case has no test_data_set_0")?;
    let paths = numbered(dir, "input_").map_err(|e| format!("{e:#}"))?;
    paths
        .iter()
        .map(|p| {
            proto::load_tensor_file(p, limits)
                .map(|(_, t)| t)
                .map_err(|e| format!("our loader cannot decode {}: {e}", p.display()))
        })
        .collect()
}

/// Why the case cannot be put to another runtime at all: an input file our
/// loader cannot decode cannot be handed to a runtime that takes typed
/// tensors, nor can a tensor of a type the runtime's API lacks.
pub fn cannot_run(case: &Case, backend: &dyn Backend, limits: Limits) -> Option<String> {
    let name = backend.name();
    let inputs = match decode_inputs(case, limits) {
        Ok(i) => i,
        Err(e) => return Some(format!("{name} takes decoded tensors, and {e}")),
    };
    inputs.iter().enumerate().find_map(|(k, t)| {
        backend
            .check_input(t)
            .err()
            .map(|e| format!("input_{k}.pb cannot be given to {name}: {e}"))
    })
}

/// Runs an invalid case through another runtime: the prepared model when
/// our loader accepts the files, else the model file through the runtime's
/// own loader.
pub fn run_other(case: &Case, backend: &dyn Backend, limits: Limits) -> Seen {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(why) = cannot_run(case, backend, limits) {
            return Seen::CannotRun(why);
        }
        match run_case::prepare(case, 0, limits) {
            Ok(p) => match backend.run(&p.model, &p.bytes, &p.inputs) {
                Ok(outs) => Seen::Accepted(outs.len()),
                Err(e) => RawRun::from(e).into(),
            },
            Err(_) => match decode_inputs(case, limits) {
                Err(e) => Seen::CannotRun(e),
                Ok(inputs) => backend
                    .run_files(&case.dir.join("model.onnx"), &inputs)
                    .into(),
            },
        }
    }));
    run.unwrap_or_else(|p| Seen::Panicked(panic_text(p)))
}

/// Loads and runs an invalid case and judges the rejection.
pub fn check(case: &Case, backend: &dyn Backend, base: Limits) -> Verdict {
    let label = format!("case {} ({})", case.id(), case.dir.display());
    let fail = |kind, m: String| Verdict::failed(kind, format!("{label}: {m}"));
    let expected = match ExpectedError::load(case) {
        Ok(e) => e,
        Err(e) => return fail(FailureKind::Error, format!("{e:#}")),
    };
    match OnnxAudit::of(case) {
        Err(e) => return fail(FailureKind::Error, format!("{e:#}")),
        Ok(Some(audit)) => {
            if let Some(problem) = spec_problem(&expected, &audit) {
                return fail(FailureKind::Error, problem);
            }
        }
        Ok(None) => {}
    }
    let limits = match expected.limits(base) {
        Ok(l) => l,
        Err(e) => return fail(FailureKind::Error, format!("{e:#}")),
    };
    let want = format!(
        "a '{}' error containing {:?} ({})",
        expected.kind, expected.message, expected.why
    );
    if case.data_sets.is_empty() {
        return fail(
            FailureKind::Error,
            "an invalid case needs a test_data_set_0 folder with its inputs".into(),
        );
    }
    let name = backend.name();
    if name != "ours" {
        return match run_other(case, backend, limits) {
            Seen::Rejected(_) => Verdict::default(),
            seen => fail(
                seen.failure_kind(),
                format!("{}; expected a rejection ({want})", seen.describe(name)),
            ),
        };
    }
    let got: Result<usize, (&'static str, String)> = match run_case::prepare(case, 0, limits) {
        Err(e) => Err((kind_of(&e), format!("{e:#}"))),
        Ok(p) => {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                graph::run(&p.model, &p.inputs, limits).map_err(|e| (e.kind(), e.to_string()))
            }));
            match run {
                Ok(r) => r.map(|outs| outs.len()),
                Err(p) => {
                    return fail(
                        FailureKind::Panic,
                        format!("{name} panicked ({}); expected {want}", panic_text(p)),
                    )
                }
            }
        }
    };
    match got {
        Ok(n) => fail(
            FailureKind::Accepted,
            format!("{name} accepted it and produced {n} outputs; expected {want}"),
        ),
        Err((kind, message)) => {
            if kind == expected.kind && message.contains(&expected.message) {
                Verdict::default()
            } else {
                fail(
                    FailureKind::Error,
                    format!("expected {want}; got a '{kind}' error: {message}"),
                )
            }
        }
    }
}
