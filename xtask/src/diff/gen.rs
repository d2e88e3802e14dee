//! Seeded random cases for the three covered operators, as parameters that
//! can be shrunk and turned into a model plus inputs.

use onnx_conformance::model::{AttrValue, Attribute, Graph, Model, Node, ValueInfo};
use onnx_conformance::{DataType, Tensor};

/// A small deterministic generator (splitmix64), so runs repeat by seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PadCase {
    pub version: i64,
    pub dtype: DataType,
    pub shape: Vec<usize>,
    /// Begin pads then end pads, one pair per entry of `axes` (or per axis).
    pub pads: Vec<i64>,
    pub axes: Option<Vec<i64>>,
    pub mode: &'static str,
    pub value: Option<i64>,
}

impl PadCase {
    /// (axis, begin pad, end pad) for each axis the pads name, in the
    /// order they name them; axes left out of `axes` are not listed, and an
    /// axis past the rank (an invalid case) is listed as it is.
    pub fn axis_pads(&self) -> Vec<(usize, i64, i64)> {
        let n = self.pads.len() / 2;
        let rank = self.shape.len() as i64;
        let axes: Vec<usize> = match &self.axes {
            Some(a) => a
                .iter()
                .map(|&x| (if x < 0 { x + rank } else { x }) as usize)
                .collect(),
            None => (0..self.shape.len()).collect(),
        };
        axes.into_iter()
            .take(n)
            .enumerate()
            .map(|(i, axis)| (axis, self.pads[i], self.pads[i + n]))
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ConvCase {
    pub version: i64,
    pub dtype: DataType,
    pub batch: usize,
    pub in_per_group: usize,
    pub out_per_group: usize,
    pub group: usize,
    pub spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Explicit pads (begin..., end...) when `auto_pad` is NOTSET.
    pub pads: Option<Vec<usize>>,
    pub auto_pad: &'static str,
    pub bias: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CcpCase {
    pub dtype: DataType,
    pub shape: Vec<usize>,
    pub targets: Vec<i64>,
    pub axes: Option<Vec<i64>>,
    pub shape_type: DataType,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Case {
    Pad(PadCase),
    Conv(ConvCase),
    Ccp(CcpCase),
}

pub const OPS: [&str; 3] = ["Pad", "Conv", "CenterCropPad"];

impl Case {
    pub fn op(&self) -> &'static str {
        match self {
            Case::Pad(_) => "Pad",
            Case::Conv(_) => "Conv",
            Case::Ccp(_) => "CenterCropPad",
        }
    }

    pub fn version(&self) -> i64 {
        match self {
            Case::Pad(c) => c.version,
            Case::Conv(c) => c.version,
            Case::Ccp(_) => 18,
        }
    }

    /// The feature the summary groups by: mode, auto_pad or dtype.
    pub fn feature(&self) -> String {
        match self {
            Case::Pad(c) => format!("{} {}", c.mode, c.dtype),
            Case::Conv(c) => format!("{} {}", c.auto_pad, c.dtype),
            Case::Ccp(c) => format!("{}", c.dtype),
        }
    }

    /// Properties known findings are matched against.
    pub fn tags(&self) -> Vec<String> {
        let mut t = vec![format!("dtype:{}", self.dtype())];
        match self {
            Case::Pad(c) => {
                t.push(format!("mode:{}", c.mode));
                t.push(format!("version:{}", c.version));
                if c.axes.is_some() {
                    t.push("axes".into());
                }
                if c.shape.contains(&0) {
                    t.push("empty_axis".into());
                }
                for (axis, b, e) in c.axis_pads() {
                    let dim = c.shape.get(axis).copied().unwrap_or(0) as i64;
                    if b < 0 || e < 0 {
                        t.push("negative_pads".into());
                    }
                    if (b < 0 && e > 0) || (b > 0 && e < 0) {
                        t.push("mixed_sign".into());
                    }
                    let kept = dim - b.min(0).abs() - e.min(0).abs();
                    if c.mode == "reflect" && (b.max(e) >= kept) && (b > 0 || e > 0) {
                        t.push("reflect_ge_len".into());
                    }
                    if kept == 1 && (b > 0 || e > 0) && c.mode != "constant" {
                        t.push("len1".into());
                    }
                    if b.max(e) > dim {
                        t.push("pad_gt_len".into());
                    }
                }
            }
            Case::Conv(c) => {
                t.push(format!("auto_pad:{}", c.auto_pad));
                if c.dilations.iter().any(|&d| d > 1) {
                    t.push("dilated".into());
                }
                if c.strides.iter().zip(&c.kernel).any(|(s, k)| s > k) {
                    t.push("stride_gt_kernel".into());
                }
                // SAME_* padding whose total, (out - 1) * stride + dilated
                // kernel - in, is negative on some axis (the spec clamps it
                // at 0).
                let same = c.auto_pad.starts_with("SAME");
                let negative = c.spatial.iter().enumerate().any(|(a, &n)| {
                    let (s, k, d) = (
                        c.strides[a] as i64,
                        c.kernel[a] as i64,
                        c.dilations[a] as i64,
                    );
                    let out = (n as i64 + s - 1) / s;
                    (out - 1) * s + (k - 1) * d + 1 < n as i64
                });
                if same && negative {
                    t.push("same_pad_negative".into());
                }
                // A dilated kernel longer than the padded input on some
                // axis: the output is empty there (SAME_* always keeps at
                // least one position).
                let exceeds = (0..c.spatial.len()).any(|a| {
                    let padded = match (&c.pads, c.auto_pad) {
                        (Some(p), _) => c.spatial[a] + p[a] + p[a + c.spatial.len()],
                        (None, "VALID") => c.spatial[a],
                        (None, _) => usize::MAX,
                    };
                    c.kernel[a].saturating_sub(1) * c.dilations[a] + 1 > padded
                });
                if exceeds {
                    t.push("kernel_exceeds_input".into());
                }
                t.push(format!("version:{}", c.version));
                if c.group > 1 {
                    t.push("grouped".into());
                }
                t.push(format!("rank:{}", c.spatial.len()));
            }
            Case::Ccp(c) => {
                if c.shape_type == DataType::Int32 {
                    t.push("int32_shape".into());
                }
                if c.targets.contains(&0) {
                    t.push("zero_target".into());
                }
                if c.targets.iter().any(|&v| v < 0) {
                    t.push("negative_target".into());
                }
                if c.axes.is_some() {
                    t.push("axes".into());
                }
            }
        }
        t.sort();
        t.dedup();
        t
    }

    pub fn dtype(&self) -> DataType {
        match self {
            Case::Pad(c) => c.dtype,
            Case::Conv(c) => c.dtype,
            Case::Ccp(c) => c.dtype,
        }
    }
}

/// The element types random cases use for Pad and CenterCropPad.
const DATA_TYPES: [DataType; 8] = [
    DataType::Float,
    DataType::Double,
    DataType::Float16,
    DataType::Int32,
    DataType::Int64,
    DataType::Uint8,
    DataType::Int8,
    DataType::Bool,
];

pub fn random(op: &str, rng: &mut Rng) -> Case {
    match op {
        "Pad" => Case::Pad(random_pad(rng)),
        "Conv" => Case::Conv(random_conv(rng)),
        _ => Case::Ccp(random_ccp(rng)),
    }
}

fn random_shape(rng: &mut Rng, max_rank: usize) -> Vec<usize> {
    let rank = 1 + rng.below(max_rank as u64) as usize;
    (0..rank)
        .map(|_| {
            if rng.chance(5) {
                0
            } else if rng.chance(20) {
                1
            } else {
                1 + rng.below(5) as usize
            }
        })
        .collect()
}

fn random_pad(rng: &mut Rng) -> PadCase {
    let version = rng.pick(&onnx_conformance::ops::pad::VERSIONS);
    let allowed = onnx_conformance::ops::pad::allowed_types(version);
    let dtypes: Vec<DataType> = DATA_TYPES
        .iter()
        .copied()
        .filter(|d| allowed.contains(d))
        .collect();
    let dtype = rng.pick(&dtypes);
    let shape = random_shape(rng, 4);
    let mut modes = vec!["constant", "reflect", "edge"];
    if version >= 19 {
        modes.push("wrap");
    }
    let mode = rng.pick(&modes);
    let axes: Option<Vec<i64>> = if version >= 18 && rng.chance(40) {
        let r = shape.len() as i64;
        let mut all: Vec<i64> = (0..r).collect();
        for i in 0..all.len() {
            let j = i + rng.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        let keep = 1 + rng.below(r as u64) as usize;
        Some(
            all[..keep]
                .iter()
                .map(|&a| if rng.chance(50) { a - r } else { a })
                .collect(),
        )
    } else {
        None
    };
    let dims: Vec<usize> = match &axes {
        Some(a) => a
            .iter()
            .map(|&x| shape[(if x < 0 { x + shape.len() as i64 } else { x }) as usize])
            .collect(),
        None => shape.clone(),
    };
    let n = dims.len();
    let mut pads = vec![0i64; 2 * n];
    for i in 0..n {
        let d = dims[i] as i64;
        for side in [i, i + n] {
            pads[side] = match rng.below(10) {
                0..=4 => rng.range(0, 2),
                5 | 6 => rng.range(d, d + 3),
                _ => -rng.range(0, d.max(1)),
            };
        }
        // Keep most cases valid: cropping past the axis is its own small share.
        if pads[i].min(0).abs() + pads[i + n].min(0).abs() > d && !rng.chance(10) {
            pads[i] = pads[i].max(0);
            pads[i + n] = pads[i + n].max(0);
        }
    }
    let value = (mode == "constant" && rng.chance(60)).then(|| rng.range(-3, 9));
    PadCase {
        version,
        dtype,
        shape,
        pads,
        axes,
        mode,
        value,
    }
}

fn random_conv(rng: &mut Rng) -> ConvCase {
    let version = rng.pick(&onnx_conformance::ops::conv::VERSIONS);
    let dtype = rng.pick(&[
        DataType::Float,
        DataType::Float,
        DataType::Double,
        DataType::Float16,
    ]);
    let rank = 1 + rng.below(3) as usize;
    let group = rng.pick(&[1usize, 1, 2, 3]);
    let depthwise = rng.chance(20);
    let in_per_group = if depthwise {
        1
    } else {
        1 + rng.below(3) as usize
    };
    let out_per_group = 1 + rng.below(3) as usize;
    let spatial: Vec<usize> = (0..rank).map(|_| 1 + rng.below(7) as usize).collect();
    let kernel: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3) as usize).collect();
    let strides: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4) as usize).collect();
    let dilations: Vec<usize> = (0..rank)
        .map(|_| if rng.chance(30) { 2 } else { 1 })
        .collect();
    let auto_pad = rng.pick(&["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]);
    let pads =
        (auto_pad == "NOTSET").then(|| (0..2 * rank).map(|_| rng.below(3) as usize).collect());
    ConvCase {
        version,
        dtype,
        batch: 1 + rng.below(2) as usize,
        in_per_group,
        out_per_group,
        group,
        spatial,
        kernel,
        strides,
        dilations,
        pads,
        auto_pad,
        bias: rng.chance(60),
    }
}

fn random_ccp(rng: &mut Rng) -> CcpCase {
    let dtype = rng.pick(&DATA_TYPES);
    let shape = random_shape(rng, 4);
    let r = shape.len() as i64;
    let axes: Option<Vec<i64>> = rng.chance(40).then(|| {
        let keep = 1 + rng.below(r as u64) as i64;
        (0..keep)
            .map(|a| if rng.chance(50) { a - r } else { a })
            .collect()
    });
    let count = axes.as_ref().map_or(shape.len(), Vec::len);
    let targets = (0..count).map(|_| rng.range(0, 8)).collect();
    let shape_type = if rng.chance(20) {
        DataType::Int32
    } else {
        DataType::Int64
    };
    CcpCase {
        dtype,
        shape,
        targets,
        axes,
        shape_type,
    }
}

/// A tensor of `dtype` with small deterministic values.
pub fn data(dtype: DataType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let mut f = || (rng.below(2001) as f64 - 1000.0) / 250.0;
    match dtype {
        DataType::Float => Tensor::from_vec(shape, (0..n).map(|_| f() as f32).collect()),
        DataType::Double => Tensor::from_vec(shape, (0..n).map(|_| f()).collect()),
        DataType::Float16 => {
            Tensor::from_vec(shape, (0..n).map(|_| half::f16::from_f64(f())).collect())
        }
        DataType::Int32 => Tensor::from_vec(shape, (0..n).map(|_| (f() * 25.0) as i32).collect()),
        DataType::Int64 => Tensor::from_vec(shape, (0..n).map(|_| (f() * 25.0) as i64).collect()),
        DataType::Int8 => Tensor::from_vec(shape, (0..n).map(|_| (f() * 25.0) as i8).collect()),
        DataType::Uint8 => {
            Tensor::from_vec(shape, (0..n).map(|_| (f().abs() * 50.0) as u8).collect())
        }
        _ => Tensor::from_vec(shape, (0..n).map(|_| f() > 0.0).collect()),
    }
}

fn scalar(dtype: DataType, v: i64) -> Tensor {
    match dtype {
        DataType::Float => Tensor::scalar(v as f32),
        DataType::Double => Tensor::scalar(v as f64),
        DataType::Float16 => Tensor::scalar(half::f16::from_f64(v as f64)),
        DataType::Int32 => Tensor::scalar(v as i32),
        DataType::Int64 => Tensor::scalar(v),
        DataType::Int8 => Tensor::scalar(v as i8),
        DataType::Uint8 => Tensor::scalar(v.max(0) as u8),
        _ => Tensor::scalar(v != 0),
    }
}

fn attr(name: &str, value: AttrValue) -> Attribute {
    Attribute::new(name, value)
}

fn ints(v: &[usize]) -> AttrValue {
    AttrValue::Ints(v.iter().map(|&x| x as i64).collect())
}

/// The model (constants as initializers) and the data input of a case.
pub fn build(case: &Case, seed: u64) -> (Model, Vec<Tensor>) {
    let mut inits: Vec<(String, Tensor)> = Vec::new();
    let mut graph_inputs = vec![ValueInfo {
        name: "x".into(),
        dtype: Some(case.dtype()),
        shape: None,
    }];
    let (node, feeds) = match case {
        Case::Pad(c) => {
            let x = data(c.dtype, &c.shape, seed);
            let mut attrs = vec![attr("mode", AttrValue::String(c.mode.into()))];
            let mut inputs = vec!["x".to_string()];
            if c.version < 11 {
                attrs.push(attr(
                    if c.version == 1 { "paddings" } else { "pads" },
                    AttrValue::Ints(c.pads.clone()),
                ));
                if let Some(v) = c.value {
                    attrs.push(attr("value", AttrValue::Float(v as f32)));
                }
            } else {
                inits.push((
                    "pads".into(),
                    Tensor::from_vec(&[c.pads.len()], c.pads.clone()),
                ));
                inputs.push("pads".into());
                if let Some(v) = c.value {
                    inits.push(("value".into(), scalar(c.dtype, v)));
                    inputs.push("value".into());
                } else if c.axes.is_some() {
                    inputs.push(String::new());
                }
                if let Some(a) = &c.axes {
                    inits.push(("axes".into(), Tensor::from_vec(&[a.len()], a.clone())));
                    inputs.push("axes".into());
                }
            }
            (
                Node {
                    name: "pad".into(),
                    op_type: "Pad".into(),
                    inputs,
                    outputs: vec!["y".into()],
                    attributes: attrs,
                    ..Node::default()
                },
                vec![x],
            )
        }
        Case::Conv(c) => {
            let cin = c.in_per_group * c.group;
            let m = c.out_per_group * c.group;
            let mut xs = vec![c.batch, cin];
            xs.extend(&c.spatial);
            let mut ws = vec![m, c.in_per_group];
            ws.extend(&c.kernel);
            let x = data(c.dtype, &xs, seed);
            inits.push(("w".into(), data(c.dtype, &ws, seed ^ 1)));
            let mut inputs = vec!["x".to_string(), "w".to_string()];
            if c.bias {
                inits.push(("b".into(), data(c.dtype, &[m], seed ^ 2)));
                inputs.push("b".into());
            }
            let mut attrs = vec![
                attr("strides", ints(&c.strides)),
                attr("dilations", ints(&c.dilations)),
            ];
            if c.group != 1 {
                attrs.push(attr("group", AttrValue::Int(c.group as i64)));
            }
            if let Some(p) = &c.pads {
                attrs.push(attr("pads", ints(p)));
            }
            if c.auto_pad != "NOTSET" {
                attrs.push(attr("auto_pad", AttrValue::String(c.auto_pad.into())));
            }
            (
                Node {
                    name: "conv".into(),
                    op_type: "Conv".into(),
                    inputs,
                    outputs: vec!["y".into()],
                    attributes: attrs,
                    ..Node::default()
                },
                vec![x],
            )
        }
        Case::Ccp(c) => {
            let x = data(c.dtype, &c.shape, seed);
            let shape = if c.shape_type == DataType::Int32 {
                Tensor::from_vec(
                    &[c.targets.len()],
                    c.targets.iter().map(|&v| v as i32).collect(),
                )
            } else {
                Tensor::from_vec(&[c.targets.len()], c.targets.clone())
            };
            // The target shape is a graph input, as in the official cases.
            graph_inputs.push(ValueInfo {
                name: "shape".into(),
                dtype: Some(c.shape_type),
                shape: None,
            });
            let attrs = c
                .axes
                .as_ref()
                .map(|a| vec![attr("axes", AttrValue::Ints(a.clone()))])
                .unwrap_or_default();
            (
                Node {
                    name: "ccp".into(),
                    op_type: "CenterCropPad".into(),
                    inputs: vec!["x".into(), "shape".into()],
                    outputs: vec!["y".into()],
                    attributes: attrs,
                    ..Node::default()
                },
                vec![x, shape],
            )
        }
    };
    let model = Model {
        ir_version: match case.version() {
            ..=21 => 10,
            22 | 23 => 11,
            _ => 12,
        },
        opset_import: vec![(String::new(), case.version())],
        graph: Graph {
            name: format!("{}_case", case.op().to_lowercase()),
            nodes: vec![node],
            initializers: inits,
            inputs: graph_inputs,
            outputs: vec![ValueInfo {
                name: "y".into(),
                dtype: Some(case.dtype()),
                shape: None,
            }],
        },
    };
    (model, feeds)
}
