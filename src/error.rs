//! Typed errors of the library. Every failure a kernel, the loader or the
//! executor can meet is one of these; none of them panics.

use crate::tensor::DataType;

/// A failure while loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes that are not a valid protobuf message of the expected kind.
    #[error("cannot decode {what}: {detail}")]
    Decode { what: String, detail: String },
    /// A well-formed message whose content we cannot represent.
    #[error("{what}: {detail}")]
    Unsupported { what: String, detail: String },
    /// A tensor whose data lives in another file.
    #[error("tensor '{tensor}' uses external data ({location}), which is not supported: embed the data in the model")]
    ExternalData { tensor: String, location: String },
    /// No kernel matches the node's domain, op type and the model's opset.
    #[error("node '{node}': no kernel for {domain}{sep}{op} at opset {opset}{hint}", sep = if domain.is_empty() { "" } else { "::" })]
    NoKernel {
        node: String,
        domain: String,
        op: String,
        opset: i64,
        hint: String,
    },
    /// A kernel rejected its node.
    #[error("node '{node}' ({op}-{version}): {source}")]
    Node {
        node: String,
        op: String,
        version: i64,
        #[source]
        source: KernelError,
    },
    /// The graph itself is malformed (missing value, wrong input count, ...).
    #[error("graph '{graph}': {detail}")]
    Graph { graph: String, detail: String },
}

/// Why a kernel rejected a node. The executor wraps it in `Error::Node`,
/// which adds the node's name, op type and version.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KernelError {
    #[error("attribute '{name}': {expected}")]
    Attribute { name: String, expected: String },
    #[error("input '{name}': {expected}")]
    Input { name: String, expected: String },
    #[error("element type {dtype} of '{name}' is not allowed; allowed: {allowed}")]
    Type {
        name: String,
        dtype: DataType,
        allowed: String,
    },
    #[error("output would hold {elements} elements, more than the limit of {limit} (raise Limits::max_output_elements to allow it)")]
    TooLarge { elements: u128, limit: u64 },
    #[error("{0}")]
    Invalid(String),
}

impl KernelError {
    pub fn attribute(name: &str, expected: impl Into<String>) -> KernelError {
        KernelError::Attribute {
            name: name.to_string(),
            expected: expected.into(),
        }
    }

    pub fn input(name: &str, expected: impl Into<String>) -> KernelError {
        KernelError::Input {
            name: name.to_string(),
            expected: expected.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
