//! Which output positions each register tile of the channel-lane kernel
//! (`direct_lanes.rs`) holds, and which kernel taps it runs.
//!
//! A tap whose input lies in the zero padding for every position of a tile
//! adds only zeros to its sums, so the tile can leave it out. Along one
//! axis the taps an output index reads inside the input form one range,
//! and the indices with the same range form runs (the first and last few
//! of each axis, and the interior). Positions whose ranges agree on every
//! axis form a class, a box of the output, and run the same taps: tiles
//! are cut from each class in row-major order, and the few positions left
//! over in each class share tiles whose taps cover all of theirs. On a
//! 14x14 output of a 3x3 kernel with padding 1 that leaves out 8% of the
//! multiply-adds (the border positions lack a row or a column of taps);
//! on 56x56 it would be 2.3%, for the 7x7 stride-2 layer on 224x224 1.5%,
//! too little for what the classes cost there ([`SKIP_FROM`]).
//!
//! Leaving out a product `w * 0` changes no bit of the sum when `w` is
//! finite, except that a sum of negative zeros stays a negative zero where
//! adding `+0` would make it `+0`. An infinite or NaN weight times a padding
//! zero is NaN, so with any such weight every tile runs every tap (the
//! kernel then gives what it gave before it skipped any).
//!
//! Tiles of one class hold positions in row-major order, so their outputs
//! are runs along the last axis, which the write-out stores whole; a
//! class along the first or last columns holds one position per row.

use super::direct::Layout;
use super::Geometry;

/// The most classes (tap lists) a plan keeps: past that (kernels with very
/// wide reach into large padding, mostly in 3-D) every tile runs every
/// tap, so the lists stay within a few times the kernel's size.
const MAX_CLASSES: usize = 64;

/// The taps of one class: each one's shift within an input channel of
/// the phase-split buffer, and its index in the kernel's row-major order
/// (where its weight sits among one channel's).
pub(super) type Taps = Vec<(usize, usize)>;

/// Per axis, the kernel indices `lo..hi` a position reads inside the input.
type TapRanges = Vec<(usize, usize)>;

/// The tiles of one image, in the order the kernel runs them.
pub(super) struct TilePlan {
    /// The tap lists, one per class.
    pub(super) classes: Vec<Taps>,
    /// Each tile's class and how many of its positions are real (the last
    /// tile may be short); empty when the tiles hold the positions in order.
    tiles: Vec<(usize, usize)>,
    /// `per_tile` output positions (flat indices into an output plane) per
    /// tile; `usize::MAX` past a short tile's last. Empty when the tiles
    /// hold the positions in order, `per_tile` apiece (one class).
    outputs: Vec<usize>,
    /// Each of those positions' base in the buffer's grid (a short tile
    /// repeats its last); empty when the tiles hold the positions in order,
    /// whose bases [`TilePlan::bases`] works out from the grid instead, a
    /// work item's at a time (a list of every position's would be a tenth
    /// of a megabyte for a 112x112 output, built and read on every call).
    bases: Vec<usize>,
    /// Positions per image.
    os: usize,
    /// Tiles, when they hold the positions in order.
    in_order_tiles: Option<usize>,
    /// Per axis: the output's extent and the grid's stride.
    grid: Vec<(usize, usize)>,
    per_tile: usize,
}

/// Along one axis, the runs of output indices `o0..o1` that read taps
/// `lo..hi` inside the input.
fn axis_runs(g: &Geometry, a: usize, skip: bool) -> Vec<(usize, usize, usize, usize)> {
    let (s, d, pb, n, k) = (
        g.strides[a],
        g.dilations[a],
        g.pads_begin[a],
        g.in_spatial[a],
        g.kernel[a],
    );
    let range = |o: usize| {
        if !skip {
            return (0, k);
        }
        // Tap j reads padded index o*s + j*d; the input spans pb..pb+n.
        let start = o * s;
        let lo = pb.saturating_sub(start).div_ceil(d).min(k);
        let hi = (pb + n).saturating_sub(start).div_ceil(d).clamp(lo, k);
        (lo, hi)
    };
    let mut runs: Vec<(usize, usize, usize, usize)> = Vec::new();
    for o in 0..g.out_spatial[a] {
        let (lo, hi) = range(o);
        match runs.last_mut() {
            Some(r) if (r.2, r.3) == (lo, hi) => r.1 = o + 1,
            _ => runs.push((o, o + 1, lo, hi)),
        }
    }
    runs
}

/// True when the reduction (input channels x taps) is long enough for
/// tiles to skip the padding's taps: from [`SKIP_FROM`].
pub(super) fn long_reduction(g: &Geometry) -> bool {
    g.in_channels / g.group * g.kernel_size() >= SKIP_FROM
}

/// Reduction length (input channels x taps) from which tiles skip the
/// padding's taps. Below it the tiles hold the output in order, as they
/// did before there were classes: a class along a column holds one
/// position per row, whose channels the write-out stores one lane at a
/// time into lines the interior's stores write again, and cutting tiles
/// at class edges adds short runs; where the reduction is short the
/// multiply-adds saved do not pay for that. Paired probes (6 pairs of 1 s
/// runs each, Zen 4 EPYC, against the kernel before plans): C256 14x14 3x3
/// (2304 per output) 3-6% faster on one and two threads in three of four
/// rounds, 1-3% in the fourth; with classes along every axis C64 56x56 3x3
/// (576) was 3-6% slower and the 7x7 stride-2 layer (147) 6-14%, and with
/// classes along the rows only 0-4% and 4-9%. Without classes they are
/// within about 2-5% of the kernel before plans (building the plan, one
/// pass over the positions, is about 1% of the 7x7 layer's call).
const SKIP_FROM: usize = 1024;

impl TilePlan {
    /// The plan for `g`'s output on `layout`'s grid, `per_tile` positions
    /// to a tile; `skip_padding` false (a weight not finite, or a short
    /// reduction: [`long_reduction`]) gives every tile every tap, the
    /// positions in order.
    pub(super) fn new(g: &Geometry, layout: &Layout, per_tile: usize, skip_padding: bool) -> Self {
        Self::build(g, layout, per_tile, skip_padding)
            .filter(|p| p.classes.len() <= MAX_CLASSES)
            .or_else(|| Self::build(g, layout, per_tile, false))
            .expect("a plan without skipping has one class")
    }

    /// None once the classes pass [`MAX_CLASSES`].
    fn build(g: &Geometry, layout: &Layout, per_tile: usize, skip: bool) -> Option<Self> {
        let d = g.out_spatial.len();
        let runs: Vec<_> = (0..d).map(|a| axis_runs(g, a, skip)).collect();
        let classes_wanted: usize = runs.iter().map(Vec::len).product();
        if classes_wanted > MAX_CLASSES {
            return None;
        }
        // Strides of an output plane and of the buffer's grid.
        let (mut out_stride, mut grid_stride) = (vec![1usize; d], vec![1usize; d]);
        for a in (0..d.saturating_sub(1)).rev() {
            out_stride[a] = out_stride[a + 1] * g.out_spatial[a + 1];
            grid_stride[a] = grid_stride[a + 1] * layout.q[a + 1];
        }
        let os = g.out_size();
        let grid = (0..d).map(|a| (g.out_spatial[a], grid_stride[a])).collect();
        if classes_wanted == 1 {
            let ranges: TapRanges = runs.iter().map(|r| (r[0].2, r[0].3)).collect();
            return Some(TilePlan {
                classes: vec![taps_within(g, layout, &ranges)],
                tiles: Vec::new(),
                outputs: Vec::new(),
                bases: Vec::new(),
                os,
                in_order_tiles: Some(os.div_ceil(per_tile)),
                grid,
                per_tile,
            });
        }
        let mut plan = TilePlan {
            classes: Vec::new(),
            tiles: Vec::with_capacity(os.div_ceil(per_tile) + classes_wanted),
            outputs: Vec::with_capacity(os + per_tile * classes_wanted),
            bases: Vec::with_capacity(os + per_tile * classes_wanted),
            os,
            in_order_tiles: None,
            grid,
            per_tile,
        };
        // Positions left over from each class: (output, base, tap ranges).
        let mut left: Vec<(usize, usize, TapRanges)> = Vec::new();
        let mut pick = vec![0usize; d];
        for _ in 0..classes_wanted {
            let boxed: Vec<_> = (0..d).map(|a| runs[a][pick[a]]).collect();
            let ranges: TapRanges = boxed.iter().map(|r| (r.2, r.3)).collect();
            let count: usize = boxed.iter().map(|r| r.1 - r.0).product();
            let whole = count / per_tile * per_tile;
            let class = if whole > 0 {
                plan.classes.push(taps_within(g, layout, &ranges));
                plan.classes.len() - 1
            } else {
                usize::MAX
            };
            // The box's positions in row-major order, a run along the last
            // axis at a time (both strides of that axis are 1).
            let last = d - 1;
            let (l0, l1) = (boxed[last].0, boxed[last].1);
            let mut o: Vec<usize> = boxed.iter().map(|r| r.0).collect();
            plan.tiles
                .extend(std::iter::repeat_n((class, per_tile), whole / per_tile));
            let mut i = 0;
            for _ in 0..count / (l1 - l0).max(1) {
                let out0: usize = (0..d).map(|a| o[a] * out_stride[a]).sum();
                let base0: usize = (0..d).map(|a| o[a] * grid_stride[a]).sum();
                let len = l1 - l0;
                let taken = len.min(whole.saturating_sub(i));
                plan.outputs.extend(out0..out0 + taken);
                plan.bases.extend(base0..base0 + taken);
                left.extend((taken..len).map(|j| (out0 + j, base0 + j, ranges.clone())));
                i += len;
                for a in (0..last).rev() {
                    o[a] += 1;
                    if o[a] < boxed[a].1 {
                        break;
                    }
                    o[a] = boxed[a].0;
                }
            }
            for a in (0..d).rev() {
                pick[a] += 1;
                if pick[a] < runs[a].len() || a == 0 {
                    break;
                }
                pick[a] = 0;
            }
        }
        // The leftovers in output order, each tile with the taps any of
        // its positions reads.
        left.sort_unstable_by_key(|l| l.0);
        for chunk in left.chunks(per_tile) {
            let ranges: TapRanges = (0..d)
                .map(|a| {
                    let lo = chunk.iter().map(|l| l.2[a].0).min().unwrap_or(0);
                    let hi = chunk.iter().map(|l| l.2[a].1).max().unwrap_or(0);
                    (lo, hi.max(lo))
                })
                .collect();
            plan.classes.push(taps_within(g, layout, &ranges));
            plan.tiles.push((plan.classes.len() - 1, chunk.len()));
            for i in 0..per_tile {
                let l = &chunk[i.min(chunk.len() - 1)];
                plan.outputs
                    .push(if i < chunk.len() { l.0 } else { usize::MAX });
                plan.bases.push(l.1);
            }
        }
        if runs[d - 1].len() > 1 {
            plan.sort_by_first_output();
        }
        Some(plan)
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
    }

    /// How many tiles.
    pub(super) fn len(&self) -> usize {
        self.in_order_tiles.unwrap_or(self.tiles.len())
    }

    /// Tile `t`'s class and how many of its positions are real.
    pub(super) fn tile(&self, t: usize) -> (usize, usize) {
        match self.in_order_tiles {
            Some(_) => (0, (self.os - t * self.per_tile).min(self.per_tile)),
            None => self.tiles[t],
        }
    }

    /// The grid bases of the positions of tiles `tiles`, `per_tile` each
    /// (a short tile's last repeated).
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
            Rows::Run {
                first: a,
                count: b.min(self.os) - a,
            }
        } else {
            Rows::Listed(&self.outputs[a..b])
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
        let end = (q + lanes).min(rows.len());
        let mut i = q;
        while i < end {
            if rows[i] == usize::MAX {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < end && rows[j] == rows[i] + (j - i) {
                j += 1;
            }
            out[n] = (i - q, j - q, rows[i]);
            n += 1;
            i = j;
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
                let mut i = 0;
                while i < rows.len() {
                    if rows[i] == usize::MAX {
                        i += 1;
                        continue;
                    }
                    let mut j = i + 1;
                    while j < rows.len() && rows[j] == rows[i] + (j - i) {
                        j += 1;
                    }
                    run(rows[i], j - i);
                    i = j;
                }
            }
        }
        lines.dedup();
        lines
    }
}

/// The taps (row-major kernel order) whose index along every axis lies in
/// that axis's range.
fn taps_within(g: &Geometry, layout: &Layout, ranges: &[(usize, usize)]) -> Taps {
    let d = g.kernel.len();
    let mut k = vec![0usize; d];
    let mut taps = Vec::new();
    for (t, &shift) in layout.taps.iter().enumerate() {
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
