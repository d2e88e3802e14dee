//! The committed `cases/seed/test_cc_*` cases hold the values that seed
//! 004 (ONNX's CenterCropPad documentation) prints.

use onnx_conformance::{proto, Tensor};
use std::path::Path;

fn load(case: &str, file: &str) -> Tensor {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/seed")
        .join(case)
        .join("test_data_set_0")
        .join(file);
    let bytes = std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fetch-cases`)", p.display()));
    proto::load_tensor(&bytes).unwrap().1
}

/// Checks `y[index] == want` for an index on all but the last axis.
fn row(t: &Tensor, index: &[isize], want: &[f32]) {
    let a = t.array::<f32>().expect("float32 output");
    let mut v = a.view();
    for &i in index {
        let n = v.shape()[0] as isize;
        let i = if i < 0 { i + n } else { i } as usize;
        v = v.index_axis_move(ndarray::Axis(0), i);
    }
    let got: Vec<f32> = v.iter().copied().collect();
    assert_eq!(&got[..want.len().min(got.len())], want, "at {index:?}");
}

fn tail(t: &Tensor, index: &[isize], want: &[f32]) {
    let a = t.array::<f32>().unwrap();
    let mut v = a.view();
    for &i in index {
        let n = v.shape()[0] as isize;
        v = v.index_axis_move(ndarray::Axis(0), if i < 0 { i + n } else { i } as usize);
    }
    let got: Vec<f32> = v.iter().copied().collect();
    assert_eq!(&got[got.len() - want.len()..], want, "tail at {index:?}");
}

#[test]
fn crop() {
    let x = load("test_cc_center_crop_pad_crop", "input_0.pb");
    assert_eq!(x.shape(), &[20, 10, 3]);
    row(&x, &[-1, -1], &[597., 598., 599.]);
    let y = load("test_cc_center_crop_pad_crop", "output_0.pb");
    assert_eq!(y.shape(), &[10, 7, 3]);
    row(&y, &[0, 0], &[153., 154., 155.]);
    row(&y, &[0, -1], &[171., 172., 173.]);
    row(&y, &[1, 0], &[183., 184., 185.]);
    row(&y, &[-1, -1], &[441., 442., 443.]);
}

#[test]
fn pad() {
    let x = load("test_cc_center_crop_pad_pad", "input_0.pb");
    assert_eq!(x.shape(), &[10, 7, 3]);
    row(&x, &[0, 0], &[1., 2., 3.]);
    row(&x, &[-1, -1], &[208., 209., 210.]);
    let y = load("test_cc_center_crop_pad_pad", "output_0.pb");
    assert_eq!(y.shape(), &[20, 10, 3]);
    row(&y, &[0, 0], &[0., 0., 0.]);
    row(&y, &[-1, -1], &[0., 0., 0.]);
    row(&y, &[5, 1], &[1., 2., 3.]);
    row(&y, &[14, 7], &[208., 209., 210.]);
}

#[test]
fn crop_and_pad() {
    let y = load("test_cc_center_crop_pad_crop_and_pad", "output_0.pb");
    assert_eq!(y.shape(), &[10, 10, 3]);
    row(&y, &[0, 0], &[0., 0., 0.]);
    row(&y, &[0, 1], &[120., 121., 122.]);
    row(&y, &[0, -2], &[141., 142., 143.]);
    row(&y, &[-1, -2], &[357., 358., 359.]);
    row(&y, &[-1, -1], &[0., 0., 0.]);
}

#[test]
fn crop_axes_hwc_and_negative_axes() {
    for case in [
        "test_cc_center_crop_pad_crop_axes_hwc",
        "test_cc_center_crop_pad_crop_negative_axes_hwc",
    ] {
        let y = load(case, "output_0.pb");
        assert_eq!(y.shape(), &[10, 9, 3], "{case}");
        row(&y, &[0, 0], &[120., 121., 122.]);
        row(&y, &[0, -2], &[141., 142., 143.]);
        row(&y, &[0, -1], &[0., 0., 0.]);
        row(&y, &[-1, -2], &[357., 358., 359.]);
    }
}

#[test]
fn crop_axes_chw() {
    let x = load("test_cc_center_crop_pad_crop_axes_chw", "input_0.pb");
    assert_eq!(x.shape(), &[3, 20, 8]);
    let y = load("test_cc_center_crop_pad_crop_axes_chw", "output_0.pb");
    assert_eq!(y.shape(), &[3, 10, 9]);
    row(&y, &[0, 0], &[40., 41., 42.]);
    tail(&y, &[0, 0], &[46., 47., 0.]);
    row(&y, &[1, 0], &[200., 201., 202.]);
    tail(&y, &[-1, -1], &[438., 439., 0.]);
}
