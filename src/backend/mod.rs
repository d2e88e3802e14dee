//! The seam through which any runtime is judged by the same suite: our
//! kernels, another runtime behind a cargo feature, or any program that
//! speaks the folder protocol of [`command`] (`ONNX_BACKEND=command:PROGRAM`).

#[cfg(feature = "candle")]
pub mod candle;
pub mod command;
#[cfg(feature = "onnxruntime")]
pub mod onnxruntime;
#[cfg(feature = "rten")]
pub mod rten;
#[cfg(feature = "tract")]
pub mod tract;

use crate::model::Model;
use crate::ops::Limits;
use crate::tensor::Tensor;
use std::path::Path;

/// Why a run produced no outputs. A runtime in this process can only refuse
/// (its panics are caught by the harness); a runtime in another process can
/// also die or hang, and those are judged apart from a refusal.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The runtime refused the model or the inputs, with its message.
    #[error("{0}")]
    Rejected(String),
    /// The runtime's process died without saying why (a signal, or a
    /// nonzero exit without a refusal): judged like a panic.
    #[error("crashed: {0}")]
    Crashed(String),
    /// The runtime did not finish within its time limit and was stopped.
    #[error("timed out: {0}")]
    TimedOut(String),
}

impl From<String> for RunError {
    fn from(message: String) -> RunError {
        RunError::Rejected(message)
    }
}

impl From<&str> for RunError {
    fn from(message: &str) -> RunError {
        RunError::Rejected(message.to_string())
    }
}

/// What a runtime did with a model file it was handed as is (one our own
/// loader may have rejected).
#[derive(Debug)]
pub enum RawRun {
    /// The runtime refused the model or the run, with its message.
    Rejected(String),
    /// The runtime ran it and returned these outputs.
    Ran(Vec<Tensor>),
    /// The file cannot be put to this runtime at all (why): neither a
    /// rejection nor a run.
    CannotRun(String),
    /// The runtime's process died (see [`RunError::Crashed`]).
    Crashed(String),
    /// The runtime was stopped at its time limit.
    TimedOut(String),
}

impl From<RunError> for RawRun {
    fn from(e: RunError) -> RawRun {
        match e {
            RunError::Rejected(m) => RawRun::Rejected(m),
            RunError::Crashed(m) => RawRun::Crashed(m),
            RunError::TimedOut(m) => RawRun::TimedOut(m),
        }
    }
}

/// A runtime that runs a model on inputs.
pub trait Backend: Send + Sync {
    /// A short name used in trial names, expectations and reports.
    fn name(&self) -> &str;
    /// The runtime's name and version as its build or its program reports
    /// them (for example `rten 0.27.0`), recorded with every run's results
    /// so that a result can be traced to the runtime that produced it.
    fn version(&self) -> String;
    /// Runs the model (given both parsed and as its serialized bytes, so a
    /// runtime with its own loader can use those) on the graph inputs in order.
    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError>;

    /// Whether this runtime can be given `input` at all (an element type its
    /// API has no counterpart for cannot be): the reason when it cannot.
    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        let _ = input;
        Ok(())
    }

    /// Runs the model file at `model` with the runtime's own loader (its own
    /// rules for external data apply), feeding `inputs` to the graph inputs
    /// the runtime reports, in order. Used when our loader rejects the
    /// model, so that the runtime is judged on the same bytes.
    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        let _ = (model, inputs);
        RawRun::CannotRun(format!(
            "the {} backend has no loader of its own for model files",
            self.name()
        ))
    }
}

/// This library's own kernels.
#[derive(Default)]
pub struct Ours {
    pub limits: Limits,
}

impl Backend for Ours {
    fn name(&self) -> &str {
        "ours"
    }

    fn version(&self) -> String {
        concat!("onnx-conformance ", env!("CARGO_PKG_VERSION")).to_string()
    }

    fn run(
        &self,
        model: &Model,
        _model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        // Prepared as a runtime creates a session, then run once: a trial
        // judges one data set of a model.
        model
            .prepare(self.limits)
            .and_then(|prepared| prepared.run(inputs))
            .map_err(|e| RunError::Rejected(e.to_string()))
    }
}

/// The runtimes this build can judge, by `ONNX_BACKEND` name.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["ours"];
    if cfg!(feature = "onnxruntime") {
        v.push("onnxruntime");
    }
    if cfg!(feature = "tract") {
        v.push("tract");
    }
    if cfg!(feature = "rten") {
        v.push("rten");
    }
    if cfg!(feature = "candle") {
        v.push("candle");
    }
    v.push("command:PROGRAM");
    v
}

/// A backend by name.
pub fn by_name(name: &str) -> Result<Box<dyn Backend>, String> {
    match name {
        "ours" => Ok(Box::new(Ours::default())),
        #[cfg(feature = "onnxruntime")]
        "onnxruntime" => Ok(Box::new(onnxruntime::OnnxRuntime::new()?)),
        #[cfg(feature = "tract")]
        "tract" => Ok(Box::new(tract::Tract)),
        #[cfg(feature = "rten")]
        "rten" => Ok(Box::new(rten::Rten)),
        #[cfg(feature = "candle")]
        "candle" => Ok(Box::new(candle::Candle)),
        other if other.starts_with("command:") => {
            Ok(Box::new(command::Command::from_spec(&other["command:".len()..])?))
        }
        other => Err(format!(
            "unknown backend '{other}' (this build knows: {}; other runtimes need their cargo feature)",
            available().join(", ")
        )),
    }
}
