//! Which output positions each register tile of the channel-lane kernel
//! (`direct_lanes.rs`) holds, which kernel taps it runs, and where it
//! reads them.
//!
//! Along one axis the taps an output index reads inside the input form one
//! range, and the indices with the same range form runs (the first and
//! last few of each axis, and the interior). Positions whose ranges agree
//! on every axis form a class, a box of the output, that reads the same
//! taps. A plan cuts tiles from each class in row-major order (the last
//! one of a class short when its positions do not fill it), and each tile
//! runs exactly its class's taps: no tap of any tile reads the padding, so
//! the tiles read X itself, each position from its own base, and no
//! zero-padded copy of the input is made. Border positions skip the
//! padding's products: on a 14x14 output of a 3x3 kernel with padding 1,
//! 8% of the multiply-adds, 6% net of the short tiles' waste. Plans of
//! classes are made for long reductions only ([`SKIP_FROM`]), and only
//! where there is no plan in place (below), which leaves out the same
//! products and was the faster ([`TilePlan::new`]).
//!
//! Leaving out a product `w * 0` changes no bit of the sum when `w` is
//! finite, except that a sum of negative zeros stays a negative zero where
//! adding `+0` would make it `+0`. An infinite or NaN weight times a padding
//! zero is NaN, so with any such weight (and for short reductions, or
//! where the classes would cost more multiply-adds than they save, or be
//! too many) the plan is the other kind: tiles of consecutive positions
//! over the zero-padded, phase-split copy (`direct::Layout`), each running
//! every tap, except that with finite weights a tile whose positions all
//! lie in one run of the first axis that reaches into the padding (the
//! first or last rows of a 2-D output) leaves out the kernel rows that
//! read it there too. On C64 56x56 3x3 that is 1.1% of the multiply-adds
//! (the first and last rows' tiles skip a third of theirs), and on the 7x7
//! stride-2 layer 0.7%; a tile that straddles two rows runs every tap.
//! Against running every tap on the Zen 4 of 2026-12-07 (one process,
//! settings in turns): C64 0.982 of the time back to back and 0.995-0.997
//! in rounds after pauses on one thread, 0.980-0.986 on two; the 7x7
//! stride-2 layer within the noise (0.97-1.01).
//!
//! A plan in place ([`TilePlan::in_place`]) reads X for reductions of
//! any length, without the column classes: its classes are runs of
//! rows only (a 2-D output's first and last rows where the kernel reaches
//! into the padding, and the rows between), each a range of consecutive
//! positions cut into tiles in order, and a tile's positions at the first
//! or last columns leave out the columns of taps that would read padding
//! by the tile's mask (below), which the AVX-512 kernel runs with a tile
//! of its own, and the AVX2 kernel (3 x 3 kernels and the 7x7 stride-2
//! layer's) with a form of its unrolled block or kernel row. So the copy and its pass over the input are gone,
//! at no cost in the write-out: on C64 56x56 3x3 0.980 of the time back
//! to back and 0.983-0.985 in rounds after pauses on one thread,
//! 0.957-0.969 on two; on the 7x7 stride-2 layer 0.99 back to back,
//! 0.981-0.983 and 0.982 in rounds (Zen 4 of 2026-12-07). With AVX2 (the
//! same Zen 4, AVX-512 hidden, eighth session of the day; fastest of 150
//! calls in rounds after pauses, the copy's plan in the same process):
//! C64 56x56 0.972-0.978 of the time on one thread and 0.953-0.960 on
//! two, C16 56x56 0.986, C28 56x56 0.975, C8 112x112 0.987-1.05, 3x3
//! stride 2 on 224x224 0.95-0.96; reading X costs no less than the copy
//! on C96 28x28 (0.999). The 7x7 stride-2 layer, whose tiles over the
//! copy read a shift every step: 0.979-0.981 on one thread and
//! 0.976-0.978 on two (medians of the rounds 0.84-0.96).
//!
//! Where the last axis's first or last columns read padding, the plan in
//! order also names, for each full tile, which of its positions read only
//! padding with which column of taps ([`TilePlan::edge_mask_at`]): with
//! finite weights the AVX-512 kernel runs such a tile without those
//! products where it has a tile for the pattern (`direct_lanes.rs`: a
//! 3-wide kernel over a padding of one, the 7x7 stride-2 layer's kernel
//! over a padding of 3): 1.2% of C64 56x56's
//! multiply-adds (0.990 and 0.992 of the time in two sets of 60 rounds
//! after pauses on one thread, 1.001 on two, Zen 4 of 2026-12-07).
//!
//! Tiles of one class hold positions in row-major order, so their outputs
//! are runs along the last axis, which the write-out stores whole; a
//! class along the first or last columns holds one position per row, and
//! the tiles run in the order of their first positions, so that such a
//! class's stores meet lines the interior's tiles of the same rows write.

use super::direct::Layout;
use super::geometry::row_major_strides;
use super::Geometry;

/// The most classes a plan keeps: past that (wide kernels with wide
/// padding, mostly in 3-D) the tiles run every tap over the padded copy,
/// so the tap lists stay within a few hundred times the kernel's size.
const MAX_CLASSES: usize = 256;

/// The taps of one class: each one's shift within an input channel (of X
/// or of the padded copy, as the plan reads), and its index in the
/// kernel's row-major order (where its weight sits among one channel's).
pub(super) type Taps = Vec<(usize, usize)>;

/// Per axis, the kernel indices `lo..hi` a position reads inside the input.
type TapRanges = Vec<(usize, usize)>;

/// The tiles of one image, in the order the kernel runs them.
pub(super) struct TilePlan {
    /// The tap lists, one per class.
    pub(super) classes: Vec<Taps>,
    /// Every tap's shift (row-major kernel order) in what the tiles read.
    pub(super) tap_shifts: Vec<usize>,
    /// True when the tiles read X itself (a channel is `in_size` long),
    /// false when they read the padded copy (`Layout::chan`).
    pub(super) reads_input: bool,
    /// Each tile's class and how many of its positions are real; empty
    /// when the tiles hold the positions in order.
    tiles: Vec<(usize, usize)>,
    /// `per_tile` output positions (flat indices into an output plane) per
    /// tile; `usize::MAX` past a short tile's last. Empty when the tiles
    /// hold the positions in order.
    outputs: Vec<usize>,
    /// Each of those positions' base in what the tiles read (a short tile
    /// repeats its last; in X a base may lie before the channel, as a
    /// wrapped offset, where every tap's shift brings it inside). Empty
    /// when the tiles hold the positions in order, whose bases
    /// [`TilePlan::bases`] works out from the grid instead, a work item's
    /// at a time (a list of every position's would be a tenth of a
    /// megabyte for a 112x112 output, built and read on every call).
    bases: Vec<usize>,
    /// Positions per image.
    os: usize,
    /// Tiles, when they hold the positions in order.
    in_order_tiles: Option<usize>,
    /// With tiles in order: the tiles `start..end` that lie whole inside
    /// a run of the first axis reaching into the padding, and that run's
    /// class, in the order of the tiles. Every other tile runs every tap
    /// (class 0). Worked out once here, not per tile in [`TilePlan::tile`].
    first_axis_tiles: Vec<(usize, usize, usize)>,
    /// With tiles in order and finite weights, where the last axis reads
    /// padding at its first or last columns: for a full tile whose first
    /// position is in output column `c0` (along the last axis), entry
    /// `c0` says which of its positions read only padding with which
    /// column of taps (the kernel's index along the last axis): bit
    /// `c * per_tile + i` for position `i` and column `c`
    /// ([`TilePlan::edge_mask_at`]). Empty otherwise. One entry per
    /// output column, worked out once here.
    edge_by_column: Vec<u64>,
    /// With tiles cut from classes along every axis but the last
    /// ([`TilePlan::in_place`]): each tile's positions that read padding
    /// with a column of taps, as [`TilePlan::edge_mask_at`] names them
    /// (0 for none); empty for the other plans.
    tile_masks: Vec<u64>,
    /// Per axis: the output's extent and the padded grid's stride.
    grid: Vec<(usize, usize)>,
    per_tile: usize,
}

/// Reduction length (input channels x taps) from which the tiles are cut
/// from classes. Below it the multiply-adds saved do not pay for what the
/// classes cost: a class along a column holds one position per row, whose
/// channels the write-out stores one lane at a time into lines the
/// interior's stores write again, and every class ends in a short tile.
/// Paired probes (8 pairs of 1 s runs, Zen 4 EPYC) against the kernel
/// before plans, which copied the input for every shape: C256 14x14 3x3
/// (2304 per output) 3-4% faster on one and two threads with classes
/// reading X, C64 56x56 3x3 (576) 4-5% and the 7x7 stride-2 layer (147)
/// 7-13% slower.
const SKIP_FROM: usize = 1024;
/// [`SKIP_FROM`] on Intel's cores. On a Xeon (family 6 model 167,
/// 2026-12-06), with short tiles running only their own positions, both
/// plans in one process, 60-300 rounds each, after 50 ms pauses as the
/// bench runs: classes took C64 56x56 3x3 (576 per output) 0.96-0.98 of
/// the copy's time on one thread (0.989 back to back) and 0.982 on two,
/// C64 112x112 0.979, C96 28x28 3x3 (864) 0.991, C32 56x56 5x5 (800)
/// 0.997; the 7x7 stride-2 layer (147) 1.08, so it keeps the copy. With
/// AVX-512 hidden (the AVX2 tiles; 50-80 rounds): C64 56x56 0.977 on one
/// thread and 0.997 on two, C96 28x28 1.002, C32 56x56 5x5 0.997.
const SKIP_FROM_INTEL: usize = 512;

/// True when the reduction is long enough for classes ([`SKIP_FROM`]).
pub(super) fn long_reduction(g: &Geometry) -> bool {
    let from = if crate::ops::cache::intel() {
        SKIP_FROM_INTEL
    } else {
        SKIP_FROM
    };
    g.in_channels / g.group * g.kernel_size() >= from
}

/// For each output index along the last axis, the kernel columns (bit
/// `c` for the kernel's index `c` along that axis) it reads in the
/// padding. For kernels up to 64 wide (the callers' masks hold fewer).
pub(super) fn padded_columns(g: &Geometry) -> Vec<u64> {
    let Some(last) = g.out_spatial.len().checked_sub(1) else {
        return Vec::new();
    };
    let kw = g.kernel[last].min(64);
    let mut columns = vec![0u64; g.out_spatial[last]];
    for (o0, o1, lo, hi) in axis_runs(g, last) {
        let outside = (0..kw).filter(|c| !(lo..hi).contains(c));
        columns[o0..o1].fill(outside.fold(0u64, |m, c| m | 1 << c));
    }
    columns
}

/// Along one axis, the runs of output indices `o0..o1` that read taps
/// `lo..hi` inside the input.
pub(super) fn axis_runs(g: &Geometry, a: usize) -> Vec<(usize, usize, usize, usize)> {
    let (s, d, pb, n, k) = (
        g.strides[a],
        g.dilations[a],
        g.pads_begin[a],
        g.in_spatial[a],
        g.kernel[a],
    );
    let mut runs: Vec<(usize, usize, usize, usize)> = Vec::new();
    for o in 0..g.out_spatial[a] {
        // Tap j reads padded index o*s + j*d; the input spans pb..pb+n.
        let start = o * s;
        let lo = pb.saturating_sub(start).div_ceil(d).min(k);
        let hi = (pb + n).saturating_sub(start).div_ceil(d).clamp(lo, k);
        match runs.last_mut() {
            Some(r) if (r.2, r.3) == (lo, hi) => r.1 = o + 1,
            _ => runs.push((o, o + 1, lo, hi)),
        }
    }
    runs
}

impl TilePlan {
    /// The plan for `g`, `per_tile` positions to a tile, when every weight
    /// is `finite`: with `edge_tiles` (the kernel's answer to whether it
    /// has a tile that leaves out a mask's products,
    /// [`TilePlan::edge_mask_at`]), tiles in order reading X
    /// ([`TilePlan::in_place`]) where the kernel has a tile for every mask;
    /// else, for a long reduction ([`long_reduction`]), classes reading X
    /// where they cost no more multiply-adds than tiles of every tap. Else,
    /// and with any weight not finite, tiles in order over `layout`'s copy.
    ///
    /// Both plans reading X leave out every product with padding; on long
    /// reductions the plan in place was the faster (fastest of 100-150
    /// calls in rounds after pauses, classes' time over the plan in
    /// place's, Zen 4 EPYC, 2026-12-07): with AVX2 (AVX-512 hidden) C256
    /// 14x14 3x3 1.037-1.039 on one thread and 1.046-1.047 on two, C128
    /// 28x28 1.043, C256 28x28 1.047, C128 56x56 1.027, C512 7x7 1.077;
    /// with AVX-512 C256 14x14 1.025-1.030, C128 28x28 1.027, C256 28x28
    /// 1.024, C128 56x56 1.012, C512 7x7 1.002. The classes' corners are
    /// tiles of one position, and their columns' tiles hold one position
    /// per row, whose write-out stores a lane at a time.
    pub(super) fn new(
        g: &Geometry,
        layout: &Layout,
        per_tile: usize,
        finite: bool,
        edge_tiles: Option<&dyn Fn(u64) -> bool>,
    ) -> Self {
        if let (true, Some(has_tile)) = (finite, edge_tiles) {
            if let Some(plan) = Self::in_place(g, per_tile, has_tile) {
                return plan;
            }
        }
        if finite && long_reduction(g) {
            if let Some(plan) = Self::exact(g, per_tile) {
                return plan;
            }
        }
        Self::in_order(g, layout, per_tile, finite)
    }

    /// Tiles of consecutive positions over the padded copy. With `finite`
    /// weights a tile whose positions all lie where the kernel reaches
    /// into the padding along the first axis (the first and last rows of
    /// a 2-D output) leaves out the taps that read it; every other tile
    /// runs every tap.
    pub(super) fn in_order(g: &Geometry, layout: &Layout, per_tile: usize, finite: bool) -> Self {
        let d = g.out_spatial.len();
        let q_stride = row_major_strides(&layout.q);
        let os = g.out_size();
        let mut classes: Vec<Taps> = vec![layout.taps.iter().copied().zip(0..).collect()];
        let tiles = os.div_ceil(per_tile);
        let mut first_axis_tiles = Vec::new();
        if finite && d > 0 && os > 0 {
            let inner = os / g.out_spatial[0];
            // Taps are in row-major kernel order: a tap's index along the
            // first axis is its index over the taps of one kernel row.
            let per_row = g.kernel_size() / g.kernel[0];
            for (o0, o1, lo, hi) in axis_runs(g, 0) {
                if (lo, hi) != (0, g.kernel[0]) {
                    // The tiles whose first position is in the run and
                    // whose last (the output's last, for the short tile)
                    // is too.
                    let (p0, p1) = (o0 * inner, o1 * inner);
                    let start = p0.div_ceil(per_tile);
                    let end = if p1 == os { tiles } else { p1 / per_tile };
                    if start >= end {
                        continue;
                    }
                    classes.push(
                        classes[0]
                            .iter()
                            .copied()
                            .filter(|&(_, t)| (lo..hi).contains(&(t / per_row)))
                            .collect(),
                    );
                    first_axis_tiles.push((start, end, classes.len() - 1));
                }
            }
        }
        let edge_by_column = if finite && d > 0 {
            edge_masks(g, per_tile)
        } else {
            Vec::new()
        };
        TilePlan {
            classes,
            tap_shifts: layout.taps.clone(),
            reads_input: false,
            tiles: Vec::new(),
            outputs: Vec::new(),
            bases: Vec::new(),
            os,
            in_order_tiles: Some(tiles),
            first_axis_tiles,
            edge_by_column,
            tile_masks: Vec::new(),
            grid: (0..d).map(|a| (g.out_spatial[a], q_stride[a])).collect(),
            per_tile,
        }
    }

    /// Tiles cut from the classes, reading X; None past [`MAX_CLASSES`] or
    /// when they would run more multiply-adds than tiles in order.
    pub(super) fn exact(g: &Geometry, per_tile: usize) -> Option<Self> {
        let d = g.out_spatial.len();
        let runs: Vec<_> = (0..d).map(|a| axis_runs(g, a)).collect();
        let count: usize = runs.iter().map(Vec::len).product();
        if count > MAX_CLASSES {
            return None;
        }
        let (out_stride, in_stride) = (
            row_major_strides(&g.out_spatial),
            row_major_strides(&g.in_spatial),
        );
        let os = g.out_size();
        let mut plan = Self::listed_in_x(g, per_tile, count);
        let mut steps = 0;
        let mut pick = vec![0usize; d];
        for _ in 0..count {
            let boxed: Vec<_> = (0..d).map(|a| runs[a][pick[a]]).collect();
            let ranges: TapRanges = boxed.iter().map(|r| (r.2, r.3)).collect();
            plan.classes.push(taps_within(g, &plan.tap_shifts, &ranges));
            let class = plan.classes.len() - 1;
            let positions: usize = boxed.iter().map(|r| r.1 - r.0).product();
            let tiles = positions.div_ceil(per_tile);
            steps += tiles * plan.classes[class].len();
            plan.tiles
                .extend((0..tiles).map(|t| (class, (positions - t * per_tile).min(per_tile))));
            // The box's positions in row-major order, a run along the last
            // axis at a time; a base is the input offset of the position's
            // window (before the channel, wrapped, where it starts in the
            // padding).
            let last = d - 1;
            let (l0, l1) = (boxed[last].0, boxed[last].1);
            let s_last = g.strides[last];
            let mut o: Vec<usize> = boxed.iter().map(|r| r.0).collect();
            for _ in 0..positions / (l1 - l0).max(1) {
                let out0: usize = (0..d).map(|a| o[a] * out_stride[a]).sum();
                let base0 = base_in_x(g, &o, &in_stride);
                plan.outputs.extend(out0..out0 + (l1 - l0));
                plan.bases
                    .extend((0..l1 - l0).map(|j| base0.wrapping_add(j * s_last)));
                for a in (0..last).rev() {
                    o[a] += 1;
                    if o[a] < boxed[a].1 {
                        break;
                    }
                    o[a] = boxed[a].0;
                }
            }
            // The short tile's rows: no output, its last base again.
            let short = tiles * per_tile - positions;
            let last_base = plan.bases.last().copied().unwrap_or(0);
            plan.outputs.extend(std::iter::repeat_n(usize::MAX, short));
            plan.bases.extend(std::iter::repeat_n(last_base, short));
            for a in (0..d).rev() {
                pick[a] += 1;
                if pick[a] < runs[a].len() || a == 0 {
                    break;
                }
                pick[a] = 0;
            }
        }
        if steps > os.div_ceil(per_tile) * g.kernel_size() {
            return None;
        }
        if runs[d - 1].len() > 1 {
            plan.sort_by_first_output();
        }
        Some(plan)
    }

    /// Tiles of consecutive positions reading X, without the padded copy:
    /// the classes are runs along every axis but the last (for a 2-D
    /// output, its first and last rows where the kernel reaches into the
    /// padding, and the rows between), each running the kernel rows its
    /// positions read inside the input, whole along the last axis. Along
    /// the last axis a position that reads padding with a column of taps
    /// leaves that column's products out: each tile carries the mask
    /// [`TilePlan::edge_mask_at`] describes, and the kernel runs a tile
    /// with a mask only as a tile that skips those products (and their
    /// reads, which would land outside the position's row or outside X).
    /// For finite weights only: the products left out are `w * 0`.
    ///
    /// None where a mask would have no tile (`has_tile`), or where a
    /// class's short tile (its positions past the last full tile's)
    /// finds no place in it whose positions all read inside the input
    /// along the last axis: short tiles have no masks. The short tile
    /// goes to the first such place, so that the full tiles around it
    /// keep the patterns the kernel has tiles for.
    ///
    /// Against the copy plan ([`TilePlan::in_order`]), in rounds after
    /// pauses as the bench runs them (Zen 4, 2026-12-07): C64 56x56 3x3
    /// 0.983-0.985 of the time on one thread and 0.957-0.969 on two, the
    /// 7x7 stride-2 layer 0.981-0.983 on one and 0.982 on two.
    pub(super) fn in_place(
        g: &Geometry,
        per_tile: usize,
        has_tile: &dyn Fn(u64) -> bool,
    ) -> Option<Self> {
        let d = g.out_spatial.len();
        if d == 0 || per_tile == 0 || g.kernel[d - 1] * per_tile > 64 {
            return None;
        }
        let last = d - 1;
        let (width, kw) = (g.out_spatial[last], g.kernel[last]);
        let runs: Vec<_> = (0..last).map(|a| axis_runs(g, a)).collect();
        let count: usize = runs.iter().map(Vec::len).product();
        if count > MAX_CLASSES || width == 0 {
            return None;
        }
        let skips = padded_columns(g);
        let (out_stride, in_stride) = (
            row_major_strides(&g.out_spatial),
            row_major_strides(&g.in_spatial),
        );
        let mut plan = Self::listed_in_x(g, per_tile, count);
        plan.tile_masks = Vec::with_capacity(plan.tiles.capacity());
        let mut pick = vec![0usize; last];
        for _ in 0..count {
            let boxed: Vec<_> = (0..last).map(|a| runs[a][pick[a]]).collect();
            let mut ranges: TapRanges = boxed.iter().map(|r| (r.2, r.3)).collect();
            ranges.push((0, kw));
            let taps = taps_within(g, &plan.tap_shifts, &ranges);
            // A class that reads no input runs no step and needs no mask.
            let masked = !taps.is_empty();
            plan.classes.push(taps);
            let class = plan.classes.len() - 1;
            // The box's positions in row-major order, whole rows along the
            // last axis: (output position, base in X, kernel columns left
            // out).
            let rows: usize = boxed.iter().map(|r| r.1 - r.0).product();
            let mut o: Vec<usize> = boxed.iter().map(|r| r.0).collect();
            o.push(0);
            let mut positions = Vec::with_capacity(rows * width);
            for _ in 0..rows {
                o[last] = 0;
                let out0: usize = (0..d).map(|a| o[a] * out_stride[a]).sum();
                let base0 = base_in_x(g, &o, &in_stride);
                positions.extend((0..width).map(|c| {
                    let base = base0.wrapping_add(c * g.strides[last]);
                    (out0 + c, base, if masked { skips[c] } else { 0 })
                }));
                for a in (0..last).rev() {
                    o[a] += 1;
                    if o[a] < boxed[a].1 {
                        break;
                    }
                    o[a] = boxed[a].0;
                }
            }
            // The short tile's place: the first tile boundary from which
            // its positions read no padding along the last axis.
            let short = positions.len() % per_tile;
            let full_end = positions.len() - short;
            let short_at = match short {
                0 => full_end,
                _ => (0..=full_end)
                    .step_by(per_tile)
                    .find(|&k| positions[k..k + short].iter().all(|p| p.2 == 0))?,
            };
            let mut k = 0;
            while k < positions.len() {
                let real = if k == short_at && short > 0 {
                    short
                } else {
                    per_tile
                };
                let tile = &positions[k..k + real];
                let mut mask = 0u64;
                for (i, &(_, _, columns)) in tile.iter().enumerate() {
                    for c in (0..kw).filter(|&c| columns >> c & 1 != 0) {
                        mask |= 1 << (c * per_tile + i);
                    }
                }
                if mask != 0 && (real < per_tile || !has_tile(mask)) {
                    return None;
                }
                plan.tiles.push((class, real));
                plan.tile_masks.push(mask);
                plan.outputs.extend(tile.iter().map(|p| p.0));
                plan.bases.extend(tile.iter().map(|p| p.1));
                // A short tile's rows: no output, its last base again.
                let last_base = tile[real - 1].1;
                plan.outputs
                    .extend(std::iter::repeat_n(usize::MAX, per_tile - real));
                plan.bases
                    .extend(std::iter::repeat_n(last_base, per_tile - real));
                k += real;
            }
            for a in (0..last).rev() {
                pick[a] += 1;
                if pick[a] < runs[a].len() || a == 0 {
                    break;
                }
                pick[a] = 0;
            }
        }
        // Classes along a middle axis (3-D and up) interleave in the
        // output: put their tiles in output order, as `exact` does.
        if d > 2 {
            plan.sort_by_first_output();
        }
        Some(plan)
    }

    /// An empty plan of listed tiles reading X, with room for `count`
    /// classes' tiles (each class ends in at most one short tile).
    fn listed_in_x(g: &Geometry, per_tile: usize, count: usize) -> Self {
        let os = g.out_size();
        TilePlan {
            classes: Vec::with_capacity(count),
            tap_shifts: shifts_in_x(g),
            reads_input: true,
            tiles: Vec::with_capacity(os.div_ceil(per_tile) + count),
            outputs: Vec::with_capacity(os + per_tile * count),
            bases: Vec::with_capacity(os + per_tile * count),
            os,
            in_order_tiles: None,
            first_axis_tiles: Vec::new(),
            edge_by_column: Vec::new(),
            tile_masks: Vec::new(),
            grid: Vec::new(),
            per_tile,
        }
    }

    /// Puts the tiles in the order of their first output position, so
    /// that a class along a column runs beside the interior tiles of its
    /// rows: its single-position runs then write lines the interior's
    /// stores find in cache, where running each class whole wrote the
    /// output's lines twice a plane apart.
    fn sort_by_first_output(&mut self) {
        let p = self.per_tile;
        let mut order: Vec<usize> = (0..self.tiles.len()).collect();
        order.sort_unstable_by_key(|&t| self.outputs[t * p]);
        let gather = |v: &[usize]| -> Vec<usize> {
            order
                .iter()
                .flat_map(|&t| v[t * p..][..p].iter().copied())
                .collect()
        };
        self.outputs = gather(&self.outputs);
        self.bases = gather(&self.bases);
        self.tiles = order.iter().map(|&t| self.tiles[t]).collect();
        if !self.tile_masks.is_empty() {
            self.tile_masks = order.iter().map(|&t| self.tile_masks[t]).collect();
        }
    }

    /// How many tiles.
    pub(super) fn len(&self) -> usize {
        self.in_order_tiles.unwrap_or(self.tiles.len())
    }

    /// Tile `t`'s class and how many of its positions are real.
    pub(super) fn tile(&self, t: usize) -> (usize, usize) {
        match self.in_order_tiles {
            Some(_) => {
                let real = (self.os - t * self.per_tile).min(self.per_tile);
                // A few ranges at most: the first axis's leading and
                // trailing runs that reach into the padding.
                let class = self
                    .first_axis_tiles
                    .iter()
                    .find(|&&(start, end, _)| (start..end).contains(&t))
                    .map_or(0, |&(_, _, class)| class);
                (class, real)
            }
            None => self.tiles[t],
        }
    }

    /// True when tiles in order may hold positions that read only padding
    /// with a column of taps ([`TilePlan::edge_mask_at`]).
    pub(super) fn has_edge_columns(&self) -> bool {
        !self.edge_by_column.is_empty()
    }

    /// The output column (along the last axis) of tile `t`'s first
    /// position, with edge columns (0 without).
    pub(super) fn edge_column(&self, t: usize) -> usize {
        match self.edge_by_column.len() {
            0 => 0,
            w => t * self.per_tile % w,
        }
    }

    /// The column of the next tile's first position after a tile's whose
    /// is `column` ([`TilePlan::edge_column`]), without a division.
    pub(super) fn next_edge_column(&self, column: usize) -> usize {
        let w = self.edge_by_column.len();
        if w == 0 {
            return 0;
        }
        let mut next = column + self.per_tile;
        while next >= w {
            next -= w;
        }
        next
    }

    /// Of the positions of a full tile in order whose first position is in
    /// output column `column`, those that read only padding with a column
    /// of taps, the kernel's index `c` along the last axis: bit `c *
    /// per_tile + i` for position `i`; 0 for none or a plan without them.
    /// With finite weights their products are zeros, which a tile may
    /// leave out.
    pub(super) fn edge_mask_at(&self, column: usize) -> u64 {
        self.edge_by_column.get(column).copied().unwrap_or(0)
    }

    /// True when the plan's tiles carry masks of their own
    /// ([`TilePlan::in_place`]): a tile with a mask must run as a tile
    /// that leaves those products out, as its positions' reads for them
    /// lie outside their rows.
    pub(super) fn has_tile_masks(&self) -> bool {
        !self.tile_masks.is_empty()
    }

    /// Tile `t`'s mask in a plan with masks of its own, 0 in others.
    pub(super) fn tile_mask(&self, t: usize) -> u64 {
        self.tile_masks.get(t).copied().unwrap_or(0)
    }

    /// [`TilePlan::edge_mask_at`] for tile `t`, 0 for a short tile.
    #[cfg(test)]
    pub(super) fn edge_mask(&self, t: usize) -> u64 {
        match (t + 1) * self.per_tile <= self.os {
            true => self.edge_mask_at(self.edge_column(t)),
            false => 0,
        }
    }

    /// The bases of the positions of tiles `tiles`, `per_tile` each (a
    /// short tile's last repeated).
    pub(super) fn bases(&self, tiles: std::ops::Range<usize>) -> std::borrow::Cow<'_, [usize]> {
        let (a, b) = (tiles.start * self.per_tile, tiles.end * self.per_tile);
        if self.in_order_tiles.is_none() {
            return std::borrow::Cow::Borrowed(&self.bases[a..b]);
        }
        // Positions a.. in order: one division per axis for the first,
        // then an odometer that turns once per run along the last axis.
        let d = self.grid.len();
        let mut coord = vec![0usize; d];
        let (mut rest, mut index) = (a, 0);
        for k in (0..d).rev() {
            coord[k] = rest % self.grid[k].0;
            rest /= self.grid[k].0;
            index += coord[k] * self.grid[k].1;
        }
        let count = b.min(self.os).saturating_sub(a);
        let mut out = Vec::with_capacity(b - a);
        while out.len() < count {
            let mut k = d - 1;
            let run = (self.grid[k].0 - coord[k]).min(count - out.len());
            out.extend(index..index + run);
            coord[k] += run;
            index += run;
            while coord[k] == self.grid[k].0 && k > 0 {
                index -= coord[k] * self.grid[k].1;
                coord[k] = 0;
                k -= 1;
                coord[k] += 1;
                index += self.grid[k].1;
            }
        }
        let last = out.last().copied().unwrap_or(0);
        out.resize(b - a, last);
        std::borrow::Cow::Owned(out)
    }

    /// The output positions of tiles `tiles`, one per row of their sums.
    pub(super) fn rows(&self, tiles: std::ops::Range<usize>) -> Rows<'_> {
        let (a, b) = (tiles.start * self.per_tile, tiles.end * self.per_tile);
        if self.in_order_tiles.is_some() {
            return Rows::Run {
                first: a,
                count: b.min(self.os) - a,
            };
        }
        let listed = &self.outputs[a..b];
        // Consecutive positions (most groups of a plan in place) take the
        // write-out's loop for a run, without walking the list.
        match listed.first() {
            Some(&first)
                if first != usize::MAX
                    && listed.iter().enumerate().all(|(i, &p)| p == first + i) =>
            {
                Rows::Run {
                    first,
                    count: listed.len(),
                }
            }
            _ => Rows::Listed(listed),
        }
    }
}

/// The output positions of a run of tiles' sums, row by row.
#[derive(Clone, Copy)]
pub(super) enum Rows<'a> {
    /// `count` consecutive positions from `first`.
    Run { first: usize, count: usize },
    /// One per row, `usize::MAX` for a row of none (a short tile's).
    Listed(&'a [usize]),
}

impl Rows<'_> {
    /// Rows of sums, those of none included.
    pub(super) fn len(&self) -> usize {
        match *self {
            Rows::Run { count, .. } => count,
            Rows::Listed(r) => r.len(),
        }
    }

    /// The runs of consecutive positions among rows `q..q + lanes`, into
    /// `out` as (first lane, lane past the last, first position); returns
    /// how many (at most `lanes`, which is at most 16).
    #[inline(always)]
    pub(super) fn lane_runs(
        &self,
        q: usize,
        lanes: usize,
        out: &mut [(usize, usize, usize); 16],
    ) -> usize {
        let rows = match *self {
            Rows::Run { first, count } => {
                out[0] = (0, lanes.min(count - q), first + q);
                return 1;
            }
            Rows::Listed(r) => r,
        };
        let mut n = 0;
        for (i, len, first) in listed_runs(rows, q..(q + lanes).min(rows.len())) {
            out[n] = (i - q, i - q + len, first);
            n += 1;
        }
        n
    }

    /// Positions that between them touch every line the rows write: the
    /// start of each run of consecutive positions, every 16th after it,
    /// and its last.
    pub(super) fn line_starts(&self) -> Vec<usize> {
        let mut lines = Vec::new();
        let mut run = |start: usize, len: usize| {
            lines.extend((0..=len / 16).map(|l| start + (16 * l).min(len - 1)));
        };
        match *self {
            Rows::Run { first, count } => run(first, count),
            Rows::Listed(rows) => {
                for (_, len, first) in listed_runs(rows, 0..rows.len()) {
                    run(first, len);
                }
            }
        }
        lines.dedup();
        lines
    }
}

/// The runs of consecutive positions among `rows[range]`, rows of none
/// (`usize::MAX`) skipped, as (index of the run's first row, its length,
/// its first position).
#[inline(always)]
fn listed_runs(
    rows: &[usize],
    range: std::ops::Range<usize>,
) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let (mut i, end) = (range.start, range.end);
    std::iter::from_fn(move || {
        while i < end && rows[i] == usize::MAX {
            i += 1;
        }
        if i >= end {
            return None;
        }
        let mut j = i + 1;
        while j < end && rows[j] == rows[i] + (j - i) {
            j += 1;
        }
        let run = (i, j - i, rows[i]);
        i = j;
        Some(run)
    })
}

/// [`TilePlan::edge_by_column`] for tiles of `per_tile` positions: empty
/// when no column of the last axis reads padding, or when a tile's bits
/// would not fit in 64.
fn edge_masks(g: &Geometry, per_tile: usize) -> Vec<u64> {
    let d = g.out_spatial.len();
    let (w, k) = (g.out_spatial[d - 1], g.kernel[d - 1]);
    if w == 0 || k * per_tile > 64 {
        return Vec::new();
    }
    let skips = padded_columns(g);
    if skips.iter().all(|&m| m == 0) {
        return Vec::new();
    }
    (0..w)
        .map(|c0| {
            let mut mask = 0u64;
            for i in 0..per_tile {
                let col = (c0 + i) % w;
                for c in (0..k).filter(|&c| skips[col] >> c & 1 != 0) {
                    mask |= 1 << (c * per_tile + i);
                }
            }
            mask
        })
        .collect()
}

/// The taps (row-major kernel order) whose index along every axis lies in
/// that axis's range, with their shifts from `shifts`.
fn taps_within(g: &Geometry, shifts: &[usize], ranges: &[(usize, usize)]) -> Taps {
    let d = g.kernel.len();
    let mut k = vec![0usize; d];
    let mut taps = Vec::new();
    for (t, &shift) in shifts.iter().enumerate() {
        if (0..d).all(|a| ranges[a].0 <= k[a] && k[a] < ranges[a].1) {
            taps.push((shift, t));
        }
        for a in (0..d).rev() {
            k[a] += 1;
            if k[a] < g.kernel[a] || a == 0 {
                break;
            }
            k[a] = 0;
        }
    }
    taps
}

/// Each tap's shift (row-major kernel order) within an input channel of X.
fn shifts_in_x(g: &Geometry) -> Vec<usize> {
    let d = g.out_spatial.len();
    let in_stride = row_major_strides(&g.in_spatial);
    let kernel_stride = row_major_strides(&g.kernel);
    (0..g.kernel_size())
        .map(|t| {
            (0..d)
                .map(|a| (t / kernel_stride[a] % g.kernel[a]) * g.dilations[a] * in_stride[a])
                .sum()
        })
        .collect()
}

/// The input offset of output position `o`'s window in a channel of X:
/// before the channel (wrapped) where it starts in the padding, so that
/// a tap's shift brings it inside wherever that tap reads the input.
fn base_in_x(g: &Geometry, o: &[usize], in_stride: &[usize]) -> usize {
    (0..o.len()).fold(0usize, |acc, a| {
        let at = (o[a] * g.strides[a]).wrapping_sub(g.pads_begin[a]);
        acc.wrapping_add(at.wrapping_mul(in_stride[a]))
    })
}
