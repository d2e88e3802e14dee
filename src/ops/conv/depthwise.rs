//! Depthwise 2-D convolution: one input channel per group.

use super::im2col::inside_columns;
use super::*;
use crate::ops::sgemm::Isa;

/// Depthwise 2-D (one input channel per group, a few outputs per group):
/// per kernel tap, a vectorizable multiply-add over the valid output span.
pub(super) fn depthwise_2d<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    y: &mut [T],
    scratch_bytes: usize,
    isa: Isa,
) {
    #[cfg(target_arch = "x86_64")]
    let wide = isa == Isa::Avx512;
    // Elsewhere there are no AVX-512 kernels to choose.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    // f32 with unit strides: a register-blocked kernel over zero-padded rows.
    #[cfg(target_arch = "x86_64")]
    let rows = wide
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && g.strides == [1, 1]
        && padded_rows_len(g).is_some_and(|n| n.saturating_mul(4) <= scratch_bytes);
    let os = g.out_spatial[0] * g.out_spatial[1];
    y.par_chunks_mut(os).enumerate().for_each(|(plane, out)| {
        #[cfg(target_arch = "x86_64")]
        if rows {
            // SAFETY: T is f32 (checked above) and the CPU has AVX-512F.
            unsafe {
                let xf = std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len());
                let wf = std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len());
                let of = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len());
                depthwise_plane_rows(g, xf, wf, plane, of);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU has the features the clone is compiled for.
            unsafe { depthwise_plane_avx512(g, x, w, plane, out) };
            return;
        }
        depthwise_plane(g, x, w, plane, out);
    });
}

/// Padded row width of the depthwise row kernel: every load of 16 lanes
/// stays inside it. Dilation and padding make it large, not the input.
pub(super) fn padded_row_width(g: &Geometry) -> usize {
    let (ow, kw, dw) = (g.out_spatial[1], g.kernel[1], g.dilations[1]);
    (ow.div_ceil(16) * 16).saturating_add((kw - 1).saturating_mul(dw))
}

/// Elements of the depthwise row kernel's padded copy of one plane.
pub(super) fn padded_rows_len(g: &Geometry) -> Option<usize> {
    g.in_spatial[0].checked_mul(padded_row_width(g))
}

/// One depthwise plane, f32, unit strides: the input plane is copied into
/// zero-padded rows, then each block of 16 outputs accumulates every tap in
/// one register and is stored once (on top of the bias already in `out`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_plane_rows(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    plane: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let mg = g.out_channels / g.group;
    let (n, m) = (plane / g.out_channels, plane % g.out_channels);
    let c = m / mg;
    let xc = &x[(n * g.in_channels + c) * ih * iw..(n * g.in_channels + c + 1) * ih * iw];
    let wm = &w[m * kh * kw..(m + 1) * kh * kw];
    let pwid = padded_row_width(g);
    thread_local! {
        static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut padded = PADDED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    padded.clear();
    padded.resize(padded_rows_len(g).unwrap_or(0), 0.0);
    for r in 0..ih {
        // Output column ox reads input column ox + kx * dw - pw.
        let row = &mut padded[r * pwid..(r + 1) * pwid];
        let src = &xc[r * iw..(r + 1) * iw];
        let (from, to) = (pw, (pw + iw).min(pwid));
        if from < to {
            row[from..to].copy_from_slice(&src[..to - from]);
        }
    }
    let tail = ow % 16;
    let tail_mask: __mmask16 = if tail == 0 {
        0xFFFF
    } else {
        ((1u32 << tail) - 1) as u16
    };
    // Four blocks of 16 outputs at a time: four independent FMA chains hide
    // the FMA latency that a single accumulator would wait on.
    const B: usize = 4;
    let blocks = ow.div_ceil(16);
    let mask_of = |b: usize| -> __mmask16 {
        if (b + 1) * 16 <= ow {
            0xFFFF
        } else {
            tail_mask
        }
    };
    for oy in 0..oh {
        let orow = out.as_mut_ptr().add(oy * ow);
        let mut b0 = 0;
        while b0 < blocks {
            let nb = B.min(blocks - b0);
            let mut acc = [_mm512_setzero_ps(); B];
            for (i, a) in acc.iter_mut().enumerate().take(nb) {
                *a = _mm512_maskz_loadu_ps(mask_of(b0 + i), orow.add((b0 + i) * 16));
            }
            for ky in 0..kh {
                let iy = (oy + ky * dh) as isize - ph as isize;
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let prow = padded.as_ptr().add(iy as usize * pwid + b0 * 16);
                for kx in 0..kw {
                    let wv = _mm512_set1_ps(*wm.get_unchecked(ky * kw + kx));
                    let p = prow.add(kx * dw);
                    for (i, a) in acc.iter_mut().enumerate().take(nb) {
                        *a = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p.add(i * 16)), *a);
                    }
                }
            }
            for (i, a) in acc.iter().enumerate().take(nb) {
                _mm512_mask_storeu_ps(orow.add((b0 + i) * 16), mask_of(b0 + i), *a);
            }
            b0 += nb;
        }
    }
    PADDED.with(|p| *p.borrow_mut() = padded);
}

/// `depthwise_plane` compiled for AVX-512, so its loops vectorize 16 lanes
/// wide (a closure would not inherit the target feature, hence a function).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_plane_avx512<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    plane: usize,
    out: &mut [T],
) {
    depthwise_plane(g, x, w, plane, out);
}

/// One output plane of a depthwise convolution: per kernel tap, a
/// multiply-add over the span of output columns whose input is inside.
#[inline(always)]
pub(super) fn depthwise_plane<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    plane: usize,
    out: &mut [T],
) {
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let mg = g.out_channels / g.group;
    let (n, m) = (plane / g.out_channels, plane % g.out_channels);
    let c = m / mg;
    let xc = &x[(n * g.in_channels + c) * ih * iw..(n * g.in_channels + c + 1) * ih * iw];
    let wm = &w[m * kh * kw..(m + 1) * kh * kw];
    for ky in 0..kh {
        for kx in 0..kw {
            let wv = wm[ky * kw + kx];
            let off_x = (kx * dw) as isize - pw as isize;
            let (lo, hi) = inside_columns(off_x, iw, sw, ow);
            if lo >= hi {
                continue;
            }
            for oy in 0..oh {
                let iy = (oy * sh + ky * dh) as isize - ph as isize;
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let src = &xc[iy as usize * iw..(iy as usize + 1) * iw];
                let dst = &mut out[oy * ow + lo..oy * ow + hi];
                let start = (lo as isize * sw as isize + off_x) as usize;
                if sw == 1 {
                    for (d, s) in dst.iter_mut().zip(&src[start..start + (hi - lo)]) {
                        *d += wv * *s;
                    }
                } else {
                    for (i, d) in dst.iter_mut().enumerate() {
                        *d += wv * src[start + i * sw];
                    }
                }
            }
        }
    }
}
