//! Every input a kernel must reject, run through the executor so that the
//! error carries the node's name, the operator version and the attribute or
//! input at fault.

mod center_crop_pad;
mod conv;
mod pad;

use onnx_conformance::model::{AttrValue, Graph, Model, Node, ValueInfo};
use onnx_conformance::{graph, Limits, Tensor};

/// A one-node model in the default domain.
pub fn model_of(
    op: &str,
    node: &str,
    opset: i64,
    inputs: &[&str],
    attrs: Vec<(&str, AttrValue)>,
) -> Model {
    Model {
        ir_version: 10,
        opset_import: vec![(String::new(), opset)],
        graph: Graph {
            name: "g".into(),
            nodes: vec![Node::new(node, op, inputs, &["y"], attrs)],
            initializers: vec![],
            inputs: inputs
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| ValueInfo {
                    name: s.to_string(),
                    ..Default::default()
                })
                .collect(),
            outputs: vec![ValueInfo {
                name: "y".into(),
                ..Default::default()
            }],
        },
    }
}

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
