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
    /// The trial did not finish within the harness's time limit
    /// (`ONNX_TRIAL_TIMEOUT`): a hang is neither a refusal nor a crash.
    Timeout,
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
            Outcome::Timeout => "timeout",
        }
    }

    /// A failure of the run (a fail, or an expected failure that passed).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::UnexpectedPass | Outcome::Timeout
        )
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
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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
    /// For an expected failure: the id of the cases/expectations.toml entry
    /// that explained it ([`SuiteListing::expected_failures`]), so that a
    /// run merged from parts can tell which entries explained nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_by: Option<String>,
}

/// The whole file: which backend ran, and every trial.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrialRecords {
    pub backend: String,
    /// The runtime's name and version (`Backend::version`), so that every
    /// result names the build of the runtime that produced it. Records
    /// written before the field existed read as empty.
    #[serde(default)]
    pub runtime_version: String,
    pub records: Vec<TrialRecord>,
}

/// Why records of several runs cannot be merged into one.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("no records to merge")]
    Empty,
    #[error("the records come from different backends: {0} and {1}")]
    Backends(String, String),
    #[error("trial {0} was recorded twice, with different outcomes or figures")]
    Conflict(String),
    #[error("the records come from different builds of the runtime: {0} and {1}")]
    Versions(String, String),
}

impl TrialRecords {
    /// One run's records from the records of its parts (shards, or one file
    /// per trial). The same trial recorded twice alike (a listing records
    /// what needs no run in every shard) counts once; recorded differently,
    /// it is an error. Records come out sorted by trial, as a single run
    /// writes them.
    pub fn merge(parts: Vec<TrialRecords>) -> Result<TrialRecords, MergeError> {
        let backend = parts.first().ok_or(MergeError::Empty)?.backend.clone();
        // A record written before the runtime first ran may not know its
        // version (a command program tells it on its first run): empty
        // versions say nothing, two different ones are an error.
        let mut runtime_version = String::new();
        let mut by_trial: std::collections::BTreeMap<String, TrialRecord> = Default::default();
        for part in parts {
            if part.backend != backend {
                return Err(MergeError::Backends(backend, part.backend));
            }
            if !part.runtime_version.is_empty() {
                if runtime_version.is_empty() {
                    runtime_version = part.runtime_version.clone();
                } else if runtime_version != part.runtime_version {
                    return Err(MergeError::Versions(runtime_version, part.runtime_version));
                }
            }
            for r in part.records {
                match by_trial.get(&r.meta.trial) {
                    Some(seen) if *seen != r => {
                        return Err(MergeError::Conflict(r.meta.trial.clone()))
                    }
                    Some(_) => {}
                    None => {
                        by_trial.insert(r.meta.trial.clone(), r);
                    }
                }
            }
        }
        Ok(TrialRecords {
            backend,
            runtime_version,
            records: by_trial.into_values().collect(),
        })
    }
}

/// What a complete run of the default cases consists of, written into an
/// `ONNX_RECORD_DIR` folder (as [`SuiteListing::FILE`]) by a run that
/// builds every trial (a plain run, or cargo-nextest's `--list`). With it, records
/// merged from parts can be held to what one whole run is held to: every
/// trial recorded, and every expected failure of the backend
/// explaining some failure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SuiteListing {
    pub backend: String,
    /// Every trial of the default cases the expectations may name: each
    /// writes a record (some when they are built, such as those not
    /// expressible at their version; the rest when they run).
    pub trials: Vec<String>,
    /// The ids of the expected failures that apply to this backend and
    /// build.
    pub expected_failures: Vec<String>,
}

/// What records merged from parts lack against their [`SuiteListing`].
#[derive(Debug, Default, PartialEq)]
pub struct Shortfall {
    /// Trials with no record: a part is missing, or a trial did not write
    /// its record.
    pub missing: Vec<String>,
    /// Expected failures that explained no failure although every trial
    /// ran: stale entries.
    pub stale: Vec<String>,
}

impl SuiteListing {
    /// Its file name in a record folder: not a trial's (those hold `%2F`).
    pub const FILE: &'static str = "_suite.json";

    /// What `merged` lacks; staleness is only told when no trial is
    /// missing (a missing record could be the failure an entry explains).
    pub fn shortfall(&self, merged: &TrialRecords) -> Shortfall {
        let recorded: std::collections::BTreeSet<&str> = merged
            .records
            .iter()
            .map(|r| r.meta.trial.as_str())
            .collect();
        let missing: Vec<String> = self
            .trials
            .iter()
            .filter(|t| !recorded.contains(t.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Shortfall {
                missing,
                stale: Vec::new(),
            };
        }
        let used: std::collections::BTreeSet<&str> = merged
            .records
            .iter()
            .filter_map(|r| r.explained_by.as_deref())
            .collect();
        Shortfall {
            missing,
            stale: self
                .expected_failures
                .iter()
                .filter(|e| !used.contains(e.as_str()))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(trial: &str, outcome: Outcome) -> TrialRecord {
        TrialRecord {
            meta: TrialMeta {
                trial: trial.into(),
                source: "node".into(),
                case: trial.into(),
                op: "Pad".into(),
                version: 18,
                dtype: "float".into(),
                variant: false,
                later_reading: None,
            },
            outcome,
            message: None,
            failure: None,
            max_abs: Some(0.0),
            max_rel: Some(0.0),
            bound_units: None,
            explained_by: None,
        }
    }

    #[test]
    fn a_merged_run_is_short_of_missing_trials_and_then_of_stale_entries() {
        let listing = SuiteListing {
            backend: "tract".into(),
            trials: vec!["a".into(), "b".into()],
            expected_failures: vec!["#1 x".into(), "#2 y".into()],
        };
        let mut known = record("b", Outcome::ExpectedFailure);
        known.explained_by = Some("#2 y".into());
        // One part lost: the missing trial is named, staleness not told.
        let short = listing.shortfall(&part("tract", vec![known.clone()]));
        assert_eq!(short.missing, ["a"]);
        assert!(short.stale.is_empty());
        // Complete: the entry that explained nothing is stale.
        let whole = part("tract", vec![record("a", Outcome::Pass), known]);
        let short = listing.shortfall(&whole);
        assert!(short.missing.is_empty());
        assert_eq!(short.stale, ["#1 x"]);
        // Both entries used: nothing short.
        let mut other = record("a", Outcome::ExpectedFailure);
        other.explained_by = Some("#1 x".into());
        let mut all = whole.clone();
        all.records[0] = other;
        assert_eq!(listing.shortfall(&all), Shortfall::default());
    }

    fn part(backend: &str, records: Vec<TrialRecord>) -> TrialRecords {
        TrialRecords {
            backend: backend.into(),
            runtime_version: String::new(),
            records,
        }
    }

    #[test]
    fn merging_sorts_and_counts_a_repeated_record_once() {
        let merged = TrialRecords::merge(vec![
            part(
                "ours",
                vec![
                    record("b", Outcome::Pass),
                    record("c", Outcome::NotExpressible),
                ],
            ),
            part(
                "ours",
                vec![
                    record("a", Outcome::Fail),
                    record("c", Outcome::NotExpressible),
                ],
            ),
        ])
        .unwrap();
        let names: Vec<_> = merged
            .records
            .iter()
            .map(|r| r.meta.trial.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn merging_refuses_conflicts_mixed_backends_and_nothing() {
        assert_eq!(
            TrialRecords::merge(vec![
                part("ours", vec![record("a", Outcome::Pass)]),
                part("ours", vec![record("a", Outcome::Fail)]),
            ]),
            Err(MergeError::Conflict("a".into()))
        );
        assert_eq!(
            TrialRecords::merge(vec![part("ours", vec![]), part("tract", vec![])]),
            Err(MergeError::Backends("ours".into(), "tract".into()))
        );
        assert_eq!(TrialRecords::merge(vec![]), Err(MergeError::Empty));
        let built = |v: &str| TrialRecords {
            runtime_version: v.into(),
            ..part("ours", vec![])
        };
        assert_eq!(
            TrialRecords::merge(vec![built(""), built("1.0"), built("")])
                .map(|m| m.runtime_version),
            Ok("1.0".into())
        );
        assert_eq!(
            TrialRecords::merge(vec![built("1.0"), built("1.1")]),
            Err(MergeError::Versions("1.0".into(), "1.1".into()))
        );
    }
}
