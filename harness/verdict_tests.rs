//! The judge cannot be fooled: cases made elsewhere whose expected outputs
//! are subtly wrong must fail, and correct ones must pass, under the strict
//! policy (issue "Strict verdicts"). Each test copies a committed case,
//! edits its expected output the way a careless generator would, and runs
//! it through the same code path as the conformance target.

use crate::discover;
use crate::run_case::{self, Verdict};
use half::{bf16, f16};
use onnx_conformance::backend::Ours;
use onnx_conformance::compare::{ErrorBound, Policy};
use onnx_conformance::verdict::{self, Tolerance};
use onnx_conformance::{proto, Limits, Storage, Tensor};
use std::path::{Path, PathBuf};

fn oracle(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases")
        .join(name)
}

fn read_output(case: &Path) -> Tensor {
    let bytes = std::fs::read(case.join("test_data_set_0/output_0.pb")).unwrap();
    proto::load_tensor(&bytes).unwrap().1
}

/// Copies `case` into a scratch folder with its expected output replaced
/// by `edit(expected)`, and runs it under `tolerance` with our kernels.
fn run_edited(
    case: &str,
    tag: &str,
    tolerance: Tolerance,
    edit: impl FnOnce(&Tensor) -> Tensor,
) -> Verdict {
    let from = oracle(case);
    let (_dir, root) = crate::scratch(&format!("verdict-{tag}"));
    let to = root.join("elsewhere").join(from.file_name().unwrap());
    crate::copy_case(&from, &to);
    let edited = edit(&read_output(&from));
    std::fs::write(
        to.join("test_data_set_0/output_0.pb"),
        proto::save_tensor("y", &edited).unwrap(),
    )
    .unwrap();
    let cases = discover::discover(std::slice::from_ref(&root)).unwrap();
    let p = run_case::prepare(&cases[0], 0, Limits::default()).unwrap();
    run_case::run_prepared_with(
        "edited",
        &p,
        &Ours::default(),
        &root.join("artifacts"),
        tolerance,
    )
}

/// The flat index of the first element whose value satisfies `pick`.
fn find(t: &Tensor, pick: impl Fn(f64) -> bool) -> usize {
    find_at(t, |_, v| pick(v))
}

/// The flat index of the first element for which `pick(index, value)`.
fn find_at(t: &Tensor, pick: impl Fn(usize, f64) -> bool) -> usize {
    let values: Vec<f64> = match t.storage() {
        Storage::F32(a) => a.iter().map(|v| *v as f64).collect(),
        Storage::F64(a) => a.iter().copied().collect(),
        Storage::F16(a) => a.iter().map(|v| v.to_f64()).collect(),
        Storage::BF16(a) => a.iter().map(|v| v.to_f64()).collect(),
        other => panic!("not a float tensor: {}", other.variant_name()),
    };
    (0..values.len())
        .find(|&i| pick(i, values[i]))
        .expect("no element fits the edit")
}

/// Rewrites element `i` through its value (as f64) and its bits.
fn edit_element(t: &Tensor, i: usize, f: impl Fn(f64, u64) -> (f64, Option<u64>)) -> Tensor {
    let mut s = t.storage().clone();
    macro_rules! at {
        ($a:expr, $to:expr, $bits:expr, $from_bits:expr, $from:expr) => {{
            let v = $a.iter_mut().nth(i).unwrap();
            let (value, bits) = f($to(*v), $bits(*v));
            *v = match bits {
                Some(b) => $from_bits(b),
                None => $from(value),
            };
        }};
    }
    match &mut s {
        Storage::F32(a) => at!(
            a,
            |v: f32| v as f64,
            |v: f32| v.to_bits() as u64,
            |b: u64| f32::from_bits(b as u32),
            |v: f64| v as f32
        ),
        Storage::F64(a) => at!(
            a,
            |v: f64| v,
            |v: f64| v.to_bits(),
            f64::from_bits,
            |v: f64| v
        ),
        Storage::F16(a) => at!(
            a,
            |v: f16| v.to_f64(),
            |v: f16| v.to_bits() as u64,
            |b: u64| f16::from_bits(b as u16),
            f16::from_f64
        ),
        Storage::BF16(a) => at!(
            a,
            |v: bf16| v.to_f64(),
            |v: bf16| v.to_bits() as u64,
            |b: u64| bf16::from_bits(b as u16),
            bf16::from_f64
        ),
        other => panic!("not a float tensor: {}", other.variant_name()),
    }
    Tensor::new(t.dtype(), s).unwrap()
}

fn one_ulp(t: &Tensor) -> Tensor {
    let i = find(t, |v| v != 0.0 && v.is_finite());
    edit_element(t, i, |v, bits| (v, Some(bits + 1)))
}

fn flip_zero(t: &Tensor) -> Tensor {
    let i = find(t, |v| v == 0.0);
    edit_element(t, i, |_, _| (-0.0, None))
}

fn relative(t: &Tensor, by: f64) -> Tensor {
    let i = find(t, |v| v.abs() >= 1.0 && v.is_finite());
    edit_element(t, i, |v, _| (v * (1.0 + by), None))
}

fn swap_neighbours(t: &Tensor) -> Tensor {
    let mut s = t.storage().clone();
    macro_rules! swap {
        ($a:expr) => {{
            let flat = $a.as_slice_mut().unwrap();
            let i = (0..flat.len() - 1)
                .find(|&i| flat[i] != flat[i + 1])
                .unwrap();
            flat.swap(i, i + 1);
        }};
    }
    match &mut s {
        Storage::F32(a) => swap!(a),
        Storage::F64(a) => swap!(a),
        Storage::F16(a) => swap!(a),
        Storage::BF16(a) => swap!(a),
        other => panic!("not a float tensor: {}", other.variant_name()),
    }
    Tensor::new(t.dtype(), s).unwrap()
}

fn must_fail(v: &Verdict, what: &str) -> String {
    let m = v
        .failure
        .clone()
        .unwrap_or_else(|| panic!("{what}: a wrong expected output passed"));
    assert!(m.contains("bits"), "{what}: the report shows no bits: {m}");
    m
}

const DATA_MOVEMENT: &[&str] = &[
    "oracle/test_pad18_float_constant_value",
    "oracle/test_pad18_float16_constant_value",
    "oracle/test_pad18_bfloat16_constant_value",
    "oracle/test_pad18_double_constant_value",
    "oracle/test_pad18_float_reflect_4d",
    "oracle/test_ccp18_float_crop_and_pad",
    "oracle/test_ccp18_float16_crop_and_pad",
    "oracle/test_ccp18_bfloat16_crop_and_pad",
    "node/test_center_crop_pad_crop_and_pad_expanded",
];

#[test]
fn correct_data_movement_cases_pass_bit_exact() {
    for case in DATA_MOVEMENT {
        let v = run_edited(case, "same", Tolerance::Strict, |t| t.clone());
        assert_eq!(v.failure, None, "{case}");
    }
}

#[test]
fn data_movement_fails_on_one_ulp_swaps_and_small_changes() {
    for case in DATA_MOVEMENT {
        let tag = case.replace('/', "-");
        let v = run_edited(case, &format!("ulp-{tag}"), Tolerance::Strict, one_ulp);
        let m = must_fail(&v, &format!("{case}, one ulp"));
        assert!(m.contains("bit-exact"), "{m}");
        let v = run_edited(
            case,
            &format!("swap-{tag}"),
            Tolerance::Strict,
            swap_neighbours,
        );
        must_fail(&v, &format!("{case}, swapped neighbours"));
        // 3.0 -> 3.0003: inside rtol 1e-3 (float16 and bfloat16 cannot
        // hold a change that small; their one-ulp edit covers them).
        if !case.contains("float16") {
            let v = run_edited(case, &format!("rel-{tag}"), Tolerance::Strict, |t| {
                relative(t, 1e-4)
            });
            must_fail(&v, &format!("{case}, relative 1e-4"));
        }
    }
}

#[test]
fn data_movement_fails_on_a_flipped_zero_sign() {
    // Cases whose output holds a +0.0 (a default pad value, or a zero of
    // CenterCropPad's padding).
    for case in [
        "oracle/test_pad18_double_constant_default_value",
        "oracle/test_ccp18_float_crop_and_pad",
        "oracle/test_ccp18_float16_crop_and_pad",
        "oracle/test_ccp18_bfloat16_crop_and_pad",
        "node/test_center_crop_pad_pad",
    ] {
        let v = run_edited(
            case,
            &format!("zero-{}", case.replace('/', "-")),
            Tolerance::Strict,
            flip_zero,
        );
        let m = must_fail(&v, &format!("{case}, -0.0"));
        assert!(m.contains("0x80") || m.contains("0x8000"), "{case}: {m}");
    }
}

#[test]
fn onnx_tolerance_is_what_the_strict_policy_replaces() {
    // The same edits pass onnx's runner tolerance: that is what the strict
    // policy is for.
    let case = "oracle/test_pad18_float_constant_value";
    let v = run_edited(case, "onnx-rel", Tolerance::Onnx, |t| relative(t, 1e-4));
    assert_eq!(v.failure, None);
    let v = run_edited(case, "onnx-ulp", Tolerance::Onnx, one_ulp);
    assert_eq!(v.failure, None);
}

/// The error bound of the case's output under the strict policy.
fn error_bound_of(case: &str) -> ErrorBound {
    let cases = discover::discover(&[oracle(case).parent().unwrap().to_path_buf()]).unwrap();
    let c = cases.iter().find(|c| c.dir == oracle(case)).unwrap();
    let p = run_case::prepare(c, 0, Limits::default()).unwrap();
    match verdict::policies(&p.model, &p.inputs, Tolerance::Strict).remove(0) {
        Ok(Policy::ErrorBound(b)) => b,
        other => panic!("{case}: {other:?}"),
    }
}

/// The absolute part of the case's bound (float and double have no other).
fn bound_of(case: &str) -> Vec<f64> {
    error_bound_of(case).bound
}

/// float16 and bfloat16 Conv: a result rounded once from a float32 sum
/// passes; one only as accurate as a sum kept in the type itself (which
/// the spec does not rule out, and onnx's reference implementation does)
/// is reported as undefined by the spec; one outside that fails. Also for
/// reductions long enough (bfloat16's 1600 terms) that `n * u_out > 1`,
/// where the wider bound once was infinite and let anything finite by.
#[test]
fn half_types_pass_are_undefined_or_fail_by_their_arithmetic() {
    for case in [
        "oracle/test_conv11_float16_basic",
        "oracle/test_conv22_bfloat16_basic",
        "oracle/test_conv11_float16_cancelling",
        "oracle/test_conv22_bfloat16_cancelling",
        "oracle/test_conv11_float16_long_reduction",
        "oracle/test_conv22_bfloat16_long_reduction",
    ] {
        let strict = error_bound_of(case);
        assert!(strict.relative > 0.0, "{case}");
        let wide = strict.unspecified.clone().expect("a wider bound");
        assert!(wide.bound.iter().all(|b| b.is_finite()), "{case}");
        let expected = read_output(&oracle(case));
        let tag = case.replace('/', "-");
        // The neighbouring value of the type passes outright ...
        let v = run_edited(case, &format!("half-ulp-{tag}"), Tolerance::Strict, one_ulp);
        assert_eq!(
            (v.failure, v.undefined),
            (None, None),
            "{case}: one unit in the last place off"
        );
        // ... three bounds of a float32 sum off is undefined by the spec ...
        let i = find_at(&expected, |i, v| {
            v.abs() >= 0.25 && 3.0 * strict.at(i, v) < 0.5 * wide.at(i, v)
        });
        fn off(i: usize, by: f64, of: &ErrorBound) -> impl Fn(&Tensor) -> Tensor + '_ {
            move |t: &Tensor| edit_element(t, i, |v, _| (v + by * of.at(i, v) * v.signum(), None))
        }
        let v = run_edited(
            case,
            &format!("half-strict-{tag}"),
            Tolerance::Strict,
            off(i, 3.0, &strict),
        );
        assert_eq!(v.failure, None, "{case}");
        let seen = v
            .undefined
            .clone()
            .unwrap_or_else(|| panic!("{case}: 3 bounds off passed outright"));
        assert!(seen.contains("summed in tensor("), "{seen}");
        assert!(
            (2.0..=4.5).contains(&v.bound_units.unwrap()),
            "{case}: {seen}"
        );
        // Undefined for another runtime; for ours, whose kernels promise
        // the float32 sum, a failure.
        let other = run_case::spec_room(&v, "tract").unwrap().unwrap();
        assert!(other.starts_with("undefined by the spec"), "{other}");
        let ours = run_case::spec_room(&v, "ours").unwrap().unwrap_err();
        assert!(
            ours.contains("must be a float32 sum rounded once"),
            "{ours}"
        );
        // ... and three of the wider bounds off fails.
        let v = run_edited(
            case,
            &format!("half-wide-{tag}"),
            Tolerance::Strict,
            off(i, 3.0, &wide),
        );
        let m = v
            .failure
            .unwrap_or_else(|| panic!("{case}: 3 wide bounds off passed"));
        assert!(m.contains("times its bound"), "{m}");
        // Four units in the last place off is no plain pass where the
        // float32 sum's own bound is below a unit (K = 18 in the basic
        // cases).
        if case.ends_with("basic") {
            let four = |t: &Tensor| edit_element(t, i, |v, bits| (v, Some(bits + 4)));
            let v = run_edited(case, &format!("half-4ulp-{tag}"), Tolerance::Strict, four);
            assert!(
                v.failure.is_some() || v.undefined.is_some(),
                "{case}: 4 units in the last place off passed"
            );
        }
    }
}

#[test]
fn conv_fails_several_bounds_off_inside_rtol() {
    // float16 and bfloat16 are left out: one rounding of theirs is already
    // about rtol 1e-3.
    // (A reduction of 1600 taps in float32 has a bound above rtol 1e-3:
    // there the bound is the looser judge, as it must be.)
    for case in [
        "oracle/test_conv11_float_basic",
        "oracle/test_conv11_float_3d",
        "oracle/test_conv22_float_group2_stride",
        "oracle/test_conv11_double_long_reduction",
        "oracle/test_conv1_double_basic",
        "node/test_conv_with_strides_padding",
    ] {
        let bound = bound_of(case);
        let expected = read_output(&oracle(case));
        // An element whose 5 bounds stay inside rtol 1e-3.
        let i = find_at(&expected, |i, v| 5.0 * bound[i] < 1e-3 * v.abs());
        let edit = |t: &Tensor| edit_element(t, i, |v, _| (v + 5.0 * bound[i] * v.signum(), None));
        let tag = case.replace('/', "-");
        let v = run_edited(case, &format!("bound-{tag}"), Tolerance::Strict, edit);
        let m = v
            .failure
            .unwrap_or_else(|| panic!("{case}: 5 bounds off passed"));
        assert!(m.contains("times its bound"), "{m}");
        let units = v.bound_units.unwrap();
        assert!(
            (3.0..=6.0).contains(&units),
            "{case}: {units} bounds off: {m}"
        );
        // onnx's runner tolerance lets the same wrong value through.
        let v = run_edited(case, &format!("bound-onnx-{tag}"), Tolerance::Onnx, edit);
        assert_eq!(v.failure, None, "{case}");
    }
}

#[test]
fn correct_long_reductions_pass_where_rtol_fails() {
    for case in [
        "oracle/test_conv11_float_cancelling",
        "oracle/test_conv11_float16_cancelling",
        "oracle/test_conv11_double_cancelling",
        "oracle/test_conv22_bfloat16_cancelling",
        "oracle/test_conv11_float_long_reduction",
        "oracle/test_conv11_float16_long_reduction",
        "oracle/test_conv11_double_long_reduction",
        "oracle/test_conv22_bfloat16_long_reduction",
    ] {
        let v = run_edited(
            case,
            &format!("ok-{}", case.replace('/', "-")),
            Tolerance::Strict,
            |t| t.clone(),
        );
        assert_eq!(v.failure, None, "{case}");
        assert!(v.bound_units.unwrap() <= 1.0, "{case}");
    }
    // The float32 cancelling case is right, and rtol 1e-3 calls it wrong.
    let v = run_edited(
        "oracle/test_conv11_float_cancelling",
        "cancel-onnx",
        Tolerance::Onnx,
        |t| t.clone(),
    );
    let m = v
        .failure
        .expect("rtol 1e-3 should reject the cancelling element");
    assert!(m.contains("rtol 1e-3"), "{m}");
}

/// Our kernels with every double output then rounded to float32, and, when
/// `swap`, two neighbouring elements of it exchanged: what a runtime that
/// computes double in float32 returns, and that with another bug on top.
struct NarrowedOurs {
    swap: bool,
}

impl onnx_conformance::backend::Backend for NarrowedOurs {
    fn name(&self) -> &str {
        "narrowed"
    }

    fn version(&self) -> String {
        "narrowed ours".into()
    }

    fn run(
        &self,
        model: &onnx_conformance::Model,
        bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, onnx_conformance::backend::RunError> {
        let outputs = Ours::default().run(model, bytes, inputs)?;
        Ok(outputs
            .iter()
            .map(|t| {
                let a = t.array::<f64>().expect("a double case");
                let narrowed = Tensor::from_vec(
                    a.shape(),
                    a.iter().map(|&v| v as f32 as f64).collect::<Vec<f64>>(),
                );
                if self.swap {
                    swap_neighbours(&narrowed)
                } else {
                    narrowed
                }
            })
            .collect())
    }
}

#[test]
fn an_expected_failure_for_double_in_float32_excuses_that_and_nothing_else() {
    use crate::expectations::Expectations;
    use crate::run_case::FailureKind;
    let e = Expectations::parse(
        "[[expected_failure]]\nbackend = \"narrowed\"\nfailure = \"values\"\nmessage = \"(tensor(double), shape * values differ\"\nobserved = [\"float_arithmetic\"]\nreason = \"double in float32\"\n",
    )
    .unwrap();
    for case in [
        "oracle/test_pad18_double_constant_value",
        "oracle/test_conv11_double_basic",
    ] {
        let cases = discover::discover(&[oracle(case)]).unwrap();
        let p = run_case::prepare(&cases[0], 0, Limits::default()).unwrap();
        let (_dir, root) = crate::scratch("narrowed");
        let run = |swap: bool| {
            let v = run_case::run_prepared_with(
                case,
                &p,
                &NarrowedOurs { swap },
                &root,
                Tolerance::Strict,
            );
            let m = v
                .failure
                .clone()
                .unwrap_or_else(|| panic!("{case}: float32 results passed as double"));
            assert_eq!(v.kind, Some(FailureKind::Values), "{case}: {m}");
            (
                v.observed.clone(),
                e.explain(case, "narrowed", FailureKind::Values, &m, &v.observed),
            )
        };
        let (seen, explained) = run(false);
        assert_eq!(seen, ["float_arithmetic"], "{case}");
        assert!(
            explained.is_some(),
            "{case}: float32 arithmetic not excused"
        );
        // Swapped elements: the same kind of message, another bug.
        let (seen, explained) = run(true);
        assert!(seen.is_empty(), "{case}: {seen:?}");
        assert!(explained.is_none(), "{case}: a second bug was excused");
    }
}
