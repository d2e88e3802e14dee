//! What each trial did, for `cargo xtask report` (written as JSON when
//! `ONNX_REPORT` is set).

use crate::discover::Case;
use crate::run_case::Verdict;
use anyhow::{Context, Result};
use onnx_conformance::backend::Backend;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use onnx_conformance::trial_record::{
    Outcome, SuiteListing, TrialMeta as Meta, TrialRecord as Record, TrialRecords,
};

/// What a judged trial comes to, for its record.
pub struct Judgement {
    pub outcome: Outcome,
    pub message: String,
    pub verdict: Option<Verdict>,
    /// The expected failure that explained it.
    pub explained_by: Option<String>,
}

/// Bundles an outcome with its message and verdict.
pub fn with(outcome: Outcome, message: &str, verdict: Option<&Verdict>) -> Judgement {
    Judgement {
        outcome,
        message: message.to_string(),
        verdict: verdict.cloned(),
        explained_by: None,
    }
}

impl Judgement {
    /// The trial's record.
    pub fn record(self, meta: &Meta) -> Record {
        let message = (!self.message.is_empty()).then_some(self.message);
        let mut r = meta.outcome(self.outcome, message, self.verdict.as_ref());
        r.explained_by = self.explained_by;
        r
    }
}

/// Builds metadata and records for trials.
pub trait MetaExt {
    fn of_case(case: &Case) -> Meta;
    fn named(self, trial: &str, variant: bool) -> Meta;
    fn outcome(
        &self,
        outcome: Outcome,
        message: Option<String>,
        verdict: Option<&Verdict>,
    ) -> Record;
}

impl MetaExt for Meta {
    fn of_case(case: &Case) -> Meta {
        let mut m = Meta {
            trial: case.id(),
            source: case.source.clone(),
            case: case.name.clone(),
            op: "?".into(),
            version: 0,
            dtype: "?".into(),
            variant: false,
            later_reading: None,
        };
        let Ok(model) = onnx_conformance::proto::load_model_file(
            &case.dir.join("model.onnx"),
            onnx_conformance::Limits::default(),
        ) else {
            return m;
        };
        if let Some((node, version)) = crate::variants::single_node(&model) {
            m.op = node.op_type.clone();
            m.version = version;
            m.later_reading = crate::reading::later_reading(node, version);
        } else {
            m.op = "graph".into();
            m.version = model.opset("").unwrap_or(0);
        }
        if let Some(dt) = model.graph.inputs.first().and_then(|v| v.dtype) {
            m.dtype = dt.to_string();
        }
        m
    }

    fn named(mut self, trial: &str, variant: bool) -> Meta {
        self.trial = trial.to_string();
        self.variant = variant;
        self
    }

    fn outcome(
        &self,
        outcome: Outcome,
        message: Option<String>,
        verdict: Option<&Verdict>,
    ) -> Record {
        let finite = |v: f64| (!v.is_nan()).then_some(v);
        Record {
            meta: self.clone(),
            outcome,
            message,
            failure: match outcome {
                Outcome::Fail | Outcome::ExpectedFailure => verdict.and_then(|v| v.kind),
                _ => None,
            },
            max_abs: verdict.and_then(|v| finite(v.max_abs)),
            max_rel: verdict.and_then(|v| finite(v.max_rel)),
            bound_units: verdict.and_then(|v| v.bound_units),
            explained_by: None,
        }
    }
}

/// Collects records from trials running on several threads. With
/// `ONNX_RECORD_DIR`, each record is also written at once as a file of its
/// own in that folder, so that runs split across processes or machines
/// (cargo-nextest, its `--partition`) can be merged: `cargo xtask report
/// --merge DIR...`. Outcomes known without running a trial (not
/// expressible, skipped) are recorded when trials are built, which a
/// `--list` run does for every trial.
#[derive(Clone, Default)]
pub struct Recorder {
    records: Arc<Mutex<Vec<Record>>>,
    dir: Option<PathBuf>,
    /// The runtime under test, asked for its name and version when records
    /// are written (a program behind `command:` tells its version only once
    /// it has run).
    runtime: Arc<OnceLock<Arc<dyn Backend>>>,
}

impl Recorder {
    pub fn from_env() -> Recorder {
        Recorder {
            records: Arc::default(),
            dir: std::env::var_os("ONNX_RECORD_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            runtime: Arc::default(),
        }
    }

    /// The runtime's name and version, as records name them.
    fn identity(&self) -> (String, String) {
        match self.runtime.get() {
            Some(b) => (b.name().to_string(), b.version()),
            // Discovery failed before a backend existed.
            None => (backend_name(), String::new()),
        }
    }

    pub fn push(&self, r: Record) {
        if let Some(dir) = &self.dir {
            if let Err(e) = write_one(dir, &r, self.identity()) {
                // The trial's own verdict stands; the missing file shows
                // up when the records are merged.
                eprintln!("could not write the record of {}: {e:#}", r.meta.trial);
            }
        }
        if let Ok(mut v) = self.records.lock() {
            v.push(r);
        }
    }

    /// Names the runtime whose trials are recorded.
    pub fn judging(&self, backend: Arc<dyn Backend>) {
        let _ = self.runtime.set(backend);
    }

    /// With `ONNX_RECORD_DIR`, writes the folder's [`SuiteListing`]. Only a
    /// run that builds every trial calls this (a plain run, or nextest's
    /// `--list`; its per-trial processes build one case each), so a folder
    /// used again gets the listing of the latest run.
    pub fn list_suite(&self, listing: impl FnOnce() -> SuiteListing) {
        let Some(dir) = &self.dir else { return };
        let path = dir.join(SuiteListing::FILE);
        let write = || -> Result<()> {
            std::fs::create_dir_all(dir)?;
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, serde_json::to_string_pretty(&listing())?)?;
            std::fs::rename(&tmp, &path)?;
            Ok(())
        };
        if let Err(e) = write() {
            // Merging then says the listing is missing.
            eprintln!("could not write {}: {e:#}", path.display());
        }
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let mut records = self
            .records
            .lock()
            .map_err(|_| anyhow::anyhow!("recorder poisoned"))?
            .clone();
        records.sort_by(|a, b| a.meta.trial.cmp(&b.meta.trial));
        let (backend, runtime_version) = self.identity();
        let doc = TrialRecords {
            backend,
            runtime_version,
            records,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

fn backend_name() -> String {
    std::env::var("ONNX_BACKEND")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "ours".into())
}

/// Writes one record as `<dir>/<file_name(trial)>.json`, a [`TrialRecords`]
/// holding it alone.
fn write_one(dir: &Path, r: &Record, (backend, runtime_version): (String, String)) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let doc = TrialRecords {
        backend,
        runtime_version,
        records: vec![r.clone()],
    };
    let path = dir.join(format!("{}.json", file_name(&r.meta.trial)));
    // Written under another name and renamed, so a reader never sees half
    // a record.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string_pretty(&doc)?)?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
}

/// A file name for a trial: letters, digits and `-_.@#~` as they are, every
/// other byte as `%XX`, so distinct trials get distinct files.
pub fn file_name(trial: &str) -> String {
    let mut s = String::new();
    for b in trial.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.@#~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}
