//! The wire layer: `ModelProto` and `TensorProto` in and out.
//!
//! This is the only module that sees onnx-protobuf. Everything it returns is
//! a `crate::model` or `crate::tensor` type.
//!
//! Tensor data is read from `raw_data` (little-endian; sub-byte types packed
//! as a bit stream, low bits first) or from the typed fields (`float_data`,
//! `int32_data` holding 8/16-bit values and float16/bfloat16/float8 bit
//! patterns, packed int4/int2 values, ...). Tensors are written with
//! `raw_data`, strings with `string_data`.

use crate::error::{Error, Result};
use crate::files::{self, ExternalRef};
use crate::limits::Limits;
use crate::model::{AttrValue, Attribute, Graph, Model, Node, ValueInfo};
use crate::tensor::{DataType, Storage, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, Dimension, IxDyn};
use num_complex::Complex;
use onnx_protobuf as pb;
use onnx_protobuf::Message;

fn decode_err(what: &str, detail: impl ToString) -> Error {
    Error::Decode {
        what: what.to_string(),
        detail: detail.to_string(),
    }
}

/// How untrusted bytes are decoded: the limits, and the folder external
/// tensor data may be read from (None: external data is refused).
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub limits: Limits,
    pub base_dir: Option<std::path::PathBuf>,
}

impl LoadOptions {
    pub fn new(limits: Limits) -> LoadOptions {
        LoadOptions {
            limits,
            base_dir: None,
        }
    }
}

/// Parses a serialized `ModelProto` with default limits and no external data.
pub fn load_model(bytes: &[u8]) -> Result<Model> {
    load_model_with(bytes, &LoadOptions::default())
}

/// Parses a serialized `ModelProto`.
pub fn load_model_with(bytes: &[u8], opts: &LoadOptions) -> Result<Model> {
    let m: pb::ModelProto = parse(bytes, "model", &opts.limits)?;
    model_from_proto(&m, opts)
}

/// Reads and parses a model file; external data resolves inside its folder.
pub fn load_model_file(path: &std::path::Path, limits: Limits) -> Result<Model> {
    let bytes = files::read_limited(path, limits.max_file_bytes)?;
    load_model_with(&bytes, &in_folder_of(path, limits)).map_err(|e| in_file(e, path))
}

/// Parses a serialized `TensorProto` (a `.pb` file of a test data set) with
/// default limits and no external data. Returns the tensor's name (possibly
/// empty) and the tensor.
pub fn load_tensor(bytes: &[u8]) -> Result<(String, Tensor)> {
    load_tensor_with(bytes, &LoadOptions::default())
}

/// Parses a serialized `TensorProto`.
pub fn load_tensor_with(bytes: &[u8], opts: &LoadOptions) -> Result<(String, Tensor)> {
    let t: pb::TensorProto = parse(bytes, "tensor", &opts.limits)?;
    let tensor = tensor_from_proto(&t, opts)?;
    Ok((t.name.clone(), tensor))
}

/// Reads and parses a tensor file; external data resolves inside its folder.
pub fn load_tensor_file(path: &std::path::Path, limits: Limits) -> Result<(String, Tensor)> {
    let bytes = files::read_limited(path, limits.max_file_bytes)?;
    load_tensor_with(&bytes, &in_folder_of(path, limits)).map_err(|e| in_file(e, path))
}

fn in_folder_of(path: &std::path::Path, limits: Limits) -> LoadOptions {
    LoadOptions {
        limits,
        base_dir: Some(
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
        ),
    }
}

/// Names the file in a decode error (other kinds already say enough).
fn in_file(e: Error, path: &std::path::Path) -> Error {
    match e {
        Error::Decode { what, detail } => Error::Decode {
            what: format!("{what} in {}", path.display()),
            detail,
        },
        other => other,
    }
}

/// Decodes a message, following nested messages at most `max_nesting` deep.
fn parse<M: Message>(bytes: &[u8], what: &str, limits: &Limits) -> Result<M> {
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit(limits.max_nesting);
    let mut m = M::new();
    m.merge_from(&mut input)
        .and_then(|()| input.check_eof())
        .map_err(|e| {
            let detail = e.to_string();
            if detail.contains("recursion") {
                decode_err(
                    what,
                    format!("{detail} (messages nest deeper than the limit max_nesting = {}; raise it with ONNX_LIMITS=max_nesting=N)", limits.max_nesting),
                )
            } else {
                decode_err(what, detail)
            }
        })?;
    Ok(m)
}

/// Serializes a tensor as a `TensorProto` with the given name.
pub fn save_tensor(name: &str, tensor: &Tensor) -> Result<Vec<u8>> {
    let t = tensor_to_proto(name, tensor)?;
    t.write_to_bytes()
        .map_err(|e| decode_err(&format!("tensor '{name}' (encoding)"), e))
}

/// Serializes a model as a `ModelProto`.
pub fn save_model(model: &Model) -> Result<Vec<u8>> {
    let mut m = pb::ModelProto::new();
    m.ir_version = model.ir_version;
    m.producer_name = "onnx-conformance".to_string();
    for (domain, version) in &model.opset_import {
        let mut o = pb::OperatorSetIdProto::new();
        o.domain = domain.clone();
        o.version = *version;
        m.opset_import.push(o);
    }
    m.graph = protobuf::MessageField::some(graph_to_proto(&model.graph)?);
    m.write_to_bytes()
        .map_err(|e| decode_err("model (encoding)", e))
}

fn model_from_proto(m: &pb::ModelProto, opts: &LoadOptions) -> Result<Model> {
    let graph = m
        .graph
        .as_ref()
        .ok_or_else(|| decode_err("model", "it has no graph"))?;
    if m.opset_import.is_empty() {
        return Err(decode_err(
            "model",
            "it imports no opset (opset_import is empty)",
        ));
    }
    Ok(Model {
        ir_version: m.ir_version,
        opset_import: m
            .opset_import
            .iter()
            .map(|o| (o.domain.clone(), o.version))
            .collect(),
        graph: graph_from_proto(graph, opts)?,
    })
}

fn graph_from_proto(g: &pb::GraphProto, opts: &LoadOptions) -> Result<Graph> {
    let what = format!("graph '{}'", g.name);
    Limits::check(
        format!("{what} ({} nodes)", g.node.len()),
        "max_nodes",
        g.node.len() as u128,
        opts.limits.max_nodes,
    )?;
    let values = g.initializer.len()
        + g.input.len()
        + g.output.len()
        + g.node.iter().map(|n| n.output.len()).sum::<usize>();
    Limits::check(
        format!("{what} ({values} named values)"),
        "max_values",
        values as u128,
        opts.limits.max_values,
    )?;
    let mut initializers = Vec::with_capacity(g.initializer.len());
    for t in &g.initializer {
        initializers.push((t.name.clone(), tensor_from_proto(t, opts)?));
    }
    let mut nodes = Vec::with_capacity(g.node.len());
    for n in &g.node {
        nodes.push(node_from_proto(n, opts)?);
    }
    Ok(Graph {
        name: g.name.clone(),
        nodes,
        initializers,
        inputs: g.input.iter().map(value_info_from_proto).collect(),
        outputs: g.output.iter().map(value_info_from_proto).collect(),
    })
}

fn value_info_from_proto(v: &pb::ValueInfoProto) -> ValueInfo {
    let mut info = ValueInfo {
        name: v.name.clone(),
        ..ValueInfo::default()
    };
    if let Some(pb::type_proto::Value::TensorType(tt)) =
        v.type_.as_ref().and_then(|t| t.value.as_ref())
    {
        info.dtype = DataType::from_code(tt.elem_type);
        if let Some(shape) = tt.shape.as_ref() {
            info.shape = Some(
                shape
                    .dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) => Some(*v),
                        _ => None,
                    })
                    .collect(),
            );
        }
    }
    info
}

fn node_from_proto(n: &pb::NodeProto, opts: &LoadOptions) -> Result<Node> {
    let display = if n.name.is_empty() {
        format!(
            "{} -> {}",
            n.op_type,
            n.output.first().map(String::as_str).unwrap_or("?")
        )
    } else {
        n.name.clone()
    };
    let mut attributes = Vec::with_capacity(n.attribute.len());
    for a in &n.attribute {
        attributes.push(Attribute {
            name: a.name.clone(),
            value: attr_from_proto(a, opts).map_err(|e| match e {
                Error::Decode { what, detail } => Error::Decode {
                    what: format!("node '{display}', attribute '{}' ({what})", a.name),
                    detail,
                },
                other => other,
            })?,
        });
    }
    Ok(Node {
        name: n.name.clone(),
        op_type: n.op_type.clone(),
        domain: n.domain.clone(),
        inputs: n.input.clone(),
        outputs: n.output.clone(),
        attributes,
    })
}

fn utf8(bytes: &[u8], what: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| decode_err(what, "string is not valid UTF-8"))
}

fn attr_from_proto(a: &pb::AttributeProto, opts: &LoadOptions) -> Result<AttrValue> {
    use pb::attribute_proto::AttributeType as T;
    let ty = a
        .type_
        .enum_value()
        .map_err(|v| decode_err("attribute", format!("unknown attribute type {v}")))?;
    Ok(match ty {
        T::FLOAT => AttrValue::Float(a.f),
        T::INT => AttrValue::Int(a.i),
        T::STRING => AttrValue::String(utf8(&a.s, "attribute")?),
        T::TENSOR => AttrValue::Tensor(tensor_from_proto(
            a.t.as_ref()
                .ok_or_else(|| decode_err("attribute", "TENSOR attribute without a tensor"))?,
            opts,
        )?),
        T::FLOATS => AttrValue::Floats(a.floats.clone()),
        T::INTS => AttrValue::Ints(a.ints.clone()),
        T::STRINGS => AttrValue::Strings(
            a.strings
                .iter()
                .map(|s| utf8(s, "attribute"))
                .collect::<Result<_>>()?,
        ),
        T::UNDEFINED => return Err(decode_err("attribute", "attribute type is UNDEFINED")),
        other => AttrValue::Other(format!("{other:?}")),
    })
}

fn dims_of(t: &pb::TensorProto, name: &str) -> Result<(Vec<usize>, usize)> {
    let mut dims = Vec::with_capacity(t.dims.len());
    let mut count: usize = 1;
    for &d in &t.dims {
        let d = usize::try_from(d)
            .map_err(|_| decode_err(name, format!("negative dimension {d} in {:?}", t.dims)))?;
        count = count.checked_mul(d).ok_or_else(|| {
            decode_err(
                name,
                format!("element count of shape {:?} overflows", t.dims),
            )
        })?;
        dims.push(d);
    }
    Ok((dims, count))
}

/// Decodes one `TensorProto`. The element count is checked against the data
/// actually present before anything is allocated, so a huge `dims` with
/// little data is an error, not an allocation.
pub(crate) fn tensor_from_proto(t: &pb::TensorProto, opts: &LoadOptions) -> Result<Tensor> {
    let what = if t.name.is_empty() {
        "tensor".to_string()
    } else {
        format!("tensor '{}'", t.name)
    };
    if t.segment.is_some() {
        return Err(Error::Unsupported {
            what,
            detail: "segmented tensors are not supported".to_string(),
        });
    }
    let dtype = DataType::from_code(t.data_type)
        .ok_or_else(|| decode_err(&what, format!("unknown data_type {}", t.data_type)))?;
    let (dims, count) = dims_of(t, &what)?;
    Limits::check(
        format!("{what} of shape {dims:?}"),
        "max_tensor_bytes",
        count as u128 * dtype.memory_bytes() as u128,
        opts.limits.max_tensor_bytes,
    )?;
    let shape = IxDyn(&dims);
    let external = t.data_location.enum_value() == Ok(pb::tensor_proto::DataLocation::EXTERNAL);
    if external || !t.external_data.is_empty() {
        let raw = files::read_external(
            &t.name,
            &external_ref(t)?,
            opts.base_dir.as_deref(),
            opts.limits.max_tensor_bytes,
        )?;
        if dtype == DataType::String {
            return Err(Error::Unsupported {
                what,
                detail: "string tensors cannot hold external data".to_string(),
            });
        }
        let storage = reshape(from_raw(dtype, &raw, count, &what)?, shape, &what)?;
        return Tensor::new(dtype, storage).map_err(|e| decode_err(&what, e));
    }
    let storage = if !t.raw_data.is_empty() || (count == 0 && dtype != DataType::String) {
        from_raw(dtype, &t.raw_data, count, &what)?
    } else {
        from_typed(dtype, t, count, &what)?
    };
    let storage = reshape(storage, shape, &what)?;
    Tensor::new(dtype, storage).map_err(|e| decode_err(&what, e))
}

/// The `external_data` entries of a tensor: `location` (required),
/// `offset` and `length` (decimal, optional); other keys are ignored.
fn external_ref(t: &pb::TensorProto) -> Result<ExternalRef> {
    let refuse = |location: &str, detail: String| Error::ExternalData {
        tensor: t.name.clone(),
        location: location.to_string(),
        detail,
    };
    let get = |key: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    };
    let location =
        get("location").ok_or_else(|| refuse("", "no 'location' entry in external_data".into()))?;
    let number = |key: &str| -> Result<Option<u64>> {
        get(key)
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    refuse(
                        location,
                        format!("'{key}' is '{v}', not a non-negative integer"),
                    )
                })
            })
            .transpose()
    };
    Ok(ExternalRef {
        location: location.to_string(),
        offset: number("offset")?.unwrap_or(0),
        length: number("length")?,
    })
}

fn reshape(s: Storage, shape: IxDyn, what: &str) -> Result<Storage> {
    let shape_c = shape.clone();
    let r: std::result::Result<Storage, ndarray::ShapeError> =
        (|| Ok(crate::map_storage!(s, a => a.into_shape_with_order(shape_c.clone())?)))();
    r.map_err(|e| {
        decode_err(
            what,
            format!("data does not fit shape {:?}: {e}", shape.slice()),
        )
    })
}

fn check_len(what: &str, field: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(decode_err(
            what,
            format!("{field} holds {got} values but the shape needs {want}"),
        ));
    }
    Ok(())
}

fn le_chunks<const N: usize, T>(
    raw: &[u8],
    count: usize,
    what: &str,
    f: impl Fn([u8; N]) -> T,
) -> Result<ArrayD<T>> {
    check_len(what, "raw_data (bytes)", raw.len(), count.saturating_mul(N))?;
    let v: Vec<T> = raw
        .chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            f(b)
        })
        .collect();
    Ok(ArrayD::from_shape_vec(IxDyn(&[count]), v).expect("length checked"))
}

fn from_raw(dtype: DataType, raw: &[u8], count: usize, what: &str) -> Result<Storage> {
    Ok(match dtype {
        DataType::Float => Storage::F32(le_chunks(raw, count, what, f32::from_le_bytes)?),
        DataType::Double => Storage::F64(le_chunks(raw, count, what, f64::from_le_bytes)?),
        DataType::Float16 => Storage::F16(le_chunks(raw, count, what, |b| {
            f16::from_bits(u16::from_le_bytes(b))
        })?),
        DataType::Bfloat16 => Storage::BF16(le_chunks(raw, count, what, |b| {
            bf16::from_bits(u16::from_le_bytes(b))
        })?),
        DataType::Int8 => Storage::I8(le_chunks(raw, count, what, i8::from_le_bytes)?),
        DataType::Int16 => Storage::I16(le_chunks(raw, count, what, i16::from_le_bytes)?),
        DataType::Int32 => Storage::I32(le_chunks(raw, count, what, i32::from_le_bytes)?),
        DataType::Int64 => Storage::I64(le_chunks(raw, count, what, i64::from_le_bytes)?),
        DataType::Uint8 => Storage::U8(le_chunks(raw, count, what, u8::from_le_bytes)?),
        DataType::Uint16 => Storage::U16(le_chunks(raw, count, what, u16::from_le_bytes)?),
        DataType::Uint32 => Storage::U32(le_chunks(raw, count, what, u32::from_le_bytes)?),
        DataType::Uint64 => Storage::U64(le_chunks(raw, count, what, u64::from_le_bytes)?),
        DataType::Bool => Storage::Bool(le_chunks(raw, count, what, |b: [u8; 1]| b[0] != 0)?),
        DataType::Complex64 => Storage::C64(le_chunks(raw, count, what, |b: [u8; 8]| {
            Complex::new(
                f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                f32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            )
        })?),
        DataType::Complex128 => Storage::C128(le_chunks(raw, count, what, |b: [u8; 16]| {
            let mut re = [0u8; 8];
            let mut im = [0u8; 8];
            re.copy_from_slice(&b[..8]);
            im.copy_from_slice(&b[8..]);
            Complex::new(f64::from_le_bytes(re), f64::from_le_bytes(im))
        })?),
        DataType::String => {
            return Err(decode_err(what, "string tensors cannot use raw_data"));
        }
        d => {
            let bits = d.bit_width();
            let need = count
                .checked_mul(bits)
                .map(|b| b.div_ceil(8))
                .ok_or_else(|| decode_err(what, "element count overflows"))?;
            check_len(what, "raw_data (bytes)", raw.len(), need)?;
            Storage::Bits(
                ArrayD::from_shape_vec(IxDyn(&[count]), unpack_bits(raw, bits, count))
                    .expect("length checked"),
            )
        }
    })
}

/// Reads `count` values of `bits` bits each from a little-endian bit stream.
fn unpack_bits(bytes: &[u8], bits: usize, count: usize) -> Vec<u8> {
    if bits == 8 {
        return bytes[..count].to_vec();
    }
    let mask = (1u16 << bits) - 1;
    (0..count)
        .map(|i| {
            let bit = i * bits;
            let (byte, shift) = (bit / 8, bit % 8);
            let lo = bytes[byte] as u16;
            let hi = bytes.get(byte + 1).copied().unwrap_or(0) as u16;
            (((lo | (hi << 8)) >> shift) & mask) as u8
        })
        .collect()
}

/// Writes values of `bits` bits each as a little-endian bit stream.
fn pack_bits(values: &[u8], bits: usize) -> Vec<u8> {
    if bits == 8 {
        return values.to_vec();
    }
    let mut out = vec![0u8; (values.len() * bits).div_ceil(8)];
    let mask = (1u16 << bits) - 1;
    for (i, &v) in values.iter().enumerate() {
        let bit = i * bits;
        let (byte, shift) = (bit / 8, bit % 8);
        let w = ((v as u16) & mask) << shift;
        out[byte] |= w as u8;
        if let Some(next) = out.get_mut(byte + 1) {
            *next |= (w >> 8) as u8;
        }
    }
    out
}

fn vec1<T>(v: Vec<T>) -> ArrayD<T> {
    let n = v.len();
    ArrayD::from_shape_vec(IxDyn(&[n]), v).expect("1-D")
}

fn from_typed(dtype: DataType, t: &pb::TensorProto, count: usize, what: &str) -> Result<Storage> {
    let i32s = |field: &str| -> Result<&[i32]> {
        check_len(what, field, t.int32_data.len(), count)?;
        Ok(&t.int32_data)
    };
    Ok(match dtype {
        DataType::Float => {
            check_len(what, "float_data", t.float_data.len(), count)?;
            Storage::F32(vec1(t.float_data.clone()))
        }
        DataType::Double => {
            check_len(what, "double_data", t.double_data.len(), count)?;
            Storage::F64(vec1(t.double_data.clone()))
        }
        DataType::Int64 => {
            check_len(what, "int64_data", t.int64_data.len(), count)?;
            Storage::I64(vec1(t.int64_data.clone()))
        }
        DataType::Uint64 => {
            check_len(what, "uint64_data", t.uint64_data.len(), count)?;
            Storage::U64(vec1(t.uint64_data.clone()))
        }
        DataType::Uint32 => {
            check_len(what, "uint64_data", t.uint64_data.len(), count)?;
            Storage::U32(vec1(t.uint64_data.iter().map(|&v| v as u32).collect()))
        }
        DataType::Int32 => Storage::I32(vec1(i32s("int32_data")?.to_vec())),
        DataType::Int16 => Storage::I16(vec1(
            i32s("int32_data")?.iter().map(|&v| v as i16).collect(),
        )),
        DataType::Int8 => Storage::I8(vec1(i32s("int32_data")?.iter().map(|&v| v as i8).collect())),
        DataType::Uint16 => Storage::U16(vec1(
            i32s("int32_data")?.iter().map(|&v| v as u16).collect(),
        )),
        DataType::Uint8 => {
            Storage::U8(vec1(i32s("int32_data")?.iter().map(|&v| v as u8).collect()))
        }
        DataType::Bool => {
            Storage::Bool(vec1(i32s("int32_data")?.iter().map(|&v| v != 0).collect()))
        }
        DataType::Float16 => Storage::F16(vec1(
            i32s("int32_data")?
                .iter()
                .map(|&v| f16::from_bits(v as u16))
                .collect(),
        )),
        DataType::Bfloat16 => Storage::BF16(vec1(
            i32s("int32_data")?
                .iter()
                .map(|&v| bf16::from_bits(v as u16))
                .collect(),
        )),
        DataType::String => {
            check_len(what, "string_data", t.string_data.len(), count)?;
            Storage::Str(vec1(
                t.string_data
                    .iter()
                    .map(|s| utf8(s, what))
                    .collect::<Result<_>>()?,
            ))
        }
        DataType::Complex64 => {
            check_len(
                what,
                "float_data (pairs)",
                t.float_data.len(),
                count.saturating_mul(2),
            )?;
            Storage::C64(vec1(
                t.float_data
                    .chunks_exact(2)
                    .map(|c| Complex::new(c[0], c[1]))
                    .collect(),
            ))
        }
        DataType::Complex128 => {
            check_len(
                what,
                "double_data (pairs)",
                t.double_data.len(),
                count.saturating_mul(2),
            )?;
            Storage::C128(vec1(
                t.double_data
                    .chunks_exact(2)
                    .map(|c| Complex::new(c[0], c[1]))
                    .collect(),
            ))
        }
        d => {
            // One int32 per byte of the packed stream: float8 kinds hold one
            // value each, 4-bit kinds two, 2-bit kinds four.
            let bits = d.bit_width();
            let bytes = count.saturating_mul(bits).div_ceil(8);
            check_len(what, "int32_data (packed bytes)", t.int32_data.len(), bytes)?;
            let packed: Vec<u8> = t.int32_data.iter().map(|&v| v as u8).collect();
            Storage::Bits(vec1(unpack_bits(&packed, bits, count)))
        }
    })
}

fn tensor_to_proto(name: &str, tensor: &Tensor) -> Result<pb::TensorProto> {
    let mut t = pb::TensorProto::new();
    t.name = name.to_string();
    t.data_type = tensor.dtype().code();
    t.dims = tensor.shape().iter().map(|&d| d as i64).collect();
    fn raw<T: Copy, const N: usize>(a: &ArrayD<T>, f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = Vec::with_capacity(a.len() * N);
        for &v in a.iter() {
            out.extend_from_slice(&f(v));
        }
        out
    }
    t.raw_data = match tensor.storage() {
        Storage::F32(a) => raw(a, f32::to_le_bytes),
        Storage::F64(a) => raw(a, f64::to_le_bytes),
        Storage::F16(a) => raw(a, |v| v.to_bits().to_le_bytes()),
        Storage::BF16(a) => raw(a, |v| v.to_bits().to_le_bytes()),
        Storage::I8(a) => raw(a, i8::to_le_bytes),
        Storage::I16(a) => raw(a, i16::to_le_bytes),
        Storage::I32(a) => raw(a, i32::to_le_bytes),
        Storage::I64(a) => raw(a, i64::to_le_bytes),
        Storage::U8(a) => raw(a, u8::to_le_bytes),
        Storage::U16(a) => raw(a, u16::to_le_bytes),
        Storage::U32(a) => raw(a, u32::to_le_bytes),
        Storage::U64(a) => raw(a, u64::to_le_bytes),
        Storage::Bool(a) => raw(a, |v| [v as u8]),
        Storage::C64(a) => raw(a, |v: Complex<f32>| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&v.re.to_le_bytes());
            b[4..].copy_from_slice(&v.im.to_le_bytes());
            b
        }),
        Storage::C128(a) => raw(a, |v: Complex<f64>| {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&v.re.to_le_bytes());
            b[8..].copy_from_slice(&v.im.to_le_bytes());
            b
        }),
        Storage::Bits(a) => {
            let values: Vec<u8> = a.iter().copied().collect();
            pack_bits(&values, tensor.dtype().bit_width())
        }
        Storage::Str(a) => {
            t.string_data = a.iter().map(|s| s.as_bytes().to_vec()).collect();
            Vec::new()
        }
    };
    Ok(t)
}

fn graph_to_proto(g: &Graph) -> Result<pb::GraphProto> {
    let mut out = pb::GraphProto::new();
    out.name = g.name.clone();
    for (name, t) in &g.initializers {
        out.initializer.push(tensor_to_proto(name, t)?);
    }
    for n in &g.nodes {
        let mut p = pb::NodeProto::new();
        p.name = n.name.clone();
        p.op_type = n.op_type.clone();
        p.domain = n.domain.clone();
        p.input = n.inputs.clone();
        p.output = n.outputs.clone();
        for a in &n.attributes {
            p.attribute.push(attr_to_proto(a)?);
        }
        out.node.push(p);
    }
    out.input = g.inputs.iter().map(value_info_to_proto).collect();
    out.output = g.outputs.iter().map(value_info_to_proto).collect();
    Ok(out)
}

fn value_info_to_proto(v: &ValueInfo) -> pb::ValueInfoProto {
    let mut p = pb::ValueInfoProto::new();
    p.name = v.name.clone();
    let mut tt = pb::type_proto::Tensor::new();
    tt.elem_type = v.dtype.map(DataType::code).unwrap_or(0);
    if let Some(shape) = &v.shape {
        let mut sp = pb::TensorShapeProto::new();
        for d in shape {
            let mut dim = pb::tensor_shape_proto::Dimension::new();
            if let Some(d) = d {
                dim.value = Some(pb::tensor_shape_proto::dimension::Value::DimValue(*d));
            }
            sp.dim.push(dim);
        }
        tt.shape = protobuf::MessageField::some(sp);
    }
    let mut ty = pb::TypeProto::new();
    ty.value = Some(pb::type_proto::Value::TensorType(tt));
    p.type_ = protobuf::MessageField::some(ty);
    p
}

fn attr_to_proto(a: &Attribute) -> Result<pb::AttributeProto> {
    use pb::attribute_proto::AttributeType as T;
    let mut p = pb::AttributeProto::new();
    p.name = a.name.clone();
    let ty = match &a.value {
        AttrValue::Float(v) => {
            p.f = *v;
            T::FLOAT
        }
        AttrValue::Int(v) => {
            p.i = *v;
            T::INT
        }
        AttrValue::String(v) => {
            p.s = v.as_bytes().to_vec();
            T::STRING
        }
        AttrValue::Tensor(t) => {
            p.t = protobuf::MessageField::some(tensor_to_proto("", t)?);
            T::TENSOR
        }
        AttrValue::Floats(v) => {
            p.floats = v.clone();
            T::FLOATS
        }
        AttrValue::Ints(v) => {
            p.ints = v.clone();
            T::INTS
        }
        AttrValue::Strings(v) => {
            p.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect();
            T::STRINGS
        }
        AttrValue::Other(kind) => {
            return Err(Error::Unsupported {
                what: format!("attribute '{}'", a.name),
                detail: format!("cannot encode attributes of kind {kind}"),
            })
        }
    };
    p.type_ = protobuf::EnumOrUnknown::new(ty);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: &[i64]) -> pb::TensorProto {
        let mut t = pb::TensorProto::new();
        t.data_type = dtype.code();
        t.dims = dims.to_vec();
        t
    }

    #[test]
    fn raw_and_typed_fields_agree() {
        let mut t = proto(DataType::Float16, &[2]);
        t.int32_data = vec![0x3c00, 0x4000];
        let a = tensor_from_proto(&t, &LoadOptions::default()).unwrap();
        assert_eq!(
            a,
            Tensor::from_vec(&[2], vec![f16::from_f32(1.0), f16::from_f32(2.0)])
        );
        let bytes = save_tensor("x", &a).unwrap();
        let (name, b) = load_tensor(&bytes).unwrap();
        assert_eq!((name.as_str(), &b), ("x", &a));
    }

    #[test]
    fn int4_packs_low_nibble_first() {
        // onnx.helper.make_tensor('x', INT4, [3], [1, -2, 3]) stores int32_data [225, 3].
        let mut t = proto(DataType::Int4, &[3]);
        t.int32_data = vec![225, 3];
        let a = tensor_from_proto(&t, &LoadOptions::default()).unwrap();
        assert_eq!(a.storage(), &Storage::Bits(vec1(vec![1, 0xE, 3])));
        let mut r = proto(DataType::Int4, &[3]);
        r.raw_data = vec![0xE1, 0x03];
        assert_eq!(tensor_from_proto(&r, &LoadOptions::default()).unwrap(), a);
        assert_eq!(tensor_to_proto("", &a).unwrap().raw_data, vec![0xE1, 0x03]);
    }

    #[test]
    fn int2_packs_four_per_byte() {
        let vals = vec![1u8, 2, 3, 0, 2];
        let packed = pack_bits(&vals, 2);
        assert_eq!(packed, vec![0b00_11_10_01, 0b10]);
        assert_eq!(unpack_bits(&packed, 2, 5), vals);
    }

    #[test]
    fn every_dtype_round_trips_through_raw_data() {
        for d in DataType::ALL {
            let t = match d {
                DataType::String => Tensor::from_vec(&[2], vec!["a".to_string(), "".to_string()]),
                _ => {
                    let mut p = proto(d, &[3]);
                    p.raw_data = vec![1u8; (3 * d.bit_width()).div_ceil(8)];
                    tensor_from_proto(&p, &LoadOptions::default()).unwrap()
                }
            };
            let (_, back) = load_tensor(&save_tensor("t", &t).unwrap()).unwrap();
            assert_eq!(back, t, "{d}");
        }
    }

    #[test]
    fn short_data_is_an_error_not_an_allocation() {
        let mut t = proto(DataType::Float, &[1_000_000_000_000]);
        t.raw_data = vec![0; 8];
        let e = tensor_from_proto(&t, &LoadOptions::default()).unwrap_err();
        assert!(e.to_string().contains("max_tensor_bytes"), "{e}");
        // Without the limit, the data present is what bounds the work.
        let unlimited = LoadOptions::new(Limits {
            max_tensor_bytes: u64::MAX,
            ..Limits::default()
        });
        let e = tensor_from_proto(&t, &unlimited).unwrap_err().to_string();
        assert!(
            e.contains("raw_data (bytes) holds 8 values but the shape needs"),
            "{e}"
        );
        let mut t = proto(DataType::Int64, &[2]);
        t.int64_data = vec![1];
        let e = tensor_from_proto(&t, &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("int64_data holds 1 values but the shape needs 2"),
            "{e}"
        );
    }

    #[test]
    fn negative_dims_and_unknown_types_are_rejected() {
        let t = proto(DataType::Float, &[-1]);
        assert!(tensor_from_proto(&t, &LoadOptions::default())
            .unwrap_err()
            .to_string()
            .contains("negative dimension"));
        let mut t = proto(DataType::Float, &[1]);
        t.data_type = 99;
        assert!(tensor_from_proto(&t, &LoadOptions::default())
            .unwrap_err()
            .to_string()
            .contains("unknown data_type 99"));
    }

    #[test]
    fn external_data_is_a_clear_error() {
        let mut t = proto(DataType::Float, &[1]);
        t.name = "w".into();
        let mut e = pb::StringStringEntryProto::new();
        e.key = "location".into();
        e.value = "weights.bin".into();
        t.external_data.push(e);
        t.data_location = protobuf::EnumOrUnknown::new(pb::tensor_proto::DataLocation::EXTERNAL);
        let e = tensor_from_proto(&t, &LoadOptions::default()).unwrap_err();
        assert_eq!(e.kind(), "external-data");
        let msg = e.to_string();
        assert!(
            msg.starts_with("tensor 'w': external data 'weights.bin' refused: no folder"),
            "{msg}"
        );
    }

    #[test]
    fn external_initializers_load_from_the_model_folder() {
        let dir = std::env::temp_dir().join(format!("onnx-conformance-ext-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let values: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut file = vec![0u8; 4];
        file.extend(&values);
        std::fs::write(dir.join("data/w.bin"), &file).unwrap();
        let mut w = proto(DataType::Float, &[3]);
        w.name = "w".into();
        w.data_location = protobuf::EnumOrUnknown::new(pb::tensor_proto::DataLocation::EXTERNAL);
        for (k, v) in [
            ("location", "data/w.bin"),
            ("offset", "4"),
            ("length", "12"),
        ] {
            let mut e = pb::StringStringEntryProto::new();
            e.key = k.into();
            e.value = v.into();
            w.external_data.push(e);
        }
        let mut g = pb::GraphProto::new();
        g.initializer.push(w);
        let mut m = pb::ModelProto::new();
        let mut o = pb::OperatorSetIdProto::new();
        o.version = 18;
        m.opset_import.push(o);
        m.graph = protobuf::MessageField::some(g);
        let path = dir.join("model.onnx");
        std::fs::write(&path, m.write_to_bytes().unwrap()).unwrap();
        let model = load_model_file(&path, Limits::default()).unwrap();
        let (name, t) = &model.graph.initializers[0];
        assert_eq!(name, "w");
        assert_eq!(
            t.array::<f32>().unwrap().as_slice().unwrap(),
            &[1.5, -2.0, 3.25]
        );
        // From bytes there is no folder to resolve it in.
        let e = load_model(&std::fs::read(&path).unwrap()).unwrap_err();
        assert_eq!(e.kind(), "external-data");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        let mut g = pb::GraphProto::new();
        for _ in 0..10 {
            let mut a = pb::AttributeProto::new();
            a.name = "then_branch".into();
            a.type_ = protobuf::EnumOrUnknown::new(pb::attribute_proto::AttributeType::GRAPH);
            a.g = protobuf::MessageField::some(g);
            let mut n = pb::NodeProto::new();
            n.attribute.push(a);
            g = pb::GraphProto::new();
            g.node.push(n);
        }
        let mut m = pb::ModelProto::new();
        let mut o = pb::OperatorSetIdProto::new();
        o.version = 18;
        m.opset_import.push(o);
        m.graph = protobuf::MessageField::some(g);
        let bytes = m.write_to_bytes().unwrap();
        assert!(load_model(&bytes).is_ok());
        let shallow = LoadOptions::new(Limits {
            max_nesting: 20,
            ..Limits::default()
        });
        let e = load_model_with(&bytes, &shallow).unwrap_err();
        assert_eq!(e.kind(), "decode");
        assert!(e.to_string().contains("max_nesting = 20"), "{e}");
    }

    #[test]
    fn truncated_and_garbage_models_are_errors() {
        let mut m = pb::ModelProto::new();
        m.ir_version = 8;
        let mut o = pb::OperatorSetIdProto::new();
        o.version = 18;
        m.opset_import.push(o);
        let mut g = pb::GraphProto::new();
        g.name = "g".into();
        m.graph = protobuf::MessageField::some(g);
        let bytes = m.write_to_bytes().unwrap();
        assert!(load_model(&bytes).is_ok());
        let cut = &bytes[..bytes.len() - 1];
        assert!(load_model(cut)
            .unwrap_err()
            .to_string()
            .starts_with("cannot decode model"));
        let garbage = [0xffu8, 0xff, 0xff, 0xff, 0x0f, 0x01];
        assert!(load_model(&garbage)
            .unwrap_err()
            .to_string()
            .starts_with("cannot decode model"));
        assert!(load_model(&[])
            .unwrap_err()
            .to_string()
            .contains("no graph"));
    }
}
