//! The record of one conformance trial: written as JSON by the harness when
//! `ONNX_REPORT` is set, read by `cargo xtask report`. One type serves both
//! sides so the format cannot drift.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    ExpectedFailure,
    UnexpectedPass,
    Skipped,
    NotExpressible,
    /// Another runtime on input whose behaviour the spec leaves undefined
    /// (or does not address): whatever it did, neither a pass nor a failure.
    Undefined,
    /// Input that cannot be put to the runtime at all (for example a tensor
    /// file only a loader could have judged, for a runtime that takes typed
    /// tensors): never a pass.
    CannotRun,
}

impl Outcome {
    /// The name used in JSON and reports.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::ExpectedFailure => "expected_failure",
            Outcome::UnexpectedPass => "unexpected_pass",
            Outcome::Skipped => "skipped",
            Outcome::NotExpressible => "not_expressible",
            Outcome::Undefined => "undefined",
            Outcome::CannotRun => "cannot_run",
        }
    }

    /// A failure of the run (a fail, or an expected failure that passed).
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::UnexpectedPass)
    }
}

/// Which way a trial failed. Expected failures name the kind they expect,
/// so a trial that starts failing another way is not excused by them.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The runtime produced outputs, and they are wrong: values beyond the
    /// policy, or the wrong shape, element type or number of outputs.
    Values,
    /// The runtime (or the loader that reads the case) refused with an
    /// error; for an invalid case, an error other than the one expected.
    Error,
    /// The runtime panicked or crashed.
    Panic,
    /// An invalid case that the runtime accepted instead of rejecting.
    Accepted,
    /// The runtime (in another process) did not finish within its time
    /// limit and was stopped: neither a refusal nor a crash.
    Timeout,
}

impl FailureKind {
    pub const ALL: [FailureKind; 5] = [
        FailureKind::Values,
        FailureKind::Error,
        FailureKind::Panic,
        FailureKind::Accepted,
        FailureKind::Timeout,
    ];

    /// The name used in JSON, reports and `cases/expectations.toml`.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Values => "values",
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::Accepted => "accepted",
            FailureKind::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a trial is about: its operator, version and element type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialMeta {
    pub trial: String,
    pub source: String,
    pub case: String,
    /// The single node's op type, or `graph` for multi-node cases.
    pub op: String,
    /// The operator version the trial runs (a since_version), 0 if unknown.
    pub version: i64,
    /// The element type of the first input.
    pub dtype: String,
    /// True for `@<Op>-<version>` trials.
    pub variant: bool,
    /// Set when the trial holds an older operator text to a later version's
    /// reading of it (its name then ends in `~later-reading`): why. Records
    /// written before the field existed read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_reading: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialRecord {
    #[serde(flatten)]
    pub meta: TrialMeta,
    pub outcome: Outcome,
    pub message: Option<String>,
    /// How the trial failed (for fails and expected failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
    pub max_abs: Option<f64>,
    pub max_rel: Option<f64>,
    /// Largest error in units of its bound, where the error-bound policy
    /// judged (Conv).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_units: Option<f64>,
}

/// The whole file: which backend ran, and every trial.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialRecords {
    pub backend: String,
    /// The runtime's name and version (`Backend::version`), so that every
    /// result names the build of the runtime that produced it. Records
    /// written before the field existed read as empty.
    #[serde(default)]
    pub runtime_version: String,
    pub records: Vec<TrialRecord>,
}
