//! Direct convolution for f32 on AVX-512F with the output channels across
//! the vector lanes: the twin of `direct.rs`, which puts positions there.
//!
//! It reads the same zero-padded, stride-phase-split copy of the input
//! (`direct::Layout`), where every (input channel, tap) is one constant
//! shift from a position's base. A register tile holds [`VECS`] vectors of
//! 16 output channels for [`POSITIONS`] output positions; per (channel,
//! tap) it loads the block's weights as vectors and broadcasts each
//! position's input. Because each position has its own base, a tile's
//! positions are consecutive *output* positions, whatever the rows: no
//! position is computed and dropped, where `direct.rs` computes the whole
//! padded grid (2 of every 16 on 14-wide rows). The price is a transpose
//! on the way out (the tile holds channels by position, the output planes
//! position by channel), which long reductions amortise.
//!
//! Numerical contract: the same as `direct.rs`, each output is its bias,
//! then the products of its (input channel, tap) pairs accumulated in that
//! order in f32 with FMA (one rounding per multiply-add).

use super::direct::Layout;
use super::packing::LaneWeights;
use super::*;
use std::mem::MaybeUninit;

/// Vectors of 16 output channels per register tile.
pub(crate) const VECS: usize = 4;
/// Output channels per tile and per packed weight block.
pub(crate) const BLOCK: usize = VECS * 16;
/// Output positions per register tile: 4 x 6 accumulators, the 4 weight
/// vectors and a broadcast fit AVX-512's 32 registers.
const POSITIONS: usize = 6;
/// Weight bytes of one chunk of the reduction.
const CHUNK_WEIGHT_BYTES: usize = 16 << 10;

/// The grid indices (in `layout`'s phase planes) of the `count` output
/// positions from `p`: one division per axis for the first, then an
/// odometer.
fn grid_indices(g: &Geometry, layout: &Layout, p: usize, count: usize) -> Vec<usize> {
    let d = g.out_spatial.len();
    let mut stride = vec![1usize; d];
    for a in (0..d.saturating_sub(1)).rev() {
        stride[a] = stride[a + 1] * layout.q[a + 1];
    }
    let mut coord = vec![0usize; d];
    let (mut rest, mut index) = (p, 0);
    for a in (0..d).rev() {
        coord[a] = rest % g.out_spatial[a];
        rest /= g.out_spatial[a];
        index += coord[a] * stride[a];
    }
    let mut out = Vec::with_capacity(count.next_multiple_of(POSITIONS));
    for _ in 0..count {
        out.push(index);
        let mut a = d - 1;
        coord[a] += 1;
        index += stride[a];
        while coord[a] == g.out_spatial[a] && a > 0 {
            index -= coord[a] * stride[a];
            coord[a] = 0;
            a -= 1;
            coord[a] += 1;
            index += stride[a];
        }
    }
    out
}

/// The convolution of `x` into `y` (uninitialised, `batch x out_channels x
/// out_size`), every element written once. `w` holds the weights packed
/// for `g` (`LaneWeights::fits`). Call from a rayon pool thread on a CPU
/// with AVX-512F.
pub(super) fn conv_direct_lanes(
    g: &Geometry,
    layout: &Layout,
    x: &[f32],
    w: &LaneWeights,
    bias: Option<&[f32]>,
    y: &mut [MaybeUninit<f32>],
) {
    assert!(
        Isa::Avx512.supported(),
        "the channel-lane Conv kernel runs on AVX-512F"
    );
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * layout.taps.len();
    let blocks = mg.div_ceil(BLOCK);
    let os = g.out_size();
    let tiles = os.div_ceil(POSITIONS);
    // Work items: a range of tiles times a range of blocks, about eight
    // per thread.
    let want = 8 * threads();
    let block_items = want.div_ceil(g.group).clamp(1, blocks.max(1));
    let tile_items = want.div_ceil(block_items * g.group).clamp(1, tiles);
    let (tr, bc) = (tiles.div_ceil(tile_items), blocks.div_ceil(block_items));
    let (tile_items, block_items) = (tiles.div_ceil(tr), blocks.div_ceil(bc));
    // Chunks of the reduction whose weights stay in L1 while every tile of
    // the item runs over them.
    let chunk = (CHUNK_WEIGHT_BYTES / (BLOCK * 4)).clamp(1, kdim.max(1));
    let shifts: Vec<usize> = (0..cg)
        .flat_map(|c| layout.taps.iter().map(move |&t| c * layout.chan + t))
        .collect();
    // Each group's biases padded to whole blocks.
    let biases: Vec<f32> = (0..g.group)
        .flat_map(|gi| {
            (0..blocks * BLOCK).map(move |oc| match bias {
                Some(b) if oc < mg => b[gi * mg + oc],
                _ => 0.0,
            })
        })
        .collect();
    let yp = SendPtr(y.as_mut_ptr() as *mut f32);
    let mut buf = super::direct::take_buffer(layout);
    for n in 0..g.batch {
        let image = &x[n * g.in_channels * g.in_size()..(n + 1) * g.in_channels * g.in_size()];
        super::direct::fill_buffer(g, layout, image, &mut buf);
        let buf = &buf;
        let items = g.group * block_items * tile_items;
        crate::ops::parallel::share(items, &|item| {
            let ti = item % tile_items;
            let bi = (item / tile_items) % block_items;
            let gi = item / tile_items / block_items;
            let xg = buf[gi * cg * layout.chan..].as_ptr();
            // The item's positions, and each one's base in the grid (the
            // last repeated to fill the last tile).
            let (p0, p1) = (ti * tr * POSITIONS, ((ti + 1) * tr * POSITIONS).min(os));
            let item_tiles = (p1 - p0).div_ceil(POSITIONS);
            let mut bases = grid_indices(g, layout, p0, p1 - p0);
            bases.resize(item_tiles * POSITIONS, bases[bases.len() - 1]);
            // The tiles' sums, position by position, BLOCK channels each.
            let mut sums = vec![0f32; item_tiles * POSITIONS * BLOCK];
            for b in bi * bc..((bi + 1) * bc).min(blocks) {
                let wb = w.block(gi, b);
                let bb = biases[(gi * blocks + b) * BLOCK..].as_ptr();
                for k0 in (0..kdim).step_by(chunk) {
                    let k1 = (k0 + chunk).min(kdim);
                    for (base, sum) in bases
                        .chunks_exact(POSITIONS)
                        .zip(sums.chunks_exact_mut(POSITIONS * BLOCK))
                    {
                        // SAFETY: the CPU has AVX-512F (asserted above);
                        // every base plus every shift lies inside the
                        // buffer (a position's base is at most the grid's
                        // last computed position, which `Layout::len`
                        // covers with its reach); the block holds `kdim`
                        // entries of BLOCK weights, the biases BLOCK values
                        // and `sum` POSITIONS x BLOCK.
                        unsafe {
                            tile(
                                xg,
                                base,
                                &shifts[k0..k1],
                                wb[k0 * BLOCK..].as_ptr(),
                                (k0 == 0).then_some(bb),
                                sum.as_mut_ptr(),
                            )
                        };
                    }
                }
                let channels = (mg - b * BLOCK).min(BLOCK);
                let plane0 = yp
                    .get()
                    .wrapping_add((n * g.out_channels + gi * mg + b * BLOCK) * os + p0);
                // SAFETY: the CPU has AVX-512F; `sums` holds the item's
                // p1 - p0 positions; this item alone writes these channels
                // at these positions of the output planes.
                unsafe { transpose_out(&sums, p1 - p0, channels, plane0, os) };
            }
        });
    }
    super::direct::keep_buffer(buf);
}

/// One register tile: BLOCK output channels x POSITIONS positions, from the
/// biases (the first chunk) or `sums` (the partial sums of the earlier
/// chunks) through the chunk's (channel, tap) shifts, into `sums` by
/// position.
///
/// # Safety
/// AVX-512F; `bases` holds POSITIONS values, `x + base + shift` in bounds
/// for every base and shift; `w` holds `shifts.len() * BLOCK` values,
/// `bias` BLOCK and `sums` POSITIONS x BLOCK.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile(
    x: *const f32,
    bases: &[usize],
    shifts: &[usize],
    w: *const f32,
    bias: Option<*const f32>,
    sums: *mut f32,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m512; VECS]; POSITIONS] = match bias {
        Some(bias) => [std::array::from_fn(|v| _mm512_loadu_ps(bias.add(v * 16))); POSITIONS],
        None => std::array::from_fn(|i| {
            std::array::from_fn(|v| _mm512_loadu_ps(sums.add(i * BLOCK + v * 16)))
        }),
    };
    let xp: [*const f32; POSITIONS] = std::array::from_fn(|i| x.add(bases[i]));
    let mut wp = w;
    for &s in shifts {
        let wv: [__m512; VECS] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
        for (i, row) in acc.iter_mut().enumerate() {
            let xv = _mm512_set1_ps(*xp[i].add(s));
            for v in 0..VECS {
                row[v] = _mm512_fmadd_ps(wv[v], xv, row[v]);
            }
        }
        wp = wp.add(BLOCK);
    }
    for (i, row) in acc.iter().enumerate() {
        for (v, a) in row.iter().enumerate() {
            _mm512_storeu_ps(sums.add(i * BLOCK + v * 16), *a);
        }
    }
}

/// Writes `count` positions of sums (position by position, BLOCK channels
/// each) to the first `channels` output planes from `plane0`, `os` apart:
/// for 16 positions at a time, one gather of a channel's 16 sums and one
/// store into its plane.
///
/// # Safety
/// AVX-512F; `sums` holds `count` rounded up to POSITIONS rows of BLOCK;
/// the planes hold `count` positions from `plane0` for each channel.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_out(sums: &[f32], count: usize, channels: usize, plane0: *mut f32, os: usize) {
    use std::arch::x86_64::*;
    let rows = _mm512_setr_epi32(
        0,
        BLOCK as i32,
        2 * BLOCK as i32,
        3 * BLOCK as i32,
        4 * BLOCK as i32,
        5 * BLOCK as i32,
        6 * BLOCK as i32,
        7 * BLOCK as i32,
        8 * BLOCK as i32,
        9 * BLOCK as i32,
        10 * BLOCK as i32,
        11 * BLOCK as i32,
        12 * BLOCK as i32,
        13 * BLOCK as i32,
        14 * BLOCK as i32,
        15 * BLOCK as i32,
    );
    for q in (0..count).step_by(16) {
        let mask: __mmask16 = if count - q >= 16 {
            0xffff
        } else {
            (1u16 << (count - q)) - 1
        };
        let src = sums.as_ptr().add(q * BLOCK);
        for c in 0..channels {
            let v = _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, rows, src.add(c));
            _mm512_mask_storeu_ps(plane0.add(c * os + q), mask, v);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose_out(_: &[f32], _: usize, _: usize, _: *mut f32, _: usize) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile(
    _: *const f32,
    _: &[usize],
    _: &[usize],
    _: *const f32,
    _: Option<*const f32>,
    _: *mut f32,
) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}
