//! Every input a kernel must reject, run through the executor so that the
//! error carries the node's name, the operator version and the attribute or
//! input at fault.

mod center_crop_pad;
mod conv;
mod pad;

// This target is a folder of its own, so the shared module is one up.
#[path = "../support/mod.rs"]
mod support;

use onnx_conformance::model::Model;
use onnx_conformance::{graph, Limits, Tensor};

pub fn err(m: &Model, inputs: &[Tensor]) -> String {
    graph::run(m, inputs, Limits::default())
        .unwrap_err()
        .to_string()
}

pub fn assert_has(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{msg:?} lacks {p:?}");
    }
}
