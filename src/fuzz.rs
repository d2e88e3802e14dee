//! The bodies of the fuzz targets in `fuzz/`, kept in the library so that
//! `cargo test` replays their corpus and every kept crash on stable Rust
//! (`tests/fuzz_regressions.rs`), without libFuzzer.
//!
//! Each body takes arbitrary bytes and must return, whatever they hold:
//! no panic, no overflow (fuzz builds check arithmetic), no allocation
//! beyond [`FUZZ_LIMITS`], no hang. The operator bodies turn the bytes into
//! a structurally valid one-node model (known op type, tensors of real
//! element types and shapes) with arbitrary attributes, inputs and opset,
//! so that the kernels' own checks are what the fuzzer explores.

use crate::graph;
use crate::limits::Limits;
use crate::model::{AttrValue, Attribute, Graph, Model, Node, ValueInfo};
use crate::proto::{self, LoadOptions};
use crate::tensor::{DataType, Storage, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

/// The size budget fuzz inputs run under: small enough that libFuzzer's
/// memory limit is never the thing that stops a run.
pub const FUZZ_LIMITS: Limits = Limits {
    max_file_bytes: 1 << 20,
    max_tensor_bytes: 1 << 20,
    max_output_bytes: 1 << 20,
    max_im2col_bytes: 1 << 20,
    max_conv_macs: 1 << 22,
    max_nodes: 64,
    max_values: 256,
    max_nesting: 16,
};

/// Decodes bytes as a `TensorProto`; a decoded tensor must encode, and
/// encoding must be stable across a second decode.
pub fn decode_tensor(data: &[u8]) {
    let opts = LoadOptions::new(FUZZ_LIMITS);
    let Ok((name, t)) = proto::load_tensor_with(data, &opts) else {
        return;
    };
    let once = proto::save_tensor(&name, &t).expect("a decoded tensor encodes");
    let (_, back) = proto::load_tensor_with(&once, &opts).expect("an encoded tensor decodes");
    let twice = proto::save_tensor(&name, &back).expect("a decoded tensor encodes");
    assert_eq!(once, twice, "encoding is not stable across a round trip");
}

/// Decodes bytes as a `ModelProto` and, when that works, runs the model on
/// inputs shaped after its declared graph inputs.
pub fn load_and_run_model(data: &[u8]) {
    let opts = LoadOptions::new(FUZZ_LIMITS);
    let Ok(model) = proto::load_model_with(data, &opts) else {
        return;
    };
    if let Ok(bytes) = proto::save_model(&model) {
        let _ = proto::load_model_with(&bytes, &opts);
    }
    let mut r = Reader::new(data);
    let mut inputs = Vec::new();
    for name in graph::feed_names(&model) {
        let info = model.graph.inputs.iter().find(|v| v.name == name);
        let dtype = info.and_then(|v| v.dtype).unwrap_or(DataType::Float);
        let shape: Vec<usize> = match info.and_then(|v| v.shape.as_ref()) {
            Some(dims) => dims
                .iter()
                .map(|d| d.map_or(1, |v| v.clamp(0, 4) as usize))
                .collect(),
            None => vec![1],
        };
        inputs.push(r.tensor(dtype, &shape));
    }
    let _ = graph::run(&model, &inputs, FUZZ_LIMITS);
}

/// The covered operators, for [`run_op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Pad,
    Conv,
    CenterCropPad,
    /// One of the helper operators that run function bodies (Add, Sub,
    /// Div, Max, Concat, Constant, Gather, Shape, Slice): any model may use
    /// them, so they face the same untrusted input.
    Helper,
}

/// Runs one node of `op` built from the bytes.
pub fn run_op(op: Op, data: &[u8]) {
    let (model, inputs) = case_for(op, &mut Reader::new(data));
    let _ = graph::run(&model, &inputs, FUZZ_LIMITS);
}

fn case_for(op: Op, r: &mut Reader) -> (Model, Vec<Tensor>) {
    match op {
        Op::Pad => pad_case(r),
        Op::Conv => conv_case(r),
        Op::CenterCropPad => center_crop_pad_case(r),
        Op::Helper => helper_case(r),
    }
}

fn pad_case(r: &mut Reader) -> (Model, Vec<Tensor>) {
    let opset = r.opset(&[1, 2, 11, 13, 18, 19, 21, 23, 24, 25]);
    let dtype = r.dtype(&[DataType::Float, DataType::Int64, DataType::String]);
    let rank = r.below(5) as usize;
    let shape = r.shape(rank);
    let mut attrs = Vec::new();
    if r.flag() {
        let mode = r.pick(&["constant", "reflect", "edge", "wrap", "", "REFLECT"]);
        attrs.push(attr("mode", AttrValue::String(mode.to_string())));
    }
    if opset < 11 || r.below(8) == 0 {
        let n = r.len_near(2 * rank);
        let name = if opset < 2 && r.flag() {
            "paddings"
        } else {
            "pads"
        };
        attrs.push(attr(name, AttrValue::Ints(r.ints(n))));
        if r.flag() {
            attrs.push(attr("value", AttrValue::Float(r.float())));
        }
    }
    let mut names = vec!["data"];
    let mut inputs = vec![r.tensor(dtype, &shape)];
    if opset >= 11 || r.below(8) == 0 {
        let n = r.len_near(2 * rank);
        names.push("pads");
        inputs.push(r.int_tensor(n));
        if r.flag() {
            let cdt = if r.below(4) == 0 {
                r.any_dtype()
            } else {
                dtype
            };
            let crank = r.below(2) as usize;
            let cshape = r.shape(crank);
            names.push("constant_value");
            inputs.push(r.tensor(cdt, &cshape));
        } else if r.flag() {
            names.push("");
        }
        if r.flag() {
            let n = r.len_near(rank);
            names.push("axes");
            inputs.push(r.int_tensor(n));
        }
    }
    (one_node("Pad", opset, &names, attrs, &inputs), inputs)
}

fn conv_case(r: &mut Reader) -> (Model, Vec<Tensor>) {
    let opset = r.opset(&[1, 11, 22]);
    let dtype = r.dtype(&[DataType::Float, DataType::Double, DataType::Float16]);
    let k = if r.below(8) == 0 {
        0
    } else {
        1 + r.below(3) as usize
    };
    let group = if r.below(4) == 0 {
        r.int()
    } else {
        1 + r.below(3) as i64
    };
    let g = group.clamp(1, 4) as usize;
    let (n, cg, mg) = (
        r.below(3) as usize,
        1 + r.below(3) as usize,
        r.below(3) as usize,
    );
    let mut x_shape = vec![n, cg * g];
    let mut w_shape = vec![mg * g, cg];
    for _ in 0..k {
        x_shape.push(r.size(7));
        w_shape.push(r.size(4));
    }
    if r.below(8) == 0 {
        // A shape that contradicts the other input.
        let wrank = r.below(5) as usize;
        w_shape = r.shape(wrank);
    }
    let mut attrs = vec![attr("group", AttrValue::Int(group))];
    if r.flag() {
        let pad = r.pick(&["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "same"]);
        attrs.push(attr("auto_pad", AttrValue::String(pad.to_string())));
    }
    for (name, len) in [
        ("kernel_shape", k),
        ("strides", k),
        ("dilations", k),
        ("pads", 2 * k),
    ] {
        if r.flag() {
            let len = r.len_near(len);
            let v = (0..len).map(|_| r.small_int()).collect();
            attrs.push(attr(name, AttrValue::Ints(v)));
        }
    }
    let mut names = vec!["X", "W"];
    let mut inputs = vec![r.tensor(dtype, &x_shape), r.tensor(dtype, &w_shape)];
    if r.flag() {
        let bdt = if r.below(8) == 0 {
            r.any_dtype()
        } else {
            dtype
        };
        let len = r.len_near(mg * g);
        names.push("B");
        inputs.push(r.tensor(bdt, &[len]));
    }
    (one_node("Conv", opset, &names, attrs, &inputs), inputs)
}

fn center_crop_pad_case(r: &mut Reader) -> (Model, Vec<Tensor>) {
    let opset = r.opset(&[18]);
    let dtype = r.dtype(&[DataType::Float, DataType::Int32, DataType::String]);
    let rank = r.below(5) as usize;
    let shape = r.shape(rank);
    let mut attrs = Vec::new();
    let mut len = rank;
    if r.flag() {
        len = r.len_near(rank);
        attrs.push(attr("axes", AttrValue::Ints(r.ints(len))));
    }
    let target = r.len_near(len);
    let shape_t = if r.below(8) == 0 {
        let t = r.dtype(&[DataType::Int32]);
        r.tensor(t, &[target])
    } else {
        r.int_tensor(target)
    };
    let inputs = vec![r.tensor(dtype, &shape), shape_t];
    (
        one_node(
            "CenterCropPad",
            opset,
            &["input_data", "shape"],
            attrs,
            &inputs,
        ),
        inputs,
    )
}

fn helper_case(r: &mut Reader) -> (Model, Vec<Tensor>) {
    let opset = 13 + r.below(13) as i64;
    let op = r.pick(&[
        "Add", "Sub", "Div", "Max", "Concat", "Constant", "Gather", "Shape", "Slice",
    ]);
    let dtype = r.dtype(&[DataType::Int64, DataType::Int32, DataType::Float]);
    let count = match op {
        "Constant" => 0,
        "Shape" => 1,
        "Slice" => 3 + r.below(3) as usize,
        "Max" | "Concat" => 1 + r.below(3) as usize,
        _ => 2,
    };
    let mut inputs = Vec::new();
    for i in 0..count {
        // Slice and Gather take index inputs after the data.
        let t = if i > 0 && matches!(op, "Slice" | "Gather") {
            let rank = r.below(2) as usize;
            let shape = r.shape(rank);
            let n = shape.iter().product();
            Tensor::new(
                DataType::Int64,
                Storage::I64(
                    ArrayD::from_shape_vec(IxDyn(&shape), r.ints(n)).expect("shape matches values"),
                ),
            )
            .expect("int64 storage")
        } else {
            let rank = r.below(4) as usize;
            let shape = r.shape(rank);
            let dt = if r.below(8) == 0 {
                r.any_dtype()
            } else {
                dtype
            };
            r.tensor(dt, &shape)
        };
        inputs.push(t);
    }
    let mut attrs = Vec::new();
    for name in ["axis", "start", "end"] {
        if r.flag() {
            attrs.push(attr(name, AttrValue::Int(r.int())));
        }
    }
    if op == "Constant" {
        attrs.clear();
        let v = match r.below(4) {
            0 => ("value_ints", AttrValue::Ints(r.ints(3))),
            1 => ("value_float", AttrValue::Float(r.float())),
            2 => ("value_int", AttrValue::Int(r.int())),
            _ => ("value", AttrValue::Tensor(r.tensor(dtype, &[2]))),
        };
        attrs.push(attr(v.0, v.1));
    }
    let names: Vec<String> = (0..count).map(|i| format!("in{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    (one_node(op, opset, &names, attrs, &inputs), inputs)
}

fn attr(name: &str, value: AttrValue) -> Attribute {
    Attribute::new(name, value)
}

/// A model with one node whose named inputs are graph inputs (an empty
/// name is an omitted optional input).
fn one_node(
    op: &str,
    opset: i64,
    names: &[&str],
    attributes: Vec<Attribute>,
    inputs: &[Tensor],
) -> Model {
    let fed: Vec<&str> = names.iter().copied().filter(|n| !n.is_empty()).collect();
    Model {
        ir_version: 8,
        opset_import: vec![(String::new(), opset)],
        graph: Graph {
            name: "fuzz".into(),
            nodes: vec![Node {
                attributes,
                ..Node::new("n", op, names, &["y"], vec![])
            }],
            initializers: vec![],
            inputs: fed
                .iter()
                .zip(inputs)
                .map(|(n, t)| ValueInfo {
                    name: n.to_string(),
                    dtype: Some(t.dtype()),
                    shape: None,
                })
                .collect(),
            outputs: vec![ValueInfo {
                name: "y".into(),
                ..ValueInfo::default()
            }],
        },
    }
}

/// Draws choices from fuzz bytes; past the end every draw is zero, so
/// any input, even empty, describes a complete case.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn below(&mut self, n: u32) -> u32 {
        self.byte() as u32 % n.max(1)
    }

    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u32) as usize]
    }

    /// Mostly the operator's own versions, sometimes any opset.
    fn opset(&mut self, versions: &[i64]) -> i64 {
        if self.below(8) == 0 {
            self.below(30) as i64
        } else {
            self.pick(versions)
        }
    }

    /// Mostly the listed types, sometimes any element type.
    fn dtype(&mut self, common: &[DataType]) -> DataType {
        if self.below(4) == 0 {
            self.any_dtype()
        } else {
            self.pick(common)
        }
    }

    fn any_dtype(&mut self) -> DataType {
        self.pick(&DataType::ALL)
    }

    fn shape(&mut self, rank: usize) -> Vec<usize> {
        (0..rank).map(|_| self.below(5) as usize).collect()
    }

    /// A length from 1 to `n - 1`, now and then 0.
    fn size(&mut self, n: u32) -> usize {
        if self.below(16) == 0 {
            0
        } else {
            1 + self.below(n - 1) as usize
        }
    }

    /// 0 to 3 mostly (sizes, strides), sometimes any integer.
    fn small_int(&mut self) -> i64 {
        if self.below(8) == 0 {
            self.int()
        } else {
            self.below(4) as i64
        }
    }

    /// `n`, or now and then one more or one less.
    fn len_near(&mut self, n: usize) -> usize {
        match self.below(8) {
            0 => n + 1,
            1 => n.saturating_sub(1),
            _ => n,
        }
    }

    /// Mostly small integers, sometimes the extremes that break arithmetic.
    fn int(&mut self) -> i64 {
        match self.below(16) {
            0 => self.pick(&[
                i64::MIN,
                i64::MAX,
                i64::MIN + 1,
                i64::MAX - 1,
                1 << 31,
                -(1 << 31),
                1 << 32,
                1 << 62,
                -(1 << 62),
                u32::MAX as i64,
            ]),
            1 => {
                let mut b = [0u8; 8];
                b.iter_mut().for_each(|x| *x = self.byte());
                i64::from_le_bytes(b)
            }
            _ => self.byte() as i8 as i64 % 9,
        }
    }

    fn ints(&mut self, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.int()).collect()
    }

    fn int_tensor(&mut self, n: usize) -> Tensor {
        let v = self.ints(n);
        Tensor::from_vec(&[n], v)
    }

    fn float(&mut self) -> f32 {
        match self.below(8) {
            0 => self.pick(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, f32::MAX]),
            _ => self.byte() as i8 as f32 / 4.0,
        }
    }

    fn tensor(&mut self, dtype: DataType, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        macro_rules! arr {
            ($f:expr) => {{
                let v = (0..n).map(|_| $f).collect();
                ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape matches values")
            }};
        }
        let storage = match dtype {
            DataType::Float => Storage::F32(arr!(self.float())),
            DataType::Double => Storage::F64(arr!(self.float() as f64)),
            DataType::Float16 => Storage::F16(arr!(f16::from_f32(self.float()))),
            DataType::Bfloat16 => Storage::BF16(arr!(bf16::from_f32(self.float()))),
            DataType::Int8 => Storage::I8(arr!(self.int() as i8)),
            DataType::Int16 => Storage::I16(arr!(self.int() as i16)),
            DataType::Int32 => Storage::I32(arr!(self.int() as i32)),
            DataType::Int64 => Storage::I64(arr!(self.int())),
            DataType::Uint8 => Storage::U8(arr!(self.byte())),
            DataType::Uint16 => Storage::U16(arr!(self.int() as u16)),
            DataType::Uint32 => Storage::U32(arr!(self.int() as u32)),
            DataType::Uint64 => Storage::U64(arr!(self.int() as u64)),
            DataType::Bool => Storage::Bool(arr!(self.flag())),
            DataType::String => Storage::Str(arr!("s".repeat(self.below(4) as usize))),
            DataType::Complex64 => Storage::C64(arr!(Complex::new(self.float(), self.float()))),
            DataType::Complex128 => {
                Storage::C128(arr!(Complex::new(self.float() as f64, self.float() as f64)))
            }
            d => {
                let mask = ((1u16 << d.bit_width()) - 1) as u8;
                Storage::Bits(arr!(self.byte() & mask))
            }
        };
        Tensor::new(dtype, storage).expect("storage matches the element type")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_accept_empty_and_short_inputs() {
        for data in [&[][..], &[0], &[1, 2, 3], &[0xff; 64]] {
            decode_tensor(data);
            load_and_run_model(data);
            for op in [Op::Pad, Op::Conv, Op::CenterCropPad, Op::Helper] {
                run_op(op, data);
            }
        }
    }

    #[test]
    fn generated_cases_reach_the_kernels() {
        // Some inputs must run all the way through, or the fuzzer would
        // explore only the checks in front of the kernels.
        let mut ran = [0; 4];
        let mut rng = crate::test_rng::Rng::new(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let data: Vec<u8> = (0..96).map(|_| (rng.next_u64() >> 32) as u8).collect();
            for (k, op) in [Op::Pad, Op::Conv, Op::CenterCropPad, Op::Helper]
                .into_iter()
                .enumerate()
            {
                let (model, inputs) = case_for(op, &mut Reader::new(&data));
                if graph::run(&model, &inputs, FUZZ_LIMITS).is_ok() {
                    ran[k] += 1;
                }
            }
        }
        assert!(
            ran.iter().all(|&n| n > 50),
            "successful runs per op: {ran:?}"
        );
    }
}
