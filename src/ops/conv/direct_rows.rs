//! Direct convolution for short reductions on AVX-512 with the output
//! channels across the vector lanes, 16 positions of one output row per
//! register tile, written straight to the output planes.
//!
//! A tile holds 16 consecutive positions of one output row x 16 channels
//! in 16 registers. Per (channel, tap) it loads one vector of weights and
//! multiplies it into each position's sum by an FMA whose other operand is
//! that position's input, broadcast from memory: the positions lie a
//! constant stride apart in X, so each one's address is one displacement
//! from the tile's base. At the end an in-register transpose turns the
//! 16 x 16 sums into 16 runs of 16 positions, one per output plane, each
//! stored whole. So no sums go through memory and no write-out pass
//! follows, where the channel-lane kernel (`direct_lanes.rs`) stores its
//! tiles' sums and transposes them in a pass of its own; and a block of 16
//! channels' weights (kernel taps x input channels x 64 bytes) stays in L1
//! while the tile runs over a whole row. That is worth it where the
//! reduction is short ([`MAX_KDIM`]), so that those costs weigh against few
//! multiply-adds per output, and the weights fit in L1.
//!
//! The tiles read X in place. The rows whose kernel rows reach into the
//! padding run only the kernel rows inside the input (the plan's runs along
//! the first axis); along a row, a position whose kernel columns reach into
//! the padding leaves those columns' products (and their reads) out, by the
//! pattern of its row's first or last tile, a constant of the tile's code
//! ([`EDGES`]). A row's last tile ends at the row's end, overlapping the
//! tile before it where the width is not a multiple of 16: the positions
//! they share are computed twice, the same way, and stored twice.
//!
//! Numerical contract: each output is its bias, then the products of its
//! (input channel, tap) pairs whose input lies inside X, in that order,
//! accumulated in f32 by FMA (one rounding per multiply-add): the order
//! of `direct_lanes.rs`'s plans that leave out the padding's products, so
//! the two give the same bits. For finite weights only (a padding product
//! left out is `w * 0`, a zero, which changes no bit of a sum but the sign
//! of a zero one); with an infinite or NaN weight the channel-lane kernel
//! runs every product over the padded copy.

use super::packing::LaneWeights;
use super::tile_plan::{axis_runs, padded_columns};
use super::{Geometry, Isa, SendPtr};
use std::mem::MaybeUninit;

/// Output positions (along a row) and channels per register tile.
const LANES: usize = 16;

/// The longest reduction (input channels x kernel taps) the row tiles take:
/// a block of 16 channels' weights is then at most 16 KiB, half of L1,
/// beside the input rows a row of tiles reads. On the 7x7 stride-2 first
/// layer (3 x 49 = 147) these tiles took 0.954 of the channel-lane
/// kernel's time (its plan in place) back to back and 0.957-0.988 in
/// rounds after pauses on one thread, 0.95 and 0.961-0.964 on two (Zen 4,
/// 2026-12-07, both in one process, settings in turns). On C64 56x56 3x3
/// (576) and C256 14x14 3x3 (2304) a first version of the tile, over the
/// padded copy, took 1.17 and 1.23 of the channel-lane kernel's time.
const MAX_KDIM: usize = 256;

/// At most one position in this many is computed twice (by a row's last
/// tile, which ends at the row's end: [`tiles_for`]).
const OVERLAP_SHARE: usize = 32;

/// The widest kernel row an edge pattern describes.
const MAX_KW: usize = 8;

/// Positions at each end of a row an edge pattern describes.
const EDGE_POSITIONS: usize = 4;

/// A row tile: its reduction and where its sums go.
type TileFn = unsafe fn(&Tile);

/// The edge patterns there are tiles for: (kernel width, stride along the
/// row, the row's first positions' kernel columns that read padding, the
/// last ones', the tiles for a row's middle, first and last positions). A
/// pattern holds, per position from the row's end inwards, a byte whose
/// bit `c` names kernel column `c` ([`edge_columns`]). The 7x7 stride-2
/// first layer over a padding of 3 on an input of even width: columns 0-2
/// for the first position and 0 for the second, 5 and 6 for the last;
/// 3-wide kernels over a padding of one at strides 1 and 2 (even widths).
static EDGES: [(usize, usize, u32, u32, [TileFn; 3]); 3] = {
    macro_rules! edge {
        ($kw:literal, $sw:literal, $left:literal, $right:literal) => {
            (
                $kw,
                $sw,
                $left,
                $right,
                [
                    tile::<$kw, $sw, 0, 0> as TileFn,
                    tile::<$kw, $sw, $left, 0> as TileFn,
                    tile::<$kw, $sw, 0, $right> as TileFn,
                ],
            )
        };
    }
    [
        edge!(7, 2, 0x0107, 0x60),
        edge!(3, 1, 0x01, 0x04),
        edge!(3, 2, 0x01, 0x00),
    ]
};

/// Per position at each end of the last axis, from the end inwards, the
/// kernel columns it reads in the padding, a byte each
/// ([`EDGES`]); None when a position past [`EDGE_POSITIONS`] from an end
/// reads padding, or the kernel is wider than [`MAX_KW`].
fn edge_columns(g: &Geometry) -> Option<(u32, u32)> {
    let last = g.out_spatial.len().checked_sub(1)?;
    let (width, kw) = (g.out_spatial[last], g.kernel[last]);
    if kw > MAX_KW {
        return None;
    }
    let (mut left, mut right) = (0u32, 0u32);
    for (o, &columns) in padded_columns(g).iter().enumerate() {
        // At most MAX_KW (8) bits: a byte.
        let outside = columns as u32;
        if outside == 0 {
            continue;
        }
        if o < EDGE_POSITIONS {
            left |= outside << (8 * o);
        } else if o >= width - EDGE_POSITIONS {
            right |= outside << (8 * (width - 1 - o));
        } else {
            return None;
        }
    }
    Some((left, right))
}

/// The tiles for `g` with weights all `finite` on `isa` (middle, first and
/// last of a row), or None where the row tiles do not apply: AVX-512,
/// finite weights, a 2-D Conv whose reduction is at most [`MAX_KDIM`],
/// rows of at least 16 positions beyond those that read padding at either
/// end and whose last tile computes few positions again
/// ([`OVERLAP_SHARE`]), and a tile for the row ends' pattern.
pub(super) fn tiles_for(g: &Geometry, isa: Isa, finite: bool) -> Option<RowTiles> {
    if isa != Isa::Avx512 || !finite || g.out_spatial.len() != 2 {
        return None;
    }
    let (cg, kdim) = (
        g.in_channels / g.group,
        g.in_channels / g.group * g.kernel_size(),
    );
    if cg == 0 || kdim > MAX_KDIM || g.out_channels == 0 {
        return None;
    }
    let (width, kw, sw) = (g.out_spatial[1], g.kernel[1], g.strides[1]);
    if width < LANES + EDGE_POSITIONS {
        return None;
    }
    let (left, right) = edge_columns(g)?;
    // The first tile must hold every position with a left pattern and the
    // last (ending at the row's end) every one with a right pattern; the
    // tiles between none. The widths of the patterns (bytes in use):
    let (lw, rw) = (pattern_len(left), pattern_len(right));
    let last_start = width - LANES;
    let middle_end = (width.div_ceil(LANES) - 1) * LANES;
    if lw > last_start.min(LANES) || middle_end > width - rw {
        return None;
    }
    // The positions the last tile computes again must be few: where the
    // width is not a multiple of 16 they cost what the tiles save (C16
    // 56x56 3x3, a last tile of 8 new positions: 1.095 of the
    // channel-lane kernel's time; the 7x7 stride-2 layer on 230x230,
    // rows of 115: 1.08; at widths of 64 and 112 0.81-0.92, Zen 4).
    if width.div_ceil(LANES) * LANES - width > width / OVERLAP_SHARE {
        return None;
    }
    EDGES
        .iter()
        .find(|e| (e.0, e.1, e.2, e.3) == (kw, sw, left, right))
        .map(|e| RowTiles(e.4))
}

/// The row tiles for one geometry ([`tiles_for`]): a row's middle, first
/// and last.
pub(super) struct RowTiles([TileFn; 3]);

/// Positions an edge pattern names from its end: its bytes up to the last
/// nonzero one.
fn pattern_len(pattern: u32) -> usize {
    (0..EDGE_POSITIONS)
        .rev()
        .find(|&i| pattern >> (8 * i) & 0xff != 0)
        .map_or(0, |i| i + 1)
}

/// One row tile's work.
struct Tile {
    /// Position 0's window in the first input channel, at the first kernel
    /// row it runs (wrapped: it may lie before X where the window starts
    /// in the padding; no read the tile makes does).
    x: *const f32,
    /// Kernel rows the tile runs, and the distance between them in X.
    rows: usize,
    row_step: usize,
    /// Input channels, and the distance between them in X.
    channels_in: usize,
    chan: usize,
    /// The distance in X between two kernel columns (the dilation).
    col_step: usize,
    /// The first kernel row's first weight entry, `ntaps` entries a
    /// channel, each 64 floats (a block's, `LaneWeights`); the tile's 16
    /// channels from the entry's start.
    w: *const f32,
    ntaps: usize,
    /// The 16 channels' biases.
    bias: *const f32,
    /// Position 0's place in the first of the tile's output planes, `os`
    /// apart, of which it writes `planes`.
    out: *mut f32,
    os: usize,
    planes: usize,
}

/// The convolution of `x` into `y` (uninitialised, `batch x out_channels x
/// out_size`) by the row tiles `tiles` ([`tiles_for`]), every element
/// written. `w` holds the weights packed for the channel-lane kernel
/// (`LaneWeights`, blocks of 64 channels); call from a rayon pool thread.
pub(super) fn conv_rows(
    g: &Geometry,
    x: &[f32],
    w: &LaneWeights,
    bias: Option<&[f32]>,
    y: &mut [MaybeUninit<f32>],
    tiles: RowTiles,
) {
    use super::direct_lanes::BLOCK;
    let tiles = tiles.0;
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let ntaps = g.kernel_size();
    let blocks = mg.div_ceil(BLOCK);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (iw, in_size, os) = (g.in_spatial[1], g.in_size(), g.out_size());
    let (kw, sh, sw) = (g.kernel[1], g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (pt, pl) = (g.pads_begin[0], g.pads_begin[1]);
    // Each output row's kernel rows inside the input.
    let mut row_taps = vec![(0, 0); oh];
    for (o0, o1, lo, hi) in axis_runs(g, 0) {
        row_taps[o0..o1].fill((lo, hi));
    }
    let biases = super::direct_lanes::padded_biases(g, bias);
    let starts: Vec<usize> = (0..ow.div_ceil(LANES))
        .map(|s| (s * LANES).min(ow - LANES))
        .collect();
    let (xp, yp) = (
        SendPtr(x.as_ptr() as *mut f32),
        SendPtr(y.as_mut_ptr() as *mut f32),
    );
    // Work items: an output row of one block of one group of one image.
    let items = g.batch * g.group * blocks * oh;
    crate::ops::parallel::share(items, &|item| {
        let r = item % oh;
        let b = item / oh % blocks;
        let gi = item / oh / blocks % g.group;
        let n = item / oh / blocks / g.group;
        let (lo, hi) = row_taps[r];
        let channels = (mg - b * BLOCK).min(BLOCK);
        let xg = xp
            .get()
            .wrapping_add((n * g.in_channels + gi * cg) * in_size) as *const f32;
        // The first kernel row's input row (wrapped before X where the
        // window starts in the padding, which no read reaches).
        let in_row = (r * sh + lo * dh).wrapping_sub(pt);
        let wb = w.block(gi, b);
        let plane0 = yp
            .get()
            .wrapping_add((n * g.out_channels + gi * mg + b * BLOCK) * os + r * ow);
        for (si, &c0) in starts.iter().enumerate() {
            let tile = match si {
                0 => tiles[1],
                _ if si + 1 == starts.len() => tiles[2],
                _ => tiles[0],
            };
            let x0 = in_row
                .wrapping_mul(iw)
                .wrapping_add((c0 * sw).wrapping_sub(pl));
            for v in (0..channels).step_by(LANES) {
                let t = Tile {
                    x: xg.wrapping_add(x0),
                    rows: hi - lo,
                    row_step: dh * iw,
                    channels_in: cg,
                    chan: in_size,
                    col_step: dw,
                    w: wb.as_ptr().wrapping_add(lo * kw * BLOCK + v),
                    ntaps,
                    bias: biases[(gi * blocks + b) * BLOCK + v..].as_ptr(),
                    out: plane0.wrapping_add(v * os + c0),
                    os,
                    planes: (channels - v).min(LANES),
                };
                // SAFETY: `tiles_for` chose these tiles for this geometry
                // on AVX-512: every read a tile makes (kernel rows lo..hi,
                // the columns its pattern keeps) lies in this image's
                // group's channels; the weights hold `cg * ntaps` entries of
                // BLOCK from the block's start and the biases BLOCK; the
                // tile writes positions c0..c0 + 16 of row r in `planes`
                // planes of this block, which this item alone writes (the
                // overlap of a row's last two tiles with equal values).
                unsafe { tile(&t) };
            }
        }
    });
}

/// One row tile ([`Tile`]): `KW`-wide kernel rows, positions `SW` apart
/// in X; the positions near the row's start leave out the kernel columns
/// `LEFT` names, those near its end the ones `RIGHT` names ([`EDGES`]).
///
/// # Safety
/// AVX-512F; every read of a kept (position, kernel row, column) of every
/// channel lies in X; `t.w` holds the entries the reduction reads, `t.bias`
/// 16 values, and positions 0..16 of `t.planes` planes from `t.out` are
/// writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const KW: usize, const SW: usize, const LEFT: u32, const RIGHT: u32>(t: &Tile) {
    use super::direct_lanes::{transpose16, BLOCK};
    use std::arch::x86_64::*;
    // Whether position `i` leaves out kernel column `c` (constants).
    const fn skips(left: u32, right: u32, i: usize, c: usize) -> bool {
        let from_left = i < EDGE_POSITIONS && left >> (8 * i + c) & 1 != 0;
        let from_right = i >= LANES - EDGE_POSITIONS && right >> (8 * (LANES - 1 - i) + c) & 1 != 0;
        from_left || from_right
    }
    let mut acc = [_mm512_loadu_ps(t.bias); LANES];
    for c in 0..t.channels_in {
        let xc = t.x.wrapping_add(c * t.chan);
        // Wrapping: for an output row whose kernel rows all read padding
        // the tile runs no step, and these may point past the weights.
        let wc = t.w.wrapping_add(c * t.ntaps * BLOCK);
        for kh in 0..t.rows {
            let xr = xc.wrapping_add(kh * t.row_step);
            let wr = wc.wrapping_add(kh * KW * BLOCK);
            // Column `$c` (a constant) of the kernel row.
            macro_rules! column {
                ($c:literal) => {
                    if $c < KW {
                        let wv = _mm512_loadu_ps(wr.add($c * BLOCK));
                        let xs = xr.wrapping_add($c * t.col_step);
                        for (i, a) in acc.iter_mut().enumerate() {
                            if !skips(LEFT, RIGHT, i, $c) {
                                *a = _mm512_fmadd_ps(wv, _mm512_set1_ps(*xs.add(i * SW)), *a);
                            }
                        }
                    }
                };
            }
            column!(0);
            column!(1);
            column!(2);
            column!(3);
            column!(4);
            column!(5);
            column!(6);
            column!(7);
        }
    }
    let cols = transpose16(acc);
    for (j, col) in cols.iter().enumerate().take(t.planes) {
        _mm512_storeu_ps(t.out.add(j * t.os), *col);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile<const KW: usize, const SW: usize, const LEFT: u32, const RIGHT: u32>(_: &Tile) {
    unreachable!("the row tiles are only chosen on x86-64 with AVX-512")
}
