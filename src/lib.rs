//! ONNX operator kernels on `ndarray`, with the loader and executor the
//! conformance harness runs them through.
//!
//! - [`tensor`]: element types and tensors.
//! - [`proto`]: the only module that touches onnx-protobuf.
//! - [`model`]: the in-memory model the executor runs.
//! - [`graph`]: runs a graph, picking kernels by domain, op type and opset.
//! - [`ops`]: the kernels (`pad`, ...) and their registry.

pub mod backend;
pub mod compare;
pub mod error;
pub mod error_bound;
pub mod files;
pub mod fuzz;
pub mod graph;
pub mod limits;
pub mod model;
pub mod observed;
pub mod ops;
pub mod proto;
pub mod schema;
pub mod tensor;
pub mod trial_record;
pub mod verdict;

// The integration tests' generator, so that unit tests draw from the same
// one instead of each writing its own.
#[cfg(test)]
#[path = "../tests/support/rng.rs"]
mod test_rng;

pub use error::{Error, KernelError, Result};
pub use limits::{LimitExceeded, Limits};
pub use model::Model;
pub use tensor::{DataType, Storage, Tensor};
