//! A single-precision GEMM for Conv on x86-64, with micro-kernels for
//! AVX-512F and for AVX2 with FMA; other machines (and f64) use the `gemm`
//! crate.
//!
//! `C[m x n] += A[m x k] * B[k x n]`, all row-major with explicit row strides,
//! or `C = bias + A * B` with one bias per row of C ([`Onto`]).
//! Numerical contract: f32 products accumulated in f32 with fused
//! multiply-add, in blocks of `KC` along k; NaN and infinities propagate.
//! Both kernels run the same sequence of operations per element of C (zero,
//! one FMA per k in order, then one add into C, or for the first block onto
//! the row's bias, per block), so they give bit-identical results.
//!
//! Structure: B is packed into panels of `NR` = 48 columns, A into panels of
//! `MR` = 8 rows, one layout for both instruction sets (so im2col can write
//! packed B without knowing which kernel reads it). The AVX-512 kernel keeps
//! the 8 x 48 block of C in 24 of its 32 registers while it walks k; AVX2
//! has 16 registers, so its kernel walks the block as four 4 x 24 sub-tiles
//! (12 accumulators, 3 B vectors, 1 broadcast). 8 divides the channel counts
//! convolutions use, so no panel is half empty.

const MR: usize = 8;
const NR: usize = 48;
/// 128 rows of k keep a 48-column B panel (24 KiB) in a 32 KiB L1 data
/// cache with the A panel, while the kernel reuses it across row panels;
/// at 256 the AVX2 kernel measured 10-20% slower (AVX-512 was not measured
/// again: this machine has none).
const KC: usize = 128;

/// The instruction sets our f32 kernels are written for, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    /// AVX2 with FMA (every x86-64 CPU since 2013-2015 has both).
    Avx2,
    /// Neither: the `gemm` crate and plain loops.
    Portable,
}

impl Isa {
    /// The best one this CPU supports.
    pub fn detect() -> Isa {
        [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|isa| isa.supported())
            .unwrap_or(Isa::Portable)
    }

    /// True when this CPU can run kernels written for `self`.
    pub fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
                Isa::Avx2 => {
                    std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma")
                }
                Isa::Portable => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Portable
        }
    }
}

/// What the product lands on.
#[derive(Clone, Copy, Debug)]
pub enum Onto<'a> {
    /// C's own values: `C += A * B`.
    C,
    /// One value per row of C, which is overwritten (and so need not be
    /// initialised): `C = bias + A * B`. Conv's bias lands this way: filling
    /// C with it first and adding the product later passed over C twice,
    /// a fifth of a 1x1 Conv's time (perf, N8 C64 56x56).
    RowBias(&'a [f32]),
}

impl Onto<'_> {
    /// The base of the first k block's tile at row `i0`: the rows' biases
    /// from there, or None for C's values.
    fn first_block(self, i0: usize) -> Option<*const f32> {
        match self {
            Onto::C => None,
            Onto::RowBias(b) => Some(b[i0..].as_ptr()),
        }
    }
}

/// `C += A * B` (or `C = bias + A * B`, see [`Onto`]) on the kernels for
/// `isa`; returns false (doing nothing) for `Isa::Portable`, which has none.
///
/// # Safety
/// The CPU must support `isa`; `a` must hold `m` rows of `k` values at
/// stride `lda`, `b` `k` rows of `n` values at stride `ldb`, `c` `m` rows of
/// `n` values at stride `ldc`, and `c` must not overlap `a` or `b`; a
/// `RowBias` holds `m` values.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_acc(
    onto: Onto,
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
) -> bool {
    debug_assert!(isa.supported());
    #[cfg(target_arch = "x86_64")]
    {
        if isa != Isa::Portable {
            imp::sgemm(onto, isa, m, n, k, a, lda, b, ldb, c, ldc);
            return true;
        }
    }
    let _ = (onto, isa, m, n, k, a, lda, b, ldb, c, ldc);
    false
}

/// Packs row panel `q` of A (rows q*MR.., columns k0..k0+kc) into `dst`,
/// k-major, rows past `m` zero.
///
/// # Safety
/// `a` must hold `m` rows of at least `k0 + kc` values at stride `lda`;
/// `dst` holds `kc * MR` values.
unsafe fn pack_a_panel(
    a: *const f32,
    lda: usize,
    m: usize,
    q: usize,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let h = MR.min(m - q * MR);
    for kk in 0..kc {
        for r in 0..MR {
            dst[kk * MR + r] = if r < h {
                *a.add((q * MR + r) * lda + k0 + kk)
            } else {
                0.0
            };
        }
    }
}

/// Pre-packed operands, for callers that produce B row by row (im2col) and
/// reuse A (Conv weights) across many calls.
///
/// Layouts, per block of `KC` rows of k starting at `k0` (the last block may
/// be shorter, `kc` rows): B's block starts at `k0 * n_panels * NR`, panel
/// `p` at `+ p * kc * NR`, row `kk` at `+ kk * NR` (NR values, zero-padded);
/// A's block starts at `k0 * m_panels * MR`, panel `q` at `+ q * kc * MR`,
/// element `(kk, r)` at `+ kk * MR + r`.
pub mod packed {
    use super::{Isa, Onto, KC, MR, NR};

    /// Column panels of a B with n columns.
    pub fn panels(n: usize) -> usize {
        n.div_ceil(NR)
    }

    /// Columns per panel.
    pub const PANEL: usize = NR;

    pub fn b_len(n: usize, k: usize) -> usize {
        n.div_ceil(NR) * NR * k
    }

    pub fn a_len(m: usize, k: usize) -> usize {
        m.div_ceil(MR) * MR * k
    }

    /// Stores row `row` (n values) of B into its packed place.
    pub fn put_b_row(pb: &mut [f32], n: usize, k: usize, row: usize, values: &[f32]) {
        assert!(pb.len() >= b_len(n, k) && row < k && values.len() >= n);
        // SAFETY: the buffer is large enough for (n, k) (asserted above).
        unsafe { put_b_row_raw(pb.as_mut_ptr(), n, k, row, values) }
    }

    /// `put_b_row` through a raw pointer, for threads filling disjoint rows
    /// of one buffer.
    ///
    /// # Safety
    /// `pb` must point to `b_len(n, k)` floats; no other thread may write
    /// the same row; `row < k`; `values` holds at least `n` values.
    pub unsafe fn put_b_row_raw(pb: *mut f32, n: usize, k: usize, row: usize, values: &[f32]) {
        let n_panels = n.div_ceil(NR);
        let k0 = row / KC * KC;
        let kc = KC.min(k - k0);
        let base = k0 * n_panels * NR + (row - k0) * NR;
        for p in 0..n_panels {
            let j0 = p * NR;
            let w = NR.min(n - j0);
            let at = pb.add(base + p * kc * NR);
            std::ptr::copy_nonoverlapping(values.as_ptr().add(j0), at, w);
            std::ptr::write_bytes(at.add(w), 0, NR - w);
        }
    }

    /// Packs A (m rows of k values at stride lda). Large A (Conv weights
    /// with many channels) is packed by several threads, one panel each.
    pub fn pack_a(a: &[f32], lda: usize, m: usize, k: usize) -> Vec<f32> {
        use rayon::prelude::*;
        let m_panels = m.div_ceil(MR);
        let mut pa = vec![0f32; a_len(m, k)];
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let block = &mut pa[k0 * m_panels * MR..(k0 + kc) * m_panels * MR];
            // Within a k block, panel q is the contiguous chunk q.
            assert!(a.len() >= (m - 1) * lda + k);
            // SAFETY: every row read (< m, columns < k) is inside `a` (asserted).
            let pack = |(q, dst): (usize, &mut [f32])| unsafe {
                super::pack_a_panel(a.as_ptr(), lda, m, q, k0, kc, dst)
            };
            if m * kc >= 1 << 15 {
                block.par_chunks_mut(kc * MR).enumerate().for_each(pack);
            } else {
                block.chunks_mut(kc * MR).enumerate().for_each(pack);
            }
            k0 += kc;
        }
        pa
    }

    /// Row panels of an A with m rows.
    pub fn row_panels(m: usize) -> usize {
        m.div_ceil(MR)
    }

    /// `C[row panels rows, column panels panels] += A * B` (or onto the
    /// rows' biases) from packed operands.
    ///
    /// # Safety
    /// The CPU must support `isa`, which is not `Isa::Portable`; `c` must
    /// hold `m` rows of `n` columns at stride `ldc`; `pa`/`pb` must be packed
    /// for (m, k) and (n, k); a `RowBias` holds `m` values.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sgemm(
        onto: Onto,
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        pa: &[f32],
        pb: &[f32],
        c: *mut f32,
        ldc: usize,
        panels: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) {
        debug_assert!(isa != Isa::Portable && isa.supported());
        #[cfg(target_arch = "x86_64")]
        super::imp::prepacked(onto, isa, m, n, k, pa, pb, c, ldc, panels, rows);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (onto, isa, m, n, k, pa, pb, c, ldc, panels, rows);
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{Isa, Onto, KC, MR, NR};
    use std::arch::x86_64::*;

    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sgemm(
        onto: Onto,
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        a: *const f32,
        lda: usize,
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        ldc: usize,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        if k == 0 {
            fill_rows(onto, c, ldc, 0..m, 0..n);
            return;
        }
        let n_panels = n.div_ceil(NR);
        let m_panels = m.div_ceil(MR);
        // Packing buffers are reused per thread: allocating them per call
        // costs page faults and TLB shootdowns when they are returned.
        thread_local! {
            static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
        }
        let (mut pa, mut pb) = SCRATCH.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        let (need_a, need_b) = (m_panels * MR * KC.min(k), n_panels * NR * KC.min(k));
        if pa.len() < need_a {
            pa.resize(need_a, 0.0);
        }
        if pb.len() < need_b {
            pb.resize(need_b, 0.0);
        }
        blocked(onto, isa, m, n, k, a, lda, b, ldb, c, ldc, &mut pa, &mut pb);
        SCRATCH.with(|cell| *cell.borrow_mut() = (pa, pb));
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn blocked(
        onto: Onto,
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        a: *const f32,
        lda: usize,
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        ldc: usize,
        pa: &mut [f32],
        pb: &mut [f32],
    ) {
        let n_panels = n.div_ceil(NR);
        let m_panels = m.div_ceil(MR);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            // Pack B[k0..k0+kc, :] into column panels of NR, zero-padded,
            // a row of B at a time: each row is then read once, front to
            // back. Panel by panel, the packing read every row's next 192
            // bytes in turn, kc streams a whole row apart, which the
            // hardware prefetchers do not follow (the copy then had 27% of
            // a one-thread 1x1 Conv's samples, 64 x 3136 per image; paired
            // runs of the two orders on a Zen 4 EPYC, medians of 8 and 12
            // pairs: 1.05 and 1.17x as fast on one thread, 1.09 and 1.12x
            // on two).
            for kk in 0..kc {
                let src = b.add((k0 + kk) * ldb);
                for p in 0..n_panels {
                    let j0 = p * NR;
                    let w = NR.min(n - j0);
                    let row = &mut pb[(p * kc + kk) * NR..(p * kc + kk + 1) * NR];
                    std::ptr::copy_nonoverlapping(src.add(j0), row.as_mut_ptr(), w);
                    row[w..].fill(0.0);
                }
            }
            // Pack A[:, k0..k0+kc] into row panels of MR, k-major, zero-padded.
            for p in 0..m_panels {
                super::pack_a_panel(
                    a,
                    lda,
                    m,
                    p,
                    k0,
                    kc,
                    &mut pa[p * MR * kc..(p + 1) * MR * kc],
                );
            }
            for pm in 0..m_panels {
                let i0 = pm * MR;
                let h = MR.min(m - i0);
                for pn in 0..n_panels {
                    let j0 = pn * NR;
                    let w = NR.min(n - j0);
                    tile(
                        isa,
                        kc,
                        pa.as_ptr().add(pm * MR * kc),
                        pb.as_ptr().add(pn * NR * kc),
                        c.add(i0 * ldc + j0),
                        ldc,
                        h,
                        w,
                        if k0 == 0 { onto.first_block(i0) } else { None },
                    );
                }
            }
            k0 += kc;
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub unsafe fn prepacked(
        onto: Onto,
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        pa: &[f32],
        pb: &[f32],
        c: *mut f32,
        ldc: usize,
        panels: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) {
        if k == 0 {
            let (rows, cols) = (
                rows.start * MR..(rows.end * MR).min(m),
                panels.start * NR..(panels.end * NR).min(n),
            );
            fill_rows(onto, c, ldc, rows, cols);
            return;
        }
        let n_panels = n.div_ceil(NR);
        let m_panels = m.div_ceil(MR);
        let mut k0 = 0;
        while k0 < k {
            let kc = KC.min(k - k0);
            let a_block = pa.as_ptr().add(k0 * m_panels * MR);
            let b_block = pb.as_ptr().add(k0 * n_panels * NR);
            for pn in panels.clone() {
                let j0 = pn * NR;
                let w = NR.min(n - j0);
                for pm in rows.clone() {
                    let i0 = pm * MR;
                    let h = MR.min(m - i0);
                    tile(
                        isa,
                        kc,
                        a_block.add(pm * kc * MR),
                        b_block.add(pn * kc * NR),
                        c.add(i0 * ldc + j0),
                        ldc,
                        h,
                        w,
                        if k0 == 0 { onto.first_block(i0) } else { None },
                    );
                }
            }
            k0 += kc;
        }
    }

    /// With no k to sum over, C is already itself, or becomes its rows'
    /// biases (written, never read: C may be uninitialised).
    unsafe fn fill_rows(
        onto: Onto,
        c: *mut f32,
        ldc: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) {
        if let Onto::RowBias(bias) = onto {
            for i in rows {
                for j in cols.clone() {
                    c.add(i * ldc + j).write(bias[i]);
                }
            }
        }
    }

    /// C[h x w] += Apanel (kc x MR) * Bpanel (kc x NR), for h <= MR, w <= NR,
    /// on the kernel for `isa` (not `Isa::Portable`); with a `base`, C =
    /// base[r] + the product instead (C's values unread).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        isa: Isa,
        kc: usize,
        pa: *const f32,
        pb: *const f32,
        c: *mut f32,
        ldc: usize,
        h: usize,
        w: usize,
        base: Option<*const f32>,
    ) {
        match isa {
            Isa::Avx512 => kernel_avx512(kc, pa, pb, c, ldc, h, w, base),
            _ => kernel_avx2(kc, pa, pb, c, ldc, h, w, base),
        }
    }

    /// C[h x w] += Apanel (kc x MR) * Bpanel (kc x NR), for h <= MR, w <= NR;
    /// with a `base` (h values), C = base[r] + the product.
    ///
    /// Numerical contract: each element of C gets the f32 sum of its kc
    /// products, formed by one fused multiply-add per k in order from zero,
    /// then added to C (or to its row's base) with one rounding.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_avx512(
        kc: usize,
        pa: *const f32,
        pb: *const f32,
        c: *mut f32,
        ldc: usize,
        h: usize,
        w: usize,
        base: Option<*const f32>,
    ) {
        let mut acc = [_mm512_setzero_ps(); 3 * MR];
        for kk in 0..kc {
            let b0 = _mm512_loadu_ps(pb.add(kk * NR));
            let b1 = _mm512_loadu_ps(pb.add(kk * NR + 16));
            let b2 = _mm512_loadu_ps(pb.add(kk * NR + 32));
            let ap = pa.add(kk * MR);
            // Unrolled by the compiler: MR is a constant.
            for r in 0..MR {
                let av = _mm512_set1_ps(*ap.add(r));
                acc[3 * r] = _mm512_fmadd_ps(av, b0, acc[3 * r]);
                acc[3 * r + 1] = _mm512_fmadd_ps(av, b1, acc[3 * r + 1]);
                acc[3 * r + 2] = _mm512_fmadd_ps(av, b2, acc[3 * r + 2]);
            }
        }
        // Masks for the three vectors of a row (all ones for a full panel).
        let mask = |lo: usize| -> __mmask16 {
            if w >= lo + 16 {
                0xFFFF
            } else if w <= lo {
                0
            } else {
                ((1u32 << (w - lo)) - 1) as u16
            }
        };
        let masks = [mask(0), mask(16), mask(32)];
        for r in 0..h {
            let cp = c.add(r * ldc);
            for v in 0..3 {
                let p = cp.add(16 * v);
                let old = |mask| match base {
                    Some(b) => _mm512_set1_ps(*b.add(r)),
                    None if mask == 0xFFFF => _mm512_loadu_ps(p),
                    None => _mm512_maskz_loadu_ps(mask, p),
                };
                if masks[v] == 0xFFFF {
                    _mm512_storeu_ps(p, _mm512_add_ps(old(masks[v]), acc[3 * r + v]));
                } else if masks[v] != 0 {
                    let sum = _mm512_add_ps(old(masks[v]), acc[3 * r + v]);
                    _mm512_mask_storeu_ps(p, masks[v], sum);
                }
            }
        }
    }

    /// C[h x w] += Apanel (kc x MR) * Bpanel (kc x NR), for h <= MR, w <= NR,
    /// as four 4 x 24 sub-tiles; those wholly past h or w are skipped (their
    /// packed operands are zero padding).
    ///
    /// Numerical contract: as `kernel_avx512`, bit for bit: each element of
    /// C gets the f32 sum of its kc products, formed by one fused
    /// multiply-add per k in order from zero, then added to C with one
    /// rounding.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_avx2(
        kc: usize,
        pa: *const f32,
        pb: *const f32,
        c: *mut f32,
        ldc: usize,
        h: usize,
        w: usize,
        base: Option<*const f32>,
    ) {
        // Both row halves of one column half back to back: the second
        // reads the B columns the first just brought into L1.
        for (c0, r0) in [(0, 0), (0, 4), (24, 0), (24, 4)] {
            if r0 < h && c0 < w {
                sub_tile_avx2(
                    kc,
                    pa.add(r0),
                    pb.add(c0),
                    c.add(r0 * ldc + c0),
                    ldc,
                    (h - r0).min(4),
                    (w - c0).min(24),
                    base.map(|b| b.add(r0)),
                );
            }
        }
    }

    /// One 4 x 24 sub-tile of `kernel_avx2`: rows `pa[kk * MR + 0..4]`,
    /// columns `pb[kk * NR + 0..24]`, into C[h x w] (h <= 4, w <= 24), or
    /// onto `base[r]`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn sub_tile_avx2(
        kc: usize,
        pa: *const f32,
        pb: *const f32,
        c: *mut f32,
        ldc: usize,
        h: usize,
        w: usize,
        base: Option<*const f32>,
    ) {
        // The loop in assembly: written with intrinsics, LLVM kept the 12
        // accumulators in registers but shuffled them with a spill and
        // about a dozen moves per k, halving the speed. Registers: ymm0-11
        // the 4 x 24 accumulators (row r in 3r..3r+2), ymm12-14 one row of
        // B, ymm15 the broadcast element of A.
        let z = _mm256_setzero_ps();
        let [mut c0, mut c1, mut c2, mut c3, mut c4, mut c5] = [z; 6];
        let [mut c6, mut c7, mut c8, mut c9, mut c10, mut c11] = [z; 6];
        if kc > 0 {
            // SAFETY: reads kc rows of the A panel (MR floats apart, 4 used)
            // and of the B panel (NR floats apart, 24 used), which the caller
            // guarantees exist; writes only the registers it declares.
            std::arch::asm!(
            "2:",
            "vmovups ymm12, [{b}]",
            "vmovups ymm13, [{b} + 32]",
            "vmovups ymm14, [{b} + 64]",
            "vbroadcastss ymm15, dword ptr [{a} + 0]",
            "vfmadd231ps ymm0, ymm15, ymm12",
            "vfmadd231ps ymm1, ymm15, ymm13",
            "vfmadd231ps ymm2, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 4]",
            "vfmadd231ps ymm3, ymm15, ymm12",
            "vfmadd231ps ymm4, ymm15, ymm13",
            "vfmadd231ps ymm5, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 8]",
            "vfmadd231ps ymm6, ymm15, ymm12",
            "vfmadd231ps ymm7, ymm15, ymm13",
            "vfmadd231ps ymm8, ymm15, ymm14",
            "vbroadcastss ymm15, dword ptr [{a} + 12]",
            "vfmadd231ps ymm9, ymm15, ymm12",
            "vfmadd231ps ymm10, ymm15, ymm13",
            "vfmadd231ps ymm11, ymm15, ymm14",
            "add {a}, {mr_bytes}",
            "add {b}, {nr_bytes}",
            "dec {k}",
            "jnz 2b",
            a = inout(reg) pa => _,
            b = inout(reg) pb => _,
            k = inout(reg) kc => _,
            mr_bytes = const MR * 4,
            nr_bytes = const NR * 4,
            inout("ymm0") c0, inout("ymm1") c1, inout("ymm2") c2,
            inout("ymm3") c3, inout("ymm4") c4, inout("ymm5") c5,
            inout("ymm6") c6, inout("ymm7") c7, inout("ymm8") c8,
            inout("ymm9") c9, inout("ymm10") c10, inout("ymm11") c11,
            out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack, readonly),
            );
        }
        let acc = [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11];
        if h == 4 && w == 24 {
            for r in 0..4 {
                for v in 0..3 {
                    let p = c.add(r * ldc + 8 * v);
                    let old = match base {
                        Some(b) => _mm256_set1_ps(*b.add(r)),
                        None => _mm256_loadu_ps(p),
                    };
                    _mm256_storeu_ps(p, _mm256_add_ps(old, acc[3 * r + v]));
                }
            }
        } else {
            // Edge tiles: through a stack row, so nothing past h x w of C
            // is read or written.
            let mut row = [0f32; 24];
            for r in 0..h {
                for v in 0..3 {
                    _mm256_storeu_ps(row.as_mut_ptr().add(8 * v), acc[3 * r + v]);
                }
                for (j, &s) in row[..w].iter().enumerate() {
                    let p = c.add(r * ldc + j);
                    *p = base.map_or_else(|| *p, |b| *b.add(r)) + s;
                }
            }
        }
    }
}

/// Fails the calling test on a CPU without AVX-512F. Such tests are marked
/// `#[cfg_attr(no_avx512, ignore = ...)]` (see `build.rs`): ignored, and
/// counted so in the test summary, where the building CPU lacks it, instead
/// of passing without checking anything. This catches the rest (`--ignored`,
/// or a build made on another machine) before an AVX-512 instruction would.
#[cfg(test)]
pub(crate) fn require(isa: Isa) {
    assert!(
        isa.supported(),
        "this test needs {isa:?}, which this CPU lacks (it is ignored when built on such a CPU)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_bound::Arithmetic;
    use crate::tensor::DataType;
    use crate::test_rng::Rng;

    #[test]
    #[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
    fn prepacked_operands_give_the_same_product() {
        prepacked_product(Isa::Avx512);
    }

    #[test]
    #[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
    fn avx2_prepacked_operands_give_the_same_product() {
        prepacked_product(Isa::Avx2);
    }

    #[test]
    #[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
    fn matches_a_plain_triple_loop() {
        triple_loop(Isa::Avx512);
    }

    #[test]
    #[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
    fn avx2_matches_a_plain_triple_loop() {
        triple_loop(Isa::Avx2);
    }

    /// Both kernels promise the same operations per element, so the same
    /// bits; edge tiles (rows and columns off the panels) included.
    #[test]
    #[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
    fn avx2_and_avx512_agree_bit_for_bit() {
        require(Isa::Avx512);
        require(Isa::Avx2);
        let mut r = Rng::new(11);
        let (m, n, k) = (21usize, 101usize, 530usize);
        let a: Vec<f32> = (0..m * k).map(|_| r.signed_unit() as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| r.signed_unit() as f32).collect();
        let mut c1 = vec![0.25f32; m * n];
        let mut c2 = c1.clone();
        unsafe {
            sgemm_acc(
                Onto::C,
                Isa::Avx512,
                m,
                n,
                k,
                a.as_ptr(),
                k,
                b.as_ptr(),
                n,
                c1.as_mut_ptr(),
                n,
            );
            sgemm_acc(
                Onto::C,
                Isa::Avx2,
                m,
                n,
                k,
                a.as_ptr(),
                k,
                b.as_ptr(),
                n,
                c2.as_mut_ptr(),
                n,
            );
        }
        assert_eq!(c1, c2);
        // Onto the rows' biases, over C's garbage: the same bits on both
        // kernels, and the same as adding to C filled with the biases.
        let bias: Vec<f32> = (0..m).map(|_| r.signed_unit() as f32).collect();
        let mut filled: Vec<f32> = (0..m * n).map(|i| bias[i / n]).collect();
        let onto = |isa, c: &mut [f32], onto| unsafe {
            sgemm_acc(
                onto,
                isa,
                m,
                n,
                k,
                a.as_ptr(),
                k,
                b.as_ptr(),
                n,
                c.as_mut_ptr(),
                n,
            )
        };
        onto(Isa::Avx512, &mut filled, Onto::C);
        for isa in [Isa::Avx512, Isa::Avx2] {
            let mut c = vec![f32::NAN; m * n];
            onto(isa, &mut c, Onto::RowBias(&bias));
            assert_eq!(c, filled, "{isa:?}");
        }
    }

    /// The unpacked and prepacked entry points, the latter over a partition
    /// of the panels, give the same bits.
    fn prepacked_product(isa: Isa) {
        require(isa);
        let (m, n, k) = (29usize, 70usize, 300usize);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104729) % 127) as f32 / 60.0 - 1.0)
            .collect();
        let mut c1 = vec![0.5f32; m * n];
        let mut c2 = c1.clone();
        unsafe {
            sgemm_acc(
                Onto::C,
                isa,
                m,
                n,
                k,
                a.as_ptr(),
                k,
                b.as_ptr(),
                n,
                c1.as_mut_ptr(),
                n,
            )
        };
        let pa = packed::pack_a(&a, k, m, k);
        let mut pb = vec![f32::NAN; packed::b_len(n, k)];
        for r in 0..k {
            packed::put_b_row(&mut pb, n, k, r, &b[r * n..(r + 1) * n]);
        }
        let panels = n.div_ceil(NR);
        let rows = packed::row_panels(m);
        let parts = |onto: Onto, c: &mut [f32]| unsafe {
            let c = c.as_mut_ptr();
            packed::sgemm(onto, isa, m, n, k, &pa, &pb, c, n, 0..1, 0..rows);
            packed::sgemm(onto, isa, m, n, k, &pa, &pb, c, n, 1..panels, 0..1);
            packed::sgemm(onto, isa, m, n, k, &pa, &pb, c, n, 1..panels, 1..rows);
        };
        parts(Onto::C, &mut c2);
        assert_eq!(c1, c2);
        // Onto biases of 0.5 over garbage: the same bits as adding to 0.5.
        let mut c3 = vec![f32::NAN; m * n];
        parts(Onto::RowBias(&vec![0.5; m]), &mut c3);
        assert_eq!(c1, c3);
        // With k = 0 (a Conv with no input channels) C becomes the biases
        // through both entry points, every element written.
        let bias: Vec<f32> = (0..m).map(|i| i as f32 - 3.0).collect();
        let want: Vec<f32> = (0..m * n).map(|i| bias[i / n]).collect();
        let (pa0, pb0) = (
            packed::pack_a(&[], 0, m, 0),
            vec![0f32; packed::b_len(n, 0)],
        );
        let mut c4 = vec![f32::NAN; m * n];
        unsafe {
            let c = c4.as_mut_ptr();
            let onto = Onto::RowBias(&bias);
            packed::sgemm(onto, isa, m, n, 0, &pa0, &pb0, c, n, 0..1, 0..rows);
            packed::sgemm(onto, isa, m, n, 0, &pa0, &pb0, c, n, 1..panels, 0..rows);
        }
        assert_eq!(c4, want);
        let mut c5 = vec![f32::NAN; m * n];
        let (a0, b0) = (Vec::<f32>::new(), Vec::<f32>::new());
        unsafe {
            sgemm_acc(
                Onto::RowBias(&bias),
                isa,
                m,
                n,
                0,
                a0.as_ptr(),
                0,
                b0.as_ptr(),
                n,
                c5.as_mut_ptr(),
                n,
            )
        };
        assert_eq!(c5, want);
    }

    /// Each element of C is its old value (or its row's bias) plus k
    /// products, summed in some order: within the strict policy's bound for
    /// n = k + 1 terms (the rounding-error bound of any summation order,
    /// `error_bound.rs`), against a plain f64 loop.
    fn triple_loop(isa: Isa) {
        triple_loop_onto(isa, false);
        triple_loop_onto(isa, true);
    }

    fn triple_loop_onto(isa: Isa, row_bias: bool) {
        require(isa);
        let mut r = Rng::new(7);
        let mut rnd = || r.signed_unit() as f32;
        let f32_sum = Arithmetic::of(DataType::Float).unwrap();
        for &(m, n, k) in &[
            (1, 1, 1),
            (14, 32, 5),
            (15, 33, 300),
            (64, 100, 576),
            (3, 7, 2),
            (29, 65, 257),
            (8, 48, 256),
            (4, 24, 1),
            (5, 25, 513),
            (12, 96, 40),
        ] {
            let (lda, ldb, ldc) = (k + 3, n + 1, n + 5);
            let a: Vec<f32> = (0..m * lda).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..k * ldb).map(|_| rnd()).collect();
            let mut c: Vec<f32> = (0..m * ldc).map(|_| rnd()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rnd()).collect();
            let before = c.clone();
            if row_bias {
                // C's values are never read: garbage in them changes nothing.
                for (at, v) in c.iter_mut().enumerate() {
                    if at % ldc < n {
                        *v = f32::NAN;
                    }
                }
            }
            let onto = if row_bias {
                Onto::RowBias(&bias)
            } else {
                Onto::C
            };
            assert!(unsafe {
                sgemm_acc(
                    onto,
                    isa,
                    m,
                    n,
                    k,
                    a.as_ptr(),
                    lda,
                    b.as_ptr(),
                    ldb,
                    c.as_mut_ptr(),
                    ldc,
                )
            });
            for i in 0..m {
                for j in 0..ldc {
                    let at = i * ldc + j;
                    if j >= n {
                        assert_eq!(c[at], before[at], "{m}x{n}x{k}: column {j} is past n");
                        continue;
                    }
                    let start = if row_bias { bias[i] } else { before[at] };
                    let (mut want, mut magnitude) = (start as f64, start.abs() as f64);
                    for p in 0..k {
                        let t = a[i * lda + p] as f64 * b[p * ldb + j] as f64;
                        want += t;
                        magnitude += t.abs();
                    }
                    let bound = f32_sum.bound(k + 1, magnitude);
                    let got = c[at] as f64;
                    assert!(
                        (got - want).abs() <= bound,
                        "{m}x{n}x{k} at ({i},{j}): {got} vs {want}, bound {bound}"
                    );
                }
            }
        }
    }
}
