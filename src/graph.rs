//! Runs a model's graph: initializers first, then graph inputs in order,
//! then nodes in the order the model lists them (ONNX requires a
//! topological order), and finally the graph outputs.
//!
//! Like a runtime's session, a model is prepared once ([`Model::prepare`]):
//! every node's kernel is resolved, and operators that can do per-model
//! work ahead (Conv packs constant weights) do it then. [`PreparedModel::run`]
//! does only the per-input work. [`run`] is both in one call.

use crate::error::{Error, Result};
use crate::model::Model;
use crate::ops::{self, KernelCtx, KernelFn, Limits, NodeState};
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::collections::HashMap;

/// The tensor a value name stands for before any node runs: an initializer,
/// or the feed of that graph input (`inputs` one per [`feed_names`]).
pub fn given_value<'a>(
    model: &'a Model,
    inputs: &'a [Tensor],
    name: &str,
) -> Result<&'a Tensor, String> {
    if let Some((_, t)) = model.graph.initializers.iter().find(|(n, _)| n == name) {
        return Ok(t);
    }
    match feed_names(model).iter().position(|f| *f == name) {
        Some(i) => inputs
            .get(i)
            .ok_or_else(|| format!("the data set has no value for graph input '{name}'")),
        None => Err(format!("'{name}' is computed by another node")),
    }
}

/// The names of the graph inputs a caller must feed: graph inputs that are
/// not initializers, in order.
pub fn feed_names(model: &Model) -> Vec<&str> {
    let inits: Vec<&str> = model
        .graph
        .initializers
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    model
        .graph
        .inputs
        .iter()
        .map(|v| v.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect()
}

/// A model with its kernels chosen and its per-model work done.
pub struct PreparedModel<'m> {
    model: &'m Model,
    limits: Limits,
    nodes: Vec<PreparedNode>,
}

struct PreparedNode {
    version: i64,
    kernel: KernelFn,
    state: Option<Box<NodeState>>,
}

impl Model {
    /// Resolves every node's kernel for the model's opsets (a node without
    /// one is an error now, as a runtime refuses such a model when a session
    /// is created) and lets operators prepare constant inputs.
    pub fn prepare(&self, limits: Limits) -> Result<PreparedModel<'_>> {
        let g = &self.graph;
        let feeds = feed_names(self);
        // An initializer a node also writes (a model breaking single
        // assignment) is not constant: the run would read the node's value.
        let written: Vec<&str> = g
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .collect();
        let constant = |name: &str| -> Option<&Tensor> {
            if feeds.contains(&name) || written.contains(&name) {
                return None;
            }
            g.initializers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t)
        };
        let mut nodes = Vec::with_capacity(g.nodes.len());
        for node in &g.nodes {
            let (version, entry) = resolve(self, node)?;
            let state = entry.prepare.and_then(|prepare| {
                let args: Vec<Option<&Tensor>> = node.inputs.iter().map(|n| constant(n)).collect();
                let ctx = KernelCtx {
                    node,
                    version,
                    limits,
                    prepared: None,
                };
                prepare(&ctx, &args)
            });
            nodes.push(PreparedNode {
                version,
                kernel: entry.kernel,
                state,
            });
        }
        Ok(PreparedModel {
            model: self,
            limits,
            nodes,
        })
    }
}

/// The operator entry a node runs, and at which version.
fn resolve(model: &Model, node: &crate::model::Node) -> Result<(i64, &'static ops::OpEntry)> {
    let opset = model.opset(&node.domain).ok_or_else(|| Error::NoKernel {
        node: node.display_name(),
        domain: node.domain.clone(),
        op: node.op_type.clone(),
        opset: 0,
        hint: format!(" (the model imports no opset for domain '{}')", node.domain),
    })?;
    ops::resolve(&node.domain, &node.op_type, opset).ok_or_else(|| {
        let hint = match ops::is_known(&node.domain, &node.op_type) {
            Some(e) => format!(
                " (implemented versions: {:?}; opset {opset} predates them)",
                e.versions
            ),
            None => " (operator not implemented)".to_string(),
        };
        Error::NoKernel {
            node: node.display_name(),
            domain: node.domain.clone(),
            op: node.op_type.clone(),
            opset,
            hint,
        }
    })
}

/// Prepares `model` and runs it once on `inputs` (one per `feed_names`, in
/// order); returns the graph outputs in order.
pub fn run(model: &Model, inputs: &[Tensor], limits: Limits) -> Result<Vec<Tensor>> {
    model.prepare(limits)?.run(inputs)
}

impl PreparedModel<'_> {
    /// Runs the model on `inputs` (one per `feed_names`, in order) and
    /// returns the graph outputs in order.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (model, limits) = (self.model, self.limits);
        let g = &model.graph;
        let graph_err = |detail: String| Error::Graph {
            graph: g.name.clone(),
            detail,
        };
        let names = feed_names(model);
        if names.len() != inputs.len() {
            return Err(graph_err(format!(
                "expects {} inputs ({}), got {}",
                names.len(),
                names.join(", "),
                inputs.len()
            )));
        }
        // Initializers and inputs are borrowed; only node outputs are owned.
        let mut values: HashMap<&str, Cow<Tensor>> = HashMap::new();
        for (name, t) in &g.initializers {
            values.insert(name.as_str(), Cow::Borrowed(t));
        }
        for (name, t) in names.iter().zip(inputs) {
            if let Some(dt) = g
                .inputs
                .iter()
                .find(|v| v.name == *name)
                .and_then(|v| v.dtype)
            {
                if dt != t.dtype() {
                    return Err(graph_err(format!(
                        "input '{name}' is declared tensor({dt}) but was given tensor({})",
                        t.dtype()
                    )));
                }
            }
            values.insert(name, Cow::Borrowed(t));
        }
        for (node, prepared) in g.nodes.iter().zip(&self.nodes) {
            let (version, kernel) = (prepared.version, prepared.kernel);
            let mut args: Vec<Option<&Tensor>> = Vec::with_capacity(node.inputs.len());
            for name in &node.inputs {
                if name.is_empty() {
                    args.push(None);
                    continue;
                }
                let v = values.get(name.as_str()).ok_or_else(|| {
                    graph_err(format!(
                        "node '{}' reads '{name}', which no initializer, graph input or earlier node provides",
                        node.display_name()
                    ))
                })?;
                args.push(Some(v.as_ref()));
            }
            if let Some(schema) = crate::schema::version(&node.op_type, version)
                .filter(|_| node.domain.is_empty() || node.domain == "ai.onnx")
            {
                crate::schema::validate::validate(node, &args, schema, &node.op_type).map_err(
                    |source| Error::Node {
                        node: node.display_name(),
                        op: node.op_type.clone(),
                        version,
                        source,
                    },
                )?;
            }
            let ctx = KernelCtx {
                node,
                version,
                limits,
                prepared: prepared.state.as_deref(),
            };
            let outs = kernel(&ctx, &args).map_err(|source| Error::Node {
                node: node.display_name(),
                op: node.op_type.clone(),
                version,
                source,
            })?;
            if outs.len() < node.outputs.iter().filter(|o| !o.is_empty()).count() {
                return Err(graph_err(format!(
                    "node '{}' produced {} outputs but declares {}",
                    node.display_name(),
                    outs.len(),
                    node.outputs.len()
                )));
            }
            for (name, t) in node.outputs.iter().zip(outs) {
                if !name.is_empty() {
                    values.insert(name.as_str(), Cow::Owned(t));
                }
            }
        }
        let mut result: Vec<Tensor> = Vec::with_capacity(g.outputs.len());
        for (i, o) in g.outputs.iter().enumerate() {
            if let Some(j) = g.outputs[..i].iter().position(|p| p.name == o.name) {
                let again = result[j].clone();
                result.push(again);
                continue;
            }
            match values.remove(o.name.as_str()) {
                Some(Cow::Owned(t)) => result.push(t),
                Some(Cow::Borrowed(t)) => result.push(t.clone()),
                None => {
                    return Err(graph_err(format!(
                        "graph output '{}' is never produced",
                        o.name
                    )))
                }
            }
        }
        Ok(result)
    }
}
