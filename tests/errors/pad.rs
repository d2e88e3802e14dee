//! Every input Pad must reject, run through the executor so that the error
//! carries the node's name, the operator version and the attribute or input
//! at fault.

use crate::support::model_of;
use crate::{assert_has, err};
use onnx_conformance::model::{AttrValue, Model};
use onnx_conformance::{graph, Limits, Tensor};

fn model(opset: i64, inputs: &[&str], attrs: Vec<(&str, AttrValue)>) -> Model {
    model_of("Pad", "pad_node", opset, inputs, attrs)
}

fn x() -> Tensor {
    Tensor::from_vec(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.])
}

fn pads(v: &[i64]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec())
}

#[test]
fn type_outside_the_version_constraint() {
    let m = model(2, &["x"], vec![("pads", AttrValue::Ints(vec![0; 4]))]);
    let e = err(&m, &[Tensor::from_vec(&[2, 2], vec![1i32; 4])]);
    assert_has(
        &e,
        &[
            "node 'pad_node' (Pad-2)",
            "element type int32 of 'data' is not allowed",
            "tensor(float16)",
        ],
    );
    let m = model(11, &["x", "p"], vec![]);
    let e = err(
        &m,
        &[Tensor::from_vec(&[2], vec![true, false]), pads(&[0, 0])],
    );
    assert_has(
        &e,
        &["(Pad-11)", "element type bool of 'data' is not allowed"],
    );
    let m = model(20, &["x", "p"], vec![]);
    let int4 =
        onnx_conformance::tensor::Storage::Bits(ndarray::ArrayD::zeros(ndarray::IxDyn(&[2])));
    let int4 = Tensor::new(onnx_conformance::DataType::Int4, int4).unwrap();
    let e = err(&m, &[int4, pads(&[0, 0])]);
    assert_has(
        &e,
        &["(Pad-19)", "element type int4 of 'data' is not allowed"],
    );
}

#[test]
fn pads_of_the_wrong_length_or_type() {
    let m = model(18, &["x", "p"], vec![]);
    let e = err(&m, &[x(), pads(&[1, 1, 1])]);
    assert_has(
        &e,
        &[
            "node 'pad_node' (Pad-18)",
            "input 'pads': expected 4 values (2 x 2 axes), got 3",
        ],
    );
    let e = err(&m, &[x(), Tensor::from_vec(&[4], vec![0i32; 4])]);
    assert_has(
        &e,
        &[
            "(Pad-18)",
            "element type int32 of 'pads' is not allowed; allowed: tensor(int64)",
        ],
    );
    let m = model(2, &["x"], vec![("pads", AttrValue::Ints(vec![0; 3]))]);
    assert_has(
        &err(&m, &[x()]),
        &["(Pad-2)", "input 'pads': expected 4 values"],
    );
    let m = model(2, &["x"], vec![("pads", AttrValue::Floats(vec![0.0; 4]))]);
    assert_has(
        &err(&m, &[x()]),
        &["attribute 'pads': Pad-2 declares it INTS, got FLOATS"],
    );
}

#[test]
fn axes_out_of_range_or_repeated() {
    let m = model(18, &["x", "p", "", "a"], vec![]);
    let e = err(&m, &[x(), pads(&[1, 1]), pads(&[2])]);
    assert_has(
        &e,
        &[
            "(Pad-18)",
            "input 'axes': axis 2 is out of range [-2, 1] for rank 2",
        ],
    );
    let e = err(&m, &[x(), pads(&[1, 1, 1, 1]), pads(&[1, -1])]);
    assert_has(&e, &["input 'axes': axis 1 is repeated in [1, -1]"]);
}

#[test]
fn unknown_mode_and_wrap_before_19() {
    let m = model(
        18,
        &["x", "p"],
        vec![("mode", AttrValue::String("wrap".into()))],
    );
    assert_has(
        &err(&m, &[x(), pads(&[0; 4])]),
        &[
            "(Pad-18)",
            "attribute 'mode': 'wrap' is not supported by Pad-18 (added in Pad-19)",
        ],
    );
    let m = model(
        19,
        &["x", "p"],
        vec![("mode", AttrValue::String("symmetric".into()))],
    );
    assert_has(
        &err(&m, &[x(), pads(&[0; 4])]),
        &["(Pad-19)", "attribute 'mode': unknown mode 'symmetric'"],
    );
}

#[test]
fn negative_pad_removing_more_than_the_axis() {
    let m = model(13, &["x", "p"], vec![]);
    let e = err(&m, &[x(), pads(&[0, -2, 0, -2])]);
    assert_has(
        &e,
        &[
            "(Pad-13)",
            "input 'pads': axis 1: pads (-2, -2) remove 4 elements but the axis holds 3",
        ],
    );
}

#[test]
fn non_constant_modes_on_an_empty_axis() {
    let m = model(
        13,
        &["x", "p"],
        vec![("mode", AttrValue::String("edge".into()))],
    );
    let e = err(
        &m,
        &[
            Tensor::from_vec(&[0, 2], Vec::<f32>::new()),
            pads(&[1, 0, 0, 0]),
        ],
    );
    assert_has(&e, &["(Pad-13)", "input 'pads': axis 0 is empty"]);
}

#[test]
fn outputs_above_the_byte_cap_are_refused() {
    let m = model(13, &["x", "p"], vec![]);
    let e = err(&m, &[x(), pads(&[1_000_000_000_000, 0, 0, 0])]);
    assert_has(
        &e,
        &[
            "(Pad-13)",
            "output of shape [1000000000002, 3] needs 12000000000024, more than the limit max_output_bytes = 4294967296",
        ],
    );
    let small = Limits {
        max_output_bytes: 32,
        ..Limits::default()
    };
    let e = graph::run(&m, &[x(), pads(&[1, 0, 0, 0])], small).unwrap_err();
    assert_eq!(e.kind(), "limit");
    assert_has(
        &e.to_string(),
        &["output of shape [3, 3] needs 36, more than the limit max_output_bytes = 32"],
    );
}

#[test]
fn missing_required_attributes_in_pad_1_and_2() {
    let m = model(1, &["x"], vec![]);
    assert_has(
        &err(&m, &[x()]),
        &[
            "(Pad-1)",
            "attribute 'paddings': required by Pad-1 but missing",
        ],
    );
    let m = model(2, &["x"], vec![]);
    assert_has(
        &err(&m, &[x()]),
        &["(Pad-2)", "attribute 'pads': required by Pad-2 but missing"],
    );
}

#[test]
fn constant_value_must_match_the_data() {
    let m = model(11, &["x", "p", "c"], vec![]);
    let e = err(&m, &[x(), pads(&[0; 4]), Tensor::scalar(1.0f64)]);
    assert_has(
        &e,
        &["input 'constant_value': expected the element type of data (float), got double"],
    );
    let e = err(
        &m,
        &[x(), pads(&[0; 4]), Tensor::from_vec(&[2], vec![1f32, 2.])],
    );
    assert_has(
        &e,
        &["input 'constant_value': expected a scalar (one element), got shape [2]"],
    );
}

#[test]
fn opset_below_the_first_version_has_no_kernel() {
    let m = model(0, &["x"], vec![]);
    assert_has(
        &err(&m, &[x()]),
        &["no kernel for Pad at opset 0", "implemented versions"],
    );
}

#[test]
fn attributes_of_another_version_are_unknown() {
    let m = model(2, &["x"], vec![("paddings", AttrValue::Ints(vec![0; 4]))]);
    assert_has(
        &err(&m, &[x()]),
        &[
            "(Pad-2)",
            "attribute 'paddings': not an attribute of Pad-2 (it has: mode, pads, value)",
        ],
    );
    let m = model(11, &["x", "p"], vec![("pads", AttrValue::Ints(vec![0; 4]))]);
    assert_has(
        &err(&m, &[x(), pads(&[0; 4])]),
        &[
            "(Pad-11)",
            "attribute 'pads': not an attribute of Pad-11 (it has: mode)",
        ],
    );
    let m = model(18, &["x", "p"], vec![("mode", AttrValue::Ints(vec![1]))]);
    assert_has(
        &err(&m, &[x(), pads(&[0; 4])]),
        &[
            "(Pad-18)",
            "attribute 'mode': Pad-18 declares it STRING, got INTS",
        ],
    );
}
