//! Runs one data set of one case through a backend and compares outputs.

use crate::discover::{numbered, Case};
use anyhow::{Context, Result};
use onnx_conformance::backend::{Backend, RunError};
use onnx_conformance::compare::{self, Mismatch, Policy};
use onnx_conformance::proto::{self, LoadOptions};
pub use onnx_conformance::trial_record::FailureKind;
use onnx_conformance::verdict::{self, Tolerance};
use onnx_conformance::{files, Limits, Storage, Tensor};
use std::path::{Path, PathBuf};

/// Small outputs also get a line diff in failure messages.
const DIFF_LIMIT: usize = 64;

/// A data set ready to run: the model (parsed and serialized), its inputs
/// and the expected outputs.
#[derive(Debug)]
pub struct Prepared {
    pub model: onnx_conformance::Model,
    pub bytes: Vec<u8>,
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<(String, Tensor)>,
}

/// What a trial found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// The failure message, when it failed.
    pub failure: Option<String>,
    /// Which way it failed (set with `failure`).
    pub kind: Option<FailureKind>,
    /// Largest absolute and relative error over all outputs (0 when exact).
    pub max_abs: f64,
    pub max_rel: f64,
    /// Largest error in units of its bound, where an error bound judged.
    pub bound_units: Option<f64>,
    /// Set when every output is right but only under arithmetic the spec
    /// leaves open (float16 Conv summed in float16): what was seen.
    pub undefined: Option<String>,
    /// For a values failure, the properties the outputs show
    /// (`onnx_conformance::observed`), which an expected failure may ask for.
    pub observed: Vec<String>,
}

impl Verdict {
    /// A failure with no error figures.
    pub fn failed(kind: FailureKind, message: String) -> Verdict {
        Verdict {
            failure: Some(message),
            kind: Some(kind),
            max_abs: f64::NAN,
            max_rel: f64::NAN,
            bound_units: None,
            undefined: None,
            observed: Vec::new(),
        }
    }
}

/// The policy family of this run (`ONNX_TOLERANCE`), read once.
pub fn tolerance() -> Result<Tolerance, String> {
    static TOLERANCE: std::sync::OnceLock<Result<Tolerance, String>> = std::sync::OnceLock::new();
    TOLERANCE.get_or_init(Tolerance::from_env).clone()
}

/// Reads a case's model and one data set, under `limits`. External data
/// resolves only inside the folder of the file that names it. Errors keep
/// the library's `Error` (with its kind) at their root.
pub fn prepare(case: &Case, data_set: usize, limits: Limits) -> Result<Prepared> {
    let model_path = case.dir.join("model.onnx");
    let in_folder = |p: &Path| LoadOptions {
        limits,
        base_dir: p.parent().map(Path::to_path_buf),
    };
    let bytes = files::read_limited(&model_path, limits.max_file_bytes)?;
    let model = proto::load_model_with(&bytes, &in_folder(&model_path))
        .with_context(|| format!("loading {}", model_path.display()))?;
    let dir = &case.data_sets[data_set];
    let read = |p: &PathBuf| -> Result<(String, Tensor)> {
        let bytes = files::read_limited(p, limits.max_file_bytes)?;
        proto::load_tensor_with(&bytes, &in_folder(p))
            .with_context(|| format!("decoding {}", p.display()))
    };
    let inputs = numbered(dir, "input_")?
        .iter()
        .map(|p| read(p).map(|(_, t)| t))
        .collect::<Result<_>>()?;
    let outputs = numbered(dir, "output_")?
        .iter()
        .map(read)
        .collect::<Result<_>>()?;
    Ok(Prepared {
        model,
        bytes,
        inputs,
        outputs,
    })
}

/// Where actual outputs of a failing trial are written.
pub fn artifact_dir(target: &Path, case: &Case, suffix: &str) -> PathBuf {
    target
        .join("conformance")
        .join(&case.source)
        .join(format!("{}{suffix}", case.name))
}

/// Runs the case's data set and compares its outputs.
pub fn check_verdict(
    case: &Case,
    data_set: usize,
    backend: &dyn Backend,
    target: &Path,
    limits: Limits,
) -> Verdict {
    let label = format!(
        "case {} ({}), data set {data_set}",
        case.id(),
        case.dir.display()
    );
    let suffix = if data_set > 0 {
        format!("/test_data_set_{data_set}")
    } else {
        String::new()
    };
    match prepare(case, data_set, limits) {
        Ok(p) => run_prepared(&label, &p, backend, &artifact_dir(target, case, &suffix)),
        Err(e) => Verdict::failed(FailureKind::Error, format!("{label}: {e:#}")),
    }
}

/// Runs a prepared data set through `backend` and compares its outputs
/// under this run's policy family (`ONNX_TOLERANCE`).
pub fn run_prepared(label: &str, p: &Prepared, backend: &dyn Backend, artifacts: &Path) -> Verdict {
    match tolerance() {
        Ok(t) => run_prepared_with(label, p, backend, artifacts, t),
        Err(e) => Verdict::failed(FailureKind::Error, format!("{label}: {e}")),
    }
}

/// [`run_prepared`] under a given policy family.
pub fn run_prepared_with(
    label: &str,
    p: &Prepared,
    backend: &dyn Backend,
    artifacts: &Path,
    tolerance: Tolerance,
) -> Verdict {
    let fail = |kind, m: String| Verdict::failed(kind, format!("{label}: {m}"));
    // A runtime that panics is judged like one that returns an error.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backend.run(&p.model, &p.bytes, &p.inputs)
    }));
    let actual = match run {
        Ok(Ok(a)) => a,
        Ok(Err(RunError::Rejected(e))) => {
            return fail(
                FailureKind::Error,
                format!("{} failed: {e}", backend.name()),
            )
        }
        // A runtime process that died is judged like one that panicked.
        Ok(Err(RunError::Crashed(e))) => {
            return fail(
                FailureKind::Panic,
                format!("{} crashed: {e}", backend.name()),
            )
        }
        Ok(Err(RunError::TimedOut(e))) => {
            return fail(
                FailureKind::Timeout,
                format!("{} timed out: {e}", backend.name()),
            )
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            return fail(
                FailureKind::Panic,
                format!("{} panicked: {what}", backend.name()),
            );
        }
    };
    if actual.len() != p.outputs.len() {
        return fail(
            FailureKind::Values,
            format!(
                "{} produced {} outputs, the data set expects {}",
                backend.name(),
                actual.len(),
                p.outputs.len()
            ),
        );
    }
    let mut verdict = Verdict::default();
    let mut problems = Vec::new();
    let mut unspecified = Vec::new();
    // The policy comes from the model and its inputs, never from the
    // backend under test, so every runtime is judged alike.
    let policies = verdict::policies(&p.model, &p.inputs, tolerance);
    for (k, ((name, expected), got)) in p.outputs.iter().zip(&actual).enumerate() {
        let label = p
            .model
            .graph
            .outputs
            .get(k)
            .map(|o| o.name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                if name.is_empty() {
                    format!("output_{k}")
                } else {
                    name.clone()
                }
            });
        let policy = match policies.get(k) {
            Some(Ok(policy)) => policy,
            Some(Err(why)) => {
                verdict.max_abs = f64::NAN;
                problems.push(format!("output {k} '{label}': cannot be judged: {why}"));
                continue;
            }
            None => {
                problems.push(format!(
                    "output {k} '{label}': the data set has more outputs than the graph declares"
                ));
                continue;
            }
        };
        match compare::compare(expected, got, policy) {
            Err(structural) => {
                verdict.max_abs = f64::INFINITY;
                problems.push(format!("output {k} '{label}': {structural}"));
            }
            Ok(m) => {
                verdict.max_abs = verdict.max_abs.max(m.max_abs);
                verdict.max_rel = verdict.max_rel.max(m.max_rel);
                if let Some(u) = m.max_bound_units {
                    verdict.bound_units = Some(verdict.bound_units.unwrap_or(0.0).max(u));
                }
                if m.mismatches == 0 {
                    continue;
                }
                match compare::within_unspecified(expected, got, policy, &m) {
                    Some(why) => unspecified.push(format!("output {k} '{label}': {why}")),
                    None => problems.push(value_report(k, &label, expected, got, &m, policy)),
                }
            }
        }
    }
    if problems.is_empty() {
        if !unspecified.is_empty() {
            verdict.undefined = Some(unspecified.join("; "));
        }
        return verdict;
    }
    let saved = match save_actual(artifacts, &actual) {
        Ok(()) => format!("actual outputs written to {}", artifacts.display()),
        Err(e) => format!(
            "could not write actual outputs to {}: {e:#}",
            artifacts.display()
        ),
    };
    verdict.failure = Some(format!("{label}:\n  {}\n  {saved}", problems.join("\n  ")));
    verdict.kind = Some(FailureKind::Values);
    let right: Vec<Tensor> = p.outputs.iter().map(|(_, t)| t.clone()).collect();
    verdict.observed = onnx_conformance::observed::observed(&p.model, &p.inputs, &right, &actual);
    verdict
}

/// How a verdict that is right only under arithmetic the spec leaves open
/// (`Verdict::undefined`) counts for `backend`: `Ok(note)`, undefined by
/// the spec, for other runtimes; `Err(failure)` for ours, whose kernels
/// promise a float32 sum rounded once (README), so that the spec's room
/// cannot hide our own regression. None when the verdict has no such note.
pub fn spec_room(v: &Verdict, backend: &str) -> Option<Result<String, String>> {
    let seen = v.undefined.as_ref()?;
    Some(if backend == "ours" {
        Err(format!(
            "[values] our float16/bfloat16 Conv must be a float32 sum rounded once: {seen}"
        ))
    } else {
        Ok(format!(
            "undefined by the spec (it does not fix the accumulation precision): {seen}"
        ))
    })
}

fn value_report(
    k: usize,
    label: &str,
    expected: &Tensor,
    got: &Tensor,
    m: &Mismatch,
    policy: &Policy,
) -> String {
    let mut s = format!(
        "output {k} '{label}' (tensor({}), shape {:?}): {}",
        expected.dtype(),
        expected.shape(),
        compare::describe(m, expected.shape(), policy)
    );
    if expected.len() <= DIFF_LIMIT {
        let (left, right) = (compare::lines(expected), compare::lines(got));
        let diff = similar_asserts::SimpleDiff::from_str(&left, &right, "expected", "actual");
        s.push_str(&format!("\n{diff}"));
    }
    s
}

fn save_actual(dir: &Path, outputs: &[Tensor]) -> Result<()> {
    use ndarray_npy::write_npy;
    std::fs::create_dir_all(dir)?;
    for (k, t) in outputs.iter().enumerate() {
        let p = dir.join(format!("output_{k}.npy"));
        match t.storage() {
            Storage::F32(a) => write_npy(&p, a)?,
            Storage::F64(a) => write_npy(&p, a)?,
            // npy has float16 but ndarray-npy does not write it: widen.
            Storage::F16(a) => write_npy(&p, &a.mapv(|v| v.to_f32()))?,
            Storage::BF16(a) => write_npy(&p, &a.mapv(|v| v.to_f32()))?,
            Storage::I8(a) => write_npy(&p, a)?,
            Storage::I16(a) => write_npy(&p, a)?,
            Storage::I32(a) => write_npy(&p, a)?,
            Storage::I64(a) => write_npy(&p, a)?,
            Storage::U8(a) => write_npy(&p, a)?,
            Storage::U16(a) => write_npy(&p, a)?,
            Storage::U32(a) => write_npy(&p, a)?,
            Storage::U64(a) => write_npy(&p, a)?,
            Storage::Bool(a) => write_npy(&p, a)?,
            Storage::C64(a) => write_npy(&p, a)?,
            Storage::C128(a) => write_npy(&p, a)?,
            Storage::Bits(a) => write_npy(&p, a)?,
            Storage::Str(a) => {
                let text: String = a.iter().map(|s| format!("{s:?}\n")).collect();
                std::fs::write(p.with_extension("txt"), text)?;
            }
        }
        // The .pb form loads in any ONNX tool.
        std::fs::write(
            dir.join(format!("output_{k}.pb")),
            proto::save_tensor("", t)?,
        )?;
    }
    Ok(())
}
