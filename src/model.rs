//! The in-memory model: what the executor and kernels see. It mirrors the
//! parts of `ModelProto` we use, without any protobuf type, so that the wire
//! layer (`proto.rs`) can change without touching kernels.

use crate::tensor::{DataType, Tensor};

#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub ir_version: i64,
    /// (domain, version); the default domain is "" (also spelled "ai.onnx").
    pub opset_import: Vec<(String, i64)>,
    pub graph: Graph,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<Node>,
    pub initializers: Vec<(String, Tensor)>,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct ValueInfo {
    pub name: String,
    /// None when the model does not say (or the value is not a tensor).
    pub dtype: Option<DataType>,
    /// None when unknown; a dimension is None when symbolic or missing.
    pub shape: Option<Vec<Option<i64>>>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Node {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    /// Input names; "" marks an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<Attribute>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub value: AttrValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Float(f32),
    Int(i64),
    String(String),
    Tensor(Tensor),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<String>),
    /// Kinds no covered operator uses (graphs, sparse tensors, type protos);
    /// kept by name so that a kernel can reject them clearly.
    Other(String),
}

impl AttrValue {
    /// The ONNX attribute type name, as schemas spell it.
    pub fn type_name(&self) -> &str {
        match self {
            AttrValue::Float(_) => "FLOAT",
            AttrValue::Int(_) => "INT",
            AttrValue::String(_) => "STRING",
            AttrValue::Tensor(_) => "TENSOR",
            AttrValue::Floats(_) => "FLOATS",
            AttrValue::Ints(_) => "INTS",
            AttrValue::Strings(_) => "STRINGS",
            AttrValue::Other(kind) => kind,
        }
    }
}

impl Attribute {
    pub fn new(name: &str, value: AttrValue) -> Attribute {
        Attribute {
            name: name.to_string(),
            value,
        }
    }
}

impl Node {
    /// A node in the default domain; "" in `inputs` marks an omitted
    /// optional input.
    pub fn new(
        name: &str,
        op_type: &str,
        inputs: &[&str],
        outputs: &[&str],
        attributes: Vec<(&str, AttrValue)>,
    ) -> Node {
        Node {
            name: name.to_string(),
            op_type: op_type.to_string(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attributes: attributes
                .into_iter()
                .map(|(n, v)| Attribute::new(n, v))
                .collect(),
        }
    }

    pub fn attribute(&self, name: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.value)
    }

    /// A display name: the node's name, or its op type and first output.
    pub fn display_name(&self) -> String {
        if !self.name.is_empty() {
            self.name.clone()
        } else {
            format!(
                "{} -> {}",
                self.op_type,
                self.outputs.first().map(String::as_str).unwrap_or("?")
            )
        }
    }
}

impl Model {
    /// The opset this model imports for a domain ("" and "ai.onnx" are the same).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let norm = |d: &str| if d == "ai.onnx" { "" } else { d }.to_string();
        let want = norm(domain);
        self.opset_import
            .iter()
            .find(|(d, _)| norm(d) == want)
            .map(|(_, v)| *v)
    }
}
