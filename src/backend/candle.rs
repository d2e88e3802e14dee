//! candle as a backend (cargo feature `candle`, the `candle-onnx` crate):
//! its `simple_eval` walks the ONNX graph node by node on candle tensors.
//!
//! candle-onnx reads the model with its own protobuf code (prost, built from
//! its copy of `onnx.proto`). Graph inputs must come with the candle type its
//! `dtype` table gives the declared ONNX type: uint8, uint32, int64,
//! float16, float and double as themselves, bool as uint8 (0/1). Other
//! element types cannot be put to it (`check_input`); an int32 graph input
//! is refused by `simple_eval` itself, although int32 initializers are read
//! (as int64). Outputs come back in candle's type and are converted to the
//! type the graph declares where candle's is the one it stores that type as
//! (uint8 for bool, int64 for int32); otherwise they keep candle's type and
//! the comparison reports the difference.
//!
//! candle panics on some input (indexing past a shape, for example); the
//! harness catches those panics and judges them as panics, as for tract.

use super::{Backend, RawRun, RunError};
use crate::tensor::{DataType, Storage, Tensor};
use crate::Model;
use candle_core::{DType, Device};
use half::f16;
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;
use std::path::Path;

pub struct Candle;

/// Our tensor as the candle tensor `simple_eval` takes for its type.
fn to_candle(t: &Tensor) -> Result<candle_core::Tensor, String> {
    let shape = t.shape().to_vec();
    fn tensor<T: candle_core::WithDType>(
        shape: Vec<usize>,
        data: Vec<T>,
    ) -> Result<candle_core::Tensor, String> {
        candle_core::Tensor::from_vec(data, shape, &Device::Cpu).map_err(|e| e.to_string())
    }
    match t.storage() {
        Storage::F32(a) => tensor(shape, a.iter().copied().collect()),
        Storage::F64(a) => tensor(shape, a.iter().copied().collect()),
        Storage::F16(a) => tensor(shape, a.iter().copied().collect::<Vec<f16>>()),
        Storage::I64(a) => tensor(shape, a.iter().copied().collect()),
        Storage::U8(a) => tensor(shape, a.iter().copied().collect()),
        Storage::U32(a) => tensor(shape, a.iter().copied().collect()),
        Storage::Bool(a) => tensor(shape, a.iter().map(|&b| u8::from(b)).collect()),
        _ => Err(format!(
            "candle-onnx takes no tensor({}) graph inputs: its inputs are uint8, uint32, int64, float16, float, double and bool (as uint8)",
            t.dtype()
        )),
    }
}

/// candle's output as our tensor of the type the graph declares (`want`)
/// where candle stores that type as another; otherwise candle's own type.
fn from_candle(t: &candle_core::Tensor, want: Option<DataType>) -> Result<Tensor, String> {
    let shape = t.dims().to_vec();
    let flat = t.flatten_all().map_err(|e| e.to_string())?;
    fn array<T>(shape: &[usize], data: Vec<T>) -> Result<ArrayD<T>, String> {
        ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| e.to_string())
    }
    macro_rules! plain {
        ($t:ty) => {
            Tensor::from_array(array(
                &shape,
                flat.to_vec1::<$t>().map_err(|e| e.to_string())?,
            )?)
        };
    }
    Ok(match t.dtype() {
        DType::U8 if want == Some(DataType::Bool) => {
            let v = flat.to_vec1::<u8>().map_err(|e| e.to_string())?;
            Tensor::from_array(array(&shape, v.into_iter().map(|x| x != 0).collect())?)
        }
        DType::I64 if want == Some(DataType::Int32) => {
            let v = flat.to_vec1::<i64>().map_err(|e| e.to_string())?;
            let narrowed: Result<Vec<i32>, _> = v.into_iter().map(i32::try_from).collect();
            match narrowed {
                Ok(n) => Tensor::from_array(array(&shape, n)?),
                // Out of int32 range: keep int64, the comparison reports it.
                Err(_) => plain!(i64),
            }
        }
        DType::U8 => plain!(u8),
        DType::U32 => plain!(u32),
        DType::I16 => plain!(i16),
        DType::I32 => plain!(i32),
        DType::I64 => plain!(i64),
        DType::BF16 => plain!(half::bf16),
        DType::F16 => plain!(f16),
        DType::F32 => plain!(f32),
        DType::F64 => plain!(f64),
        other => return Err(format!("candle returned a tensor of {other:?}")),
    })
}

/// Why a run produced no outputs.
enum Refusal {
    Rejected(String),
    CannotRun(String),
}

/// Runs candle's model on `inputs`, fed by position to the graph inputs
/// that are not initializers; outputs in the graph's order, converted to
/// the declared types (`declared`, by position).
fn run_model(
    model: &candle_onnx::onnx::ModelProto,
    inputs: &[Tensor],
    declared: &[Option<DataType>],
) -> Result<Vec<Tensor>, Refusal> {
    let Some(graph) = &model.graph else {
        return Err(Refusal::Rejected("candle: the model has no graph".into()));
    };
    let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let names: Vec<&str> = graph
        .input
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect();
    let mut feeds = HashMap::new();
    for (name, t) in names.iter().zip(inputs) {
        feeds.insert(name.to_string(), to_candle(t).map_err(Refusal::CannotRun)?);
    }
    let mut outputs = candle_onnx::simple_eval(model, feeds)
        .map_err(|e| Refusal::Rejected(format!("candle failed: {e}")))?;
    graph
        .output
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let t = outputs.remove(&o.name).ok_or_else(|| {
                Refusal::Rejected(format!("candle returned no output '{}'", o.name))
            })?;
            from_candle(&t, declared.get(k).copied().flatten())
                .map_err(|e| Refusal::CannotRun(format!("output '{}': {e}", o.name)))
        })
        .collect()
}

impl Backend for Candle {
    fn name(&self) -> &str {
        "candle"
    }

    fn version(&self) -> String {
        format!("candle-onnx {}", env!("ONNXC_VERSION_CANDLE_ONNX"))
    }

    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        let proto = <candle_onnx::onnx::ModelProto as prost::Message>::decode(model_bytes)
            .map_err(|e| format!("candle rejected the model: {e}"))?;
        let declared: Vec<Option<DataType>> = model.graph.outputs.iter().map(|o| o.dtype).collect();
        run_model(&proto, inputs, &declared).map_err(|e| match e {
            Refusal::Rejected(m) | Refusal::CannotRun(m) => RunError::Rejected(m),
        })
    }

    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        to_candle(input).map(|_| ())
    }

    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        // candle's own reader (`read_file`); it has no external data.
        let proto = match candle_onnx::read_file(model) {
            Ok(p) => p,
            Err(e) => return RawRun::Rejected(format!("candle rejected the model: {e}")),
        };
        match run_model(&proto, inputs, &[]) {
            Ok(outputs) => RawRun::Ran(outputs),
            Err(Refusal::Rejected(m)) => RawRun::Rejected(m),
            Err(Refusal::CannotRun(m)) => RawRun::CannotRun(m),
        }
    }
}
