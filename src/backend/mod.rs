//! The seam through which any runtime is judged by the same suite: our
//! kernels, or another runtime behind a cargo feature.

#[cfg(feature = "onnxruntime")]
pub mod onnxruntime;
#[cfg(feature = "tract")]
pub mod tract;

use crate::model::Model;
use crate::ops::Limits;
use crate::tensor::Tensor;
use std::path::Path;

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
}

/// A runtime that runs a model on inputs.
pub trait Backend: Send + Sync {
    /// A short name used in trial names, expectations and reports.
    fn name(&self) -> &str;
    /// Runs the model (given both parsed and as its serialized bytes, so a
    /// runtime with its own loader can use those) on the graph inputs in order.
    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, String>;

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

    fn run(
        &self,
        model: &Model,
        _model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, String> {
        crate::graph::run(model, inputs, self.limits).map_err(|e| e.to_string())
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
        other => Err(format!(
            "unknown backend '{other}' (this build knows: {}; other runtimes need their cargo feature)",
            available().join(", ")
        )),
    }
}
