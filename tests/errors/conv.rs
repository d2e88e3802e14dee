//! Conv rejections (the geometry rules have unit tests in src/ops/conv.rs;
//! these check that the executor reports them with node and version).

use crate::support::model_of;
use crate::{assert_has, err};
use half::bf16;
use onnx_conformance::model::{AttrValue, Model};
use onnx_conformance::Tensor;

fn model(opset: i64, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> Model {
    model_of("Conv", "conv_node", opset, inputs, attrs)
}

fn x() -> Tensor {
    Tensor::from_vec(&[1, 2, 4, 4], vec![1f32; 32])
}

fn w() -> Tensor {
    Tensor::from_vec(&[2, 2, 3, 3], vec![1f32; 36])
}

#[test]
fn bfloat16_needs_conv_22() {
    let xb = Tensor::from_vec(&[1, 1, 3], vec![bf16::ONE; 3]);
    let wb = Tensor::from_vec(&[1, 1, 2], vec![bf16::ONE; 2]);
    let e = err(&model(11, &["x", "w"], vec![]), &[xb.clone(), wb.clone()]);
    assert_has(
        &e,
        &[
            "node 'conv_node' (Conv-11)",
            "element type bfloat16 of 'X' is not allowed",
        ],
    );
    let ok = onnx_conformance::graph::run(
        &model(22, &["x", "w"], vec![]),
        &[xb, wb],
        Default::default(),
    );
    assert_eq!(ok.unwrap()[0].shape(), &[1, 1, 2]);
}

#[test]
fn integer_inputs_and_mixed_types_are_rejected() {
    let xi = Tensor::from_vec(&[1, 1, 3], vec![1i32; 3]);
    let e = err(&model(22, &["x", "w"], vec![]), &[xi.clone(), xi]);
    assert_has(
        &e,
        &["(Conv-22)", "element type int32 of 'X' is not allowed"],
    );
    let wd = Tensor::from_vec(&[2, 2, 3, 3], vec![1f64; 36]);
    let e = err(&model(11, &["x", "w"], vec![]), &[x(), wd]);
    assert_has(
        &e,
        &["input 'W': expected the element type of X (float), got double"],
    );
}

#[test]
fn geometry_errors_carry_node_and_version() {
    let m = model(
        11,
        &["x", "w"],
        vec![("auto_pad", AttrValue::String("SAME".into()))],
    );
    assert_has(
        &err(&m, &[x(), w()]),
        &[
            "node 'conv_node' (Conv-11)",
            "attribute 'auto_pad': unknown value 'SAME'",
        ],
    );
    let m = model(
        1,
        &["x", "w"],
        vec![("strides", AttrValue::Ints(vec![0, 1]))],
    );
    assert_has(
        &err(&m, &[x(), w()]),
        &["(Conv-1)", "attribute 'strides': values must be at least 1"],
    );
    let m = model(22, &["x", "w", "b"], vec![]);
    let e = err(&m, &[x(), w(), Tensor::from_vec(&[3], vec![0f32; 3])]);
    assert_has(&e, &["(Conv-22)", "input 'B': expected shape [2]"]);
    let m = model(22, &["x", "w"], vec![("group", AttrValue::Int(2))]);
    assert_has(
        &err(&m, &[x(), w()]),
        &["input 'W': X has 2 channels but W.shape[1] * group = 2 * 2 = 4"],
    );
}

/// A dilated kernel longer than the input: the node runs and its output is
/// empty on that axis (our reading: the spec gives no size here, and onnx's
/// shape inference and reference agree on 0 only where the overrun equals
/// the stride; the differential oracle calls the rest undefined).
#[test]
fn kernel_longer_than_the_input_gives_an_empty_output() {
    let m = model(
        22,
        &["x", "w"],
        vec![("dilations", AttrValue::Ints(vec![3, 1]))],
    );
    let out = onnx_conformance::graph::run(&m, &[x(), w()], onnx_conformance::Limits::default())
        .unwrap_or_else(|e| panic!("Conv with an empty output was rejected: {e}"));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &[1, 2, 0, 2]);
}

#[test]
fn missing_weights_are_reported() {
    let m = model(22, &["x"], vec![]);
    assert_has(
        &err(&m, &[x()]),
        &[
            "(Conv-22)",
            "input 'W': required by Conv-22 (input 1) but missing",
        ],
    );
}
