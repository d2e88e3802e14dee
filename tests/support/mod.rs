//! What the integration tests share: the random number generator and the
//! builders of small models. Each test target includes this module with
//! `mod support;` (or a `#[path]` from a subfolder).

// Every test target compiles its own copy and uses only part of it.
#![allow(dead_code)]

pub mod rng;

use onnx_conformance::model::{AttrValue, Graph, Model, Node, ValueInfo};

/// A node named after its one output.
pub fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<(&str, AttrValue)>) -> Node {
    Node::new(output, op, inputs, &[output], attrs)
}

/// A model of `nodes` in the default domain at `opset`, whose graph takes
/// `inputs` and gives `outputs` (names only: the executor needs no types).
pub fn model(opset: i64, nodes: Vec<Node>, inputs: &[&str], outputs: &[&str]) -> Model {
    let named = |n: &&str| ValueInfo {
        name: n.to_string(),
        ..Default::default()
    };
    Model {
        ir_version: 10,
        opset_import: vec![(String::new(), opset)],
        graph: Graph {
            name: "g".into(),
            nodes,
            initializers: vec![],
            inputs: inputs.iter().map(named).collect(),
            outputs: outputs.iter().map(named).collect(),
        },
    }
}

/// A one-node model whose node is called `name` and writes `y`; empty input
/// names (skipped optional inputs) are not graph inputs.
pub fn model_of(
    op: &str,
    name: &str,
    opset: i64,
    inputs: &[&str],
    attrs: Vec<(&str, AttrValue)>,
) -> Model {
    let given: Vec<&str> = inputs.iter().copied().filter(|s| !s.is_empty()).collect();
    model(
        opset,
        vec![Node::new(name, op, inputs, &["y"], attrs)],
        &given,
        &["y"],
    )
}
