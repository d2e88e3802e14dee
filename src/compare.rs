//! Output comparison: dtype and shape first, then values. Used by the
//! conformance harness and by differential runs.
//!
//! Tolerance policy (the one place it is written in code; the README repeats
//! it): integers, bool, strings and the 8-bit-or-smaller float kinds compare
//! exactly (bit patterns). Floats pass when `|a - e| <= atol + rtol * |e|`;
//! NaN equals NaN; an infinity only equals the same infinity. Complex values
//! compare their real and imaginary parts with the tolerance of the part type.

use crate::tensor::{DataType, Storage, Tensor};
use half::{bf16, f16};
use ndarray::ArrayD;
use std::fmt::Write;

/// (atol, rtol) for a float type; `None` means exact comparison.
pub fn tolerance(dtype: DataType) -> Option<(f64, f64)> {
    match dtype {
        DataType::Float | DataType::Complex64 => Some((1e-5, 1e-4)),
        DataType::Double | DataType::Complex128 => Some((1e-10, 1e-8)),
        DataType::Float16 => Some((1e-3, 2e-3)),
        DataType::Bfloat16 => Some((1e-2, 1.6e-2)),
        _ => None,
    }
}

/// How far apart two outputs are; `mismatches == 0` means they agree.
#[derive(Debug, Default, Clone)]
pub struct Mismatch {
    pub total: usize,
    pub mismatches: usize,
    pub max_abs: f64,
    pub max_rel: f64,
    /// (flat index, expected, actual), the first few.
    pub first: Vec<(usize, String, String)>,
}

const SHOWN: usize = 5;

/// Compares `actual` with `expected`. `Err` carries a dtype or shape
/// mismatch; `Ok` carries value differences (possibly none).
pub fn compare(
    expected: &Tensor,
    actual: &Tensor,
    tol: Option<(f64, f64)>,
) -> Result<Mismatch, String> {
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
    let tol = tol.or_else(|| tolerance(expected.dtype()));
    let mut m = Mismatch {
        total: expected.len(),
        ..Mismatch::default()
    };
    match (expected.storage(), actual.storage()) {
        (Storage::F32(e), Storage::F32(a)) => floats(
            &mut m,
            e,
            a,
            tol,
            |v| *v as f64,
            |v| format!("{v:e} ({:#010x})", v.to_bits()),
        ),
        (Storage::F64(e), Storage::F64(a)) => floats(
            &mut m,
            e,
            a,
            tol,
            |v| *v,
            |v| format!("{v:e} ({:#018x})", v.to_bits()),
        ),
        (Storage::F16(e), Storage::F16(a)) => floats(
            &mut m,
            e,
            a,
            tol,
            |v: &f16| v.to_f64(),
            |v| format!("{v} ({:#06x})", v.to_bits()),
        ),
        (Storage::BF16(e), Storage::BF16(a)) => floats(
            &mut m,
            e,
            a,
            tol,
            |v: &bf16| v.to_f64(),
            |v| format!("{v} ({:#06x})", v.to_bits()),
        ),
        (Storage::C64(e), Storage::C64(a)) => {
            let re = |x: &ArrayD<num_complex::Complex<f32>>| x.mapv(|c| c.re as f64);
            let im = |x: &ArrayD<num_complex::Complex<f32>>| x.mapv(|c| c.im as f64);
            floats(&mut m, &re(e), &re(a), tol, |v| *v, |v| format!("re {v:e}"));
            floats(&mut m, &im(e), &im(a), tol, |v| *v, |v| format!("im {v:e}"));
            m.total = e.len();
        }
        (Storage::C128(e), Storage::C128(a)) => {
            let re = |x: &ArrayD<num_complex::Complex<f64>>| x.mapv(|c| c.re);
            let im = |x: &ArrayD<num_complex::Complex<f64>>| x.mapv(|c| c.im);
            floats(&mut m, &re(e), &re(a), tol, |v| *v, |v| format!("re {v:e}"));
            floats(&mut m, &im(e), &im(a), tol, |v| *v, |v| format!("im {v:e}"));
            m.total = e.len();
        }
        (Storage::I8(e), Storage::I8(a)) => exact(&mut m, e, a),
        (Storage::I16(e), Storage::I16(a)) => exact(&mut m, e, a),
        (Storage::I32(e), Storage::I32(a)) => exact(&mut m, e, a),
        (Storage::I64(e), Storage::I64(a)) => exact(&mut m, e, a),
        (Storage::U8(e), Storage::U8(a)) => exact(&mut m, e, a),
        (Storage::U16(e), Storage::U16(a)) => exact(&mut m, e, a),
        (Storage::U32(e), Storage::U32(a)) => exact(&mut m, e, a),
        (Storage::U64(e), Storage::U64(a)) => exact(&mut m, e, a),
        (Storage::Bool(e), Storage::Bool(a)) => exact(&mut m, e, a),
        (Storage::Str(e), Storage::Str(a)) => exact(&mut m, e, a),
        (Storage::Bits(e), Storage::Bits(a)) => exact(&mut m, e, a),
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

fn exact<T: PartialEq + std::fmt::Debug>(m: &mut Mismatch, e: &ArrayD<T>, a: &ArrayD<T>) {
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        if x != y {
            m.mismatches += 1;
            if m.first.len() < SHOWN {
                m.first.push((i, format!("{x:?}"), format!("{y:?}")));
            }
        }
    }
}

fn floats<T>(
    m: &mut Mismatch,
    e: &ArrayD<T>,
    a: &ArrayD<T>,
    tol: Option<(f64, f64)>,
    to_f64: impl Fn(&T) -> f64,
    show: impl Fn(&T) -> String,
) {
    let (atol, rtol) = tol.unwrap_or((0.0, 0.0));
    for (i, (x, y)) in e.iter().zip(a.iter()).enumerate() {
        let (ev, av) = (to_f64(x), to_f64(y));
        let ok = if ev.is_nan() || av.is_nan() {
            ev.is_nan() && av.is_nan()
        } else if ev.is_infinite() || av.is_infinite() {
            ev == av
        } else {
            let abs = (av - ev).abs();
            let rel = if ev != 0.0 { abs / ev.abs() } else { 0.0 };
            m.max_abs = m.max_abs.max(abs);
            if ev != 0.0 {
                m.max_rel = m.max_rel.max(rel);
            }
            abs <= atol + rtol * ev.abs()
        };
        if !ok {
            if ev.is_nan() != av.is_nan() || ev.is_infinite() || av.is_infinite() {
                m.max_abs = f64::INFINITY;
            }
            m.mismatches += 1;
            if m.first.len() < SHOWN {
                m.first.push((i, show(x), show(y)));
            }
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

/// A human report of a value mismatch.
pub fn describe(m: &Mismatch, shape: &[usize], tol: Option<(f64, f64)>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{} of {} values differ ({:.3}%)",
        m.mismatches,
        m.total,
        100.0 * m.mismatches as f64 / m.total.max(1) as f64
    );
    match tol {
        Some((atol, rtol)) => {
            let _ = write!(
                s,
                "; largest absolute error {:e}, largest relative error {:e} (atol {atol:e}, rtol {rtol:e})",
                m.max_abs, m.max_rel
            );
        }
        None => s.push_str(" (exact comparison)"),
    }
    for (i, e, a) in &m.first {
        let _ = write!(
            s,
            "\n    at {:?}: expected {e}, actual {a}",
            unravel(*i, shape)
        );
    }
    if m.mismatches > m.first.len() {
        let _ = write!(s, "\n    ... and {} more", m.mismatches - m.first.len());
    }
    s
}

/// One value per line, for a textual diff of small tensors.
pub fn lines(t: &Tensor) -> String {
    let shape = t.shape().to_vec();
    let mut out = String::new();
    crate::with_storage!(t.storage(), a => {
        for (i, v) in a.iter().enumerate() {
            let _ = writeln!(out, "{:?} {:?}", unravel(i, &shape), v);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_policy() {
        let e = Tensor::from_vec(&[5], vec![1.0f32, f32::NAN, f32::INFINITY, 0.0, 100.0]);
        let same = Tensor::from_vec(
            &[5],
            vec![1.000001f32, f32::NAN, f32::INFINITY, 1e-6, 100.005],
        );
        assert_eq!(compare(&e, &same, None).unwrap().mismatches, 0);
        let off = Tensor::from_vec(&[5], vec![1.1f32, 0.0, f32::NEG_INFINITY, 0.0, 100.0]);
        let m = compare(&e, &off, None).unwrap();
        assert_eq!(m.mismatches, 3);
        assert_eq!(m.first[0].0, 0);
        assert_eq!(m.first[1].0, 1);
        assert_eq!(m.first[2].0, 2);
    }

    #[test]
    fn shape_and_dtype_come_first() {
        let e = Tensor::from_vec(&[2], vec![1i64, 2]);
        let a = Tensor::from_vec(&[1, 2], vec![1i64, 2]);
        assert!(compare(&e, &a, None).unwrap_err().contains("shape differs"));
        let a = Tensor::from_vec(&[2], vec![1i32, 2]);
        assert!(compare(&e, &a, None)
            .unwrap_err()
            .contains("element type differs"));
    }

    #[test]
    fn integers_are_exact_and_reported_by_index() {
        let e = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]);
        let a = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 5]);
        let m = compare(&e, &a, None).unwrap();
        assert_eq!(m.mismatches, 1);
        let text = describe(&m, &[2, 2], None);
        assert!(text.contains("at [1, 1]: expected 4, actual 5"), "{text}");
    }
}
