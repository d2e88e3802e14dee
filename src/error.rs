//! Typed errors of the library. Every failure a kernel, the loader or the
//! executor can meet is one of these; none of them panics.

use crate::limits::LimitExceeded;
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
    /// A tensor whose data lives in another file that cannot be used: no
    /// case folder to resolve it in, a path outside that folder, or a
    /// missing or short file.
    #[error("tensor '{tensor}': external data '{location}' refused: {detail}")]
    ExternalData {
        tensor: String,
        location: String,
        detail: String,
    },
    /// A file that cannot be read.
    #[error("cannot read {path}: {detail}")]
    Io { path: String, detail: String },
    /// A model or tensor larger than a configured limit allows.
    #[error("{0}")]
    Limit(Box<LimitExceeded>),
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
    /// The output or the work would exceed a configured limit.
    #[error("{0}")]
    Limit(Box<LimitExceeded>),
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

impl Error {
    /// A short name for the kind of failure, stable across message wording:
    /// `decode`, `unsupported`, `external-data`, `io`, `limit`, `no-kernel`,
    /// `graph`, or for a rejected node the kernel's kind (`attribute`,
    /// `input`, `type`, `limit`, `invalid`). The invalid-input suite matches it.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Decode { .. } => "decode",
            Error::Unsupported { .. } => "unsupported",
            Error::ExternalData { .. } => "external-data",
            Error::Io { .. } => "io",
            Error::Limit(_) => "limit",
            Error::NoKernel { .. } => "no-kernel",
            Error::Graph { .. } => "graph",
            Error::Node { source, .. } => source.kind(),
        }
    }
}

impl KernelError {
    pub fn kind(&self) -> &'static str {
        match self {
            KernelError::Attribute { .. } => "attribute",
            KernelError::Input { .. } => "input",
            KernelError::Type { .. } => "type",
            KernelError::Limit(_) => "limit",
            KernelError::Invalid(_) => "invalid",
        }
    }
}

impl From<LimitExceeded> for KernelError {
    fn from(e: LimitExceeded) -> Self {
        KernelError::Limit(Box::new(e))
    }
}

impl From<LimitExceeded> for Error {
    fn from(e: LimitExceeded) -> Self {
        Error::Limit(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
