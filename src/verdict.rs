//! Which verdict policy (`compare::Policy`) judges each output of a model,
//! for our kernels and for any other runtime alike.
//!
//! Under the strict policy (the default):
//! - an output that no Conv contributes to is data movement or exact
//!   integer arithmetic (Pad, CenterCropPad and the helper operators of
//!   function bodies, which compute shapes in int64): **bit-exact**;
//! - an output produced by a Conv whose inputs are graph inputs or
//!   initializers: the **error bound** derived from those inputs
//!   (`error_bound.rs`);
//! - anything else (a Conv fed by other nodes, or followed by them) has no
//!   derivable bound: judging it is an error that says so, never a guess.
//!
//! `ONNX_TOLERANCE=onnx` judges every output as onnx's backend runner does
//! (`compare::ONNX_RUNNER`), for comparison with upstream results.

use crate::compare::{Policy, ONNX_RUNNER};
use crate::graph::{feed_names, given_value};
use crate::model::{Model, Node};
use crate::tensor::Tensor;

/// The policy family a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tolerance {
    /// Bit-exact data movement, error bounds for Conv.
    #[default]
    Strict,
    /// onnx's runner: rtol 1e-3, atol 1e-7 for every float output.
    Onnx,
}

impl Tolerance {
    /// Parses the value of `ONNX_TOLERANCE` (unset means strict).
    pub fn parse(value: Option<&str>) -> Result<Tolerance, String> {
        match value.map(str::trim) {
            None | Some("") | Some("strict") => Ok(Tolerance::Strict),
            Some("onnx") => Ok(Tolerance::Onnx),
            Some(other) => Err(format!(
                "ONNX_TOLERANCE={other}: expected 'strict' (the default) or 'onnx'"
            )),
        }
    }

    /// From the environment.
    pub fn from_env() -> Result<Tolerance, String> {
        Tolerance::parse(std::env::var("ONNX_TOLERANCE").ok().as_deref())
    }

    pub fn name(self) -> &'static str {
        match self {
            Tolerance::Strict => "strict",
            Tolerance::Onnx => "onnx",
        }
    }
}

fn is_conv(node: &Node) -> bool {
    node.op_type == "Conv" && (node.domain.is_empty() || node.domain == "ai.onnx")
}

/// The policy for each graph output of `model` run on `inputs` (the graph
/// inputs that are not initializers, in order). An `Err` says why no policy
/// can judge that output.
pub fn policies(
    model: &Model,
    inputs: &[Tensor],
    tolerance: Tolerance,
) -> Vec<Result<Policy, String>> {
    model
        .graph
        .outputs
        .iter()
        .map(|out| match tolerance {
            Tolerance::Onnx => Ok(ONNX_RUNNER),
            Tolerance::Strict => strict(model, inputs, &out.name),
        })
        .collect()
}

fn producer<'a>(model: &'a Model, value: &str) -> Option<&'a Node> {
    model
        .graph
        .nodes
        .iter()
        .find(|n| n.outputs.iter().any(|o| o == value))
}

/// Whether a Conv contributes to `value` (walks producers back to the graph
/// inputs; each node is visited once).
fn depends_on_conv(model: &Model, value: &str) -> bool {
    let mut seen = vec![false; model.graph.nodes.len()];
    let mut pending = vec![value.to_string()];
    while let Some(v) = pending.pop() {
        let Some(i) = model
            .graph
            .nodes
            .iter()
            .position(|n| n.outputs.contains(&v))
        else {
            continue;
        };
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        let node = &model.graph.nodes[i];
        if is_conv(node) {
            return true;
        }
        pending.extend(node.inputs.iter().filter(|s| !s.is_empty()).cloned());
    }
    false
}

fn strict(model: &Model, inputs: &[Tensor], output: &str) -> Result<Policy, String> {
    if !depends_on_conv(model, output) {
        return Ok(Policy::BitExact);
    }
    let node = producer(model, output)
        .filter(|n| is_conv(n))
        .ok_or_else(|| {
            format!("output '{output}' is computed from a Conv by other nodes: the strict policy bounds Conv outputs from Conv's own inputs only (run with ONNX_TOLERANCE=onnx to judge it by onnx's tolerance)")
        })?;
    let value = |name: &str| -> Result<&Tensor, String> {
        given_value(model, inputs, name).map_err(|e| {
            if feed_names(model).contains(&name) {
                e
            } else {
                format!("Conv input {e}: the strict policy bounds Conv outputs from graph inputs and initializers only (run with ONNX_TOLERANCE=onnx)")
            }
        })
    };
    let arg = |k: usize| node.inputs.get(k).filter(|n| !n.is_empty());
    let x = value(arg(0).ok_or("Conv has no input X")?)?;
    let w = value(arg(1).ok_or("Conv has no input W")?)?;
    let b = arg(2).map(|n| value(n)).transpose()?;
    let bound = crate::error_bound::conv(node, x, w, b)
        .map_err(|e| format!("no error bound for output '{output}': {e}"))?;
    Ok(Policy::ErrorBound(bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Graph, ValueInfo};

    fn value(name: &str) -> ValueInfo {
        ValueInfo {
            name: name.into(),
            ..ValueInfo::default()
        }
    }

    fn model(nodes: Vec<Node>, inputs: &[&str], outputs: &[&str]) -> Model {
        Model {
            ir_version: 8,
            opset_import: vec![(String::new(), 18)],
            graph: Graph {
                name: "g".into(),
                nodes,
                initializers: Vec::new(),
                inputs: inputs.iter().map(|n| value(n)).collect(),
                outputs: outputs.iter().map(|n| value(n)).collect(),
            },
        }
    }

    #[test]
    fn pad_is_bit_exact_and_conv_gets_a_bound() {
        let pad = Node::new("", "Pad", &["x", "p"], &["y"], vec![]);
        let m = model(vec![pad], &["x", "p"], &["y"]);
        assert_eq!(
            policies(&m, &[], Tolerance::Strict),
            vec![Ok(Policy::BitExact)]
        );
        assert_eq!(policies(&m, &[], Tolerance::Onnx), vec![Ok(ONNX_RUNNER)]);

        let conv = Node::new("", "Conv", &["x", "w"], &["y"], vec![]);
        let m = model(vec![conv.clone()], &["x", "w"], &["y"]);
        let x = Tensor::from_vec(&[1, 1, 2], vec![1.0f32, -3.0]);
        let w = Tensor::from_vec(&[1, 1, 1], vec![2.0f32]);
        match &policies(&m, &[x.clone(), w.clone()], Tolerance::Strict)[0] {
            Ok(Policy::ErrorBound(b)) => assert_eq!(b.bound.len(), 2),
            other => panic!("{other:?}"),
        }
        // A missing input is an error, not a guess.
        let got = policies(&m, std::slice::from_ref(&x), Tolerance::Strict);
        assert!(got[0]
            .as_ref()
            .unwrap_err()
            .contains("no value for graph input 'w'"));

        // Pad after Conv: no derivable bound.
        let pad = Node::new("", "Pad", &["c", "p"], &["y"], vec![]);
        let conv = Node::new("", "Conv", &["x", "w"], &["c"], vec![]);
        let m = model(vec![conv, pad], &["x", "w", "p"], &["y"]);
        let got = policies(&m, &[x, w], Tolerance::Strict);
        assert!(got[0].as_ref().unwrap_err().contains("ONNX_TOLERANCE=onnx"));
    }

    #[test]
    fn tolerance_names_parse() {
        assert_eq!(Tolerance::parse(None), Ok(Tolerance::Strict));
        assert_eq!(Tolerance::parse(Some("strict")), Ok(Tolerance::Strict));
        assert_eq!(Tolerance::parse(Some("onnx")), Ok(Tolerance::Onnx));
        assert!(Tolerance::parse(Some("loose"))
            .unwrap_err()
            .contains("'strict'"));
    }
}
