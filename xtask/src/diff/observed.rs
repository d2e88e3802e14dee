//! Properties of a disagreement seen in the outputs rather than in the
//! case's parameters, for findings that describe what a runtime computes
//! (`when = ["dtype:double", "float_arithmetic"]`), so that such a finding
//! cannot also excuse another bug met in the same kind of case. The ones
//! the harness's expected failures use too live in the library
//! (`onnx_conformance::observed`).

use super::gen::PadCase;
use onnx_conformance::compare::{self, Policy};
use onnx_conformance::{map_storage, Tensor};

/// Where one output index along an axis reads from: an input index, or
/// nothing (a zero).
type AxisMap = Vec<Option<usize>>;

/// An axis's map from its length, begin pad and end pad; None where the
/// algorithm gives no output.
type AxisAlgorithm = fn(usize, i64, i64) -> Option<AxisMap>;

/// Reflect-padding algorithms runtimes are known to follow instead of the
/// spec's, each a map per axis from (length, begin pad, end pad): a Pad
/// disagreement whose output is exactly what one of them gives, bit for
/// bit, has that property. Reading the runtime's algorithm this way, rather
/// than from the case's parameters alone, keeps its finding from excusing
/// another bug met in the same kind of case.
pub(super) const REFLECTIONS: &[(&str, AxisAlgorithm)] = &[
    ("reflect_from_unsigned_pad", reflect_from_unsigned_pad),
    ("reflect_into_zeroed_output", reflect_into_zeroed_output),
    ("reflect_modulo_length", reflect_modulo_length),
];

/// `reflect_from_unsigned_pad`: the axis read as the endless zigzag 0, 1,
/// .., n-1, n-2, .., 1, 0, 1, .. (period 2n - 2), n + begin + end indices
/// from an offset of `-begin` modulo the period, where `begin` has been
/// cast to an unsigned 64-bit count first. For begin >= 0 that is the
/// spec's reflection; a negative begin becomes 2^64 - |begin|, whose
/// remainder is not -|begin|'s unless the period divides 2^64 ([a, b, c,
/// d] with pads [-1, 0]: period 6, offset 3, [d, c, b]). An axis of length
/// 0 or 1 is left as it is, whatever its pads.
fn reflect_from_unsigned_pad(n: usize, begin: i64, end: i64) -> Option<AxisMap> {
    if n <= 1 || (begin == 0 && end == 0) {
        return Some((0..n).map(Some).collect());
    }
    let count = usize::try_from(n as i64 + begin + end).ok()?;
    let period = 2 * n as u64 - 2;
    let offset = period - (begin as u64) % period;
    Some(
        (0..count as u64)
            .map(|j| {
                let k = ((offset + j) % period) as usize;
                Some(if k < n { k } else { period as usize - k })
            })
            .collect(),
    )
}

/// `reflect_into_zeroed_output`: the output starts as zeros with the input
/// in its middle; the begin pad is then filled, each element from its
/// mirror image across the pad's inner edge (which past the input is still
/// zero), then the end pad the same way (its mirror images may be begin
/// pads, filled by then). Within the axis length it is the spec's
/// reflection; further out it gives zeros ([a, b] with pads [2, 1] gives
/// [0, b, a, b, a]). Negative pads have no such output.
fn reflect_into_zeroed_output(n: usize, begin: i64, end: i64) -> Option<AxisMap> {
    let (b, e) = (usize::try_from(begin).ok()?, usize::try_from(end).ok()?);
    let mut map: AxisMap = vec![None; b + n + e];
    for i in 0..n {
        map[b + i] = Some(i);
    }
    for o in 0..b {
        let mirror = 2 * b - o;
        map[o] = if mirror < b + n { map[mirror] } else { None };
    }
    for i in 0..e {
        map[b + n + i] = map[(b + n).checked_sub(2 + i)?];
    }
    Some(map)
}

/// `reflect_modulo_length`: negative pads crop the axis first; then each
/// begin pad at distance d from the kept part reads kept index d, each end
/// pad at distance d reads n - 1 - d, and the middle reads itself, every
/// index taken modulo the kept length n. Within that length it is the
/// spec's reflection; further out it continues from the far end instead of
/// reflecting again ([a, b, c] with pads [3, 0] gives [a, c, b, a, b, c],
/// not [b, c, b, a, b, c]).
fn reflect_modulo_length(n: usize, begin: i64, end: i64) -> Option<AxisMap> {
    let (cut_begin, cut_end) = (begin.min(0).unsigned_abs(), end.min(0).unsigned_abs());
    let kept = (n as i64).checked_sub((cut_begin + cut_end) as i64)?;
    if kept < 1 {
        return None;
    }
    let (b, e) = (begin.max(0), end.max(0));
    Some(
        (0..b + kept + e)
            .map(|x| {
                let from = if x < b {
                    b - x
                } else if x < b + kept {
                    x - b
                } else {
                    kept - 1 - (x - b - kept) - 1
                };
                Some(cut_begin as usize + from.rem_euclid(kept) as usize)
            })
            .collect(),
    )
}

/// The reflect-padding properties (`REFLECTIONS`) of a Pad disagreement:
/// those whose algorithm gives exactly their output from the case's input.
pub fn pad_reflections(case: &PadCase, input: &Tensor, theirs: &[Tensor]) -> Vec<String> {
    let [theirs] = theirs else {
        return Vec::new();
    };
    if case.mode != "reflect" || input.shape() != case.shape.as_slice() {
        return Vec::new();
    }
    // (begin, end) per axis, each axis named at most once.
    let mut pads = vec![(0i64, 0i64); case.shape.len()];
    let mut named = vec![false; case.shape.len()];
    for (axis, b, e) in case.axis_pads() {
        if axis >= pads.len() || std::mem::replace(&mut named[axis], true) {
            return Vec::new();
        }
        pads[axis] = (b, e);
    }
    REFLECTIONS
        .iter()
        .filter(|(_, map)| {
            let maps: Option<Vec<AxisMap>> = case
                .shape
                .iter()
                .zip(&pads)
                .map(|(&n, &(b, e))| map(n, b, e))
                .collect();
            maps.and_then(|maps| gather(input, &maps))
                .is_some_and(|expected| {
                    compare::compare(&expected, theirs, &Policy::BitExact)
                        .is_ok_and(|m| m.mismatches == 0)
                })
        })
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The tensor whose element at (o_0, .., o_r) is `input`'s at (m_0[o_0],
/// .., m_r[o_r]), or zero (the element type's default) where a map gives
/// nothing. None past 2^24 elements (the diff's output limit, 2^27 bytes,
/// for 8-byte elements).
fn gather(input: &Tensor, maps: &[AxisMap]) -> Option<Tensor> {
    let shape: Vec<usize> = maps.iter().map(Vec::len).collect();
    let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    if len > 1 << 24 {
        return None;
    }
    let storage = map_storage!(input.storage(), a => gather_array(a, maps, &shape));
    Tensor::new(input.dtype(), storage).ok()
}

fn gather_array<T: Clone + Default>(
    a: &ndarray::ArrayD<T>,
    maps: &[AxisMap],
    shape: &[usize],
) -> ndarray::ArrayD<T> {
    ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(shape), |o| {
        let at: Option<Vec<usize>> = maps.iter().enumerate().map(|(k, m)| m[o[k]]).collect();
        at.map_or_else(T::default, |at| a[ndarray::IxDyn(&at)].clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_conformance::DataType;

    /// A reflect Pad case over `shape` with `pads` (begin pads, then end).
    fn reflect(shape: &[usize], pads: &[i64]) -> PadCase {
        PadCase {
            version: 21,
            dtype: DataType::Int32,
            shape: shape.to_vec(),
            pads: pads.to_vec(),
            axes: None,
            mode: "reflect",
            value: None,
        }
    }

    /// The reflect properties `theirs` (of `shape`) has for `case` over the
    /// input 1, 2, 3, ...
    fn seen(case: &PadCase, shape: &[usize], theirs: &[i32]) -> Vec<String> {
        let n: usize = case.shape.iter().product();
        let input = Tensor::from_vec(&case.shape, (1..=n as i32).collect());
        pad_reflections(case, &input, &[Tensor::from_vec(shape, theirs.to_vec())])
    }

    #[test]
    fn a_reflection_from_the_unsigned_pad_is_seen_and_nothing_near_it() {
        let unsigned = vec!["reflect_from_unsigned_pad".to_string()];
        // [a, b, c, d] with pads [-1, 0]: the kept elements reversed.
        let c = reflect(&[4], &[-1, 0]);
        assert_eq!(seen(&c, &[3], &[4, 3, 2]), unsigned);
        assert!(!seen(&c, &[3], &[2, 3, 4]).contains(&unsigned[0]));
        assert!(seen(&c, &[3], &[4, 3, 3]).is_empty());
        // Rows of a 2-D input reversed where axis 0 loses one, the other
        // axis as it is.
        let c = reflect(&[4, 2], &[-1, 0, 0, 0]);
        assert_eq!(seen(&c, &[3, 2], &[7, 8, 5, 6, 3, 4]), unsigned);
        assert!(seen(&c, &[3, 2], &[8, 7, 6, 5, 4, 3]).is_empty());
        // An axis of length 1 comes back as it is, whatever its pads.
        assert_eq!(seen(&reflect(&[1], &[0, 1]), &[1], &[1]), unsigned);
        assert!(!seen(&reflect(&[1], &[0, 1]), &[2], &[1, 1]).contains(&unsigned[0]));
        // With pads of 0 or more it is the spec's reflection, the wrong
        // values of another runtime are not it.
        let c = reflect(&[2], &[2, 1]);
        assert!(seen(&c, &[5], &[1, 2, 1, 2, 1]).contains(&unsigned[0]));
        assert!(!seen(&c, &[5], &[0, 2, 1, 2, 1]).contains(&unsigned[0]));
        // Only reflect is read this way.
        let edge = PadCase {
            mode: "edge",
            ..reflect(&[4], &[-1, 0])
        };
        assert!(seen(&edge, &[3], &[4, 3, 2]).is_empty());
    }

    #[test]
    fn a_reflection_into_a_zeroed_output_is_seen_and_nothing_near_it() {
        let zeroed = vec!["reflect_into_zeroed_output".to_string()];
        // [a, b] with pads [2, 1]: zero where the mirror image is past the
        // input, the end pad from the begin side.
        let c = reflect(&[2], &[2, 1]);
        assert_eq!(seen(&c, &[5], &[0, 2, 1, 2, 1]), zeroed);
        assert!(seen(&c, &[5], &[0, 2, 1, 2, 2]).is_empty());
        assert!(seen(&c, &[5], &[9, 2, 1, 2, 1]).is_empty());
        // The end pad reading a begin pad that is still zero: [a, b] with
        // pads [2, 3] gives [0, b, a, b, a, b, 0].
        let c = reflect(&[2], &[2, 3]);
        assert_eq!(seen(&c, &[7], &[0, 2, 1, 2, 1, 2, 0]), zeroed);
        // Two axes: an element is zero where either axis reads nothing.
        let c = reflect(&[1, 2], &[0, 2, 0, 0]);
        assert_eq!(seen(&c, &[1, 4], &[0, 2, 1, 2]), zeroed);
        // Cropping has no such output.
        assert!(!seen(&reflect(&[4], &[-1, 0]), &[3], &[2, 3, 4]).contains(&zeroed[0]));
    }

    #[test]
    fn a_reflection_modulo_the_length_is_seen_and_nothing_near_it() {
        let modulo = "reflect_modulo_length".to_string();
        // [a, b, c] with pads [3, 0]: the far end after one reflection.
        let c = reflect(&[3], &[3, 0]);
        assert_eq!(seen(&c, &[6], &[1, 3, 2, 1, 2, 3]), vec![modulo.clone()]);
        assert!(!seen(&c, &[6], &[2, 3, 2, 1, 2, 3]).contains(&modulo));
        assert!(seen(&c, &[6], &[1, 3, 2, 1, 2, 2]).is_empty());
        // At the end: [a, b, c] with pads [0, 3] gives [a, b, c, b, a, c].
        let c = reflect(&[3], &[0, 3]);
        assert_eq!(seen(&c, &[6], &[1, 2, 3, 2, 1, 3]), vec![modulo.clone()]);
        // Cropping first: [a, b, c, d] with pads [-1, 3] reflects [b, c, d].
        let c = reflect(&[4], &[-1, 3]);
        assert!(seen(&c, &[6], &[2, 3, 4, 3, 2, 4]).contains(&modulo));
        assert!(seen(&c, &[6], &[2, 3, 4, 3, 2, 3]).is_empty());
        // Within the kept length it is the spec's reflection.
        let c = reflect(&[3, 2], &[1, 0, 1, 1]);
        let spec = [3, 4, 3, 1, 2, 1, 3, 4, 3, 5, 6, 5, 3, 4, 3];
        assert!(seen(&c, &[5, 3], &spec).contains(&modulo));
    }
}
