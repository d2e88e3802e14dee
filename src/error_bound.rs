//! The rounding-error bound a correct Conv output must meet, computed from
//! the node's own inputs (the strict verdict policy, `compare.rs`).
//!
//! Each output element is `b + sum_k w_k * x_k` over the K = C/group x
//! prod(kernel) taps of its window (padding taps are zero). Summed in any
//! order in floating point with unit roundoff `u`, with or without fused
//! multiply-adds, the computed value differs from the exact one by at most
//! `g_n * (sum_k |w_k * x_k| + |b|)` with `n = K + 1` when there is a bias
//! (K otherwise) and `g_n = (1 + u)^n - 1`: each term passes through at
//! most n roundings (Higham, Accuracy and Stability of Numerical
//! Algorithms, 2nd ed., section 3.1; the bias is one more term of the sum),
//! plus `n` times the smallest subnormal spacing for underflow, grown by
//! the same factor. Higham simplifies `g_n` to `gamma_n = n*u / (1 - n*u)`,
//! which is never smaller but exists only while `n*u < 1`; `g_n` exists for
//! every n, so a sum kept in bfloat16 over thousands of terms still has a
//! finite bound (see [`growth`]). float16 and bfloat16 are computed in f32 (u = 2^-24) and
//! rounded once, which adds `u_out * |result|` plus half the type's
//! smallest subnormal.
//!
//! The oracle that produced the expected output rounds too. Assuming it is
//! at least as accurate as this model (numpy in float32 or float64, or
//! float64 rounded once, as every oracle of this suite is), both sides lie
//! within one bound of the exact value, so the allowed distance between
//! them is **c = 2** bounds. Nothing else is added: no fixed tolerance.
//!
//! For the half types the exact `|y|` in the final rounding is not known;
//! it is bounded through the expected value `e`: with `A` the reduction's
//! bound, `B = A (1 + u_out) + eta_out` and `|y - e| <= B + u_out |y|`,
//! `|y| <= (|e| + B) / (1 - u_out)`, so the allowed distance is
//! `c (B + u_out |e|) / (1 - u_out)`: an absolute part per element (from
//! the inputs) and a relative part on `|e|` ([`Arithmetic::relative`]).
//! (An earlier version bounded `|y|` by `sum |w*x| + |b|`, which where sums
//! cancel allowed many float16 units in the last place.)
//!
//! The spec does not fix the accumulation precision of the half types, and
//! onnx's reference implementation (like tract and candle-onnx) sums them in
//! the type itself. So they get a second, wider bound: the same dot-product
//! bound with `u = u_out` and `eta = eta_out` and no final rounding (it
//! contains the first). A result outside the first bound but inside the
//! second is reported as undefined by the spec (`compare::ErrorBound::
//! unspecified`); outside both it fails.
//!
//! The sums of magnitudes are computed in f64 by a plain loop written from
//! the spec's definition, independent of the kernels in `ops::conv`; their
//! own rounding (relative 2^-53 per term) is far below the factor c leaves.

use crate::compare::ErrorBound;
use crate::model::{AttrValue, Node};
use crate::tensor::{DataType, Storage, Tensor};

/// The constant that covers the oracle's own rounding (see the module doc).
pub const ORACLE_FACTOR: f64 = 2.0;

/// Above this many multiply-adds the bound is not computed (a plain f64
/// loop; the suite's Conv cases need far fewer).
pub const MAX_BOUND_WORK: u64 = 1 << 32;

/// `(1 + u)^n - 1`: how far the product of a term's n roundings, each a
/// factor `1 + delta` with `|delta| <= u`, can stray from 1 (Higham's
/// section 3.1 before it simplifies this to `gamma_n = n*u / (1 - n*u)`,
/// which is never smaller and has no value from `n*u >= 1`). It exists for
/// every n: only past f64's range (bfloat16 from about 180 000 terms) is it
/// infinite. Computed as `expm1(n * ln1p(u))`, accurate to a few f64
/// roundings.
pub fn growth(n: usize, u: f64) -> f64 {
    (n as f64 * u.ln_1p()).exp_m1()
}

/// Unit roundoff and underflow spacing of the accumulation, and of the
/// final rounding for types computed wider.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arithmetic {
    pub u: f64,
    pub eta: f64,
    /// (unit roundoff, half the smallest subnormal) of the output type
    /// when it is narrower than the accumulation.
    pub output: Option<(f64, f64)>,
}

impl Arithmetic {
    /// The arithmetic the policy assumes for a Conv on `dtype`.
    pub fn of(dtype: DataType) -> Option<Arithmetic> {
        let f32_acc = |output| Arithmetic {
            u: 2f64.powi(-24),
            eta: 2f64.powi(-150),
            output,
        };
        match dtype {
            DataType::Float => Some(f32_acc(None)),
            DataType::Float16 => Some(f32_acc(Some((2f64.powi(-11), 2f64.powi(-25))))),
            DataType::Bfloat16 => Some(f32_acc(Some((2f64.powi(-8), 2f64.powi(-134))))),
            DataType::Double => Some(Arithmetic {
                u: 2f64.powi(-53),
                // Half of 2^-1074 is not representable; the whole spacing
                // is a safe upper bound.
                eta: f64::from_bits(1),
                output: None,
            }),
            _ => None,
        }
    }

    /// The absolute part of the allowed distance between two results of a
    /// sum of `n` terms whose magnitudes add up to `magnitude`: the bound
    /// on `|computed - exact|` times [`ORACLE_FACTOR`]. For the half types
    /// add [`Arithmetic::relative`] times `|expected|`.
    pub fn bound(&self, n: usize, magnitude: f64) -> f64 {
        let growth = growth(n, self.u);
        // The underflow terms may grow with the partial sums they enter.
        let side = growth * magnitude + n as f64 * self.eta * (1.0 + growth);
        match self.output {
            Some((u_out, eta_out)) => {
                ORACLE_FACTOR * (side * (1.0 + u_out) + eta_out) / (1.0 - u_out)
            }
            None => ORACLE_FACTOR * side,
        }
    }

    /// The arithmetic of a sum kept in the output type itself (for the half
    /// types; None for the others, which have no wider one).
    pub fn in_output_type(&self) -> Option<Arithmetic> {
        self.output.map(|(u_out, eta_out)| Arithmetic {
            u: u_out,
            eta: eta_out,
            output: None,
        })
    }

    /// The part of the allowed distance proportional to `|expected|`: the
    /// final rounding of the half types (0 for float and double).
    pub fn relative(&self) -> f64 {
        match self.output {
            Some((u_out, _)) => ORACLE_FACTOR * u_out / (1.0 - u_out),
            None => 0.0,
        }
    }
}

fn ints(node: &Node, name: &str) -> Result<Option<Vec<i64>>, String> {
    match node.attribute(name) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
        Some(other) => Err(format!(
            "attribute '{name}' is {}, not ints",
            other.type_name()
        )),
    }
}

/// A float tensor's values as f64 (the types a Conv takes).
pub(crate) fn values(t: &Tensor) -> Result<Vec<f64>, String> {
    Ok(match t.storage() {
        Storage::F32(a) => a.iter().map(|v| *v as f64).collect(),
        Storage::F64(a) => a.iter().copied().collect(),
        Storage::F16(a) => a.iter().map(|v| v.to_f64()).collect(),
        Storage::BF16(a) => a.iter().map(|v| v.to_f64()).collect(),
        _ => return Err(format!("Conv input of type {} has no bound", t.dtype())),
    })
}

/// Per spatial axis: (input, kernel, stride, dilation, pad_begin, output).
type Axis = (usize, usize, usize, usize, i64, usize);

/// The spatial geometry, from the spec text of Conv-11/22 (`auto_pad`
/// SAME_* gives `ceil(in / stride)`, the extra pad at the end for UPPER).
fn axes(node: &Node, x: &[usize], w: &[usize]) -> Result<Vec<Axis>, String> {
    let rank = x.len().checked_sub(2).ok_or("X has rank below 3")?;
    if w.len() != rank + 2 {
        return Err(format!("W has rank {}, X {}", w.len(), x.len()));
    }
    let ones = vec![1; rank];
    let strides = ints(node, "strides")?.unwrap_or_else(|| ones.clone());
    let dilations = ints(node, "dilations")?.unwrap_or(ones);
    let pads = ints(node, "pads")?.unwrap_or_else(|| vec![0; 2 * rank]);
    let auto_pad = match node.attribute("auto_pad") {
        None => "NOTSET".to_string(),
        Some(AttrValue::String(s)) => s.clone(),
        Some(other) => return Err(format!("auto_pad is {}", other.type_name())),
    };
    if strides.len() != rank || dilations.len() != rank || pads.len() != 2 * rank {
        return Err("strides, dilations or pads do not match the rank".into());
    }
    let mut out = Vec::with_capacity(rank);
    for a in 0..rank {
        let (n, k) = (x[a + 2] as i64, w[a + 2] as i64);
        let (s, d) = (strides[a], dilations[a]);
        if s < 1 || d < 1 {
            return Err("strides and dilations must be positive".into());
        }
        let span = d
            .checked_mul(k - 1)
            .and_then(|v| v.checked_add(1))
            .ok_or("dilated kernel overflows")?;
        let (begin, end) = match auto_pad.as_str() {
            "NOTSET" => (pads[a], pads[a + rank]),
            "VALID" => (0, 0),
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = (n + s - 1) / s;
                let total = ((o - 1).max(0) * s + span - n).max(0);
                let small = total / 2;
                if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                }
            }
            other => return Err(format!("unknown auto_pad '{other}'")),
        };
        let room = n + begin + end - span;
        let o = if room < 0 { 0 } else { room / s + 1 };
        out.push((
            n as usize, k as usize, s as usize, d as usize, begin, o as usize,
        ));
    }
    Ok(out)
}

/// The per-element bound of a Conv node's output, row-major (its absolute
/// part, the coefficient of `|expected|`, and for the half types the wider
/// bound of summing in the type itself: see the module doc), with one-line
/// derivations for reports.
pub fn conv(node: &Node, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<ErrorBound, String> {
    conv_with_sums(node, x, w, b).map(|(bound, _)| bound)
}

/// [`conv`] and, from the same loop, each output's value summed in f64
/// (row-major): what the node computes, to within f64 rounding, for
/// telling apart what another runtime computed (`observed.rs`), never as
/// an expected output.
pub fn conv_with_sums(
    node: &Node,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
) -> Result<(ErrorBound, Vec<f64>), String> {
    let dtype = x.dtype();
    let arith =
        Arithmetic::of(dtype).ok_or_else(|| format!("Conv on tensor({dtype}) has no bound"))?;
    let group = match node.attribute("group") {
        None => 1,
        Some(AttrValue::Int(g)) if *g >= 1 => *g as usize,
        Some(other) => return Err(format!("group {other:?} is not a positive int")),
    };
    let (xs, ws) = (x.shape(), w.shape());
    let geo = axes(node, xs, ws)?;
    let (batch, channels, maps) = (xs[0], xs[1], ws[0]);
    let per_group = ws[1];
    if per_group * group != channels || maps % group != 0 {
        return Err(format!(
            "channels {channels}, W.shape[1] {per_group}, M {maps} and group {group} do not fit"
        ));
    }
    let taps: usize = geo.iter().map(|g| g.1).product();
    let k = per_group * taps;
    let outputs: usize = geo.iter().map(|g| g.5).product();
    let work = (batch * maps * outputs) as u64 * k as u64;
    if work > MAX_BOUND_WORK {
        return Err(format!(
            "the error bound would need {work} multiply-adds (more than {MAX_BOUND_WORK})"
        ));
    }
    let (xv, wv) = (values(x)?, values(w)?);
    let bv = match b {
        Some(t) => values(t)?,
        None => Vec::new(),
    };
    if k == 0 {
        // No input channels: every output is its bias, or zero, moved into
        // the output without an operation, so nothing rounds.
        let sums = (0..batch * maps * outputs)
            .map(|i| bv.get(i / outputs % maps).copied().unwrap_or(0.0))
            .collect();
        return Ok((
            ErrorBound {
                bound: vec![0.0; batch * maps * outputs],
                relative: 0.0,
                derivation:
                    "0: no input channels, every output is its bias (or 0), computed by no operation"
                        .into(),
                unspecified: None,
            },
            sums,
        ));
    }
    let n_terms = k + usize::from(b.is_some());
    let in_plane: usize = geo.iter().map(|g| g.0).product();
    let maps_per_group = maps / group;
    // The taps each output position reads, as (tap, offset in the input
    // plane): the same for every image, map and channel.
    let mut windows = Vec::with_capacity(outputs);
    let mut out_idx = vec![0usize; geo.len()];
    let mut tap_idx = vec![0usize; geo.len()];
    for o in 0..outputs {
        split(o, &geo, |g| g.5, &mut out_idx);
        let mut window = Vec::with_capacity(taps);
        for t in 0..taps {
            split(t, &geo, |g| g.1, &mut tap_idx);
            if let Some(offset) = input_offset(&geo, &out_idx, &tap_idx) {
                window.push((t, offset));
            }
        }
        windows.push(window);
    }
    let wide = arith.in_output_type();
    let mut bound = Vec::with_capacity(batch * maps * outputs);
    let mut sums = Vec::with_capacity(batch * maps * outputs);
    let mut wide_bound = Vec::with_capacity(if wide.is_some() { bound.capacity() } else { 0 });
    for img in 0..batch {
        for m in 0..maps {
            let first_channel = (m / maps_per_group) * per_group;
            let bias = bv.get(m).copied().unwrap_or(0.0);
            for window in &windows {
                let (mut magnitude, mut sum) = (bias.abs(), bias);
                for c in 0..per_group {
                    let xs = &xv[(img * channels + first_channel + c) * in_plane..][..in_plane];
                    let ws = &wv[(m * per_group + c) * taps..][..taps];
                    for &(t, offset) in window {
                        let product = ws[t] * xs[offset];
                        magnitude += product.abs();
                        sum += product;
                    }
                }
                sums.push(sum);
                bound.push(arith.bound(n_terms, magnitude));
                if let Some(wide) = &wide {
                    wide_bound.push(wide.bound(n_terms, magnitude));
                }
            }
        }
    }
    let derivation = match arith.output {
        Some((u_out, _)) => format!(
            "{ORACLE_FACTOR} * (B + u_out*|expected|) / (1 - u_out), B = ((1+u)^n - 1) * (sum|w*x| + |b|) * (1 + u_out) + eta_out, n = {n_terms}, u = {:e} (accumulation in float), u_out = {u_out:e} (tensor({dtype}))",
            arith.u
        ),
        None => format!(
            "{ORACLE_FACTOR} * ((1+u)^n - 1) * (sum|w*x| + |b|), n = {n_terms}, u = {:e} (tensor({dtype}))",
            arith.u
        ),
    };
    let unspecified = wide.map(|wide| {
        Box::new(ErrorBound {
            bound: wide_bound,
            relative: 0.0,
            derivation: format!(
                "{ORACLE_FACTOR} * ((1+u)^n - 1) * (sum|w*x| + |b|), n = {n_terms}, u = {:e}: summed in tensor({dtype}) itself, which the spec does not rule out",
                wide.u
            ),
            unspecified: None,
        })
    });
    Ok((
        ErrorBound {
            bound,
            relative: arith.relative(),
            derivation,
            unspecified,
        },
        sums,
    ))
}

/// Row-major digits of `flat` over the extents `extent(axis)`.
fn split(mut flat: usize, geo: &[Axis], extent: impl Fn(&Axis) -> usize, idx: &mut [usize]) {
    for a in (0..geo.len()).rev() {
        let e = extent(&geo[a]);
        idx[a] = flat % e;
        flat /= e;
    }
}

/// The flat offset in one input plane read by output `out` at tap `tap`,
/// or `None` when it falls in the padding.
fn input_offset(geo: &[Axis], out: &[usize], tap: &[usize]) -> Option<usize> {
    let mut offset = 0usize;
    for (a, &(n, _, s, d, begin, _)) in geo.iter().enumerate() {
        let pos = (out[a] * s + tap[a] * d) as i64 - begin;
        if pos < 0 || pos >= n as i64 {
            return None;
        }
        offset = offset * n + pos as usize;
    }
    Some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(attrs: Vec<(&str, AttrValue)>) -> Node {
        Node::new("", "Conv", &["x", "w", "b"], &["y"], attrs)
    }

    #[test]
    fn magnitudes_follow_the_window_and_padding() {
        // 1-D, x = [1, -2, 3], w = [1, 1], pads 1/1: windows (pad, 1), (1, -2),
        // (-2, 3), (3, pad); magnitudes 1, 3, 5, 3, plus |b| = 0.5.
        let x = Tensor::from_vec(&[1, 1, 3], vec![1.0f32, -2.0, 3.0]);
        let w = Tensor::from_vec(&[1, 1, 2], vec![1.0f32, 1.0]);
        let b = Tensor::from_vec(&[1], vec![-0.5f32]);
        let n = node(vec![("pads", AttrValue::Ints(vec![1, 1]))]);
        let ErrorBound {
            bound,
            derivation: text,
            ..
        } = conv(&n, &x, &w, Some(&b)).unwrap();
        let a = Arithmetic::of(DataType::Float).unwrap();
        let expect: Vec<f64> = [1.5, 3.5, 5.5, 3.5]
            .iter()
            .map(|m| a.bound(3, *m))
            .collect();
        assert_eq!(bound, expect);
        assert!(text.contains("n = 3"), "{text}");
        // gamma_3 for f32 is about 3 * 2^-24: 5.5 gives about 2 * 9.8e-7.
        assert!((bound[2] - 2.0 * 5.5 * 3.0 * 2f64.powi(-24)).abs() < 1e-12);
    }

    #[test]
    fn same_lower_puts_the_odd_pad_first_and_strides_skip() {
        // Input 3, kernel 2, SAME_LOWER: total pad 1 at the start, so
        // output 0 sees (pad, x0), output 1 (x0, x1), output 2 (x1, x2).
        let x = Tensor::from_vec(&[1, 1, 3], vec![1.0f64, 10.0, 100.0]);
        let w = Tensor::from_vec(&[1, 1, 2], vec![1.0f64, 1.0]);
        let lower = node(vec![("auto_pad", AttrValue::String("SAME_LOWER".into()))]);
        let ErrorBound { bound, .. } = conv(&lower, &x, &w, None).unwrap();
        let a = Arithmetic::of(DataType::Double).unwrap();
        assert_eq!(
            bound,
            vec![a.bound(2, 1.0), a.bound(2, 11.0), a.bound(2, 110.0)]
        );
        let upper = node(vec![("auto_pad", AttrValue::String("SAME_UPPER".into()))]);
        let ErrorBound { bound, .. } = conv(&upper, &x, &w, None).unwrap();
        assert_eq!(
            bound,
            vec![a.bound(2, 11.0), a.bound(2, 110.0), a.bound(2, 100.0)]
        );
        // Stride 2 without padding: outputs at 0 only (floor((3-2)/2)+1 = 1).
        let strided = node(vec![("strides", AttrValue::Ints(vec![2]))]);
        let ErrorBound { bound, .. } = conv(&strided, &x, &w, None).unwrap();
        assert_eq!(bound, vec![a.bound(2, 11.0)]);
    }

    #[test]
    fn groups_read_their_own_channels_and_empty_outputs_are_empty() {
        // Two groups of one channel: map 0 reads channel 0, map 1 channel 1.
        let x = Tensor::from_vec(&[1, 2, 1], vec![2.0f32, 7.0]);
        let w = Tensor::from_vec(&[2, 1, 1], vec![1.0f32, 1.0]);
        let n = node(vec![("group", AttrValue::Int(2))]);
        let ErrorBound { bound, .. } = conv(&n, &x, &w, None).unwrap();
        let a = Arithmetic::of(DataType::Float).unwrap();
        assert_eq!(bound, vec![a.bound(1, 2.0), a.bound(1, 7.0)]);
        // No input channels: the bias, exactly (no rounding to allow for),
        // in every element type.
        for (x0, w0, b0) in [
            (
                Tensor::from_vec(&[2, 0, 3], Vec::<f32>::new()),
                Tensor::from_vec(&[2, 0, 2], Vec::<f32>::new()),
                Tensor::from_vec(&[2], vec![0.5f32, -3.0]),
            ),
            (
                Tensor::from_vec(&[2, 0, 3], Vec::<half::f16>::new()),
                Tensor::from_vec(&[2, 0, 2], Vec::<half::f16>::new()),
                Tensor::from_vec(
                    &[2],
                    vec![half::f16::from_f32(0.5), half::f16::from_f32(-3.0)],
                ),
            ),
        ] {
            let eb = conv(&node(vec![]), &x0, &w0, Some(&b0)).unwrap();
            assert_eq!((eb.bound, eb.relative), (vec![0.0; 2 * 2 * 2], 0.0));
            assert!(eb.unspecified.is_none());
        }
        // A kernel longer than the input gives an empty output.
        let w = Tensor::from_vec(&[1, 2, 3], vec![1.0f32; 6]);
        let ErrorBound { bound, .. } = conv(&node(vec![]), &x, &w, None).unwrap();
        assert!(bound.is_empty());
    }

    #[test]
    fn half_types_add_one_final_rounding_of_the_result() {
        let f16 = Arithmetic::of(DataType::Float16).unwrap();
        let f32 = Arithmetic::of(DataType::Float).unwrap();
        // The final rounding scales with the result, not with the sum of
        // magnitudes: a sum of 10 that cancels to 0 gets no more room in
        // float16 than in float32 but float16's underflow term (2 x 2^-25)
        // ...
        let extra = f16.bound(10, 10.0) - f32.bound(10, 10.0);
        let underflow = 2.0 * 2f64.powi(-25);
        assert!((extra - underflow).abs() < 0.2 * underflow, "{extra}");
        // ... and a result of 1 about one float16 rounding per side.
        let rel = f16.relative();
        assert!((rel / (2.0 * 2f64.powi(-11)) - 1.0).abs() < 1e-3, "{rel}");
        assert_eq!(f32.relative(), 0.0);
        let bf16 = Arithmetic::of(DataType::Bfloat16).unwrap();
        assert!((bf16.relative() / (2.0 * 2f64.powi(-8)) - 1.0).abs() < 1e-2);
        assert!(Arithmetic::of(DataType::Int8).is_none());
    }

    /// `g_n = (1 + u)^n - 1` is at most gamma_n where that exists, by a
    /// second-order sliver, and stays finite past `n * u = 1`: a sum kept
    /// in bfloat16 over the suite's 1600 terms may be off by about 511
    /// times its sum of magnitudes, no more.
    #[test]
    fn long_reductions_keep_a_finite_bound_past_n_u_of_one() {
        let gamma = |n: usize, u: f64| n as f64 * u / (1.0 - n as f64 * u);
        for (n, u) in [
            (1, 2f64.powi(-24)),
            (576, 2f64.powi(-24)),
            (18, 2f64.powi(-8)),
        ] {
            let (g, gam) = (growth(n, u), gamma(n, u));
            assert!(
                g <= gam && g >= gam * (1.0 - n as f64 * u),
                "{n}: {g} {gam}"
            );
        }
        let f32 = Arithmetic::of(DataType::Float).unwrap();
        let got = f32.bound(1 << 24, 1.0);
        assert!((3.43..3.44).contains(&got), "{got}: about 2 (e - 1)");
        let bf16 = Arithmetic::of(DataType::Bfloat16)
            .unwrap()
            .in_output_type()
            .unwrap();
        let got = bf16.bound(1600, 1.0);
        assert!((1020.0..1024.0).contains(&got), "{got}");
        // Rising with n through n * u = 1, where gamma_n is undefined.
        let around: Vec<f64> = (250..262).map(|n| bf16.bound(n, 1.0)).collect();
        assert!(around.windows(2).all(|w| w[0] < w[1]), "{around:?}");
        assert!((3.4..3.5).contains(&bf16.bound(256, 1.0)));
        // Only past f64's range is it infinite.
        assert_eq!(bf16.bound(1 << 20, 1.0), f64::INFINITY);
    }

    #[test]
    fn malformed_nodes_are_errors() {
        let x = Tensor::from_vec(&[1, 1, 3], vec![1.0f32; 3]);
        let w = Tensor::from_vec(&[1, 1, 2], vec![1.0f32; 2]);
        let bad = node(vec![("strides", AttrValue::Ints(vec![0]))]);
        assert!(conv(&bad, &x, &w, None).is_err());
        let bad = node(vec![("auto_pad", AttrValue::String("SAME".into()))]);
        assert!(conv(&bad, &x, &w, None).unwrap_err().contains("auto_pad"));
        let w2 = Tensor::from_vec(&[1, 2, 2], vec![1.0f32; 4]);
        assert!(conv(&node(vec![]), &x, &w2, None).is_err());
        let xi = Tensor::from_vec(&[1, 1, 3], vec![1i32; 3]);
        assert!(conv(&node(vec![]), &xi, &w, None).is_err());
    }
}
