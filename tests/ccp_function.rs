//! CenterCropPad run directly and through ONNX's own function body (the
//! graph of the `*_expanded` cases) must agree exactly on random inputs.

mod support;

use onnx_conformance::model::{AttrValue, Model, Node};
use onnx_conformance::{graph, Limits, Tensor};
use support::node;
use support::rng::Rng;

fn model(nodes: Vec<Node>) -> Model {
    support::model(18, nodes, &["x", "shape"], &["y"])
}

fn direct(axes: Option<&[i64]>) -> Model {
    let attrs = axes
        .map(|a| vec![("axes", AttrValue::Ints(a.to_vec()))])
        .unwrap_or_default();
    model(vec![node("CenterCropPad", &["x", "shape"], "y", attrs)])
}

/// The function body of CenterCropPad-18, node for node.
fn expanded(axes: Option<&[i64]>) -> Model {
    let two = Tensor::from_vec(&[1], vec![2i64]);
    let mut n = vec![node(
        "Constant",
        &[],
        "k2",
        vec![("value", AttrValue::Tensor(two))],
    )];
    match axes {
        Some(a) => {
            n.push(node(
                "Constant",
                &[],
                "axes",
                vec![("value_ints", AttrValue::Ints(a.to_vec()))],
            ));
            n.push(node("Shape", &["x"], "x_all", vec![]));
            n.push(node("Gather", &["x_all", "axes"], "x_shape", vec![]));
        }
        None => n.push(node("Shape", &["x"], "x_shape", vec![])),
    }
    n.push(node("Max", &["x_shape", "shape"], "padded_sh", vec![]));
    n.push(node("Sub", &["padded_sh", "x_shape"], "pad_amount", vec![]));
    n.push(node("Div", &["pad_amount", "k2"], "left", vec![]));
    n.push(node("Sub", &["pad_amount", "left"], "right", vec![]));
    n.push(node(
        "Concat",
        &["left", "right"],
        "pads",
        vec![("axis", AttrValue::Int(0))],
    ));
    if axes.is_some() {
        n.push(node("Pad", &["x", "pads", "", "axes"], "padded", vec![]));
        n.push(node("Shape", &["padded"], "p_all", vec![]));
        n.push(node("Gather", &["p_all", "axes"], "p_shape", vec![]));
    } else {
        n.push(node("Pad", &["x", "pads"], "padded", vec![]));
        n.push(node("Shape", &["padded"], "p_shape", vec![]));
    }
    n.push(node("Sub", &["p_shape", "shape"], "diff", vec![]));
    n.push(node("Div", &["diff", "k2"], "starts", vec![]));
    n.push(node("Add", &["starts", "shape"], "ends", vec![]));
    if axes.is_some() {
        n.push(node(
            "Slice",
            &["padded", "starts", "ends", "axes"],
            "y",
            vec![],
        ));
    } else {
        n.push(node("Slice", &["padded", "starts", "ends"], "y", vec![]));
    }
    model(n)
}

#[test]
fn kernel_and_function_body_agree() {
    let mut r = Rng::new(0xDEADBEEFCAFEF00D);
    for case in 0..300 {
        let rank = 1 + r.below(4) as usize;
        let shape: Vec<usize> = (0..rank).map(|_| 1 + r.below(7) as usize).collect();
        let len: usize = shape.iter().product();
        let x = match case % 3 {
            0 => Tensor::from_vec(&shape, (0..len).map(|i| i as f32 + 0.5).collect()),
            1 => Tensor::from_vec(&shape, (0..len).map(|i| i as i32 - 7).collect()),
            _ => Tensor::from_vec(&shape, (0..len).map(|i| format!("s{i}")).collect()),
        };
        let axes: Option<Vec<i64>> = if r.below(2) == 0 {
            None
        } else {
            let mut all: Vec<i64> = (0..rank as i64).collect();
            let keep = 1 + r.below(rank as u64) as usize;
            for i in 0..rank {
                let j = i + r.below((rank - i) as u64) as usize;
                all.swap(i, j);
            }
            Some(
                all[..keep]
                    .iter()
                    .map(|&a| if r.below(2) == 0 { a - rank as i64 } else { a })
                    .collect(),
            )
        };
        let count = axes.as_ref().map_or(rank, Vec::len);
        let targets: Vec<i64> = (0..count).map(|_| r.below(10) as i64).collect();
        let t = Tensor::from_vec(&[count], targets.clone());
        let inputs = [x, t];
        let want = graph::run(&direct(axes.as_deref()), &inputs, Limits::default()).unwrap();
        let got = graph::run(&expanded(axes.as_deref()), &inputs, Limits::default())
            .unwrap_or_else(|e| {
                panic!("case {case}: shape {shape:?} axes {axes:?} targets {targets:?}: {e}")
            });
        assert_eq!(
            got, want,
            "case {case}: shape {shape:?} axes {axes:?} targets {targets:?}"
        );
    }
}
