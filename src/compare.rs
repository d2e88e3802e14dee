//! The verdict policy: how an actual output is judged against the oracle's
//! expected output. Used by the conformance harness (for every backend) and
//! by differential runs. It is written here once; `verdict.rs` decides which
//! policy each graph output gets, and the README repeats the rules.
//!
//! Element type and shape must match first. Then, per element:
//! - [`Policy::BitExact`] (data movement: Pad, CenterCropPad, any output
//!   that copies input or constant bits, every non-float type): the bit
//!   patterns must be equal. NaN payloads, signed zeros, every bit of the
//!   float8/float4/int4/int2 kinds count.
//! - [`Policy::ErrorBound`] (Conv): `|actual - expected| <= bound[i] +
//!   relative * |expected|`, where the bound comes from the inputs and the
//!   relative part (nonzero for the half types only) from the output
//!   type's rounding (`error_bound.rs`). NaN must meet NaN
//!   (any payload: a computation does not define it) and an infinity the
//!   same infinity.
//! - [`Policy::Tolerance`] (the named alternative `ONNX_TOLERANCE=onnx`):
//!   `|actual - expected| <= atol + rtol * |expected|` for float types,
//!   as onnx's backend runner judges; other types stay exact.

use crate::tensor::{DataType, Storage, Tensor};
use half::bf16;
use ndarray::ArrayD;
use num_complex::Complex;
use std::fmt::Write;

/// onnx's backend test runner: `assert_allclose(rtol=1e-3, atol=1e-7)`.
pub const ONNX_RUNNER: Policy = Policy::Tolerance {
    atol: 1e-7,
    rtol: 1e-3,
};

/// How one output is judged.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// Same bits in every element.
    BitExact,
    /// Per-element bound on the absolute error, from the inputs.
    ErrorBound(ErrorBound),
    /// A fixed tolerance, for comparison with other suites.
    Tolerance { atol: f64, rtol: f64 },
}

/// A per-element error bound, row-major like the output, with the
/// derivation printed in mismatch reports.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBound {
    pub bound: Vec<f64>,
    /// Added to each element's bound times `|expected|`.
    pub relative: f64,
    pub derivation: String,
    /// Where the spec leaves the arithmetic open (the accumulation
    /// precision of float16/bfloat16 Conv), the bound of the least precise
    /// arithmetic it allows. A result outside `bound` but inside this one
    /// is reported as undefined by the spec, not failed.
    pub unspecified: Option<Box<ErrorBound>>,
}

impl ErrorBound {
    /// The allowed distance at element `i` whose expected value is `e`.
    pub fn at(&self, i: usize, e: f64) -> f64 {
        self.bound[i] + self.relative * e.abs()
    }
}

impl Policy {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::BitExact => "bit-exact",
            Policy::ErrorBound(_) => "error bound",
            Policy::Tolerance { .. } => "tolerance",
        }
    }
}

/// How far apart two outputs are; `mismatches == 0` means they agree.
#[derive(Debug, Default, Clone)]
pub struct Mismatch {
    pub total: usize,
    pub mismatches: usize,
    /// Largest absolute and relative error over finite pairs (0 when the
    /// type has no numeric value, such as strings).
    pub max_abs: f64,
    pub max_rel: f64,
    /// Largest `|actual - expected| / bound` under an error bound; an
    /// element off while its bound is 0 counts as infinity.
    pub max_bound_units: Option<f64>,
    /// (flat index, expected, actual), the first few mismatches.
    pub first: Vec<(usize, String, String)>,
}

const SHOWN: usize = 5;

/// Compares `actual` with `expected` under `policy`. `Err` carries an
/// element type or shape mismatch (or a bound of the wrong length); `Ok`
/// carries value differences, possibly none.
pub fn compare(expected: &Tensor, actual: &Tensor, policy: &Policy) -> Result<Mismatch, String> {
    if expected.dtype() != actual.dtype() {
        return Err(format!(
            "element type differs: expected tensor({}), got tensor({})",
            expected.dtype(),
            actual.dtype()
        ));
    }
    if expected.shape() != actual.shape() {
        return Err(format!(
            "shape differs: expected {:?}, got {:?}",
            expected.shape(),
            actual.shape()
        ));
    }
    if let Policy::ErrorBound(b) = policy {
        if b.bound.len() != expected.len() {
            return Err(format!(
                "the error bound has {} elements, the output {}",
                b.bound.len(),
                expected.len()
            ));
        }
    }
    let mut m = Mismatch {
        total: expected.len(),
        max_bound_units: matches!(policy, Policy::ErrorBound(_)).then_some(0.0),
        ..Mismatch::default()
    };
    match (expected.storage(), actual.storage()) {
        (Storage::F32(e), Storage::F32(a)) => floats(
            &mut m,
            e,
            a,
            policy,
            |v| *v as f64,
            |v| {
                (
                    format!("{v:e}"),
                    format!("{:#010x}", v.to_bits()),
                    v.to_bits() as u64,
                )
            },
        ),
        (Storage::F64(e), Storage::F64(a)) => floats(
            &mut m,
            e,
            a,
            policy,
            |v| *v,
            |v| {
                (
                    format!("{v:e}"),
                    format!("{:#018x}", v.to_bits()),
                    v.to_bits(),
                )
            },
        ),
        (Storage::F16(e), Storage::F16(a)) => floats(
            &mut m,
            e,
            a,
            policy,
            |v| v.to_f64(),
            |v| half_parts(v.to_f64(), v.to_bits()),
        ),
        (Storage::BF16(e), Storage::BF16(a)) => floats(
            &mut m,
            e,
            a,
            policy,
            |v: &bf16| v.to_f64(),
            |v| half_parts(v.to_f64(), v.to_bits()),
        ),
        (Storage::C64(e), Storage::C64(a)) => complex(&mut m, e, a, policy, |v| {
            (
                (v.re as f64, v.im as f64),
                (v.re.to_bits() as u64, v.im.to_bits() as u64),
            )
        }),
        (Storage::C128(e), Storage::C128(a)) => complex(&mut m, e, a, policy, |v| {
            ((v.re, v.im), (v.re.to_bits(), v.im.to_bits()))
        }),
        (Storage::I8(e), Storage::I8(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::I16(e), Storage::I16(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::I32(e), Storage::I32(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::I64(e), Storage::I64(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::U8(e), Storage::U8(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::U16(e), Storage::U16(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::U32(e), Storage::U32(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::U64(e), Storage::U64(a)) => integers(&mut m, e, a, |v| *v as f64),
        (Storage::Bool(e), Storage::Bool(a)) => integers(&mut m, e, a, |v| *v as u8 as f64),
        (Storage::Bits(e), Storage::Bits(a)) => bits(&mut m, e, a, expected.dtype()),
        (Storage::Str(e), Storage::Str(a)) => {
            for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
                if x != y {
                    miss(&mut m, i, format!("{x:?}"), format!("{y:?}"));
                }
            }
        }
        (e, a) => {
            return Err(format!(
                "storage differs: {} vs {}",
                e.variant_name(),
                a.variant_name()
            ))
        }
    }
    Ok(m)
}

fn miss(m: &mut Mismatch, i: usize, expected: String, actual: String) {
    m.mismatches += 1;
    if m.first.len() < SHOWN {
        m.first.push((i, expected, actual));
    }
}

fn half_parts(v: f64, bits: u16) -> (String, String, u64) {
    (format!("{v:e}"), format!("{bits:#06x}"), bits as u64)
}

/// Tracks the largest absolute and relative difference of a finite pair.
fn track(m: &mut Mismatch, e: f64, a: f64) {
    let abs = (a - e).abs();
    m.max_abs = m.max_abs.max(abs);
    if e != 0.0 {
        m.max_rel = m.max_rel.max(abs / e.abs());
    } else if abs > 0.0 {
        m.max_rel = f64::INFINITY;
    }
}

fn integers<T: PartialEq + std::fmt::Display>(
    m: &mut Mismatch,
    e: &ArrayD<T>,
    a: &ArrayD<T>,
    value: impl Fn(&T) -> f64,
) {
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        if x != y {
            track(m, value(x), value(y));
            miss(m, i, x.to_string(), y.to_string());
        }
    }
}

/// Sub-byte and 8-bit float kinds: always their bit patterns, whatever the
/// policy (no computing operator produces them here).
fn bits(m: &mut Mismatch, e: &ArrayD<u8>, a: &ArrayD<u8>, dtype: DataType) {
    let width = dtype.bit_width().clamp(1, 8);
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        if x != y {
            let show = |v: u8| format!("{v:#04x} ({width}-bit {dtype} pattern)");
            miss(m, i, show(*x), show(*y));
        }
    }
}

/// One element of a float type: `(value shown, bits shown, raw bits)`.
type Shown = (String, String, u64);

fn floats<T>(
    m: &mut Mismatch,
    e: &ArrayD<T>,
    a: &ArrayD<T>,
    policy: &Policy,
    value: impl Fn(&T) -> f64,
    show: impl Fn(&T) -> Shown,
) {
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        let (ev, av) = (value(x), value(y));
        let (xs, ys) = (show(x), show(y));
        let ok = match numeric(policy) {
            None => xs.2 == ys.2,
            Some(n) => numeric_ok(m, n, i, ev, av),
        };
        if ev.is_finite() && av.is_finite() {
            track(m, ev, av);
        } else if !(ok || ev.is_nan() && av.is_nan()) {
            m.max_abs = f64::INFINITY;
            m.max_rel = f64::INFINITY;
        }
        if !ok {
            miss(
                m,
                i,
                format!("{} (bits {})", xs.0, xs.1),
                format!("{} (bits {})", ys.0, ys.1),
            );
        }
    }
}

fn complex<T>(
    m: &mut Mismatch,
    e: &ArrayD<Complex<T>>,
    a: &ArrayD<Complex<T>>,
    policy: &Policy,
    parts: impl Fn(&Complex<T>) -> ((f64, f64), (u64, u64)),
) {
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        let ((xr, xi), xb) = parts(x);
        let ((yr, yi), yb) = parts(y);
        let ok = match numeric(policy) {
            None => xb == yb,
            Some(n) => numeric_ok(m, n, i, xr, yr) & numeric_ok(m, n, i, xi, yi),
        };
        for (ev, av) in [(xr, yr), (xi, yi)] {
            if ev.is_finite() && av.is_finite() {
                track(m, ev, av);
            } else if !ok {
                m.max_abs = f64::INFINITY;
            }
        }
        if !ok {
            let show = |(r, im): (f64, f64), (rb, ib): (u64, u64)| {
                format!("{r:e}{im:+e}i (bits {rb:#x}, {ib:#x})")
            };
            miss(m, i, show((xr, xi), xb), show((yr, yi), yb));
        }
    }
}

/// The policies that judge values rather than bits.
#[derive(Clone, Copy)]
enum Numeric<'a> {
    Tolerance(f64, f64),
    Bound(&'a ErrorBound),
}

fn numeric(policy: &Policy) -> Option<Numeric<'_>> {
    match policy {
        Policy::BitExact => None,
        Policy::Tolerance { atol, rtol } => Some(Numeric::Tolerance(*atol, *rtol)),
        Policy::ErrorBound(b) => Some(Numeric::Bound(b)),
    }
}

/// NaN meets NaN, an infinity the same infinity, finite values within the
/// policy's distance.
fn numeric_ok(m: &mut Mismatch, policy: Numeric, i: usize, e: f64, a: f64) -> bool {
    let special = if e.is_nan() || a.is_nan() {
        Some(e.is_nan() && a.is_nan())
    } else if e.is_infinite() || a.is_infinite() {
        Some(e == a)
    } else {
        None
    };
    if let Some(ok) = special {
        // A NaN or infinity where another value belongs is no number of
        // bounds away.
        if !ok && matches!(policy, Numeric::Bound(_)) {
            m.max_bound_units = Some(f64::INFINITY);
        }
        return ok;
    }
    let err = (a - e).abs();
    match policy {
        Numeric::Tolerance(atol, rtol) => err <= atol + rtol * e.abs(),
        Numeric::Bound(b) => {
            let bound = b.at(i, e);
            let units = if err == 0.0 {
                0.0
            } else if bound > 0.0 {
                err / bound
            } else {
                f64::INFINITY
            };
            let worst = m.max_bound_units.unwrap_or(0.0);
            m.max_bound_units = Some(worst.max(units));
            err <= bound
        }
    }
}

/// The multi-dimensional index of a flat row-major index.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        if shape[a] > 0 {
            idx[a] = flat % shape[a];
            flat /= shape[a];
        }
    }
    idx
}

/// For a result that misses `policy`'s bound (`m`, from [`compare`]): when
/// the policy has the wider bound of arithmetic the spec leaves open
/// (`ErrorBound::unspecified`) and the result meets it, why the result is
/// undefined by the spec rather than wrong. None otherwise.
pub fn within_unspecified(
    expected: &Tensor,
    actual: &Tensor,
    policy: &Policy,
    m: &Mismatch,
) -> Option<String> {
    let Policy::ErrorBound(b) = policy else {
        return None;
    };
    let wide = b.unspecified.as_ref()?;
    let w = compare(expected, actual, &Policy::ErrorBound((**wide).clone())).ok()?;
    (w.mismatches == 0).then(|| {
        format!(
            "{} of {} values are outside the bound of the arithmetic this suite assumes ({:.3} times it at most; {}) but inside that of {} ({:.3} times it at most)",
            m.mismatches,
            m.total,
            m.max_bound_units.unwrap_or(0.0),
            b.derivation,
            wide.derivation,
            w.max_bound_units.unwrap_or(0.0),
        )
    })
}

/// A human report of a value mismatch.
pub fn describe(m: &Mismatch, shape: &[usize], policy: &Policy) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{} of {} values differ ({:.3}%)",
        m.mismatches,
        m.total,
        100.0 * m.mismatches as f64 / m.total.max(1) as f64
    );
    match policy {
        Policy::BitExact => {
            let _ = write!(
                s,
                " under the bit-exact policy (data movement); largest absolute difference {:e}",
                m.max_abs
            );
        }
        Policy::Tolerance { atol, rtol } => {
            let _ = write!(
                s,
                "; largest absolute error {:e}, largest relative error {:e} (atol {atol:e}, rtol {rtol:e})",
                m.max_abs, m.max_rel
            );
        }
        Policy::ErrorBound(b) => {
            let _ = write!(
                s,
                "; largest error {:.3} times its bound (largest absolute error {:e}); bound: {}",
                m.max_bound_units.unwrap_or(0.0),
                m.max_abs,
                b.derivation
            );
        }
    }
    for (i, e, a) in &m.first {
        let _ = write!(
            s,
            "\n    at {:?}: expected {e}, actual {a}",
            unravel(*i, shape)
        );
        if let Policy::ErrorBound(b) = policy {
            let _ = write!(s, ", bound {:e}", b.bound[*i]);
            if b.relative > 0.0 {
                let _ = write!(s, " + {:e} * |expected|", b.relative);
            }
        }
    }
    if m.mismatches > m.first.len() {
        let _ = write!(s, "\n    ... and {} more", m.mismatches - m.first.len());
    }
    s
}

/// One value per line, for a textual diff of small tensors (floats with
/// their bits, so a sign or payload change shows).
pub fn lines(t: &Tensor) -> String {
    let shape = t.shape().to_vec();
    let mut out = String::new();
    let mut line = |i: usize, v: String| {
        let _ = writeln!(out, "{:?} {v}", unravel(i, &shape));
    };
    match t.storage() {
        Storage::F32(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| line(i, format!("{v:?} {:#010x}", v.to_bits()))),
        Storage::F64(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| line(i, format!("{v:?} {:#018x}", v.to_bits()))),
        Storage::F16(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| line(i, format!("{v:?} {:#06x}", v.to_bits()))),
        Storage::BF16(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| line(i, format!("{v:?} {:#06x}", v.to_bits()))),
        other => crate::with_storage!(other, a => {
            a.iter().enumerate().for_each(|(i, v)| line(i, format!("{v:?}")))
        }),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_vec(&[v.len()], v.to_vec())
    }

    fn bound(b: &[f64]) -> Policy {
        Policy::ErrorBound(ErrorBound {
            bound: b.to_vec(),
            relative: 0.0,
            derivation: "test".into(),
            unspecified: None,
        })
    }

    /// The relative part scales with each expected value.
    #[test]
    fn an_error_bound_adds_its_relative_part_per_element() {
        let policy = Policy::ErrorBound(ErrorBound {
            bound: vec![0.5, 0.5],
            relative: 0.01,
            derivation: "test".into(),
            unspecified: None,
        });
        let e = f32s(&[100.0, 1.0]);
        // 1.5 allowed at 100, 0.51 at 1.
        let m = compare(&e, &f32s(&[101.4, 1.5]), &policy).unwrap();
        assert_eq!(m.mismatches, 0);
        let m = compare(&e, &f32s(&[101.6, 1.52]), &policy).unwrap();
        assert_eq!(m.mismatches, 2);
        let text = describe(&m, &[2], &policy);
        assert!(text.contains("+ 1e-2 * |expected|"), "{text}");
    }

    #[test]
    fn bit_exact_sees_one_ulp_signed_zero_and_payload() {
        let e = f32s(&[1.0, 0.0, f32::NAN, 3.0]);
        let same = f32s(&[1.0, 0.0, f32::NAN, 3.0]);
        assert_eq!(compare(&e, &same, &Policy::BitExact).unwrap().mismatches, 0);
        let ulp = f32s(&[
            f32::from_bits(1.0f32.to_bits() + 1),
            -0.0,
            f32::from_bits(0x7fc0_0001),
            3.0,
        ]);
        let m = compare(&e, &ulp, &Policy::BitExact).unwrap();
        assert_eq!(m.mismatches, 3);
        assert_eq!(
            m.first.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let text = describe(&m, &[4], &Policy::BitExact);
        assert!(text.contains("0x3f800001"), "{text}");
        assert!(text.contains("0x80000000"), "{text}");
        assert!(text.contains("bit-exact"), "{text}");
    }

    #[test]
    fn bit_exact_for_half_types_and_complex() {
        let e = Tensor::from_vec(&[2], vec![f16::from_f32(1.0), f16::from_f32(0.0)]);
        let a = Tensor::from_vec(&[2], vec![f16::from_bits(0x3c01), f16::from_f32(0.0)]);
        assert_eq!(compare(&e, &a, &Policy::BitExact).unwrap().mismatches, 1);
        let e = Tensor::from_vec(&[1], vec![bf16::from_f32(0.0)]);
        let a = Tensor::from_vec(&[1], vec![bf16::from_f32(-0.0)]);
        assert_eq!(compare(&e, &a, &Policy::BitExact).unwrap().mismatches, 1);
        let e = Tensor::from_vec(&[1], vec![Complex::new(1.0f64, 0.0)]);
        let a = Tensor::from_vec(&[1], vec![Complex::new(1.0f64, -0.0)]);
        assert_eq!(compare(&e, &a, &Policy::BitExact).unwrap().mismatches, 1);
        assert_eq!(compare(&e, &e, &Policy::BitExact).unwrap().mismatches, 0);
    }

    #[test]
    fn error_bound_is_per_element_and_reported_in_units() {
        let e = f32s(&[1.0, 100.0, f32::NAN, f32::INFINITY]);
        let inside = f32s(&[
            1.0 + 1e-6,
            100.0 - 1e-4,
            f32::from_bits(0x7fc0_1234),
            f32::INFINITY,
        ]);
        let p = bound(&[2e-6, 2e-4, 0.0, 0.0]);
        let m = compare(&e, &inside, &p).unwrap();
        assert_eq!(m.mismatches, 0, "{m:?}");
        assert!(m.max_bound_units.unwrap() <= 1.0);
        // The same absolute error is fine at [1] and 50 bounds off at [0].
        let off = f32s(&[1.0 + 1e-4, 100.0 - 1e-4, 0.0, f32::NEG_INFINITY]);
        let m = compare(&e, &off, &p).unwrap();
        assert_eq!(m.mismatches, 3);
        let units = m.max_bound_units.unwrap();
        assert!(units.is_infinite(), "{units}");
        let text = describe(&m, &[4], &p);
        assert!(text.contains("times its bound"), "{text}");
        assert!(text.contains("bound 2e-6"), "{text}");
    }

    #[test]
    fn error_bound_units_when_finite() {
        let e = f32s(&[1.0]);
        let a = f32s(&[1.5]);
        let m = compare(&e, &a, &bound(&[0.1])).unwrap();
        assert_eq!(m.mismatches, 1);
        assert!((m.max_bound_units.unwrap() - 5.0).abs() < 1e-9);
        assert!(compare(&e, &a, &bound(&[0.1, 0.2])).is_err());
        // An error where the bound is zero is infinitely many bounds off.
        let m = compare(&e, &a, &bound(&[0.0])).unwrap();
        assert!(m.max_bound_units.unwrap().is_infinite());
        assert_eq!(compare(&e, &e, &bound(&[0.0])).unwrap().mismatches, 0);
    }

    #[test]
    fn onnx_runner_tolerance() {
        let e = f32s(&[1.0, 1000.0, 0.0]);
        let a = f32s(&[1.0009, 1000.9, 1e-8]);
        assert_eq!(compare(&e, &a, &ONNX_RUNNER).unwrap().mismatches, 0);
        let a = f32s(&[1.0011, 1001.1, 2e-7]);
        let m = compare(&e, &a, &ONNX_RUNNER).unwrap();
        assert_eq!(m.mismatches, 3);
        assert!(describe(&m, &[3], &ONNX_RUNNER).contains("rtol 1e-3"));
    }

    #[test]
    fn shape_and_dtype_come_first() {
        let e = Tensor::from_vec(&[2], vec![1i64, 2]);
        let a = Tensor::from_vec(&[1, 2], vec![1i64, 2]);
        assert!(compare(&e, &a, &Policy::BitExact)
            .unwrap_err()
            .contains("shape differs"));
        let a = Tensor::from_vec(&[2], vec![1i32, 2]);
        assert!(compare(&e, &a, &Policy::BitExact)
            .unwrap_err()
            .contains("element type differs"));
    }

    #[test]
    fn integers_strings_and_bits_are_exact_under_every_policy() {
        let e = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]);
        let a = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 5]);
        for p in [Policy::BitExact, ONNX_RUNNER] {
            let m = compare(&e, &a, &p).unwrap();
            assert_eq!(m.mismatches, 1);
            assert_eq!(m.max_abs, 1.0);
            let text = describe(&m, &[2, 2], &p);
            assert!(text.contains("at [1, 1]: expected 4, actual 5"), "{text}");
        }
        let e = Tensor::from_vec(&[2], vec!["a".to_string(), "b".to_string()]);
        let a = Tensor::from_vec(&[2], vec!["a".to_string(), "c".to_string()]);
        assert_eq!(compare(&e, &a, &ONNX_RUNNER).unwrap().mismatches, 1);
        let e = Tensor::new(
            DataType::Int4,
            Storage::Bits(ArrayD::from_elem(vec![2], 0x7)),
        )
        .unwrap();
        let a = Tensor::new(
            DataType::Int4,
            Storage::Bits(ArrayD::from_shape_vec(vec![2], vec![0x7, 0xf]).unwrap()),
        )
        .unwrap();
        let m = compare(&e, &a, &ONNX_RUNNER).unwrap();
        assert_eq!(m.mismatches, 1);
        assert!(m.first[0].2.contains("0x0f"), "{:?}", m.first);
    }

    #[test]
    fn policy_names_used_in_reports() {
        assert_eq!(Policy::BitExact.name(), "bit-exact");
        assert_eq!(bound(&[]).name(), "error bound");
        assert_eq!(ONNX_RUNNER.name(), "tolerance");
    }

    #[test]
    fn counts_and_the_elided_tail_of_a_report() {
        let e = f32s(&[0.0; 8]);
        let a = f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let m = compare(&e, &a, &Policy::BitExact).unwrap();
        assert_eq!((m.total, m.mismatches, m.first.len()), (8, 7, SHOWN));
        let text = describe(&m, &[8], &Policy::BitExact);
        assert!(text.starts_with("7 of 8 values differ (87.500%)"), "{text}");
        assert!(text.ends_with("\n    ... and 2 more"), "{text}");
        // Every mismatch shown: no tail line.
        let a = f32s(&[0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let m = compare(&e, &a, &Policy::BitExact).unwrap();
        assert_eq!((m.mismatches, m.first.len()), (2, 2));
        assert!(!describe(&m, &[8], &Policy::BitExact).contains("more"));
    }

    #[test]
    fn relative_error_tracks_finite_pairs() {
        // 1 off at 2 is 0.5 relative; the equal zeros add nothing.
        let m = compare(&f32s(&[2.0, 0.0]), &f32s(&[3.0, 0.0]), &Policy::BitExact).unwrap();
        assert_eq!((m.max_abs, m.max_rel), (1.0, 0.5));
        let e = Tensor::from_vec(&[2], vec![4i64, 0]);
        let a = Tensor::from_vec(&[2], vec![5i64, 0]);
        let m = compare(&e, &a, &Policy::BitExact).unwrap();
        assert_eq!((m.max_abs, m.max_rel), (1.0, 0.25));
        // Anything but zero where zero belongs is infinitely far, relatively.
        let a = Tensor::from_vec(&[2], vec![4i64, 3]);
        let m = compare(&e, &a, &Policy::BitExact).unwrap();
        assert_eq!((m.max_abs, m.max_rel), (3.0, f64::INFINITY));
    }

    #[test]
    fn nan_or_infinity_where_a_number_belongs_is_infinitely_far() {
        let m = compare(&f32s(&[1.0]), &f32s(&[f32::NAN]), &Policy::BitExact).unwrap();
        assert_eq!(
            (m.mismatches, m.max_abs, m.max_rel),
            (1, f64::INFINITY, f64::INFINITY)
        );
        let m = compare(&f32s(&[1.0]), &f32s(&[f32::NAN]), &bound(&[1.0])).unwrap();
        assert_eq!(m.mismatches, 1);
        assert_eq!(m.max_bound_units, Some(f64::INFINITY));
        // Equal infinities, and NaNs that differ only in payload, are no
        // distance apart (bit-exact still counts the payload).
        let inf = f32s(&[f32::INFINITY, f32::NEG_INFINITY]);
        let m = compare(&inf, &inf, &Policy::BitExact).unwrap();
        assert_eq!((m.mismatches, m.max_abs, m.max_rel), (0, 0.0, 0.0));
        let payload = f32s(&[f32::from_bits(0x7fc0_0001)]);
        let m = compare(&f32s(&[f32::NAN]), &payload, &Policy::BitExact).unwrap();
        assert_eq!((m.mismatches, m.max_abs), (1, 0.0));
        // rtol * inf must not admit a finite value for an infinity.
        let m = compare(&f32s(&[f32::INFINITY]), &f32s(&[1.0]), &ONNX_RUNNER).unwrap();
        assert_eq!(m.mismatches, 1);
        let one = Tensor::from_vec(&[1], vec![Complex::new(1.0f32, 0.0)]);
        let nan = Tensor::from_vec(&[1], vec![Complex::new(f32::NAN, 0.0)]);
        let m = compare(&one, &nan, &Policy::BitExact).unwrap();
        assert_eq!((m.mismatches, m.max_abs), (1, f64::INFINITY));
    }

    #[test]
    fn bound_units_exist_even_without_a_finite_element() {
        let nan = f32s(&[f32::NAN]);
        let m = compare(&nan, &nan, &bound(&[0.0])).unwrap();
        assert_eq!((m.mismatches, m.max_bound_units), (0, Some(0.0)));
        assert_eq!(
            compare(&nan, &nan, &ONNX_RUNNER).unwrap().max_bound_units,
            None
        );
    }

    #[test]
    fn complex_needs_both_parts_within_the_policy() {
        let e = Tensor::from_vec(&[1], vec![Complex::new(1.0f64, 1.0)]);
        let a = Tensor::from_vec(&[1], vec![Complex::new(1.0f64, 1.5)]);
        assert_eq!(compare(&e, &e, &ONNX_RUNNER).unwrap().mismatches, 0);
        assert_eq!(compare(&e, &a, &ONNX_RUNNER).unwrap().mismatches, 1);
        let m = compare(&e, &a, &bound(&[1.0])).unwrap();
        assert_eq!((m.mismatches, m.max_bound_units), (0, Some(0.5)));
    }

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(4, &[3, 1, 2]), vec![2, 0, 0]);
        // A zero-length axis has no index to take a remainder by.
        assert_eq!(unravel(0, &[0, 3]), vec![0, 0]);
    }

    #[test]
    fn lines_give_index_value_and_float_bits() {
        assert_eq!(
            lines(&f32s(&[-0.0, 1.0])),
            "[0] -0.0 0x80000000\n[1] 1.0 0x3f800000\n"
        );
        let t = Tensor::from_vec(&[1], vec![f16::from_bits(0x7e01)]);
        assert_eq!(lines(&t), "[0] NaN 0x7e01\n");
        let t = Tensor::from_vec(&[2, 1], vec![7i64, -1]);
        assert_eq!(lines(&t), "[0, 0] 7\n[1, 0] -1\n");
    }
}
