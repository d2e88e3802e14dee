//! Runs a model's graph: initializers first, then graph inputs in order,
//! then nodes in the order the model lists them (ONNX requires a
//! topological order), and finally the graph outputs.

use crate::error::{Error, Result};
use crate::model::Model;
use crate::ops::{self, KernelCtx, Limits};
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::collections::HashMap;

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

/// Runs `model` on `inputs` (one per `feed_names`, in order) and returns the
/// graph outputs in order.
pub fn run(model: &Model, inputs: &[Tensor], limits: Limits) -> Result<Vec<Tensor>> {
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
    for node in &g.nodes {
        let opset = model.opset(&node.domain).ok_or_else(|| Error::NoKernel {
            node: node.display_name(),
            domain: node.domain.clone(),
            op: node.op_type.clone(),
            opset: 0,
            hint: format!(" (the model imports no opset for domain '{}')", node.domain),
        })?;
        let (version, kernel) =
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
            })?;
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
