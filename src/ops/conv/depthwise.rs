//! Depthwise 2-D convolution: one input channel per group.
//!
//! Memory-bound (nine multiply-adds per output for a 3x3 kernel), so the
//! kernels touch each output element once, from registers that start as
//! the bias, and the AVX2 kernel reads the input in place instead of
//! copying it into padded rows first.

use super::im2col::inside_columns;
use super::*;
use crate::ops::sgemm::Isa;
use std::mem::MaybeUninit;

/// Which depthwise kernel runs: chosen once per call, not per plane.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// AVX-512, f32, unit strides: register-blocked over zero-padded rows.
    #[cfg(target_arch = "x86_64")]
    Rows512,
    /// `depthwise_plane` compiled for AVX-512.
    #[cfg(target_arch = "x86_64")]
    Plain512,
    /// AVX2 with FMA, f32, unit strides: register-blocked, straight from
    /// the input.
    #[cfg(target_arch = "x86_64")]
    Rows256,
    /// `depthwise_plane` compiled for AVX2 with FMA.
    #[cfg(target_arch = "x86_64")]
    Plain256,
    Plain,
}

/// Depthwise 2-D (one input channel per group, a few outputs per group).
/// `y` is the whole output, uninitialized: every kernel writes each element
/// of its plane, starting from the plane's bias, so the output is written
/// once instead of being filled with the bias first and then added to.
pub(super) fn depthwise_2d<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [MaybeUninit<T>],
    scratch_bytes: usize,
    isa: Isa,
) {
    let f32 = std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>();
    let unit = g.strides == [1, 1];
    #[cfg(target_arch = "x86_64")]
    let kernel = match isa {
        Isa::Avx512
            if f32
                && unit
                && padded_rows_len(g).is_some_and(|n| n.saturating_mul(4) <= scratch_bytes) =>
        {
            Kernel::Rows512
        }
        Isa::Avx512 => Kernel::Plain512,
        Isa::Avx2 if f32 && unit && lanes_fit_i32(g) => Kernel::Rows256,
        Isa::Avx2 => Kernel::Plain256,
        Isa::Portable => Kernel::Plain,
    };
    // Elsewhere there are only the plain loops.
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = {
        let _ = (isa, f32, unit, scratch_bytes);
        Kernel::Plain
    };
    let os = g.out_spatial[0] * g.out_spatial[1];
    let yp = SendPtr(y.as_mut_ptr());
    crate::ops::parallel::share(y.len() / os.max(1), &|plane| {
        // SAFETY: task `plane` alone writes plane `plane` of `y`, which is
        // alive until `share` returns.
        let out = unsafe { std::slice::from_raw_parts_mut(yp.get().add(plane * os), os) };
        let b = bias.map_or(T::ZERO, |b| b[plane % g.out_channels]);
        #[cfg(target_arch = "x86_64")]
        if matches!(kernel, Kernel::Rows512 | Kernel::Rows256) {
            // SAFETY: T is f32 (checked when the kernel was chosen), and the
            // CPU has the features the kernel is compiled for (`Isa`).
            unsafe {
                let xf = std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len());
                let wf = std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len());
                let bf = *(&b as *const T as *const f32);
                let of = std::slice::from_raw_parts_mut(
                    out.as_mut_ptr() as *mut MaybeUninit<f32>,
                    out.len(),
                );
                if kernel == Kernel::Rows512 {
                    depthwise_plane_rows(g, xf, wf, bf, plane, of);
                } else {
                    depthwise_plane_fma(g, xf, wf, bf, plane, of);
                }
            }
            return;
        }
        // The plain loops add onto their output: it starts as the bias. One
        // plane is small enough to be in cache when they run.
        let out = fill(out, b);
        match kernel {
            // SAFETY: the CPU has the features the clones are compiled for.
            #[cfg(target_arch = "x86_64")]
            Kernel::Plain512 => unsafe { depthwise_plane_avx512(g, x, w, plane, out) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Plain256 => unsafe { depthwise_plane_avx2(g, x, w, plane, out) },
            _ => depthwise_plane(g, x, w, plane, out),
        }
    });
}

/// Writes `v` to every element and returns the now initialized slice.
fn fill<T: Copy>(out: &mut [MaybeUninit<T>], v: T) -> &mut [T] {
    for o in out.iter_mut() {
        o.write(v);
    }
    // SAFETY: every element was written above; MaybeUninit<T> has T's layout.
    unsafe { &mut *(out as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// The input plane and the kernel output plane `plane` (image n, output
/// channel m, in output order) reads: the one input channel of m's group,
/// and m's kernel taps.
fn plane_operands<'a, T>(g: &Geometry, x: &'a [T], w: &'a [T], plane: usize) -> (&'a [T], &'a [T]) {
    let in_plane = g.in_spatial[0] * g.in_spatial[1];
    let taps = g.kernel[0] * g.kernel[1];
    let mg = g.out_channels / g.group;
    let (n, m) = (plane / g.out_channels, plane % g.out_channels);
    let c = n * g.in_channels + m / mg;
    (
        &x[c * in_plane..(c + 1) * in_plane],
        &w[m * taps..(m + 1) * taps],
    )
}

/// Padded row width of the depthwise row kernel: every load of 16 lanes
/// stays inside it. Dilation and padding make it large, not the input.
/// Rows for [`rows3`] are whole vectors, one more than the output's, so
/// that they start on a line when the first does and each block's two
/// aligned loads lie in the row.
pub(super) fn padded_row_width(g: &Geometry) -> usize {
    let (ow, kw, dw) = (g.out_spatial[1], g.kernel[1], g.dilations[1]);
    if takes_rows3(g) {
        return (ow.div_ceil(16) + 1) * 16;
    }
    (ow.div_ceil(16) * 16).saturating_add((kw - 1).saturating_mul(dw))
}

/// Elements of the depthwise row kernel's padded copy of one plane, and a
/// vector of slack to start the rows on a 64-byte line.
pub(super) fn padded_rows_len(g: &Geometry) -> Option<usize> {
    g.in_spatial[0]
        .checked_mul(padded_row_width(g))?
        .checked_add(16)
}

/// Whether the AVX-512 row kernel takes [`rows3`]: kernels three wide
/// without column dilation (the common 3x3 depthwise layer).
fn takes_rows3(g: &Geometry) -> bool {
    g.kernel[1] == 3 && g.dilations[1] == 1
}

/// One depthwise plane, f32, unit strides: the input plane is copied into
/// zero-padded rows, then each block of 16 outputs starts as the bias,
/// accumulates every tap in one register and is stored once; every element
/// of `out` is written.
///
/// Numerical contract: each output is its bias plus its taps in row-major
/// tap order, each added with one FMA. Taps in the padding multiply the
/// zeros of the copy, which differs from skipping them only for an
/// infinite or NaN weight (NaN instead of the finite sum) and for a -0 bias
/// (+0 instead).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_plane_rows(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    bias: f32,
    plane: usize,
    out: &mut [MaybeUninit<f32>],
) {
    use std::arch::x86_64::*;
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let (xc, wm) = plane_operands(g, x, w, plane);
    let pwid = padded_row_width(g);
    // The copy writes only the input's columns of each row, so the padding
    // columns keep the zeros of the first plane of the same row layout:
    // the buffer is zeroed when the layout changes, not per plane (zeroing
    // every plane took 7.5% of the kernel's time on C256 56x56).
    /// The rows, and the layout (input height and width, row width, left
    /// padding) their padding columns were zeroed for.
    type Rows = (Vec<f32>, (usize, usize, usize, usize));
    thread_local! {
        static PADDED: std::cell::RefCell<Rows> =
            const { std::cell::RefCell::new((Vec::new(), (0, 0, 0, 0))) };
    }
    let (mut padded, mut zeroed_for) = PADDED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let layout = (ih, iw, pwid, pw);
    if zeroed_for != layout {
        padded.clear();
        padded.resize(padded_rows_len(g).unwrap_or(0), 0.0);
        zeroed_for = layout;
    }
    // The rows start on a line (the vector is not moved between calls of
    // one layout, so the offset stays the one its padding was zeroed for).
    let start = padded.as_ptr().align_offset(64).min(16);
    for r in 0..ih {
        // Output column ox reads input column ox + kx * dw - pw.
        let row = &mut padded[start + r * pwid..start + (r + 1) * pwid];
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
    // The next plane's input asked for while this one computes from L1:
    // the copy above otherwise waits on its misses (34% of a one-thread
    // C256 56x56 call's samples in `memcpy`, 11% with this).
    let ask_next = NextPlane::new(x, xc, ih * iw, oh);
    let ask_next = |oy0: usize, oy1: usize| ask_next.ask(oy0, oy1);
    let rows = padded.as_ptr().add(start);
    if takes_rows3(g) {
        let plane = Rows3 {
            rows,
            pwid,
            ih,
            w: wm.as_ptr(),
            kh,
            dh,
            ph,
            bias,
        };
        for oy0 in (0..oh).step_by(ROWS3) {
            ask_next(oy0, (oy0 + ROWS3).min(oh));
            let count = ROWS3.min(oh - oy0);
            let orow = out.as_mut_ptr().add(oy0 * ow) as *mut f32;
            let mut b0 = 0;
            while b0 < blocks {
                let store = |b: usize| (orow.add(b * 16), mask_of(b));
                match blocks - b0 {
                    1 => rows3::<1>(&plane, oy0, count, b0, ow, store),
                    2 => rows3::<2>(&plane, oy0, count, b0, ow, store),
                    3 => rows3::<3>(&plane, oy0, count, b0, ow, store),
                    _ => rows3::<4>(&plane, oy0, count, b0, ow, store),
                }
                b0 += 4;
            }
        }
        PADDED.with(|p| *p.borrow_mut() = (padded, zeroed_for));
        return;
    }
    for oy in 0..oh {
        ask_next(oy, oy + 1);
        let orow = out.as_mut_ptr().add(oy * ow) as *mut f32;
        let mut b0 = 0;
        while b0 < blocks {
            let nb = B.min(blocks - b0);
            let mut acc = [_mm512_set1_ps(bias); B];
            for ky in 0..kh {
                let iy = (oy + ky * dh) as isize - ph as isize;
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let prow = rows.add(iy as usize * pwid + b0 * 16);
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
    PADDED.with(|p| *p.borrow_mut() = (padded, zeroed_for));
}

/// Output rows [`rows3`] holds in registers at once.
#[cfg(target_arch = "x86_64")]
const ROWS3: usize = 4;

/// One plane's operands for [`rows3`]: the padded rows (64-byte aligned,
/// `pwid` apart, `ih` of them), the kernel's `kh` x 3 taps, its row
/// dilation and top padding, and the bias.
#[cfg(target_arch = "x86_64")]
struct Rows3 {
    rows: *const f32,
    pwid: usize,
    ih: usize,
    w: *const f32,
    kh: usize,
    dh: usize,
    ph: usize,
    bias: f32,
}

/// [`depthwise_plane_rows`]' loop for kernels three wide without column
/// dilation: `count` (up to [`ROWS3`]) output rows from `oy0` times `B`
/// blocks of 16 outputs from block `b0`, all in registers. Each padded
/// input row the outputs read is loaded once, as B + 1 aligned vectors,
/// for every output row and tap that reads it; the two shifted columns
/// come from `valignd` in the register. One row of blocks at a time, the
/// loop had a load per multiply-add, every one straddling two lines (rows
/// of 66 floats). `store(b)` gives block `b`'s address in the first output
/// row and its lane mask.
///
/// Numerical contract: as [`depthwise_plane_rows`]'s, bit for bit. An
/// output row meets its input rows in increasing order, so its taps are
/// added in row-major order, each with one FMA; rows outside the input
/// are skipped, padding columns multiply the copy's zeros.
///
/// # Safety
/// AVX-512F; `p.rows` holds `p.ih` rows of `p.pwid` (at least (b0 + B + 1)
/// x 16) and `p.w` `p.kh` x 3 taps; the output rows from `oy0` hold `ow`
/// each, and `store` gives in-bounds addresses for blocks below `b0 + B`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn rows3<const B: usize>(
    p: &Rows3,
    oy0: usize,
    count: usize,
    b0: usize,
    ow: usize,
    store: impl Fn(usize) -> (*mut f32, std::arch::x86_64::__mmask16),
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_set1_ps(p.bias); B]; ROWS3];
    // The input rows any of the output rows reads, top to bottom.
    let span = (ROWS3 - 1) + (p.kh - 1) * p.dh + 1;
    for t in 0..span {
        let iy = (oy0 + t) as isize - p.ph as isize;
        if iy < 0 || iy >= p.ih as isize {
            continue;
        }
        let src = p.rows.add(iy as usize * p.pwid + b0 * 16);
        let a: [__m512i; 5] = std::array::from_fn(|i| {
            if i <= B {
                _mm512_load_si512(src.add(16 * i) as *const __m512i)
            } else {
                _mm512_setzero_si512()
            }
        });
        let cols: [[__m512; B]; 3] = [
            std::array::from_fn(|i| _mm512_castsi512_ps(a[i])),
            std::array::from_fn(|i| _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(a[i + 1], a[i]))),
            std::array::from_fn(|i| _mm512_castsi512_ps(_mm512_alignr_epi32::<2>(a[i + 1], a[i]))),
        ];
        for (j, row) in acc.iter_mut().enumerate().take(count) {
            // Output row oy0 + j reads this row with tap row (t - j) / dh.
            let Some(d) = t.checked_sub(j) else { break };
            if d % p.dh != 0 || d / p.dh >= p.kh {
                continue;
            }
            let ky = d / p.dh;
            for (kx, col) in cols.iter().enumerate() {
                let wv = _mm512_set1_ps(*p.w.add(ky * 3 + kx));
                for (a, v) in row.iter_mut().zip(col) {
                    *a = _mm512_fmadd_ps(wv, *v, *a);
                }
            }
        }
    }
    for (j, row) in acc.iter().enumerate().take(count) {
        for (i, a) in row.iter().enumerate() {
            let (at, mask) = store(b0 + i);
            _mm512_mask_storeu_ps(at.add(j * ow), mask, *a);
        }
    }
}

/// True when every input column the AVX2 kernel computes (output column
/// plus tap offset minus padding, for a whole block of 8) fits in an i32,
/// the width of its lane masks. Only absurd padding or dilation fails.
#[cfg(target_arch = "x86_64")]
/// The input plane after the one a kernel computes (the next channel,
/// which this thread is likely to take next: `share` hands out runs of
/// consecutive planes), asked for a share of its lines with each share of
/// the output rows.
#[cfg(target_arch = "x86_64")]
struct NextPlane {
    next: *const f32,
    lines: usize,
    rows: usize,
}

#[cfg(target_arch = "x86_64")]
impl NextPlane {
    /// After plane `xc` of `x`, `len` elements a plane, over `rows` output
    /// rows.
    fn new(x: &[f32], xc: &[f32], len: usize, rows: usize) -> Self {
        let next = xc.as_ptr_range().end;
        let left = x.as_ptr_range().end as usize - next as usize;
        NextPlane {
            next,
            lines: left.min(len * 4) / 64,
            rows: rows.max(1),
        }
    }

    /// Asks for the lines that go with output rows `oy0..oy1`.
    #[inline(always)]
    fn ask(&self, oy0: usize, oy1: usize) {
        use std::arch::x86_64::*;
        for l in self.lines * oy0 / self.rows..self.lines * oy1 / self.rows {
            // A hint only: it never faults.
            // SAFETY: prefetching has no effect on memory and needs SSE,
            // which x86-64 always has.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((self.next as *const i8).wrapping_add(64 * l)) };
        }
    }
}

fn lanes_fit_i32(g: &Geometry) -> bool {
    let (iw, ow, kw, dw, pw) = (
        g.in_spatial[1],
        g.out_spatial[1],
        g.kernel[1],
        g.dilations[1],
        g.pads_begin[1],
    );
    (kw - 1)
        .checked_mul(dw)
        .and_then(|s| s.checked_add(pw))
        .and_then(|s| s.checked_add(ow))
        .and_then(|s| s.checked_add(iw))
        .and_then(|s| s.checked_add(8))
        .is_some_and(|s| s <= i32::MAX as usize)
}

/// One plane of `depthwise_plane_fma`: raw pointers and the geometry of
/// one input channel, one kernel and one output plane.
#[cfg(target_arch = "x86_64")]
struct Plane {
    x: *const f32,
    w: *const f32,
    out: *mut f32,
    bias: f32,
    iw: usize,
    ow: usize,
    kw: usize,
    dh: usize,
    dw: usize,
    ph: usize,
    pw: usize,
}

/// One depthwise plane, f32, unit strides, AVX2 with FMA. Outputs are
/// computed in blocks of 8 columns by up to 8 rows, one register per row,
/// so that up to eight independent FMA chains hide the FMA latency; each
/// block starts as the bias, takes every tap, and is stored once, so every
/// element of `out` is written exactly once. Loads come straight from the
/// input: blocks whose taps all fall inside the row use plain loads, the
/// few at the left and right borders (and the row's last, partial block)
/// masked loads, so no padded copy of the plane is made.
///
/// Numerical contract: each output is its bias plus its taps in row-major
/// tap order, each added with one FMA (one rounding per tap). Taps in the
/// padding are skipped, not multiplied by zero, so an infinite weight or a
/// -0 bias give what the direct sum gives.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn depthwise_plane_fma(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    bias: f32,
    plane: usize,
    out: &mut [MaybeUninit<f32>],
) {
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let (xc, wm) = plane_operands(g, x, w, plane);
    assert_eq!(out.len(), oh * ow);
    let p = Plane {
        x: xc.as_ptr(),
        w: wm.as_ptr(),
        out: out.as_mut_ptr() as *mut f32,
        bias,
        iw,
        ow,
        kw,
        dh,
        dw,
        ph,
        pw,
    };
    // The kernel rows that land inside the input for output row oy:
    // input row oy + ky * dh - ph must lie in 0..ih.
    let taps = |oy: usize| -> (usize, usize) {
        let lo = ph.saturating_sub(oy).div_ceil(dh).min(kh);
        let hi = (ih.saturating_add(ph))
            .saturating_sub(oy)
            .div_ceil(dh)
            .min(kh);
        (lo, hi.max(lo))
    };
    // Input columns a block reads beyond its own 8, to the right.
    let reach = (kw - 1) * dw;
    let blocks = ow.div_ceil(8);
    // The next plane's input, asked for as in `depthwise_plane_rows`: this
    // kernel reads its plane in place, rows several lines apart, which
    // the hardware's prefetchers do not foresee.
    let next = NextPlane::new(x, xc, ih * iw, oh);
    let mut oy = 0;
    while oy < oh {
        let rows = taps(oy);
        // The most rows (8, 4, 2 or 1) that share oy's kernel rows: those
        // are the same for all rows between two that agree.
        let r = [8, 4, 2]
            .into_iter()
            .find(|&r| oy + r <= oh && taps(oy + r - 1) == rows)
            .unwrap_or(1);
        next.ask(oy, oy + r);
        for b in 0..blocks {
            let col = b * 8;
            let edge = col < pw || col + 8 + reach > iw + pw || col + 8 > ow;
            match (r, edge) {
                (8, false) => block::<8, false>(&p, oy, col, rows),
                (8, true) => block::<8, true>(&p, oy, col, rows),
                (4, false) => block::<4, false>(&p, oy, col, rows),
                (4, true) => block::<4, true>(&p, oy, col, rows),
                (2, false) => block::<2, false>(&p, oy, col, rows),
                (2, true) => block::<2, true>(&p, oy, col, rows),
                (_, false) => block::<1, false>(&p, oy, col, rows),
                (_, true) => block::<1, true>(&p, oy, col, rows),
            }
        }
        oy += r;
    }
}

/// Outputs `col..col + 8` of rows `oy..oy + R` of `depthwise_plane_fma`,
/// over kernel rows `ky0..ky1` (inside the input for all R rows). `EDGE`:
/// some tap of the block reads outside its input row, or the block runs
/// past the output row; loads and stores are then masked to the lanes
/// inside, and skipped lanes keep their accumulator.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block<const R: usize, const EDGE: bool>(
    p: &Plane,
    oy: usize,
    col: usize,
    (ky0, ky1): (usize, usize),
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(p.bias); R];
    for ky in ky0..ky1 {
        // Input row of output row oy; row oy + r reads r rows further.
        let row = p.x.add((oy + ky * p.dh - p.ph) * p.iw);
        for kx in 0..p.kw {
            let wv = _mm256_broadcast_ss(&*p.w.add(ky * p.kw + kx));
            let from = (col + kx * p.dw) as isize - p.pw as isize;
            // Before the row when `from` < 0: only masked loads use it then.
            let src = row.wrapping_offset(from);
            if EDGE {
                let m = lanes_inside(from, p.iw);
                for (r, a) in acc.iter_mut().enumerate() {
                    let v = _mm256_maskload_ps(src.wrapping_add(r * p.iw), m);
                    *a = _mm256_blendv_ps(*a, _mm256_fmadd_ps(wv, v, *a), _mm256_castsi256_ps(m));
                }
            } else {
                for (r, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src.add(r * p.iw)), *a);
                }
            }
        }
    }
    let dst = p.out.add(oy * p.ow + col);
    if col + 8 <= p.ow {
        for (r, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(dst.add(r * p.ow), *a);
        }
    } else {
        let m = lanes_inside(0, p.ow - col);
        for (r, a) in acc.iter().enumerate() {
            _mm256_maskstore_ps(dst.add(r * p.ow), m, *a);
        }
    }
}

/// The mask of lanes j (of 8) with 0 <= from + j < len; `lanes_fit_i32`
/// makes the values fit in i32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn lanes_inside(from: isize, len: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let at = _mm256_add_epi32(
        _mm256_set1_epi32(from as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    _mm256_and_si256(
        _mm256_cmpgt_epi32(at, _mm256_set1_epi32(-1)),
        _mm256_cmpgt_epi32(_mm256_set1_epi32(len as i32), at),
    )
}

/// `depthwise_plane` compiled for AVX2 with FMA (8 lanes), for what the
/// register-blocked kernel does not take (strides, f64).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn depthwise_plane_avx2<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    plane: usize,
    out: &mut [T],
) {
    depthwise_plane(g, x, w, plane, out);
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
    let (xc, wm) = plane_operands(g, x, w, plane);
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
