//! im2col: the input values each output position multiplies, one row per
//! (input channel, kernel tap).

use super::*;

/// Fills `col` (kdim rows x (j1 - j0) columns) with the input values each
/// output position j0..j1 multiplies with each kernel tap, zero where the
/// tap falls in the padding.
pub(super) fn im2col<T: Real>(
    g: &Geometry,
    x: &[T],
    cg: usize,
    j0: usize,
    j1: usize,
    col: &mut [T],
) {
    let width = j1 - j0;
    let mut row_buf = vec![T::ZERO; width];
    im2col_rows(g, x, cg, j0, j1, &mut row_buf, &mut |row, values| {
        col[row * width..(row + 1) * width].copy_from_slice(values);
    });
}

/// im2col one row at a time: each row (input channel and kernel tap) is
/// built in `row_buf` (at least j1 - j0 long) and handed to `sink` with its
/// row number, so the caller can store it in whatever layout its GEMM wants.
pub(super) fn im2col_rows<T: Real>(
    g: &Geometry,
    x: &[T],
    cg: usize,
    j0: usize,
    j1: usize,
    row_buf: &mut [T],
    sink: &mut dyn FnMut(usize, &[T]),
) {
    let rank = g.in_spatial.len();
    let width = j1 - j0;
    // 1-D and 2-D share the 2-D code with a unit leading axis.
    let (ih, iw, kh, kw, sh, sw, dh, dw, ph, pw, ow) = match rank {
        1 => (
            1,
            g.in_spatial[0],
            1,
            g.kernel[0],
            1,
            g.strides[0],
            1,
            g.dilations[0],
            0,
            g.pads_begin[0],
            g.out_spatial[0],
        ),
        2 => (
            g.in_spatial[0],
            g.in_spatial[1],
            g.kernel[0],
            g.kernel[1],
            g.strides[0],
            g.strides[1],
            g.dilations[0],
            g.dilations[1],
            g.pads_begin[0],
            g.pads_begin[1],
            g.out_spatial[1],
        ),
        _ => return im2col_nd(g, x, cg, j0, j1, row_buf, sink),
    };
    let plane = ih * iw;
    let mut row = 0;
    for c in 0..cg {
        let xc = &x[c * plane..(c + 1) * plane];
        for ky in 0..kh {
            for kx in 0..kw {
                let dst = &mut row_buf[..width];
                let off_x = (kx * dw) as isize - pw as isize;
                let (lo, hi) = inside_columns(off_x, iw, sw, ow);
                let mut j = j0;
                while j < j1 {
                    let (oy, ox0) = (j / ow, j % ow);
                    let ox1 = ow.min(ox0 + (j1 - j));
                    let d = &mut dst[j - j0..j - j0 + (ox1 - ox0)];
                    let iy = (oy * sh + ky * dh) as isize - ph as isize;
                    if iy < 0 || iy >= ih as isize {
                        d.fill(T::ZERO);
                    } else {
                        let src = &xc[iy as usize * iw..(iy as usize + 1) * iw];
                        let (a, b) = (
                            lo.clamp(ox0, ox1),
                            hi.clamp(ox0, ox1).max(lo.clamp(ox0, ox1)),
                        );
                        d[..a - ox0].fill(T::ZERO);
                        d[b - ox0..].fill(T::ZERO);
                        if a == b {
                            j += ox1 - ox0;
                            continue;
                        }
                        let start = (a as isize * sw as isize + off_x) as usize;
                        let seg = &mut d[a - ox0..b - ox0];
                        if sw == 1 {
                            seg.copy_from_slice(&src[start..start + seg.len()]);
                        } else {
                            // An iterator, not indexing: no bounds check per
                            // element (inside_columns keeps every read in the row).
                            for (v, s) in seg.iter_mut().zip(src[start..].iter().step_by(sw)) {
                                *v = *s;
                            }
                        }
                    }
                    j += ox1 - ox0;
                }
                sink(row, &row_buf[..width]);
                row += 1;
            }
        }
    }
}

/// The output columns `lo..hi` (of `ow`) whose input column
/// `ox * sw + off_x` falls inside a row of `iw` values; the others read
/// padding.
pub(super) fn inside_columns(off_x: isize, iw: usize, sw: usize, ow: usize) -> (usize, usize) {
    let lo = if off_x >= 0 {
        0
    } else {
        ((-off_x) as usize).div_ceil(sw)
    };
    let hi = if (iw as isize - off_x) <= 0 {
        0
    } else {
        ((iw as isize - off_x - 1) as usize) / sw + 1
    };
    (lo.min(ow), hi.min(ow))
}

/// im2col for any spatial rank (3-D and beyond), one element at a time.
pub(super) fn im2col_nd<T: Real>(
    g: &Geometry,
    x: &[T],
    cg: usize,
    j0: usize,
    j1: usize,
    row_buf: &mut [T],
    sink: &mut dyn FnMut(usize, &[T]),
) {
    let rank = g.in_spatial.len();
    let width = j1 - j0;
    let in_size = g.in_size();
    let mut in_strides = vec![1usize; rank];
    for a in (0..rank - 1).rev() {
        in_strides[a] = in_strides[a + 1] * g.in_spatial[a + 1];
    }
    let ks = g.kernel_size();
    let mut tap = vec![0usize; rank];
    let mut out_idx = vec![0usize; rank];
    for c in 0..cg {
        for k in 0..ks {
            let mut rem = k;
            for a in (0..rank).rev() {
                tap[a] = rem % g.kernel[a];
                rem /= g.kernel[a];
            }
            let row = c * ks + k;
            let dst = &mut row_buf[..width];
            let mut rem = j0;
            for a in (0..rank).rev() {
                out_idx[a] = rem % g.out_spatial[a];
                rem /= g.out_spatial[a];
            }
            for v in dst.iter_mut() {
                let mut off = 0usize;
                let mut inside = true;
                for a in 0..rank {
                    let p = (out_idx[a] * g.strides[a] + tap[a] * g.dilations[a]) as isize
                        - g.pads_begin[a] as isize;
                    if p < 0 || p >= g.in_spatial[a] as isize {
                        inside = false;
                        break;
                    }
                    off += p as usize * in_strides[a];
                }
                *v = if inside {
                    x[c * in_size + off]
                } else {
                    T::ZERO
                };
                for a in (0..rank).rev() {
                    out_idx[a] += 1;
                    if out_idx[a] < g.out_spatial[a] {
                        break;
                    }
                    out_idx[a] = 0;
                }
            }
            sink(row, &row_buf[..width]);
        }
    }
}
