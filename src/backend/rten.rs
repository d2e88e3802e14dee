//! rten as a backend (cargo feature `rten`, the `rten` crate: a pure-Rust
//! runtime that reads `.onnx` files with its own protobuf parser).
//!
//! rten computes in four element types only: f32, i32, i8 and u8. Its ONNX
//! loader converts the others it knows on the way in (int64 and bool to
//! i32, float16 and double to f32: `onnx_loader.rs`, "RTen doesn't
//! internally support i64 or bool tensors but converts them to i32") and
//! declares graph inputs of those types with the converted type. This
//! backend feeds inputs the same way, so rten is judged as its users run
//! it: int64 inputs must fit in i32 (rten saturates its own constants; an
//! input it would have to saturate is refused here rather than silently
//! changed), bool becomes 0/1, float16 widens exactly, double rounds to
//! f32. Outputs come back as rten's type and are converted to the type the
//! graph declares for them (an int32 result for an int64 output widens; an
//! f32 result for a double or float16 output is converted once), so a
//! double model computed in f32 shows as the value differences it causes.
//! Every other element type cannot be put to rten at all (`check_input`).

use super::{Backend, RawRun, RunError};
use crate::tensor::{DataType, Storage, Tensor};
use crate::Model;
use half::f16;
use ndarray::{ArrayD, IxDyn};
use rten::{Value, ValueOrView};
use rten_tensor::Layout;
use std::path::Path;

pub struct Rten;

/// Our tensor as the value rten takes for it.
fn to_rten(t: &Tensor) -> Result<Value, String> {
    let shape = t.shape().to_vec();
    fn value<T>(shape: &[usize], data: Vec<T>) -> Result<Value, String>
    where
        Value: From<rten_tensor::Tensor<T>>,
    {
        rten_tensor::Tensor::try_from_data(shape, data)
            .map(Value::from)
            .map_err(|e| e.to_string())
    }
    match t.storage() {
        Storage::F32(a) => value(&shape, a.iter().copied().collect()),
        Storage::I32(a) => value(&shape, a.iter().copied().collect()),
        Storage::I8(a) => value(&shape, a.iter().copied().collect()),
        Storage::U8(a) => value(&shape, a.iter().copied().collect()),
        Storage::I64(a) => {
            let narrowed: Result<Vec<i32>, String> = a
                .iter()
                .map(|&v| {
                    i32::try_from(v).map_err(|_| {
                        format!(
                            "rten takes tensor(int64) as int32 and {v} does not fit (rten would saturate it)"
                        )
                    })
                })
                .collect();
            value(&shape, narrowed?)
        }
        Storage::Bool(a) => value(&shape, a.iter().map(|&b| i32::from(b)).collect()),
        Storage::F16(a) => value(&shape, a.iter().map(|v| v.to_f32()).collect()),
        Storage::F64(a) => value(&shape, a.iter().map(|&v| v as f32).collect()),
        _ => Err(format!(
            "rten has no tensor({}) values: it computes in float, int32, int8 and uint8 (and takes int64, bool, float16 and double as it converts them)",
            t.dtype()
        )),
    }
}

/// rten's output as our tensor of the type the graph declares (`want`),
/// where rten's type is the one it converts that type to; otherwise as
/// rten's own type (the comparison then reports the type difference).
fn from_rten(v: Value, want: Option<DataType>) -> Result<Tensor, String> {
    fn parts<T: Clone>(t: rten_tensor::Tensor<T>) -> (Vec<usize>, Vec<T>) {
        (t.shape().to_vec(), t.into_data())
    }
    fn array<T>(shape: &[usize], data: Vec<T>) -> Result<ArrayD<T>, String> {
        ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| e.to_string())
    }
    Ok(match v {
        Value::FloatTensor(t) => {
            let (shape, data) = parts(t);
            match want {
                Some(DataType::Double) => {
                    Tensor::from_array(array(&shape, data.into_iter().map(f64::from).collect())?)
                }
                Some(DataType::Float16) => Tensor::from_array(array(
                    &shape,
                    data.into_iter().map(f16::from_f32).collect(),
                )?),
                _ => Tensor::from_array(array(&shape, data)?),
            }
        }
        Value::Int32Tensor(t) => {
            let (shape, data) = parts(t);
            match want {
                Some(DataType::Int64) => {
                    Tensor::from_array(array(&shape, data.into_iter().map(i64::from).collect())?)
                }
                Some(DataType::Bool) => {
                    Tensor::from_array(array(&shape, data.into_iter().map(|v| v != 0).collect())?)
                }
                _ => Tensor::from_array(array(&shape, data)?),
            }
        }
        Value::Int8Tensor(t) => {
            let (shape, data) = parts(t);
            Tensor::from_array(array(&shape, data)?)
        }
        Value::UInt8Tensor(t) => {
            let (shape, data) = parts(t);
            Tensor::from_array(array(&shape, data)?)
        }
        // Sequences, and whatever later rten versions add (the enum is
        // non-exhaustive): none is a tensor output.
        other => {
            return Err(format!(
                "rten returned a {:?} value, not a tensor",
                other.dtype()
            ))
        }
    })
}

/// Why a run produced no outputs.
enum Refusal {
    Rejected(String),
    CannotRun(String),
}

/// Feeds `inputs` to the model's inputs in order (rten lists graph inputs
/// that are not initializers, as `graph::feed_names` does), runs it and
/// converts the outputs to the declared types (`declared`, by position).
fn run_model(
    model: &rten::Model,
    inputs: &[Tensor],
    declared: &[Option<DataType>],
) -> Result<Vec<Tensor>, Refusal> {
    let ids = model.input_ids();
    if ids.len() != inputs.len() {
        return Err(Refusal::Rejected(format!(
            "rten's model has {} inputs to feed; the data set has {}",
            ids.len(),
            inputs.len()
        )));
    }
    let mut feeds = Vec::with_capacity(inputs.len());
    for (&id, t) in ids.iter().zip(inputs) {
        let v = to_rten(t).map_err(Refusal::CannotRun)?;
        feeds.push((id, ValueOrView::Value(v)));
    }
    let outputs = model
        .run(feeds, model.output_ids(), None)
        .map_err(|e| Refusal::Rejected(format!("rten failed: {e}")))?;
    outputs
        .into_iter()
        .enumerate()
        .map(|(k, v)| {
            from_rten(v, declared.get(k).copied().flatten())
                .map_err(|e| Refusal::CannotRun(format!("output {k}: {e}")))
        })
        .collect()
}

impl Backend for Rten {
    fn name(&self) -> &str {
        "rten"
    }

    fn version(&self) -> String {
        format!("rten {}", env!("ONNXC_VERSION_RTEN"))
    }

    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        let loaded = rten::Model::load(model_bytes.to_vec())
            .map_err(|e| format!("rten rejected the model: {e}"))?;
        let declared: Vec<Option<DataType>> = model.graph.outputs.iter().map(|o| o.dtype).collect();
        run_model(&loaded, inputs, &declared).map_err(|e| match e {
            Refusal::Rejected(m) | Refusal::CannotRun(m) => RunError::Rejected(m),
        })
    }

    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        to_rten(input).map(|_| ())
    }

    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        // rten's own loader reads the file (and its external data, by its
        // own rules); our loader rejected it, so no declared types are known
        // and outputs keep rten's types.
        let loaded = match rten::Model::load_file(model) {
            Ok(m) => m,
            Err(e) => return RawRun::Rejected(format!("rten rejected the model: {e}")),
        };
        match run_model(&loaded, inputs, &[]) {
            Ok(outputs) => RawRun::Ran(outputs),
            Err(Refusal::Rejected(m)) => RawRun::Rejected(m),
            Err(Refusal::CannotRun(m)) => RawRun::CannotRun(m),
        }
    }
}
