//! CenterCropPad rejections through the executor.

use crate::support::model_of;
use crate::{assert_has, err};
use onnx_conformance::model::{AttrValue, Model};
use onnx_conformance::Tensor;

fn model(axes: Option<Vec<i64>>) -> Model {
    let attrs = axes
        .map(|a| vec![("axes", AttrValue::Ints(a))])
        .unwrap_or_default();
    model_of("CenterCropPad", "ccp_node", 18, &["x", "shape"], attrs)
}

fn x() -> Tensor {
    Tensor::from_vec(&[2, 3], vec![1f32; 6])
}

#[test]
fn shape_of_the_wrong_length_for_axes() {
    let e = err(
        &model(Some(vec![1])),
        &[x(), Tensor::from_vec(&[2], vec![1i64, 1])],
    );
    assert_has(
        &e,
        &[
            "node 'ccp_node' (CenterCropPad-18)",
            "input 'shape': expected 1 values (one per axis in [1]), got 2",
        ],
    );
}

#[test]
fn negative_targets() {
    let e = err(&model(None), &[x(), Tensor::from_vec(&[2], vec![1i64, -3])]);
    assert_has(
        &e,
        &[
            "(CenterCropPad-18)",
            "input 'shape': target size -3 for axis 1 is negative",
        ],
    );
}

#[test]
fn shape_must_be_int32_or_int64() {
    let e = err(&model(None), &[x(), Tensor::from_vec(&[2], vec![1u8, 1])]);
    assert_has(
        &e,
        &[
            "(CenterCropPad-18)",
            "element type uint8 of 'shape' is not allowed; allowed: tensor(int32), tensor(int64)",
        ],
    );
}

#[test]
fn scalar_input() {
    let e = err(
        &model(None),
        &[
            Tensor::scalar(1f32),
            Tensor::from_vec(&[0], Vec::<i64>::new()),
        ],
    );
    assert_has(
        &e,
        &["input 'input_data': expected rank 1 or more, got a scalar"],
    );
}

#[test]
fn repeated_or_out_of_range_axes() {
    let s = Tensor::from_vec(&[2], vec![1i64, 1]);
    assert_has(
        &err(&model(Some(vec![0, -2])), &[x(), s.clone()]),
        &["attribute 'axes': axis 0 is repeated"],
    );
    assert_has(
        &err(&model(Some(vec![0, 2])), &[x(), s]),
        &["attribute 'axes': axis 2 is out of range [-2, 1]"],
    );
}

#[test]
fn types_outside_the_constraint() {
    let int4 =
        onnx_conformance::tensor::Storage::Bits(ndarray::ArrayD::zeros(ndarray::IxDyn(&[2])));
    let int4 = Tensor::new(onnx_conformance::DataType::Int4, int4).unwrap();
    let e = err(&model(None), &[int4, Tensor::from_vec(&[1], vec![1i64])]);
    assert_has(&e, &["element type int4 of 'input_data' is not allowed"]);
}
