//! Direct convolution for f32 on AVX-512F or AVX2 with FMA: no im2col, no
//! GEMM packing.
//!
//! One image's input is copied once into a zero-padded buffer split by
//! stride phase: along an axis with stride `s`, the padded positions `i`
//! with the same `i mod s` form one phase, stored at index `i / s`. In that
//! layout each kernel tap (dilation included) reads every output position's
//! input at one fixed distance from the position's own index, so the
//! convolution becomes, per output channel, a sum over (input channel, tap)
//! of a weight times the buffer shifted by a constant. The kernel holds
//! [`OCB`] output channels x a row of positions in registers (3 vectors of
//! 8 with AVX2, 6 of 16 with AVX-512) and streams those shifts, so the
//! input is read from cache and nothing is rearranged per tap.
//!
//! Positions live on the phase plane's grid, whose inner extents exceed the
//! output's by the kernel's reach; the positions outside the output are
//! computed and dropped. [`Layout::waste`] says how many there are, and the
//! caller takes this path only when they are few.
//!
//! Numerical contract: each output is its bias, then the products of its
//! (input channel, tap) pairs accumulated in that order in f32 with FMA
//! (one rounding per multiply-add); long reductions are split into chunks
//! that continue the same accumulator through memory, which changes nothing.

use super::packing::DirectWeights;
use super::*;
use crate::ops::sgemm::Isa;

/// Output channels per register tile (and per packed weight block).
pub(crate) const OCB: usize = 4;
/// The most f32 lanes of a vector (AVX-512's 16).
const MAX_LANES: usize = 16;
/// Packed weight bytes one chunk of the reduction may span across the
/// blocks of an item, so that they stay in L2.
const CHUNK_WEIGHT_BYTES: usize = 256 << 10;
/// Input bytes one tile may read in one chunk of the reduction, so that
/// they stay in L1 while every block of the item runs over them (half of a
/// 32 KiB L1, leaving room for the weights streaming past).
const CHUNK_INPUT_BYTES: usize = 16 << 10;

/// Where one image's input goes in the phase-split buffer, and how each
/// tap reads it.
pub(super) struct Layout {
    /// Phase-plane extent along each spatial axis.
    q: Vec<usize>,
    /// Elements per input channel (all its phase planes).
    chan: usize,
    /// Positions computed per output channel: the output's first extent
    /// times the plane's other extents.
    positions: usize,
    /// Shift of each kernel tap (row-major kernel order) within a channel.
    taps: Vec<usize>,
    /// Buffer length for one image: every channel, plus the reach of the
    /// last tile past the last channel.
    len: usize,
}

impl Layout {
    pub(super) fn new(g: &Geometry) -> Layout {
        let d = g.in_spatial.len();
        let q: Vec<usize> = (0..d)
            .map(|a| g.out_spatial[a] + (g.kernel[a] - 1) * g.dilations[a] / g.strides[a])
            .collect();
        let plane: usize = q.iter().product();
        let phases: usize = g.strides.iter().product();
        let chan = plane * phases;
        let mut taps = vec![0usize];
        for a in 0..d {
            let q_stride: usize = q[a + 1..].iter().product();
            let phase_stride: usize = g.strides[a + 1..].iter().product();
            taps = taps
                .iter()
                .flat_map(|&t| {
                    (0..g.kernel[a]).map(move |k| {
                        let i = k * g.dilations[a];
                        let (phase, idx) = (i % g.strides[a], i / g.strides[a]);
                        t + phase * phase_stride * plane + idx * q_stride
                    })
                })
                .collect();
        }
        let positions = g.out_spatial[0] * q[1..].iter().product::<usize>();
        let reach = taps.iter().max().copied().unwrap_or(0) + positions.next_multiple_of(MAX_LANES);
        let len = (g.in_channels * chan).max((g.in_channels.max(1) - 1) * chan + reach);
        Layout {
            q,
            chan,
            positions,
            taps,
            len,
        }
    }

    /// Positions computed per output position (1.0: none dropped).
    pub(super) fn waste(&self, g: &Geometry) -> f64 {
        self.positions as f64 / g.out_size().max(1) as f64
    }

    /// Elements of one input channel a tile of `tile` positions reads: a
    /// run of the tile plus the kernel's reach along the last axis, for
    /// each (phase, row) the taps start in.
    fn footprint(&self, g: &Geometry, tile: usize) -> usize {
        let d = g.kernel.len();
        let last = g.kernel[d - 1].max(1);
        let reach = (last - 1) * g.dilations[d - 1] / g.strides[d - 1] + 1;
        (self.taps.len() / last).max(1) * (tile + reach)
    }

    /// Bytes of the per-image buffer.
    pub(super) fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<f32>()
    }
}

/// The register tile of an instruction set: (lanes per vector, vectors).
/// AVX2: 4 x 3 accumulators, 3 input vectors and one broadcast weight fill
/// the 16 registers; AVX-512: 4 x 6 accumulators and 7 more of the 32.
fn tile_shape(isa: Isa) -> (usize, usize) {
    match isa {
        Isa::Avx512 => (16, 6),
        _ => (8, 3),
    }
}

/// The convolution of `x` into `y` (uninitialised, `batch x out_channels x
/// out_size`), every element written once. `w` is the packed weights for
/// `g` (`DirectWeights::fits`). Call from a rayon pool thread; `isa` is
/// AVX-512 or AVX2 and supported by the CPU.
pub(super) fn conv_direct(
    g: &Geometry,
    layout: &Layout,
    x: &[f32],
    w: &DirectWeights,
    bias: Option<&[f32]>,
    y: &mut [std::mem::MaybeUninit<f32>],
    isa: Isa,
) {
    assert!(
        isa != Isa::Portable && isa.supported(),
        "the direct Conv kernel runs on AVX-512F or AVX2 with FMA, not {isa:?}"
    );
    let (lanes, vecs_per_tile) = tile_shape(isa);
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * layout.taps.len();
    let blocks = mg.div_ceil(OCB);
    // Tiles of equal size, in whole vectors: the positions split into
    // `tiles` runs of `vecs_per_tile` vectors or one fewer, so no run ends
    // in a nearly empty tile that costs a full one.
    let vectors = layout.positions.div_ceil(lanes);
    let tiles = vectors.div_ceil(vecs_per_tile);
    let tile_start = |t: usize| (t * vectors / tiles * lanes).min(layout.positions);
    // Work items: one tile times a range of blocks, at least eight per
    // thread when the image allows it, so both cores stay busy to the end.
    let block_items = (8 * threads())
        .div_ceil(tiles * g.group)
        .clamp(1, blocks.max(1));
    let bc = blocks.div_ceil(block_items);
    let block_items = blocks.div_ceil(bc);
    // Chunks of whole input channels, bounded by what one tile reads of
    // them and by the weights all blocks of an item read.
    let taps = layout.taps.len();
    let per_channel = layout.footprint(g, lanes * vecs_per_tile) * 4;
    let channels = (CHUNK_INPUT_BYTES / per_channel)
        .min(CHUNK_WEIGHT_BYTES / (bc * OCB * 4 * taps).max(1))
        .clamp(1, cg.max(1));
    let chunk = (channels * taps).max(1);
    // Each (channel, tap) of a group, as a shift from the group's first
    // channel.
    let shifts: Vec<usize> = (0..cg)
        .flat_map(|c| layout.taps.iter().map(move |&t| c * layout.chan + t))
        .collect();
    let os = g.out_size();
    let yp = SendPtr(y.as_mut_ptr() as *mut f32);
    let mut buf = vec![0f32; layout.len];
    for n in 0..g.batch {
        let image = &x[n * g.in_channels * g.in_size()..(n + 1) * g.in_channels * g.in_size()];
        if !image.is_empty() {
            fill(g, layout, image, &mut buf);
        }
        let buf = &buf;
        let items = g.group * block_items * tiles;
        (0..items).into_par_iter().with_max_len(1).for_each(|item| {
            let t = item % tiles;
            let bi = (item / tiles) % block_items;
            let gi = item / tiles / block_items;
            let (b0, b1) = (bi * bc, ((bi + 1) * bc).min(blocks));
            let (p0, p1) = (tile_start(t), tile_start(t + 1));
            let ld = (p1 - p0).next_multiple_of(lanes);
            let vecs = ld / lanes;
            let mut acc = vec![0f32; (b1 - b0) * OCB * ld];
            let xg = buf[gi * cg * layout.chan..].as_ptr();
            for k0 in (0..kdim).step_by(chunk) {
                let k1 = (k0 + chunk).min(kdim);
                for b in b0..b1 {
                    let first = (k0 == 0).then(|| {
                        std::array::from_fn(|o| {
                            let oc = b * OCB + o;
                            match bias {
                                Some(bias) if oc < mg => bias[gi * mg + oc],
                                _ => 0.0,
                            }
                        })
                    });
                    let out = acc[(b - b0) * OCB * ld..].as_mut_ptr();
                    let wb = w.block(gi, b)[k0 * OCB..].as_ptr();
                    // SAFETY: the CPU has `isa` (asserted above); every
                    // shift plus the tile's vectors stays inside the buffer
                    // (`Layout::len` covers the last channel's reach), the
                    // weights hold `kdim` entries of OCB per block, and
                    // `acc` holds OCB rows of `ld` from `out`.
                    unsafe {
                        let xs = xg.add(p0);
                        let s = &shifts[k0..k1];
                        match (isa, vecs) {
                            (Isa::Avx512, 6) => tile512::<6>(xs, s, wb, out, ld, first),
                            (Isa::Avx512, 5) => tile512::<5>(xs, s, wb, out, ld, first),
                            (Isa::Avx512, 4) => tile512::<4>(xs, s, wb, out, ld, first),
                            (Isa::Avx512, 3) => tile512::<3>(xs, s, wb, out, ld, first),
                            (Isa::Avx512, 2) => tile512::<2>(xs, s, wb, out, ld, first),
                            (Isa::Avx512, _) => tile512::<1>(xs, s, wb, out, ld, first),
                            (_, 3) => tile256::<3>(xs, s, wb, out, ld, first),
                            (_, 2) => tile256::<2>(xs, s, wb, out, ld, first),
                            _ => tile256::<1>(xs, s, wb, out, ld, first),
                        }
                    }
                }
            }
            for b in b0..b1 {
                for o in 0..OCB {
                    let oc = b * OCB + o;
                    if oc >= mg {
                        break;
                    }
                    let row = &acc[((b - b0) * OCB + o) * ld..][..p1 - p0];
                    let plane = (n * g.out_channels + gi * mg + oc) * os;
                    // SAFETY: this item owns output channel oc's positions
                    // p0..p1 of image n; `place` writes only those.
                    unsafe { place(g, layout, row, p0, yp.get().add(plane)) };
                }
            }
        });
    }
}

/// Copies one image into the zero-initialised phase-split buffer: only the
/// input's own elements are written, the padding stays zero.
fn fill(g: &Geometry, layout: &Layout, image: &[f32], buf: &mut [f32]) {
    let d = g.in_spatial.len();
    let in_size = g.in_size();
    let ql = layout.q[d - 1];
    let (sl, pl, il) = (g.strides[d - 1], g.pads_begin[d - 1], g.in_spatial[d - 1]);
    let rows_per_phase: usize = layout.q[..d - 1].iter().product();
    let phases: usize = g.strides.iter().product();
    buf[..g.in_channels * layout.chan]
        .par_chunks_mut(layout.chan)
        .zip(image.par_chunks(in_size.max(1)))
        .for_each(|(dst, src)| {
            for row in 0..phases * rows_per_phase {
                // The row's phase (mixed radix over the strides) and its
                // coordinates in the plane (over q), axis by axis from the
                // last but one.
                let (mut phase, mut r) = (row / rows_per_phase, row % rows_per_phase);
                let lphase = phase % sl;
                phase /= sl;
                let mut src_off = 0;
                let mut src_stride = il;
                let mut inside = true;
                for a in (0..d - 1).rev() {
                    let (j, s) = (r % layout.q[a], g.strides[a]);
                    r /= layout.q[a];
                    let ph = phase % s;
                    phase /= s;
                    let i = (j * s + ph) as isize - g.pads_begin[a] as isize;
                    if i < 0 || i >= g.in_spatial[a] as isize {
                        inside = false;
                        break;
                    }
                    src_off += i as usize * src_stride;
                    src_stride *= g.in_spatial[a];
                }
                if !inside {
                    continue;
                }
                let line = &src[src_off..src_off + il];
                let out = &mut dst[row * ql..(row + 1) * ql];
                if sl == 1 {
                    // Padded index j reads input j - pl.
                    let j0 = pl.min(ql);
                    let j1 = (pl + il).min(ql);
                    out[j0..j1].copy_from_slice(&line[..j1 - j0]);
                } else {
                    for (j, v) in out.iter_mut().enumerate() {
                        let i = (j * sl + lphase) as isize - pl as isize;
                        if i >= 0 && (i as usize) < il {
                            *v = line[i as usize];
                        }
                    }
                }
            }
        });
}

/// Writes the output positions among `row` (positions `p0..` of one output
/// channel) to that channel's plane.
///
/// # Safety
/// `plane` must point to `out_size` writable elements that no other thread
/// writes at these positions.
unsafe fn place(g: &Geometry, layout: &Layout, row: &[f32], p0: usize, plane: *mut f32) {
    let d = g.out_spatial.len();
    let (ql, ol) = (layout.q[d - 1], g.out_spatial[d - 1]);
    let p1 = p0 + row.len();
    for r in p0 / ql..p1.div_ceil(ql) {
        // Row r of the position grid: valid when each inner coordinate lies
        // inside the output.
        let (mut rest, mut out_row, mut scale) = (r, 0, 1);
        let mut valid = true;
        for a in (0..d - 1).rev() {
            let extent = if a == 0 { usize::MAX } else { layout.q[a] };
            let c = if a == 0 { rest } else { rest % extent };
            rest = if a == 0 { 0 } else { rest / extent };
            if c >= g.out_spatial[a] {
                valid = false;
                break;
            }
            out_row += c * scale;
            scale *= g.out_spatial[a];
        }
        if !valid {
            continue;
        }
        let j0 = p0.saturating_sub(r * ql);
        let j1 = (p1 - r * ql).min(ol);
        if j0 < j1 {
            let src = &row[r * ql + j0 - p0..r * ql + j1 - p0];
            std::ptr::copy_nonoverlapping(src.as_ptr(), plane.add(out_row * ol + j0), j1 - j0);
        }
    }
}

/// One register tile: OCB output channels x `V` vectors of 8 positions.
/// `out` holds OCB rows `ld` apart; with `first` the sums start from those
/// biases, otherwise from what `out` holds (an earlier chunk).
///
/// # Safety
/// AVX2 and FMA; `x + shift + V * 8` in bounds for every shift; `w` holds
/// `shifts.len() * OCB` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile256<const V: usize>(
    x: *const f32,
    shifts: &[usize],
    w: *const f32,
    out: *mut f32,
    ld: usize,
    first: Option<[f32; OCB]>,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m256; V]; OCB] = match first {
        Some(bias) => std::array::from_fn(|o| [_mm256_set1_ps(bias[o]); V]),
        None => std::array::from_fn(|o| {
            std::array::from_fn(|v| _mm256_loadu_ps(out.add(o * ld + v * 8)))
        }),
    };
    let mut wp = w;
    for &s in shifts {
        let xp = x.add(s);
        let xv: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(xp.add(v * 8)));
        for (o, row) in acc.iter_mut().enumerate() {
            let wv = _mm256_broadcast_ss(&*wp.add(o));
            for v in 0..V {
                row[v] = _mm256_fmadd_ps(wv, xv[v], row[v]);
            }
        }
        wp = wp.add(OCB);
    }
    for (o, row) in acc.iter().enumerate() {
        for (v, a) in row.iter().enumerate() {
            _mm256_storeu_ps(out.add(o * ld + v * 8), *a);
        }
    }
}

/// [`tile256`] with vectors of 16 positions.
///
/// # Safety
/// AVX-512F; `x + shift + V * 16` in bounds for every shift; `w` holds
/// `shifts.len() * OCB` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile512<const V: usize>(
    x: *const f32,
    shifts: &[usize],
    w: *const f32,
    out: *mut f32,
    ld: usize,
    first: Option<[f32; OCB]>,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m512; V]; OCB] = match first {
        Some(bias) => std::array::from_fn(|o| [_mm512_set1_ps(bias[o]); V]),
        None => std::array::from_fn(|o| {
            std::array::from_fn(|v| _mm512_loadu_ps(out.add(o * ld + v * 16)))
        }),
    };
    let mut wp = w;
    for &s in shifts {
        let xp = x.add(s);
        let xv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(xp.add(v * 16)));
        for (o, row) in acc.iter_mut().enumerate() {
            let wv = _mm512_set1_ps(*wp.add(o));
            for v in 0..V {
                row[v] = _mm512_fmadd_ps(wv, xv[v], row[v]);
            }
        }
        wp = wp.add(OCB);
    }
    for (o, row) in acc.iter().enumerate() {
        for (v, a) in row.iter().enumerate() {
            _mm512_storeu_ps(out.add(o * ld + v * 16), *a);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile256<const V: usize>(
    _: *const f32,
    _: &[usize],
    _: *const f32,
    _: *mut f32,
    _: usize,
    _: Option<[f32; OCB]>,
) {
    unreachable!("the direct kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
use tile256 as tile512;
