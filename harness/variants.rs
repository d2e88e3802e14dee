//! The version matrix: a single-node case rewritten for another version of
//! its operator, when the same computation can be expressed there. The
//! expected outputs stay those of the original case.
//!
//! When it cannot be expressed, the reason cites the schema change, e.g.
//! "Pad-18 has no mode 'wrap' (added in Pad-19)". Pad-18's `axes` input is
//! expressed at older versions by full-rank pads.

use crate::run_case::Prepared;
use onnx_conformance::model::{AttrValue, Attribute, Model, Node};
use onnx_conformance::schema;
use onnx_conformance::{ops, proto, DataType, Storage, Tensor};

/// Operators whose cases are run at their other versions.
pub fn versions_of(op: &str) -> &'static [i64] {
    match op {
        "Pad" => &ops::pad::VERSIONS,
        "Conv" => &ops::conv::VERSIONS,
        _ => &[],
    }
}

/// The single node of a one-node model in the default domain, with the
/// version it runs at.
pub fn single_node(model: &Model) -> Option<(&Node, i64)> {
    let [node] = model.graph.nodes.as_slice() else {
        return None;
    };
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return None;
    }
    let opset = model.opset("")?;
    let (version, _) = ops::resolve("", &node.op_type, opset)?;
    Some((node, version))
}

/// The first version of `op` whose type constraint for `param` allows `dtype`.
fn first_allowing(op: &str, param: &str, dtype: DataType) -> Option<i64> {
    let s = schema::op(op)?;
    s.versions.iter().find_map(|v| {
        let p = v.input(param)?;
        v.allowed(p)
            .contains(&format!("tensor({dtype})"))
            .then_some(v.since_version)
    })
}

fn type_reason(op: &str, param: &str, target: i64, dtype: DataType) -> Option<String> {
    let v = schema::version(op, target)?;
    let allowed = v.allowed(v.input(param)?);
    if allowed.contains(&format!("tensor({dtype})")) {
        return None;
    }
    let added = first_allowing(op, param, dtype)
        .map_or(String::new(), |f| format!(" (widened in {op}-{f})"));
    if allowed.len() <= 4 {
        let names: Vec<String> = allowed
            .iter()
            .map(|t| {
                t.trim_start_matches("tensor(")
                    .trim_end_matches(')')
                    .to_string()
            })
            .collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        Some(format!("{op}-{target} allows {list} only{added}"))
    } else {
        Some(format!("{op}-{target} does not allow {dtype}{added}"))
    }
}

/// Rewrites `p` (whose single node runs at `from`) for version `to`.
pub fn at_version(p: &Prepared, from: i64, to: i64) -> Result<Prepared, String> {
    let (node, _) = single_node(&p.model).ok_or("not a single-node case")?;
    let op = node.op_type.as_str();
    let value_of = |name: &str| -> Option<Tensor> {
        if let Some((_, t)) = p.model.graph.initializers.iter().find(|(n, _)| n == name) {
            return Some(t.clone());
        }
        let feeds = onnx_conformance::graph::feed_names(&p.model);
        feeds
            .iter()
            .position(|f| *f == name)
            .and_then(|i| p.inputs.get(i).cloned())
    };
    let data_name = node.inputs.first().ok_or("node has no inputs")?;
    let data = value_of(data_name).ok_or("the data input has no value")?;
    let param = if op == "Conv" { "X" } else { "data" };
    if let Some(r) = type_reason(op, param, to, data.dtype()) {
        return Err(r);
    }
    let mut model = p.model.clone();
    for (d, v) in model.opset_import.iter_mut() {
        if d.is_empty() || d == "ai.onnx" {
            *v = to;
        }
    }
    if op == "Pad" {
        rewrite_pad(&mut model, node, from, to, &value_of)?;
    }
    // Keep only the graph inputs the rewritten node still reads.
    let used: Vec<String> = model.graph.nodes[0].inputs.clone();
    let feeds: Vec<String> = onnx_conformance::graph::feed_names(&p.model)
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut inputs = Vec::new();
    for (i, name) in feeds.iter().enumerate() {
        if used.contains(name) {
            let t = p
                .inputs
                .get(i)
                .ok_or_else(|| format!("the data set has no value for graph input '{name}'"))?;
            inputs.push(t.clone());
        }
    }
    model.graph.inputs.retain(|v| {
        used.contains(&v.name) || model.graph.initializers.iter().any(|(n, _)| *n == v.name)
    });
    model.graph.initializers.retain(|(n, _)| used.contains(n));
    let bytes =
        proto::save_model(&model).map_err(|e| format!("cannot encode the rewritten model: {e}"))?;
    Ok(Prepared {
        model,
        bytes,
        inputs,
        outputs: p.outputs.clone(),
    })
}

fn rewrite_pad(
    model: &mut Model,
    node: &Node,
    from: i64,
    to: i64,
    value_of: &dyn Fn(&str) -> Option<Tensor>,
) -> Result<(), String> {
    let mode = match node.attribute("mode") {
        Some(AttrValue::String(m)) => m.clone(),
        _ => "constant".to_string(),
    };
    if mode == "wrap" && to < 19 {
        return Err(format!("Pad-{to} has no mode 'wrap' (added in Pad-19)"));
    }
    let input = |i: usize| node.inputs.get(i).filter(|s| !s.is_empty());
    // The pads and pad value, whichever form the source uses.
    let (pads, value): (Vec<i64>, Option<Tensor>) = if from < 11 {
        let attr = if from == 1 { "paddings" } else { "pads" };
        let pads = match node.attribute(attr) {
            Some(AttrValue::Ints(v)) => v.clone(),
            _ => return Err(format!("the case has no '{attr}' attribute")),
        };
        let value = match node.attribute("value") {
            Some(AttrValue::Float(f)) => Some(*f),
            _ => None,
        };
        let data = value_of(&node.inputs[0]).ok_or("no data")?;
        let value = value.map(|f| float_tensor(f, data.dtype())).transpose()?;
        (pads, value)
    } else {
        let pads = input(1)
            .and_then(|n| value_of(n))
            .and_then(|t| t.to_i64_vec())
            .ok_or("the pads input has no value in the data set")?;
        (pads, input(2).and_then(|n| value_of(n)))
    };
    let axes = match input(3) {
        Some(name) if from >= 18 => Some(value_of(name).ok_or("the axes input has no value")?),
        _ => None,
    };
    // Before Pad-18 every axis has its pads; the data set tells which axes
    // `axes` names, so the same computation has zeros for the others.
    let (pads, axes) = match axes {
        Some(axes) if to < 18 => {
            let rank = value_of(&node.inputs[0]).ok_or("no data")?.rank();
            let list = axes.to_i64_vec().ok_or("the axes input is not integral")?;
            (full_rank_pads(&pads, &list, rank, to)?, None)
        }
        other => (pads, other),
    };
    let mut attrs = vec![Attribute {
        name: "mode".into(),
        value: AttrValue::String(mode),
    }];
    let new_node = &mut model.graph.nodes[0];
    if to < 11 {
        attrs.push(Attribute {
            name: if to == 1 { "paddings" } else { "pads" }.into(),
            value: AttrValue::Ints(pads),
        });
        if let Some(v) = value {
            let f = scalar_f32(&v).ok_or_else(|| {
                format!("Pad-{to}'s 'value' is a float attribute and cannot hold this {} constant_value exactly (pads became inputs in Pad-11)", v.dtype())
            })?;
            attrs.push(Attribute {
                name: "value".into(),
                value: AttrValue::Float(f),
            });
        }
        new_node.inputs.truncate(1);
    } else {
        let base = if new_node.name.is_empty() {
            "pad".to_string()
        } else {
            new_node.name.clone()
        };
        let pads_name = format!("{base}__pads");
        let mut inputs = vec![new_node.inputs[0].clone(), pads_name.clone()];
        model
            .graph
            .initializers
            .push((pads_name, Tensor::from_vec(&[pads.len()], pads)));
        if let Some(v) = value {
            let value_name = format!("{base}__constant_value");
            model.graph.initializers.push((value_name.clone(), v));
            inputs.push(value_name);
        }
        if let Some(t) = axes {
            let axes_name = format!("{base}__axes");
            model.graph.initializers.push((axes_name.clone(), t));
            if inputs.len() == 2 {
                inputs.push(String::new());
            }
            inputs.push(axes_name);
        }
        new_node.inputs = inputs;
    }
    new_node.attributes = attrs;
    Ok(())
}

/// Pads for every axis of a rank-`rank` input (`[x1_begin, ..., x1_end, ...]`)
/// doing what `pads` over `axes` does at Pad-18: each listed axis (negative
/// counts from the back) gets its begin and end pads, the others zeros.
///
/// Written here rather than borrowed from the Pad kernel, so that a kernel
/// bug in reading `axes` cannot also shape the variants that check it.
pub fn full_rank_pads(
    pads: &[i64],
    axes: &[i64],
    rank: usize,
    to: i64,
) -> Result<Vec<i64>, String> {
    let cannot = |why: String| {
        format!("Pad-{to} has no input 'axes' (added in Pad-18) and full-rank pads cannot express these: {why}")
    };
    if pads.len() != 2 * axes.len() {
        return Err(cannot(format!(
            "{} pads for {} axes",
            pads.len(),
            axes.len()
        )));
    }
    let signed_rank = i64::try_from(rank).map_err(|_| cannot(format!("rank {rank}")))?;
    let mut full = vec![0i64; 2 * rank];
    let mut seen = vec![false; rank];
    for (i, &a) in axes.iter().enumerate() {
        let axis = if a < 0 { a + signed_rank } else { a };
        if !(0..signed_rank).contains(&axis) {
            return Err(cannot(format!("axis {a} is out of range for rank {rank}")));
        }
        let axis = axis as usize;
        if std::mem::replace(&mut seen[axis], true) {
            return Err(cannot(format!(
                "axes {axes:?} name axis {axis} twice (Pad-18: \"Behavior is undefined if an axis is repeated\")"
            )));
        }
        full[axis] = pads[i];
        full[rank + axis] = pads[axes.len() + i];
    }
    Ok(full)
}

/// A scalar of a float type holding `f`.
fn float_tensor(f: f32, dtype: DataType) -> Result<Tensor, String> {
    Ok(match dtype {
        DataType::Float => Tensor::scalar(f),
        DataType::Double => Tensor::scalar(f as f64),
        DataType::Float16 => Tensor::scalar(half::f16::from_f32(f)),
        other => return Err(format!("Pad-2's value cannot express a {other} pad value")),
    })
}

/// The value of a one-element float tensor as an f32, when exact.
fn scalar_f32(t: &Tensor) -> Option<f32> {
    match t.storage() {
        Storage::F32(a) => a.iter().next().copied(),
        Storage::F16(a) => a.iter().next().map(|v| v.to_f32()),
        Storage::F64(a) => a
            .iter()
            .next()
            .and_then(|&v| ((v as f32) as f64 == v).then_some(v as f32)),
        _ => None,
    }
}
