//! onnxruntime as a backend (cargo feature `onnxruntime`), through the `ort`
//! crate with dynamic loading. The shared library is the one inside the
//! onnxruntime wheel from PyPI: `ORT_DYLIB_PATH` names it, or else the one
//! `cargo xtask` installed under `target/xtask/ort-venv/` is used.

use super::{Backend, RawRun, RunError};
use crate::tensor::{Storage, Tensor};
use crate::Model;
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use ort::session::Session;
use ort::value::{DynValue, TensorElementType};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub struct OnnxRuntime {
    env: ort::environment::Environment,
    /// The shared library loaded (its file name carries its version).
    library: PathBuf,
}

/// The onnxruntime shared library to load.
pub fn library_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return Ok(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/xtask/ort-venv/lib");
    let found = std::fs::read_dir(&venv).ok().and_then(|dirs| {
        dirs.flatten().find_map(|py| {
            let capi = py.path().join("site-packages/onnxruntime/capi");
            std::fs::read_dir(&capi)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libonnxruntime.so"))
                })
        })
    });
    found.ok_or_else(|| {
        format!(
            "no onnxruntime library: set ORT_DYLIB_PATH, or run `cargo xtask ort-path` to install the pinned wheel under {}",
            venv.display()
        )
    })
}

impl OnnxRuntime {
    pub fn new() -> Result<OnnxRuntime, String> {
        type Loaded = (ort::environment::Environment, PathBuf);
        static ENV: OnceLock<Result<Loaded, String>> = OnceLock::new();
        let (env, library) = ENV
            .get_or_init(|| {
                let path = library_path()?;
                let builder = ort::init_from(&path)
                    .map_err(|e| format!("loading {}: {e}", path.display()))?;
                let env = builder
                    .build()
                    .map_err(|e| format!("initializing onnxruntime: {e}"))?;
                // Failures come back as errors; the log would repeat them on stderr.
                env.set_log_level(ort::logging::LogLevel::Fatal);
                Ok((env, path))
            })
            .clone()?;
        Ok(OnnxRuntime { env, library })
    }
}

fn to_value(t: &Tensor) -> Result<DynValue, String> {
    let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
    macro_rules! prim {
        ($a:expr) => {
            ort::value::Tensor::from_array((shape.clone(), $a.iter().cloned().collect::<Vec<_>>()))
                .map(|v| v.into_dyn())
                .map_err(|e| e.to_string())
        };
    }
    match t.storage() {
        Storage::F32(a) => prim!(a),
        Storage::F64(a) => prim!(a),
        Storage::F16(a) => prim!(a),
        Storage::BF16(a) => prim!(a),
        Storage::I8(a) => prim!(a),
        Storage::I16(a) => prim!(a),
        Storage::I32(a) => prim!(a),
        Storage::I64(a) => prim!(a),
        Storage::U8(a) => prim!(a),
        Storage::U16(a) => prim!(a),
        Storage::U32(a) => prim!(a),
        Storage::U64(a) => prim!(a),
        Storage::Bool(a) => prim!(a),
        Storage::Str(a) => {
            let v: Vec<String> = a.iter().cloned().collect();
            ort::value::Tensor::from_string_array((shape, v.as_slice()))
                .map(|v| v.into_dyn())
                .map_err(|e| e.to_string())
        }
        _ => Err(format!(
            "the onnxruntime backend does not pass tensor({}) inputs",
            t.dtype()
        )),
    }
}

fn from_value(v: &DynValue) -> Result<Tensor, String> {
    let ty = match v.dtype() {
        ort::value::ValueType::Tensor { ty, .. } => *ty,
        other => return Err(format!("output is not a tensor: {other:?}")),
    };
    macro_rules! prim {
        ($t:ty) => {{
            let (shape, data) = v.try_extract_tensor::<$t>().map_err(|e| e.to_string())?;
            let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            Tensor::from_array(
                ArrayD::from_shape_vec(IxDyn(&dims), data.to_vec()).map_err(|e| e.to_string())?,
            )
        }};
    }
    Ok(match ty {
        TensorElementType::Float32 => prim!(f32),
        TensorElementType::Float64 => prim!(f64),
        TensorElementType::Float16 => prim!(f16),
        TensorElementType::Bfloat16 => prim!(bf16),
        TensorElementType::Int8 => prim!(i8),
        TensorElementType::Int16 => prim!(i16),
        TensorElementType::Int32 => prim!(i32),
        TensorElementType::Int64 => prim!(i64),
        TensorElementType::Uint8 => prim!(u8),
        TensorElementType::Uint16 => prim!(u16),
        TensorElementType::Uint32 => prim!(u32),
        TensorElementType::Uint64 => prim!(u64),
        TensorElementType::Bool => prim!(bool),
        TensorElementType::String => {
            let (shape, data) = v.try_extract_strings().map_err(|e| e.to_string())?;
            let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            Tensor::from_array(
                ArrayD::from_shape_vec(IxDyn(&dims), data).map_err(|e| e.to_string())?,
            )
        }
        other => {
            return Err(format!(
                "the onnxruntime backend does not read {other:?} outputs"
            ))
        }
    })
}

/// Runs a session on inputs fed by position; outputs in the session's order.
fn run_session(session: &mut Session, inputs: &[Tensor]) -> RawRun {
    let names: Vec<String> = session
        .inputs()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let mut feeds: Vec<(String, DynValue)> = Vec::with_capacity(inputs.len());
    for (name, t) in names.iter().zip(inputs) {
        match to_value(t) {
            Ok(v) => feeds.push((name.clone(), v)),
            Err(e) => return RawRun::CannotRun(e),
        }
    }
    let out_names: Vec<String> = session
        .outputs()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let outputs = match session.run(feeds) {
        Ok(o) => o,
        Err(e) => return RawRun::Rejected(format!("onnxruntime failed: {e}")),
    };
    let mut tensors = Vec::with_capacity(out_names.len());
    for name in &out_names {
        match outputs.get(name.as_str()).map(from_value) {
            Some(Ok(t)) => tensors.push(t),
            Some(Err(e)) => return RawRun::CannotRun(format!("output '{name}': {e}")),
            None => return RawRun::Rejected(format!("onnxruntime returned no output '{name}'")),
        }
    }
    RawRun::Ran(tensors)
}

impl Backend for OnnxRuntime {
    fn name(&self) -> &str {
        "onnxruntime"
    }

    fn version(&self) -> String {
        // The library loaded at run time is the runtime judged; the crate
        // only binds it. The wheel names the library by its version
        // (libonnxruntime.so.1.32.0); its build string has no version, only
        // a commit, which stands in when the name has none.
        let from_name = self
            .library
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once(".so."))
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'));
        let release = from_name.unwrap_or_else(|| ort::info().to_string());
        format!("onnxruntime {release} (ort {})", env!("ONNXC_VERSION_ORT"))
    }

    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        let builder = Session::builder(&self.env).map_err(|e| e.to_string())?;
        let mut builder = builder.with_intra_threads(1).map_err(|e| e.to_string())?;
        let mut session = builder
            .commit_from_memory(model_bytes)
            .map_err(|e| format!("onnxruntime rejected the model: {e}"))?;
        let names = crate::graph::feed_names(model);
        let mut feeds: Vec<(String, DynValue)> = Vec::with_capacity(inputs.len());
        for (name, t) in names.iter().zip(inputs) {
            feeds.push((name.to_string(), to_value(t)?));
        }
        let outputs = session
            .run(feeds)
            .map_err(|e| format!("onnxruntime failed: {e}"))?;
        model
            .graph
            .outputs
            .iter()
            .map(|o| {
                let v = outputs
                    .get(o.name.as_str())
                    .ok_or_else(|| format!("onnxruntime returned no output '{}'", o.name))?;
                Ok(from_value(v)?)
            })
            .collect()
    }

    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        to_value(input).map(|_| ())
    }

    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        let builder = match Session::builder(&self.env) {
            Ok(b) => b,
            Err(e) => return RawRun::CannotRun(format!("creating a session builder: {e}")),
        };
        let mut builder = match builder.with_intra_threads(1) {
            Ok(b) => b,
            Err(e) => return RawRun::CannotRun(format!("creating a session builder: {e}")),
        };
        match builder.commit_from_file(model) {
            Ok(mut session) => run_session(&mut session, inputs),
            Err(e) => RawRun::Rejected(format!("onnxruntime rejected the model: {e}")),
        }
    }
}
