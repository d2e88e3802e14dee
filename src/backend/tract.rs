//! tract as a backend (cargo feature `tract`, the `tract-onnx` crate).
//! The model is loaded from its bytes by tract's own ONNX loader; input
//! facts come from the actual inputs, then the model is optimized and run.

use super::{Backend, RawRun, RunError};
use crate::tensor::{Storage, Tensor};
use crate::Model;
use ndarray::{ArrayD, IxDyn};
use std::path::Path;
use tract_onnx::prelude::{
    self as tp, tract_ndarray, Datum, DatumType, Framework, InferenceFact, InferenceModelExt,
    IntoRunnable, IntoTValue,
};

pub struct Tract;

fn to_tract(t: &Tensor) -> Result<tp::Tensor, String> {
    let shape = t.shape().to_vec();
    macro_rules! prim {
        ($a:expr) => {{
            let v: Vec<_> = $a.iter().cloned().collect();
            tract_ndarray::ArrayD::from_shape_vec(tract_ndarray::IxDyn(&shape), v)
                .map(tp::Tensor::from)
                .map_err(|e| e.to_string())
        }};
    }
    match t.storage() {
        Storage::F32(a) => prim!(a),
        Storage::F64(a) => prim!(a),
        Storage::F16(a) => {
            let v: Vec<tp::f16> = a.iter().map(|x| tp::f16::from_bits(x.to_bits())).collect();
            prim!(v)
        }
        Storage::I8(a) => prim!(a),
        Storage::I16(a) => prim!(a),
        Storage::I32(a) => prim!(a),
        Storage::I64(a) => prim!(a),
        Storage::U8(a) => prim!(a),
        Storage::U16(a) => prim!(a),
        Storage::U32(a) => prim!(a),
        Storage::U64(a) => prim!(a),
        Storage::Bool(a) => prim!(a),
        Storage::Str(a) => prim!(a),
        _ => Err(format!(
            "the tract backend does not pass tensor({}) inputs",
            t.dtype()
        )),
    }
}

fn from_tract(t: &tp::Tensor) -> Result<Tensor, String> {
    let dims = t.shape().to_vec();
    fn arr<T: Datum + Clone>(t: &tp::Tensor, dims: &[usize]) -> Result<ArrayD<T>, String> {
        let v: Vec<T> = t
            .to_plain_array_view::<T>()
            .map_err(|e| e.to_string())?
            .iter()
            .cloned()
            .collect();
        ArrayD::from_shape_vec(IxDyn(dims), v).map_err(|e| e.to_string())
    }
    Ok(match t.datum_type() {
        DatumType::F32 => Tensor::from_array(arr::<f32>(t, &dims)?),
        DatumType::F64 => Tensor::from_array(arr::<f64>(t, &dims)?),
        DatumType::F16 => Tensor::from_array(
            arr::<tp::f16>(t, &dims)?.mapv(|x| half::f16::from_bits(x.to_bits())),
        ),
        DatumType::I8 => Tensor::from_array(arr::<i8>(t, &dims)?),
        DatumType::I16 => Tensor::from_array(arr::<i16>(t, &dims)?),
        DatumType::I32 => Tensor::from_array(arr::<i32>(t, &dims)?),
        DatumType::I64 => Tensor::from_array(arr::<i64>(t, &dims)?),
        DatumType::U8 => Tensor::from_array(arr::<u8>(t, &dims)?),
        DatumType::U16 => Tensor::from_array(arr::<u16>(t, &dims)?),
        DatumType::U32 => Tensor::from_array(arr::<u32>(t, &dims)?),
        DatumType::U64 => Tensor::from_array(arr::<u64>(t, &dims)?),
        DatumType::Bool => Tensor::from_array(arr::<bool>(t, &dims)?),
        DatumType::String => Tensor::from_array(arr::<String>(t, &dims)?),
        other => return Err(format!("the tract backend does not read {other:?} outputs")),
    })
}

impl Backend for Tract {
    fn name(&self) -> &str {
        "tract"
    }

    fn version(&self) -> String {
        format!("tract-onnx {}", env!("ONNXC_VERSION_TRACT_ONNX"))
    }

    fn run(
        &self,
        _model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        let mut reader = std::io::Cursor::new(model_bytes);
        let model = tract_onnx::onnx()
            .model_for_read(&mut reader)
            .map_err(|e| format!("tract rejected the model: {e:#}"))?;
        run_model(model, inputs).map_err(|e| match e {
            Refusal::Rejected(m) | Refusal::CannotRun(m) => RunError::Rejected(m),
        })
    }

    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        to_tract(input).map(|_| ())
    }

    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        let model = match tract_onnx::onnx().model_for_path(model) {
            Ok(m) => m,
            Err(e) => return RawRun::Rejected(format!("tract rejected the model: {e:#}")),
        };
        match run_model(model, inputs) {
            Ok(outputs) => RawRun::Ran(outputs),
            Err(Refusal::Rejected(m)) => RawRun::Rejected(m),
            Err(Refusal::CannotRun(m)) => RawRun::CannotRun(m),
        }
    }
}

/// Why a run produced no outputs: tract refused, or the inputs or outputs
/// could not cross between our tensors and tract's.
enum Refusal {
    Rejected(String),
    CannotRun(String),
}

/// Sets input facts from the actual inputs, optimizes and runs.
fn run_model(mut model: tp::InferenceModel, inputs: &[Tensor]) -> Result<Vec<Tensor>, Refusal> {
    let mut values = tp::TVec::new();
    for (i, t) in inputs.iter().enumerate() {
        let tt = to_tract(t).map_err(Refusal::CannotRun)?;
        let fact = InferenceFact::dt_shape(tt.datum_type(), tt.shape());
        model
            .set_input_fact(i, fact)
            .map_err(|e| Refusal::Rejected(format!("tract: input {i}: {e:#}")))?;
        values.push(tt.into_tvalue());
    }
    let plan = model
        .into_optimized()
        .and_then(|m| m.into_runnable())
        .map_err(|e| Refusal::Rejected(format!("tract could not prepare the model: {e:#}")))?;
    let outputs = plan
        .run(values)
        .map_err(|e| Refusal::Rejected(format!("tract failed: {e:#}")))?;
    outputs
        .iter()
        .map(|v| from_tract(v).map_err(Refusal::CannotRun))
        .collect()
}
