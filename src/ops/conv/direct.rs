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
use std::mem::MaybeUninit;

/// Output channels per register tile (and per packed weight block).
pub(crate) const OCB: usize = 4;
/// The most f32 lanes of a vector (AVX-512's 16).
const MAX_LANES: usize = 16;
/// Input bytes one tile may read in one chunk of the reduction, so that
/// they stay in L1 while every block of the item runs over them (half of a
/// 32 KiB L1, leaving room for the weights streaming past).
const CHUNK_INPUT_BYTES: usize = 16 << 10;
/// Packed weights of a group that L2 holds whole, with room to spare.
const ITEM_WEIGHT_BYTES: usize = 512 << 10;

/// Where one image's input goes in the phase-split buffer, and how each
/// tap reads it.
pub(super) struct Layout {
    /// Phase-plane extent along each spatial axis.
    pub(super) q: Vec<usize>,
    /// Elements per input channel (all its phase planes).
    pub(super) chan: usize,
    /// Positions computed per output channel: the output's first extent
    /// times the plane's other extents.
    positions: usize,
    /// Shift of each kernel tap (row-major kernel order) within a channel.
    pub(super) taps: Vec<usize>,
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
        let (q_strides, phase_strides) = (row_major_strides(&q), row_major_strides(&g.strides));
        let mut taps = vec![0usize];
        for a in 0..d {
            let (q_stride, phase_stride) = (q_strides[a], phase_strides[a]);
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

    /// True when one channel's phase planes are the input channel as it
    /// is (no padding, unit strides): the buffer's channels would copy the
    /// image.
    pub(super) fn is_image(&self, g: &Geometry) -> bool {
        g.strides.iter().all(|&s| s == 1)
            && g.pads_begin.iter().chain(&g.pads_end).all(|&p| p == 0)
            && self.chan == g.in_size()
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
    // Chunks of whole input channels, bounded by what one tile reads of
    // them.
    let taps = layout.taps.len();
    let per_channel = layout.footprint(g, lanes * vecs_per_tile) * 4;
    let channels = (CHUNK_INPUT_BYTES / per_channel).clamp(1, cg.max(1));
    let chunk = (channels * taps).max(1);
    // Work items: a range of tiles times a range of blocks, about eight per
    // thread (so both cores stay busy to the end without many small
    // items). Within an item a tile's chunk of input stays in L1 while every
    // block runs over it, and a chunk of the blocks' weights stays in L2
    // while every tile runs over it. Weights that fit L2 whole are split
    // along the tiles first; larger ones along the blocks, so that each
    // item reads its share from memory once rather than once per tile.
    let want = 8 * threads();
    let weight_bytes = blocks * OCB * kdim * 4;
    let (tile_items, block_items) = if weight_bytes <= ITEM_WEIGHT_BYTES {
        let tile_items = want.div_ceil(g.group).clamp(1, tiles);
        let block_items = want.div_ceil(tile_items * g.group).clamp(1, blocks.max(1));
        (tile_items, block_items)
    } else {
        let block_items = want.div_ceil(g.group).clamp(1, blocks.max(1));
        let tile_items = want.div_ceil(block_items * g.group).clamp(1, tiles);
        (tile_items, block_items)
    };
    let (tr, bc) = (tiles.div_ceil(tile_items), blocks.div_ceil(block_items));
    let (tile_items, block_items) = (tiles.div_ceil(tr), blocks.div_ceil(bc));
    // Each (channel, tap) of a group, as a shift from the group's first
    // channel.
    let shifts: Vec<usize> = (0..cg)
        .flat_map(|c| layout.taps.iter().map(move |&t| c * layout.chan + t))
        .collect();
    let os = g.out_size();
    let yp = SendPtr(y.as_mut_ptr() as *mut f32);
    let mut buf = take_buffer(layout);
    for n in 0..g.batch {
        let image = &x[n * g.in_channels * g.in_size()..(n + 1) * g.in_channels * g.in_size()];
        fill_buffer(g, layout, image, &mut buf);
        let buf = &buf;
        let items = g.group * block_items * tile_items;
        crate::ops::parallel::share(items, &|item| {
            let ti = item % tile_items;
            let bi = (item / tile_items) % block_items;
            let gi = item / tile_items / block_items;
            let (b0, b1) = (bi * bc, ((bi + 1) * bc).min(blocks));
            // The item's tiles: first position, vectors, output segments.
            let item_tiles: Vec<(usize, usize, Vec<Segment>)> = (ti * tr
                ..((ti + 1) * tr).min(tiles))
                .map(|t| {
                    let (p0, p1) = (tile_start(t), tile_start(t + 1));
                    let vecs = (p1 - p0).div_ceil(lanes);
                    (p0, vecs, segments(g, layout, p0, p1, lanes))
                })
                .collect();
            let ld = lanes * vecs_per_tile;
            // Partial sums between chunks, when there is more than one.
            let mut acc: Vec<f32> = Vec::new();
            if chunk < kdim {
                acc.reserve_exact((b1 - b0) * item_tiles.len() * OCB * ld);
            }
            let accp = acc.as_mut_ptr();
            let xg = buf[gi * cg * layout.chan..].as_ptr();
            for k0 in (0..kdim).step_by(chunk) {
                let k1 = (k0 + chunk).min(kdim);
                for (t, (p0, vecs, segs)) in item_tiles.iter().enumerate() {
                    for b in b0..b1 {
                        let partial =
                            accp.wrapping_add(((b - b0) * item_tiles.len() + t) * OCB * ld);
                        let from = if k0 == 0 {
                            From::Bias(std::array::from_fn(|o| {
                                let oc = b * OCB + o;
                                match bias {
                                    Some(bias) if oc < mg => bias[gi * mg + oc],
                                    _ => 0.0,
                                }
                            }))
                        } else {
                            From::Partial(partial, ld)
                        };
                        let to = if k1 == kdim {
                            To::Planes(
                                std::array::from_fn(|o| {
                                    let oc = b * OCB + o;
                                    (oc < mg).then(|| {
                                        yp.get()
                                            .wrapping_add((n * g.out_channels + gi * mg + oc) * os)
                                    })
                                }),
                                segs,
                            )
                        } else {
                            To::Partial(partial, ld)
                        };
                        let wb = w.block(gi, b)[k0 * OCB..].as_ptr();
                        // SAFETY: the CPU has `isa` (asserted above); every
                        // shift plus the tile's vectors stays inside the
                        // buffer (`Layout::len` covers the last channel's
                        // reach), the weights hold `kdim` entries of OCB per
                        // block; `acc` holds OCB rows of `ld` per block and
                        // tile, written by a chunk before the next reads
                        // them; this item alone writes its output channels
                        // at its positions (`segs`).
                        unsafe {
                            let xs = xg.add(*p0);
                            let s = &shifts[k0..k1];
                            match (isa, vecs) {
                                (Isa::Avx512, 6) => tile512::<6>(xs, s, wb, from, to),
                                (Isa::Avx512, 5) => tile512::<5>(xs, s, wb, from, to),
                                (Isa::Avx512, 4) => tile512::<4>(xs, s, wb, from, to),
                                (Isa::Avx512, 3) => tile512::<3>(xs, s, wb, from, to),
                                (Isa::Avx512, 2) => tile512::<2>(xs, s, wb, from, to),
                                (Isa::Avx512, _) => tile512::<1>(xs, s, wb, from, to),
                                (_, 3) => tile256::<3>(xs, s, wb, from, to),
                                (_, 2) => tile256::<2>(xs, s, wb, from, to),
                                _ => tile256::<1>(xs, s, wb, from, to),
                            }
                        }
                    }
                }
            }
        });
    }
    keep_buffer(buf);
}

/// The calling thread's buffer from its last call, when there is one, with
/// room for `layout`: a model run many times would otherwise allocate (and
/// on many systems page-fault) a copy of its input on every run.
pub(super) fn take_buffer(layout: &Layout) -> Vec<f32> {
    let mut buf = BUFFER.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
    buf.clear();
    buf.reserve_exact(layout.len);
    buf
}

/// Gives the buffer back for the thread's next call, unless it is large.
pub(super) fn keep_buffer(buf: Vec<f32>) {
    if buf.capacity() <= KEPT_BUFFER_BYTES / 4 {
        BUFFER.with(|cell| *cell.borrow_mut() = buf);
    }
}

/// Makes `buf` (from [`take_buffer`]) one image's phase-split copy.
pub(super) fn fill_buffer(g: &Geometry, layout: &Layout, image: &[f32], buf: &mut Vec<f32>) {
    buf.clear();
    fill(
        g,
        layout,
        image,
        &mut buf.spare_capacity_mut()[..layout.len],
    );
    // SAFETY: `fill` wrote all `layout.len` elements.
    unsafe { buf.set_len(layout.len) };
}

thread_local! {
    /// Each thread's input buffer, kept between calls.
    static BUFFER: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest input buffer a thread keeps after a call.
const KEPT_BUFFER_BYTES: usize = 16 << 20;

/// Where a tile's sums start.
#[derive(Clone, Copy)]
enum From {
    /// The block's biases (the first chunk).
    Bias([f32; OCB]),
    /// OCB rows `ld` apart of partial sums (an earlier chunk).
    Partial(*mut f32, usize),
}

/// Where a tile's sums go.
#[derive(Clone, Copy)]
enum To<'a> {
    /// OCB rows `ld` apart, for the next chunk.
    Partial(*mut f32, usize),
    /// The output planes of the block's channels (None past the group's
    /// end), at the tile's segments.
    Planes([Option<*mut f32>; OCB], &'a [Segment]),
}

/// A run of lanes of one vector of a tile that lands in one output row:
/// lanes `lanes` (a bit mask) of vector `vec` go to the plane at `offset`
/// plus the lane index.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vec: usize,
    lanes: u16,
    offset: isize,
}

/// The segments of the tile of positions `p0..p1`, vectors of `lanes`:
/// each run of positions within one grid row, cut to the output's extent,
/// and none for the rows outside the output.
fn segments(g: &Geometry, layout: &Layout, p0: usize, p1: usize, lanes: usize) -> Vec<Segment> {
    let d = g.out_spatial.len();
    let (ql, ol) = (layout.q[d - 1], g.out_spatial[d - 1]);
    let mut segs = Vec::new();
    let mut p = p0;
    while p < p1 {
        let (vec, lane) = ((p - p0) / lanes, (p - p0) % lanes);
        let (r, x) = (p / ql, p % ql);
        let run = (ql - x).min(lanes - lane).min(p1 - p);
        if let Some(out_row) = output_row(g, layout, r) {
            if x < ol {
                let valid = run.min(ol - x);
                let mask = (((1u32 << valid) - 1) << lane) as u16;
                let offset = (out_row * ol + x) as isize - lane as isize;
                segs.push(Segment {
                    vec,
                    lanes: mask,
                    offset,
                });
            }
        }
        p += run;
    }
    segs
}

/// The output row (all axes but the last, row-major) of grid row `r`, or
/// None when one of its inner coordinates lies past the output.
fn output_row(g: &Geometry, layout: &Layout, r: usize) -> Option<usize> {
    let d = g.out_spatial.len();
    let (mut rest, mut out_row, mut scale) = (r, 0, 1);
    for a in (0..d - 1).rev() {
        let c = if a == 0 { rest } else { rest % layout.q[a] };
        rest = if a == 0 { 0 } else { rest / layout.q[a] };
        if c >= g.out_spatial[a] {
            return None;
        }
        out_row += c * scale;
        scale *= g.out_spatial[a];
    }
    Some(out_row)
}

/// Copies one image into the phase-split buffer, writing every element of
/// its channels (the padding as zeros) in parallel: no serial zeroing pass
/// before it.
fn fill(g: &Geometry, layout: &Layout, image: &[f32], buf: &mut [MaybeUninit<f32>]) {
    let d = g.in_spatial.len();
    let in_size = g.in_size();
    let ql = layout.q[d - 1];
    let (sl, pl, il) = (g.strides[d - 1], g.pads_begin[d - 1], g.in_spatial[d - 1]);
    let rows_per_phase: usize = layout.q[..d - 1].iter().product();
    // Tasks of whole rows, about 16 KiB each: images of few channels (the
    // first layer's three) still spread over every thread.
    let rows_per_channel = layout.chan / ql;
    let phases = rows_per_channel / rows_per_phase;
    let rows_per_task = (4096 / ql).max(1);
    // The row writer: AVX-512's or AVX2's vectors for strides 1 and 2
    // where the CPU has them, else the portable loop.
    let isa = match Isa::detect() {
        isa @ (Isa::Avx512 | Isa::Avx2) if sl <= 2 => isa,
        _ => Isa::Portable,
    };
    // Each row of a channel's phase planes: where its source line starts
    // in the input channel (None: a padding row) and its phase along the
    // last axis. The same for every channel, so worked out once here
    // rather than per row (a row of 56 values copies in a few cycles; the
    // mixed-radix arithmetic cost several times that).
    let sources: Vec<(Option<usize>, usize)> = (0..rows_per_channel)
        .map(|row| {
            // The row's phase (mixed radix over the strides) and its
            // coordinates in the plane (over q), axis by axis from the
            // last but one.
            let (mut phase, mut r) = (row / rows_per_phase, row % rows_per_phase);
            let lphase = phase % sl;
            phase /= sl;
            let mut src_off = 0;
            let mut src_stride = il;
            for a in (0..d - 1).rev() {
                let (j, s) = (r % layout.q[a], g.strides[a]);
                r /= layout.q[a];
                let ph = phase % s;
                phase /= s;
                let i = (j * s + ph) as isize - g.pads_begin[a] as isize;
                if i < 0 || i >= g.in_spatial[a] as isize {
                    return (None, lphase);
                }
                src_off += i as usize * src_stride;
                src_stride *= g.in_spatial[a];
            }
            (Some(src_off), lphase)
        })
        .collect();
    let (body, tail) = buf.split_at_mut(g.in_channels * layout.chan);
    let all_rows = g.in_channels * rows_per_channel;
    let tasks = all_rows.div_ceil(rows_per_task);
    let dst = SendPtr(body.as_mut_ptr());
    crate::ops::parallel::share(tasks, &|task| {
        let first = task * rows_per_task;
        let task_rows = TaskRows {
            first,
            count: rows_per_task.min(all_rows - first),
            width: ql,
            rows_per_channel,
            phases,
            sources: &sources,
            in_size,
            il,
        };
        // SAFETY: the CPU has `isa`; the task's rows are its own
        // (`TaskRows::write`) and `body` is alive until `share` returns.
        unsafe {
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => task_rows.write_avx512(dst.get(), image, sl, pl),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => task_rows.write_avx2(dst.get(), image, sl, pl),
                _ => task_rows.write(dst.get(), |out, line, phase| {
                    write_line(out, image, line, sl, phase, pl, Isa::Portable)
                }),
            }
        };
    });
    tail.fill(MaybeUninit::new(0.0));
}

/// The rows of one task of [`fill`]: `count` rows from row `first`, each
/// `width` long, in the order that reads the input line by line. A
/// channel's rows are visited plane row by plane row, each in every phase
/// before the next (`r * phases + phase`), not phase plane by phase
/// plane: with a stride of 2 the four phase rows of a plane row read two
/// consecutive input lines, each twice, so the input is read once, in
/// order, where plane by plane it was read four times, every other line
/// each time. With a stride of 1 there is one phase and both orders are
/// the buffer's.
struct TaskRows<'a> {
    first: usize,
    count: usize,
    width: usize,
    rows_per_channel: usize,
    /// Phase planes per channel (the strides' product).
    phases: usize,
    /// Each row of a channel: its line's start in the input channel (None:
    /// a padding row) and its phase along the last axis.
    sources: &'a [(Option<usize>, usize)],
    in_size: usize,
    /// The input's last extent (a line's length).
    il: usize,
}

/// A [`TaskRows`] method that writes the task's rows with [`write_line`]
/// for one instruction set, compiled with that set's target feature so
/// that the row loop and the inlined vector row writer share it (the
/// feature must be named on the function itself, hence one method per
/// set).
macro_rules! vector_rows {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $isa:expr) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name(
            &self,
            body: *mut MaybeUninit<f32>,
            image: &[f32],
            stride: usize,
            pad: usize,
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                self.write(body, |out, line, phase| {
                    write_line(out, image, line, stride, phase, pad, $isa)
                })
            };
        }
    };
}

impl TaskRows<'_> {
    /// Calls `row(out, line, phase)` for every row of the task, with its
    /// line's range in the image; `body` is the buffer's channels.
    ///
    /// # Safety
    /// `body` holds every channel's rows, and no other thread touches this
    /// task's rows while it runs (tasks of disjoint row ranges in visiting
    /// order write disjoint rows: the order is a permutation of each
    /// channel's rows).
    #[inline(always)]
    unsafe fn write(
        &self,
        body: *mut MaybeUninit<f32>,
        mut row: impl FnMut(&mut [MaybeUninit<f32>], Option<std::ops::Range<usize>>, usize),
    ) {
        let rows_per_phase = self.rows_per_channel / self.phases;
        let v = self.first % self.rows_per_channel;
        let (mut c, mut r, mut phase) = (
            self.first / self.rows_per_channel,
            v / self.phases,
            v % self.phases,
        );
        for _ in 0..self.count {
            let b = phase * rows_per_phase + r;
            // SAFETY: row `b` of channel `c` lies in `body` and is this
            // task's alone (the caller's contract).
            let out = unsafe {
                std::slice::from_raw_parts_mut(
                    body.add((c * self.rows_per_channel + b) * self.width),
                    self.width,
                )
            };
            let (src_off, line_phase) = self.sources[b];
            let at = |o: usize| c * self.in_size + o..c * self.in_size + o + self.il;
            row(out, src_off.map(at), line_phase);
            phase += 1;
            if phase == self.phases {
                phase = 0;
                r += 1;
                if r == rows_per_phase {
                    (c, r) = (c + 1, 0);
                }
            }
        }
    }

    vector_rows!(
        /// [`TaskRows::write`] with [`line_avx512`] compiled into the loop
        /// (a call per row cost the 58-wide rows of a 56x56 image 10-15% of
        /// their copy).
        ///
        /// # Safety
        /// AVX-512F; `stride` 1 or 2; `body` as for [`TaskRows::write`].
        write_avx512, "avx512f", Isa::Avx512
    );
    vector_rows!(
        /// [`TaskRows::write`] with [`line_avx2`] compiled into the loop.
        ///
        /// # Safety
        /// AVX2; `stride` 1 or 2; `body` as for [`TaskRows::write`].
        write_avx2, "avx2", Isa::Avx2
    );
}

/// The run of j in `0..len` whose source `j * stride + phase - pad` lies
/// on a line of `line_len`.
#[inline(always)]
fn line_run(
    len: usize,
    line_len: usize,
    stride: usize,
    phase: usize,
    pad: usize,
) -> std::ops::Range<usize> {
    let j0 = pad.saturating_sub(phase).div_ceil(stride).min(len);
    let j1 = (pad + line_len)
        .saturating_sub(phase)
        .div_ceil(stride)
        .clamp(j0, len);
    j0..j1
}

/// One row of a phase plane: element `j` is the input line's element
/// `j * stride + phase - pad` where that lies on the line, zero elsewhere
/// (and everywhere when the row lies in the padding: `line` None). The
/// line is `image[line]`; the rest of `image` is there for whole-vector
/// loads that overlap the line's ends. With `isa` AVX-512 or AVX2 (which
/// the CPU must have) strides 1 and 2 take [`line_avx512`] or
/// [`line_avx2`]; inlined, so that the row loop around it is compiled
/// with the vector instructions when it is.
#[inline(always)]
pub(super) fn write_line(
    out: &mut [MaybeUninit<f32>],
    image: &[f32],
    line: Option<std::ops::Range<usize>>,
    stride: usize,
    phase: usize,
    pad: usize,
    isa: Isa,
) {
    let zero = MaybeUninit::new(0.0);
    let Some(line) = line else {
        out.fill(zero);
        return;
    };
    let std::ops::Range { start: j0, end: j1 } =
        line_run(out.len(), line.len(), stride, phase, pad);
    #[cfg(target_arch = "x86_64")]
    if stride <= 2 {
        // SAFETY: the CPU has `isa` (the caller's word); j0..j1 are the j
        // whose source lies on the line (worked out above).
        match isa {
            Isa::Avx512 => {
                unsafe { line_avx512(out, image, line.start, stride, phase, pad, j0..j1) };
                return;
            }
            Isa::Avx2 => {
                unsafe { line_avx2(out, image, line.start, stride, phase, pad, j0..j1) };
                return;
            }
            Isa::Portable => {}
        }
    }
    out[..j0].fill(zero);
    out[j1..].fill(zero);
    if j0 == j1 {
        return;
    }
    let first = line.start + j0 * stride + phase - pad;
    if stride == 1 {
        for (o, &v) in out[j0..j1].iter_mut().zip(&image[first..]) {
            *o = MaybeUninit::new(v);
        }
    } else {
        for (o, &v) in out[j0..j1]
            .iter_mut()
            .zip(image[first..].iter().step_by(stride))
        {
            *o = MaybeUninit::new(v);
        }
    }
}

/// [`write_line`] for strides 1 and 2, 16 elements of `out` per store,
/// every element written once: the lanes whose source is off the line are
/// zeroed in the register, so the padding costs no pass of its own. Loads
/// are whole vectors wherever they stay inside `image` (reading the
/// neighbouring line there, masked off after); only at the image's ends
/// do masked loads read the line alone; the lanes off the line are zeroed
/// by permutes. Against the loop it replaced (zero fills, a copy or
/// permute loop, a scalar tail), the whole copy of one image, timed inside
/// the Conv: 14x14 (rows of 16) 43-46 -> 27-29 us on one thread and 56-71
/// -> 18 us on two; the 7x7 stride-2 layer 47-49 -> 37-40 us on one and
/// 56-57 -> 50-53 us on two; 56x56 60-61 -> 62-72 us on one and 28-32 ->
/// 32-33 us on two (there the copy runs at the speed of memory either
/// way). Masked loads everywhere measured slower than the old loop
/// (105-143 us against 64 on the stride-2 layer), and so did a masked
/// store for each row's tail. Rows of stride 1 whose valid run fills a
/// vector skip the per-vector masks: whole loads of the run, scalar zeros
/// around it. On a Zen 5 machine (AMD EPYC family 26), where the copy of
/// a 56x56 image is no longer bound by memory, that took the copy from
/// 5.1-5.7% to 3.0-3.4% of the C64 56x56 3x3 Conv's perf samples on one
/// and two threads.
///
/// # Safety
/// AVX-512F; `valid` holds exactly the `j` of `out` whose source
/// `j * stride + phase - pad` lies on the line, which starts at
/// `image[start]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn line_avx512(
    out: &mut [MaybeUninit<f32>],
    image: &[f32],
    start: usize,
    stride: usize,
    phase: usize,
    pad: usize,
    valid: std::ops::Range<usize>,
) {
    use std::arch::x86_64::*;
    // Lanes 0-7 from the even elements of `a` (elements 0..16), lanes 8-15
    // from those of `b`, loaded from element 15 so that a whole load never
    // needs element 31 (which may lie past the line's last source).
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
    let lane_index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Bits lo..hi of a 16-bit mask (both at most 16; none if hi <= lo).
    let bits = |lo: usize, hi: usize| (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16;
    // Bit i of the low 8 to bit 2i: the even elements of a masked load.
    let spread = |m: u16| {
        let mut x = u32::from(m) & 0xff;
        x = (x | x << 4) & 0x0f0f;
        x = (x | x << 2) & 0x3333;
        x = (x | x << 1) & 0x5555;
        x as u16
    };
    // Elements a whole load of one store's sources spans.
    let span = if stride == 1 { 16 } else { 31 };
    let len = out.len();
    let dst = out.as_mut_ptr() as *mut f32;
    let base = image.as_ptr();
    if stride == 1 && valid.len() >= 16 {
        // The valid run copied as whole vectors, the last one overlapping
        // the one before, between scalar zeros: every load lies on the
        // line, so no lane needs a mask or a permute.
        let (j0, n) = (valid.start, valid.len());
        let src = base.add(start + j0 + phase - pad);
        for j in (0..j0).chain(valid.end..len) {
            dst.add(j).write(0.0);
        }
        let mut k = 0;
        while k + 16 <= n {
            _mm512_storeu_ps(dst.add(j0 + k), _mm512_loadu_ps(src.add(k)));
            k += 16;
        }
        if k < n {
            _mm512_storeu_ps(dst.add(j0 + n - 16), _mm512_loadu_ps(src.add(n - 16)));
        }
        return;
    }
    // The 16 values from element k of the row.
    let values = |k: usize| {
        // Empty where the row's valid run ends before element k.
        let m = bits(
            valid.start.saturating_sub(k).min(16),
            valid.end.saturating_sub(k).min(16),
        );
        // The image index of lane 0's source (negative before the image).
        let first = (start + k * stride + phase) as isize - pad as isize;
        let whole = first >= 0 && first as usize + span <= image.len();
        if m == 0 {
            _mm512_setzero_ps()
        } else if whole {
            // The zeros come from permutes, not from a zero-masking move:
            // the compiler folds such a move and its load into a masked
            // load, which ran the 56x56 copy at a fifth of its speed here.
            let src = base.add(first as usize);
            if stride == 2 {
                _mm512_maskz_permutex2var_ps(
                    m,
                    _mm512_loadu_ps(src),
                    evens,
                    _mm512_loadu_ps(src.add(15)),
                )
            } else if m == u16::MAX {
                _mm512_loadu_ps(src)
            } else {
                // Lane i from the load where valid, from the zero vector
                // (index 16) elsewhere.
                let pick = _mm512_mask_blend_epi32(m, _mm512_set1_epi32(16), lane_index);
                _mm512_permutex2var_ps(_mm512_loadu_ps(src), pick, _mm512_setzero_ps())
            }
        } else {
            // The lanes that would read outside the image are masked off
            // and never touched.
            let src = base.wrapping_offset(first);
            if stride == 1 {
                _mm512_maskz_loadu_ps(m, src)
            } else {
                let a = _mm512_maskz_loadu_ps(spread(m), src);
                let b = _mm512_maskz_loadu_ps(spread(m >> 8) << 1, src.wrapping_add(15));
                _mm512_permutex2var_ps(a, evens, b)
            }
        }
    };
    let mut k = 0;
    while k + 16 <= len {
        _mm512_storeu_ps(dst.add(k), values(k));
        k += 16;
    }
    if k < len {
        // The row's last 16 again, overlapping the store before: a masked
        // store for the tail measured slower (rows of 58, 10-15% of the
        // copy), and the next row may be another thread's.
        if len >= 16 {
            _mm512_storeu_ps(dst.add(len - 16), values(len - 16));
        } else {
            _mm512_mask_storeu_ps(dst, bits(0, len), values(0));
        }
    }
}

/// [`write_line`] for strides 1 and 2 with AVX2, for the valid run only:
/// the elements before and after it (in the padding, a few) as scalar
/// zeros, the run eight elements a store, its last eight again
/// overlapping the store before, a run shorter than eight element by
/// element. Every load lies on the line, so unlike [`line_avx512`] no
/// lane needs a mask (AVX2's masked stores are slow on AMD's cores, and a
/// masked load would only serve the line's ends). With a stride of 2,
/// eight outputs are the even elements of 15 sources, loaded as two
/// overlapping vectors (elements 0-7 and 7-14) and picked by a shuffle
/// and a permute. Against the portable loop (a scalar copy for a stride
/// of 2), with AVX-512 hidden on the Zen 4 of 2026-12-06, eight
/// interleaved pairs of 0.3 s runs: the 7x7 stride-2 layer 0.965 of the
/// time on one thread and 0.973 on two, C64 56x56 0.995 and 0.984 (the
/// copy had 5% of the 7x7 layer's samples).
///
/// # Safety
/// AVX2; `valid` holds exactly the `j` of `out` whose source
/// `j * stride + phase - pad` lies on the line, which starts at
/// `image[start]`; `stride` is 1 or 2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn line_avx2(
    out: &mut [MaybeUninit<f32>],
    image: &[f32],
    start: usize,
    stride: usize,
    phase: usize,
    pad: usize,
    valid: std::ops::Range<usize>,
) {
    use std::arch::x86_64::*;
    let dst = out.as_mut_ptr() as *mut f32;
    let (j0, n) = (valid.start, valid.len());
    for j in (0..j0).chain(valid.end..out.len()) {
        dst.add(j).write(0.0);
    }
    if n == 0 {
        return;
    }
    // Source of output j0 + k: src[k * stride].
    let src = image.as_ptr().add(start + j0 * stride + phase - pad);
    if n < 8 {
        for k in 0..n {
            dst.add(j0 + k).write(*src.add(k * stride));
        }
        return;
    }
    let eight = |k: usize| {
        if stride == 1 {
            _mm256_loadu_ps(src.add(k))
        } else {
            // a = s0..s7, b = s7..s14; per half, a's lanes 0 and 2 and b's
            // 1 and 3: s0 s2 s8 s10 | s4 s6 s12 s14, then the middle
            // 64-bit pairs swapped.
            let a = _mm256_loadu_ps(src.add(2 * k));
            let b = _mm256_loadu_ps(src.add(2 * k + 7));
            let picked = _mm256_castps_pd(_mm256_shuffle_ps::<0xd8>(a, b));
            _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(picked))
        }
    };
    let mut k = 0;
    while k + 8 <= n {
        _mm256_storeu_ps(dst.add(j0 + k), eight(k));
        k += 8;
    }
    if k < n {
        _mm256_storeu_ps(dst.add(j0 + n - 8), eight(n - 8));
    }
}

/// One register tile: OCB output channels x `V` vectors of 8 positions,
/// starting `from` biases or partial sums and stored `to` partial sums or
/// the output planes.
///
/// # Safety
/// AVX2 and FMA; `x + shift + V * 8` in bounds for every shift; `w` holds
/// `shifts.len() * OCB` values; the partial rows hold `V * 8` values each;
/// every segment's lanes lie inside its plane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile256<const V: usize>(
    x: *const f32,
    shifts: &[usize],
    w: *const f32,
    from: From,
    to: To,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m256; V]; OCB] = match from {
        From::Bias(bias) => std::array::from_fn(|o| [_mm256_set1_ps(bias[o]); V]),
        From::Partial(p, ld) => {
            std::array::from_fn(|o| std::array::from_fn(|v| _mm256_loadu_ps(p.add(o * ld + v * 8))))
        }
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
    match to {
        To::Partial(p, ld) => {
            for (o, row) in acc.iter().enumerate() {
                for (v, a) in row.iter().enumerate() {
                    _mm256_storeu_ps(p.add(o * ld + v * 8), *a);
                }
            }
        }
        To::Planes(planes, segs) => {
            let lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
            for seg in segs {
                let bits = _mm256_set1_epi32(i32::from(seg.lanes));
                let mask = _mm256_cmpeq_epi32(_mm256_and_si256(bits, lane), lane);
                for (o, row) in acc.iter().enumerate() {
                    if let Some(plane) = planes[o] {
                        // Masked-off lanes are neither written nor checked.
                        let dst = plane.wrapping_offset(seg.offset);
                        _mm256_maskstore_ps(dst, mask, row[seg.vec]);
                    }
                }
            }
        }
    }
}

/// [`tile256`] with vectors of 16 positions.
///
/// # Safety
/// AVX-512F; `x + shift + V * 16` in bounds for every shift; the rest as
/// for [`tile256`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile512<const V: usize>(
    x: *const f32,
    shifts: &[usize],
    w: *const f32,
    from: From,
    to: To,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m512; V]; OCB] = match from {
        From::Bias(bias) => std::array::from_fn(|o| [_mm512_set1_ps(bias[o]); V]),
        From::Partial(p, ld) => std::array::from_fn(|o| {
            std::array::from_fn(|v| _mm512_loadu_ps(p.add(o * ld + v * 16)))
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
    match to {
        To::Partial(p, ld) => {
            for (o, row) in acc.iter().enumerate() {
                for (v, a) in row.iter().enumerate() {
                    _mm512_storeu_ps(p.add(o * ld + v * 16), *a);
                }
            }
        }
        To::Planes(planes, segs) => {
            for seg in segs {
                for (o, row) in acc.iter().enumerate() {
                    if let Some(plane) = planes[o] {
                        // Masked-off lanes are neither written nor checked.
                        let dst = plane.wrapping_offset(seg.offset);
                        _mm512_mask_storeu_ps(dst, seg.lanes, row[seg.vec]);
                    }
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile256<const V: usize>(_: *const f32, _: &[usize], _: *const f32, _: From, _: To) {
    unreachable!("the direct kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
use tile256 as tile512;
