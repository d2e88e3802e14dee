//! Direct convolution for f32 on AVX-512F or AVX2 with FMA, with the output
//! channels across the vector lanes: the twin of `direct.rs`, which puts
//! positions there.
//!
//! A register tile holds [`POSITIONS`] output positions of a block's
//! channels, 64 of them (4 vectors of 16) with AVX-512, and
//! [`POSITIONS_AVX2`] positions of 32 channels (4 vectors of 8, so a block
//! takes two tiles) with AVX2's 16 registers; per
//! (channel, tap) it loads the weights as vectors and broadcasts each
//! position's input, each position from its own base, every tap one
//! constant shift from it. A tile's positions are output positions, not a
//! padded grid's: no position is computed and dropped, where `direct.rs`
//! computes the whole padded grid (2 of every 16 on 14-wide rows). The
//! price is a transpose on the way out (the tile holds channels by
//! position, the output planes position by channel), which long
//! reductions amortise.
//!
//! Which positions a tile holds and what it reads come from a plan
//! (`tile_plan.rs`): with finite weights, where the edge tiles cover the
//! border columns' patterns (on AVX-512
//! `tile512_cols`; on AVX2 a 3 x 3 kernel over a padding of one and the
//! 7x7 stride-2 layer's, forms of its unrolled blocks and rows,
//! [`EDGE_MASKS_AVX2`]), tiles of consecutive
//! positions within runs of rows, straight from X, each position's reads
//! of the padding left out by its tile's mask; else for long reductions
//! with finite weights, tiles cut from boxes of positions that read the
//! same taps inside the input, each running those taps only, straight
//! from X (the border positions skip the padding's products); otherwise
//! tiles of consecutive positions over the
//! same zero-padded, stride-phase-split copy of the input as `direct.rs`
//! (`direct::Layout`), each running every tap. With AVX2, runs of full
//! tiles that run every tap, or whose taps are a block of a unit-stride
//! 3 x 3 kernel (the whole kernel, or an edge's 2 x 3 or 3 x 2) or whole
//! rows of a 7 x 7 kernel with adjacent taps, go to one call, each tile one
//! block of inline assembly, the blocks of a 3 x 3 kernel unrolled per
//! input channel and the 7-wide rows per kernel row, without the loop's
//! shift read and branch per step ([`TapForm`], `tile_run256`): the same
//! steps in the same order; a masked tile of a plan in place is a call of
//! its own, its block without the masked positions' steps of the masked
//! columns.
//!
//! Numerical contract: each output is its bias, then the products of its
//! (input channel, tap) pairs accumulated in that order in f32 with FMA
//! (one rounding per multiply-add), as in `direct.rs`, except that in a
//! plan of classes or a plan in place the pairs whose input is padding
//! are left out, and in
//! a plan in order those of a tile's kernel rows that read padding for
//! each of its positions and, in an AVX-512 tile some of whose positions
//! read only padding with a column of taps along the last axis, those
//! positions' products of that column (`tile512_cols`; all of these only
//! when every weight is finite): each of
//! those products is a zero, so leaving it out changes no bit but the
//! sign of a zero sum (`-0` where adding `+0` gives `+0`). With an
//! infinite or NaN weight every pair is multiplied, padding zeros
//! included.

use super::direct::Layout;
use super::packing::LaneWeights;
use super::tile_plan::{Rows, TilePlan};
use super::*;
use std::mem::MaybeUninit;

/// Vectors of 16 output channels per AVX-512 register tile.
pub(crate) const VECS: usize = 4;
/// Output channels per packed weight block (and per AVX-512 tile).
pub(crate) const BLOCK: usize = VECS * 16;
/// Vectors of 8 output channels per AVX2 register tile: 4 x
/// [`POSITIONS_AVX2`] accumulators, the 3 positions' broadcasts and one
/// weight vector at a time fill AVX2's 16 registers.
const VECS_AVX2: usize = 4;
/// The output channels one register tile of `isa` computes, and the
/// span its weights are packed in (`BlockedWeights::in_spans`).
pub(crate) fn span(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => BLOCK,
        _ => VECS_AVX2 * 8,
    }
}
/// Output positions per AVX-512 register tile: 4 x 6 accumulators, the 4
/// weight vectors and a broadcast fit AVX-512's 32 registers.
const POSITIONS: usize = 6;
/// Output positions per AVX2 register tile. A step of 3 positions x 4
/// vectors takes 3 broadcasts and 4 weight loads for its 12 FMAs, where 6
/// positions x 2 vectors (this kernel until 2026-12-04) took 6 and 2. On
/// a Zen 3 EPYC, whose load-heavy loops lose up to a third of their speed
/// while something else runs on the core's other hardware thread (a loop
/// of 12 FMAs and 7 loads from L1 measured 65-80 GFLOP/s in those
/// stretches and 91-99 outside them, a loop of FMAs alone 88-100
/// throughout), interleaved 0.3 s process pairs against the 6 x 2 tile
/// took 0.96, 0.92 and 0.97 of its time on C64 56x56, the 7x7 stride-2
/// layer and C256 14x14 on one thread, 0.96, 0.96 and 0.94 on two (with
/// this tile's groups and chunks). The same 12 FMAs with their weights as
/// memory operands (15 loads a step, as the FMA3 kernels of some libraries
/// do) were 23-31% slower: the core reads two 32-byte vectors a cycle.
const POSITIONS_AVX2: usize = 3;
/// Output positions per register tile of `isa`.
fn positions(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => POSITIONS,
        _ => POSITIONS_AVX2,
    }
}
/// Weight bytes of one chunk of the reduction: what L2 holds while a group
/// of tiles runs over it. Paired probes against chunks of 16 KiB (kept in
/// L1, but every tile then stores and reloads its sums per chunk): before
/// tiles ran in groups, the whole reduction was 6-7% faster on C256 14x14
/// and the 7x7 stride-2 first layer and no slower elsewhere; with groups,
/// 16 KiB chunks were 4-6% faster on C64 56x56, C128 28x28 and C512 7x7
/// on one and on two threads, and on C256 14x14 5% slower on one thread
/// and 1% faster on two (each within a spread of about +-5%). Neither
/// wins everywhere; this keeps the simpler loop. On a Zen 5 EPYC, 16 and
/// 32 KiB chunks were slower in all 24 comparisons (C64, C128 and C256,
/// one and two threads, two rounds of 1.5 s runs in turns; by 1-28%).
const CHUNK_WEIGHT_BYTES: usize = 1 << 20;
/// [`CHUNK_WEIGHT_BYTES`] for AVX2, whose tiles take a block's 64
/// channels a span of 32 at a time: half the core's L2, so that the
/// chunk's weights stay there with the input the tiles read.
///
/// Each tile loads and stores its sums once per chunk and costs a call
/// per chunk, so a chunk should be as long as the cache allows. On a Zen
/// 3 EPYC (512 KiB L2; 2026-12-03/04, one thread) C256 14x14 ran at 68.8
/// GFLOP/s with 1 MiB chunks (its block's 590 KiB of weights then stream
/// from L3 through every tile) and 80-84 with 64 or 128 KiB; 32 KiB
/// against 64 was 1-2% faster on C64 56x56. On a Zen 4 EPYC (1 MiB L2;
/// 2026-12-06, AVX-512 hidden, one thread, runs alternating inside each
/// round with onnxruntime's in the same process): 32 KiB chunks ran C64
/// 56x56 at 0.93 of onnxruntime's speed and C256 14x14 at 0.92, one chunk
/// for the whole reduction at 0.95-0.96 and 0.94-0.95; against one chunk,
/// 128 KiB was alike on C64 and 4% slower on C256, 256 KiB 1% slower on
/// C256, 512 KiB alike on both.
fn chunk_weight_bytes_avx2() -> usize {
    crate::ops::cache::l2_bytes() / 2
}
/// The bytes of a block's weights one chunk holds with `isa`.
pub(super) fn chunk_weight_bytes(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => CHUNK_WEIGHT_BYTES,
        _ => chunk_weight_bytes_avx2(),
    }
}
/// Output positions computed before their sums are written out, per ISA.
/// AVX-512: 48 (eight tiles), three transposes of 16, 12 KiB of sums that
/// stay in L1. AVX2: 192 (64 tiles), so that each span's chunk of weights
/// serves four times as many tiles before the next span's; the 48 KiB of
/// sums then live in L2. Against 48 on the Zen 3, when chunks were 32 KiB
/// and stayed in L1 (runs alternating in one process, one thread): 96
/// positions were 1-2% faster on C64 and C256,
/// 192 another 0-3% (C3 7x7 s2 alike), 384 and 768 no faster than 192.
fn group_positions(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 8 * POSITIONS,
        _ => 64 * POSITIONS_AVX2,
    }
}
/// A block's weights larger than this stream from L2 through every tile,
/// and the tile asks for them [`WEIGHTS_AHEAD`] steps early: paired probes
/// (200-300 pairs, one and two threads, medians of the pairs' ratios) ran
/// C64 56x56 0-3%, C128 28x28 1-3%, C256 14x14 1-4% and C512 7x7 6-13%
/// faster with it, where a block's weights are 147 KiB to 2.3 MiB, and the
/// 7x7 stride-2 first layer, whose 37 KiB stay in L1, 1-2% slower (so it
/// goes without).
/// Prefetching 8, 16 or 24 steps ahead measured alike; 16 steps are 16 KiB,
/// four pages, so the stream is asked for across page boundaries, where
/// the hardware's L1 prefetcher stops.
const STREAMED_WEIGHT_BYTES: usize = 40 << 10;
/// How many (channel, tap) steps ahead a streamed block's weights are
/// asked for.
const WEIGHTS_AHEAD: usize = 16;
/// The lines of one tile's sums (POSITIONS x BLOCK floats), each asked
/// for (for writing) beside one of a flat reduction's last steps. The
/// weight stream has evicted them from L1 by then, so the tile's closing
/// stores would miss and fill the store buffer, and the caller's stores
/// for the next tile stall behind them. Paired probes on the Zen 4
/// (2026-12-04, eight pairs): C3 7x7 s2 0.985-0.992 of the time without,
/// C64 3x3 0.989; the same in the tap-classes branch measured 0.997-1.002
/// on C256 and was not kept.
const SUMS_LINES: usize = POSITIONS * BLOCK * 4 / 64;
/// [`SUMS_LINES`] for an AVX2 tile run by `tile256`: its rows' lines (all
/// of the block's channels, the other span's included). The runs of full
/// tiles (`tile_run256`) ask for none: on the Zen 4 of 2026-12-07 (AVX-512
/// hidden, C64 56x56, one process) a tile that asked for its output lines
/// at its start and for no sums' lines took 0.99 of the time of one that
/// asked for both as `reduce!` does, and asking at each tile's start for
/// the next tile's lines measured alike (README, "Measured and not
/// kept").
const SUMS_LINES_AVX2: usize = POSITIONS_AVX2 * BLOCK * 4 / 64;

/// The tile plan a prepared node's last run used, with what it was made
/// for, so that the next run of the same shapes takes it instead of making
/// it again: a plan of classes sorts its tiles and lists every position's
/// base. Making it on every call took the C64 56x56 3x3 layer 1.020 of
/// the time back to back (400 rounds in one process on the Xeon of
/// 2026-12-06; 1.005 in rounds after pauses, within their spread).
#[derive(Default)]
pub(crate) struct PlanCache(std::sync::Mutex<Option<(PlanKey, std::sync::Arc<TilePlan>)>>);

/// What a plan depends on: the geometry, the positions per tile and
/// whether every weight is finite.
type PlanKey = (Geometry, usize, bool);

impl PlanCache {
    /// The plan for `key`, from the cache or made by `make` (and kept).
    fn get(&self, key: PlanKey, make: impl FnOnce() -> TilePlan) -> std::sync::Arc<TilePlan> {
        // A poisoned lock only means another run panicked while holding
        // it; the cached plan, if any, is whole either way.
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*cached {
            Some((k, plan)) if *k == key => plan.clone(),
            _ => {
                let plan = std::sync::Arc::new(make());
                *cached = Some((key, plan.clone()));
                plan
            }
        }
    }
}

/// The convolution of `x` into `y` (uninitialised, `batch x out_channels x
/// out_size`), every element written once. `w` holds the weights packed
/// for `g` (`LaneWeights::fits`); `plans`, where given, keeps the tile
/// plan between calls. Call from a rayon pool thread; `isa` is AVX-512 or
/// AVX2 and supported by the CPU.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv_direct_lanes(
    g: &Geometry,
    layout: &Layout,
    x: &[f32],
    w: &LaneWeights,
    bias: Option<&[f32]>,
    y: &mut [MaybeUninit<f32>],
    isa: Isa,
    plans: Option<&PlanCache>,
) {
    assert!(
        isa != Isa::Portable && isa.supported(),
        "the channel-lane Conv kernel runs on AVX-512F or AVX2 with FMA, not {isa:?}"
    );
    // Short reductions whose row ends the row tiles have patterns for.
    if let Some(tiles) = super::direct_rows::tiles_for(g, isa, w.finite()) {
        super::direct_rows::conv_rows(g, x, w, bias, y, tiles);
        return;
    }
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let ntaps = layout.taps.len();
    let kdim = cg * ntaps;
    let blocks = mg.div_ceil(BLOCK);
    let os = g.out_size();
    // Which positions each tile holds, which taps it runs and whether it
    // reads X or the padded copy (`tile_plan.rs`).
    let positions = positions(isa);
    let group_tiles_max = group_positions(isa) / positions;
    let make = || plan_for(g, layout, isa, w.finite());
    let plan = match plans {
        Some(cache) => cache.get((g.clone(), positions, w.finite()), make),
        None => std::sync::Arc::new(make()),
    };
    // A channel's length in what the tiles read: X, or the padded copy.
    let chan = if plan.reads_input {
        g.in_size()
    } else {
        layout.chan
    };
    let tiles = plan.len();
    // Work items: a range of tiles times a range of blocks, about eight
    // per thread, the tile ranges shrinking from the first to the last
    // (`guided_cut`). Paired runs on two threads against equal ranges
    // (eight pairs each): C64 56x56 and the 7x7 stride-2 layer 1.5-2%
    // faster, C256 14x14 alike; 20 items per thread were 2% slower than
    // eight, four alike.
    let want = 8 * threads();
    let block_items = want.div_ceil(g.group).clamp(1, blocks.max(1));
    let tile_items = want.div_ceil(block_items * g.group).clamp(1, tiles.max(1));
    let bc = blocks.div_ceil(block_items);
    let block_items = blocks.div_ceil(bc);
    let tile_cut = |i: usize| guided_cut(tiles, tile_items, i);
    // Chunks of whole input channels whose weights stay in cache while a
    // group of tiles runs over them: L2 with both (half of it with AVX2,
    // see `chunk_weight_bytes_avx2`).
    let chunk_bytes = chunk_weight_bytes(isa);
    let mut chunk = (chunk_bytes / (BLOCK * 4) / ntaps.max(1)).clamp(1, cg.max(1));
    // With AVX2, a reduction up to half again as long as a chunk is not
    // split: the 7x7 stride-2 layer's three channels (19 KiB of a span's
    // weights) ran 3-4% faster in one chunk than in chunks of two and one.
    if isa != Isa::Avx512 && cg <= chunk * 3 / 2 {
        chunk = cg.max(1);
    }
    // With no input channels a tile still runs once, from the biases.
    let chunks: Vec<std::ops::Range<usize>> = (0..cg.max(1))
        .step_by(chunk)
        .map(|c0| c0..(c0 + chunk).min(cg))
        .collect();
    let streamed = kdim * BLOCK * std::mem::size_of::<f32>() > STREAMED_WEIGHT_BYTES;
    // The channels one tile computes, its kernel and the write-out's.
    // A short tile runs a tile of its own positions only (the corners of
    // a plan of classes hold one position each).
    macro_rules! avx512_tiles {
        ($streamed:literal) => {
            &[
                tile512::<$streamed, 1>,
                tile512::<$streamed, 2>,
                tile512::<$streamed, 3>,
                tile512::<$streamed, 4>,
                tile512::<$streamed, 5>,
                tile512::<$streamed, 6>,
            ]
        };
    }
    // Entry `k` computes `k + 1` positions.
    let (tiles_by_count, write_out): (&[TileFn], WriteFn) = match (isa, streamed) {
        (Isa::Avx512, true) => (avx512_tiles!(true), transpose_out512),
        (Isa::Avx512, false) => (avx512_tiles!(false), transpose_out512),
        _ => (
            &[tile256::<1>, tile256::<2>, tile256::<3>],
            transpose_out256,
        ),
    };
    debug_assert_eq!(tiles_by_count.len(), positions);
    // AVX-512 tiles in order whose positions read only padding with some
    // column of taps leave those products out where there is an edge tile
    // for the pattern (`tile512_cols`, `TilePlan::edge_mask`). Kernels of a
    // width no edge tile has (the 7x7 stride-2 layer's) skip the per-tile
    // mask lookup and column walk altogether.
    let edge_kw = g.kernel.last().copied().unwrap_or(0);
    let edge_columns =
        isa == Isa::Avx512 && plan.has_edge_columns() && edge_tiles_apply(edge_kw, ntaps);
    let tile_masks = plan.has_tile_masks();
    let span = span(isa);
    assert_eq!(
        w.span(),
        span,
        "channel-lane weights packed for another tile"
    );
    // Each class's unrolled form, for the AVX2 tile.
    let forms: Vec<TapForm> = plan
        .classes
        .iter()
        .map(|class| match isa {
            Isa::Avx512 => TapForm::Steps,
            _ => TapForm::of(class, ntaps),
        })
        .collect();
    let shifts: Vec<usize> = (0..cg)
        .flat_map(|c| plan.tap_shifts.iter().map(move |&t| c * chan + t))
        .collect();
    let biases = padded_biases(g, bias);
    let yp = SendPtr(y.as_mut_ptr() as *mut f32);
    // Tiles cut from classes read X (no tap of theirs reads padding); so do
    // tiles in order where the phase-split copy would be the image itself
    // (no padding or striding), whose reads end at the last output
    // position's last tap, the image's last element.
    let unpadded = plan.reads_input || layout.is_image(g);
    let mut buf = if unpadded {
        Vec::new()
    } else {
        super::direct::take_buffer(layout)
    };
    for n in 0..g.batch {
        let image = &x[n * g.in_channels * g.in_size()..(n + 1) * g.in_channels * g.in_size()];
        let buf: &[f32] = if unpadded {
            image
        } else {
            super::direct::fill_buffer(g, layout, image, &mut buf);
            &buf
        };
        let items = g.group * block_items * tile_items;
        crate::ops::parallel::share(items, &|item| {
            let ti = item % tile_items;
            let bi = (item / tile_items) % block_items;
            let gi = item / tile_items / block_items;
            let xg = buf[gi * cg * chan..].as_ptr();
            let (t0, t1) = (tile_cut(ti), tile_cut(ti + 1));
            if t0 >= t1 {
                return;
            }
            // One group's sums, position by position, BLOCK channels each:
            // every tile writes its rows before anything reads them.
            // Its rows start on cache lines, so that the tiles' stores and
            // the write-out's loads of whole vectors each touch one line.
            let mut sums = Vec::<f32>::with_capacity(group_tiles_max * positions * BLOCK + 16);
            let sums = sums.as_mut_ptr();
            let sums = sums.wrapping_add(sums.align_offset(64).min(16));
            // Each group's output positions, one per row of its sums
            // (`usize::MAX` for a short tile's repeats), and the places in
            // a plane whose lines it writes.
            let bases = plan.bases(t0..t1);
            let groups: Vec<(Rows, Vec<usize>)> = (t0..t1)
                .step_by(group_tiles_max)
                .map(|g0| {
                    let rows = plan.rows(g0..(g0 + group_tiles_max).min(t1));
                    (rows, rows.line_starts())
                })
                .collect();
            for b in bi * bc..((bi + 1) * bc).min(blocks) {
                let wb = w.block(gi, b);
                let bb = biases[(gi * blocks + b) * BLOCK..].as_ptr();
                let channels = (mg - b * BLOCK).min(BLOCK);
                let plane0 = yp
                    .get()
                    .wrapping_add((n * g.out_channels + gi * mg + b * BLOCK) * os);
                for (gt, (rows, lines)) in groups.iter().enumerate() {
                    let g0 = t0 + gt * group_tiles_max;
                    let group_tiles = (t1 - g0).min(group_tiles_max);
                    // The output lines the group will write, handed out
                    // over its tiles' first chunk, one per (channel, tap)
                    // step (a run of AVX2 tiles asks for each tile's share
                    // at the tile's start): the write-out then finds them
                    // in cache instead of waiting on 64 planes' misses,
                    // and no burst of prefetches for the whole group stalls
                    // on the line fill buffers.
                    let asks = Asks {
                        plane0,
                        os,
                        lines,
                        channels: 0..0,
                    };
                    for (k, part) in chunks.iter().enumerate() {
                        // The block's channels `span` at a time (all at
                        // once with AVX-512), each over every tile of the
                        // group, so that an AVX2 span's chunk of weights
                        // stays in cache while the group's tiles read it
                        // (L1 when chunks were 32 KiB): with spans of 16,
                        // paired 0.3 s runs on
                        // a Zen 3 EPYC against every span of a tile before
                        // the next tile, C256 14x14 4-6% faster on one and
                        // two threads, C64 56x56 0.5-1% slower, the 7x7
                        // stride-2 layer alike (and alike on all three in
                        // a later session's runs alternating in one
                        // process). The first span's tiles ask for the
                        // output lines.
                        for c0 in (0..channels).step_by(span) {
                            let mut t = 0;
                            // The output column of tile t's first position,
                            // for its edge mask: one division a group.
                            let mut column = match edge_columns {
                                true => plan.edge_column(g0),
                                false => 0,
                            };
                            while t < group_tiles {
                                let (class_index, real) = plan.tile(g0 + t);
                                let form = forms[class_index];
                                // A run of full AVX2 tiles of one class
                                // whose steps run as assembly (an unrolled
                                // form, or every tap of the kernel) is one
                                // call; any other tile a call of its own.
                                // With AVX2 a tile of a plan in place
                                // whose mask names columns of taps to
                                // leave out is a run of its own, its
                                // block's edge form (`EDGE_MASKS_AVX2`).
                                let run = isa != Isa::Avx512
                                    && real == positions
                                    && !part.is_empty()
                                    && (form != TapForm::Steps
                                        || plan.classes[class_index].len() == ntaps);
                                let mask = match isa != Isa::Avx512 && tile_masks {
                                    true => plan.tile_mask(g0 + t),
                                    false => 0,
                                };
                                assert!(
                                    mask == 0 || run,
                                    "an AVX2 tile with the mask {mask:#x} and no edge form"
                                );
                                let end = match (run, mask) {
                                    (true, 0) => (t + 1..group_tiles)
                                        .find(|&e| {
                                            plan.tile(g0 + e) != (class_index, positions)
                                                || (tile_masks && plan.tile_mask(g0 + e) != 0)
                                        })
                                        .unwrap_or(group_tiles),
                                    _ => t + 1,
                                };
                                let r = Reduction {
                                    x: xg,
                                    bases: &bases[(g0 - t0 + t) * positions..]
                                        [..(end - t) * positions],
                                    chan,
                                    channels: part.clone(),
                                    taps: &plan.classes[class_index],
                                    ntaps,
                                    shifts: &shifts,
                                    w: wb[c0 * kdim..].as_ptr(),
                                    form,
                                };
                                let asking = k == 0 && c0 == 0;
                                // SAFETY: the CPU has `isa` (asserted
                                // above); every base plus every shift of
                                // every channel of the part lies inside
                                // what the tiles read: in X, a class's
                                // taps are those inside the input for each
                                // of its positions; in the copy, a
                                // position's base is at most the grid's
                                // last computed position, which
                                // `Layout::len` covers with its reach;
                                // the span holds `kdim` entries of `span`
                                // weights, the biases BLOCK values and
                                // `sums` `group_tiles_max` tiles of
                                // `positions` x BLOCK, of which the tiles
                                // cover `span` channels from `c0`.
                                unsafe {
                                    let bias = (k == 0).then_some(bb.add(c0));
                                    let sums = sums.add(t * positions * BLOCK + c0);
                                    if run {
                                        let share = asking.then_some((t, group_tiles, channels));
                                        tile_run256(&r, bias, sums, &asks, share, mask);
                                    } else {
                                        let ask = Asks {
                                            channels: match asking {
                                                true => {
                                                    channels * t / group_tiles
                                                        ..channels * (t + 1) / group_tiles
                                                }
                                                false => 0..0,
                                            },
                                            ..asks.clone()
                                        };
                                        let edges = match edge_columns {
                                            true if real == positions && class_index == 0 => {
                                                let mask = plan.edge_mask_at(column);
                                                edge_tile512(streamed, edge_kw, mask)
                                            }
                                            // A tile reading X whose mask
                                            // names reads outside its rows:
                                            // the plan has a tile for it.
                                            _ if tile_masks => {
                                                let mask = plan.tile_mask(g0 + t);
                                                let tile = edge_tile512(streamed, edge_kw, mask);
                                                assert!(
                                                    mask == 0 || tile.is_some(),
                                                    "a plan in place whose mask {mask:#x} has no tile"
                                                );
                                                tile
                                            }
                                            _ => None,
                                        };
                                        let tile = edges.unwrap_or(
                                            tiles_by_count[real.clamp(1, positions) - 1],
                                        );
                                        tile(&r, bias, sums, &ask);
                                    }
                                }
                                if edge_columns {
                                    for _ in t..end {
                                        column = plan.next_edge_column(column);
                                    }
                                }
                                t = end;
                            }
                        }
                    }
                    // SAFETY: the CPU has `isa`; the group's tiles wrote
                    // every row of `rows` to `sums`, every channel up to
                    // `channels` rounded up to `span`; this item alone
                    // writes these channels at these positions of the
                    // output planes.
                    unsafe { write_out(sums, rows, channels, plane0, os) };
                }
            }
        });
    }
    if !unpadded {
        super::direct::keep_buffer(buf);
    }
}

/// Each group's biases (zeros without), padded with zeros to whole
/// blocks of BLOCK channels.
pub(super) fn padded_biases(g: &Geometry, bias: Option<&[f32]>) -> Vec<f32> {
    let mg = g.out_channels / g.group;
    let blocks = mg.div_ceil(BLOCK);
    (0..g.group)
        .flat_map(|gi| {
            (0..blocks * BLOCK).map(move |oc| match bias {
                Some(b) if oc < mg => b[gi * mg + oc],
                _ => 0.0,
            })
        })
        .collect()
}

/// What a tile reduces over: for each channel of `channels`, each of
/// `taps` (its shift within a channel, `chan` elements long, and its index
/// among the kernel's `ntaps`), from each of the tile's `bases` in the
/// buffer `x`, against the weights of entry `c * ntaps + tap` of `w`.
/// `shifts` holds every entry's shift (`c * chan` plus its tap's), for
/// the tiles that run every tap.
#[derive(Clone)]
struct Reduction<'a> {
    x: *const f32,
    bases: &'a [usize],
    chan: usize,
    channels: std::ops::Range<usize>,
    taps: &'a [(usize, usize)],
    ntaps: usize,
    shifts: &'a [usize],
    w: *const f32,
    /// The taps' unrolled form, if any (AVX2 full tiles).
    form: TapForm,
}

/// The tile plan the kernel runs for `g` with `isa`'s tiles and weights
/// all `finite` or not ([`TilePlan::new`]): AVX-512 offers its edge tiles
/// (`tile512_cols`), with which a plan may read X in place.
pub(super) fn plan_for(g: &Geometry, layout: &Layout, isa: Isa, finite: bool) -> TilePlan {
    let kw = g.kernel.last().copied().unwrap_or(0);
    let has_tile = |mask: u64| has_edge_tile(kw, mask);
    let has_tile256 = |mask: u64| EDGE_MASKS_AVX2.contains(&(kw, mask));
    let edge_tiles: Option<&dyn Fn(u64) -> bool> = match isa {
        Isa::Avx512 if edge_tiles_apply(kw, layout.taps.len()) => Some(&has_tile),
        // The AVX2 edge tiles are forms of the unrolled 3 x 3 blocks and
        // 7-wide rows.
        _ if (g.kernel == [3, 3] || g.kernel == [7, 7]) && g.dilations == [1, 1] => {
            Some(&has_tile256)
        }
        _ => None,
    };
    let plan = TilePlan::new(g, layout, positions(isa), finite, edge_tiles);
    // An AVX2 plan in place runs its masked tiles as blocks of whole
    // kernel rows (2 or 3 x 3, or 7-wide rows): with any other class (an
    // output of one row, whose class has one kernel row of a 3 x 3
    // kernel), the plan there would be without edge tiles (the classes
    // of a long reduction, or the copy).
    let blocks = |plan: &TilePlan| {
        plan.classes.iter().all(|c| {
            c.is_empty()
                || matches!(
                    TapForm::of(c, layout.taps.len()),
                    TapForm::Block { cols: 3, .. } | TapForm::Rows7 { .. }
                )
        })
    };
    if isa != Isa::Avx512 && plan.has_tile_masks() && !blocks(&plan) {
        return TilePlan::new(g, layout, positions(isa), finite, None);
    }
    plan
}

/// The edge masks the AVX2 tile has a form for (`tile_run256`): a 3 x 3
/// kernel over a padding of one, where its tile of 3 positions holds a
/// row's first column at position 0, 1 or 2 (with the previous row's
/// last column before it: bit `3c + i` for position `i` leaving out
/// kernel column `c`), or the row's last column at position 2; and at
/// stride 2 on an even width, whose last column reads no padding, the
/// first column alone at position 1 or 2.
///
/// For the 7x7 stride-2 layer over a padding of 3 on an even width
/// (`Rows7`), whose row's first column leaves out kernel columns 0-2, its
/// second column 0 and its last 5 and 6: the first column at position 0,
/// 1 or 2, the second alone at position 0, the last alone at position 2.
pub(super) const EDGE_MASKS_AVX2: [(usize, u64); 11] = [
    (3, 0x001),
    (3, 0x042),
    (3, 0x084),
    (3, 0x100),
    (3, 0x002),
    (3, 0x004),
    (7, 0x1),
    (7, 0x4b),
    (7, 0x48096),
    (7, 0x90124),
    (7, 0x120000),
];

/// Where item `i` of `items` starts in `0..total` (`i == items`: the end):
/// item sizes fall linearly from the first to the last, so that the items
/// taken last, while the other threads finish theirs, are the smallest.
fn guided_cut(total: usize, items: usize, i: usize) -> usize {
    let n = items.max(1);
    let done = i * n - i * i.saturating_sub(1) / 2;
    total * done / (n * (n + 1) / 2)
}

/// The output lines a tile asks for while it runs: in each plane of
/// `channels` (from `plane0`, `os` apart), the line of each of `lines`.
#[derive(Clone)]
struct Asks<'a> {
    plane0: *mut f32,
    os: usize,
    lines: &'a [usize],
    channels: std::ops::Range<usize>,
}

impl Asks<'_> {
    /// How many lines it asks for.
    fn len(&self) -> usize {
        self.channels.len() * self.lines.len()
    }

    /// One address in each line, plane by plane.
    fn walk(&self) -> impl Iterator<Item = *const f32> + '_ {
        let (mut c, mut l) = (self.channels.start, 0);
        std::iter::from_fn(move || {
            if c >= self.channels.end || self.lines.is_empty() {
                return None;
            }
            let at = self.plane0.wrapping_add(c * self.os + self.lines[l]) as *const f32;
            l += 1;
            if l == self.lines.len() {
                (c, l) = (c + 1, 0);
            }
            Some(at)
        })
    }
}

/// Runs a tile's `$step!(shift, weights)` over its reduction `$r`, a
/// channel at a time and within it each of the taps, asking for one of the
/// `$ask` lines (for writing) per step while there are some, and in a flat
/// reduction the lines of `$sums` beside its last steps. A macro rather
/// than a function so that both tiles' inner loops stay their own code,
/// with their instruction sets.
#[cfg(target_arch = "x86_64")]
macro_rules! reduce {
    ($r:expr, $span:expr, $ask:expr, $sums:expr, $lines:expr, $step:ident) => {
        if $r.taps.len() == $r.ntaps {
            // Every tap: the steps are consecutive entries, one flat loop,
            // the first ones each beside one of the asks (the lines of a
            // plane, plane by plane), the last ones each beside a line of
            // the sums (see SUMS_LINES), the rest on their own.
            let steps = &$r.shifts[$r.channels.start * $r.ntaps..$r.channels.end * $r.ntaps];
            let (first, rest) = steps.split_at($ask.len().min(steps.len()));
            let mut wp = $r.w.add($r.channels.start * $r.ntaps * $span);
            let mut first = first.iter();
            for c in $ask.channels.clone() {
                let plane = $ask.plane0.wrapping_add(c * $ask.os) as *const f32;
                for &l in $ask.lines {
                    _mm_prefetch::<_MM_HINT_ET0>(plane.wrapping_add(l) as *const i8);
                    if let Some(&s) = first.next() {
                        $step!(s, wp);
                        wp = wp.add($span);
                    }
                }
            }
            let (body, tail) = rest.split_at(rest.len().saturating_sub($lines));
            for &s in body {
                $step!(s, wp);
                wp = wp.add($span);
            }
            for (l, &s) in tail.iter().enumerate() {
                _mm_prefetch::<_MM_HINT_ET0>(($sums as *const i8).wrapping_add(64 * l));
                $step!(s, wp);
                wp = wp.add($span);
            }
        } else {
            let mut ask = $ask.walk();
            for c in $r.channels.clone() {
                let xc = c * $r.chan;
                let wc = $r.w.add(c * $r.ntaps * $span);
                for &(shift, t) in $r.taps {
                    if let Some(line) = ask.next() {
                        _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
                    }
                    $step!(xc + shift, wc.add(t * $span));
                }
            }
            for line in ask {
                _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
            }
        }
    };
}

/// An AVX-512 tile's start: its `P` positions' sums (each BLOCK channels,
/// four vectors) from the biases (the first chunk) or from `sums` (the
/// earlier chunks'), and each position's pointer into what the tiles
/// read. A macro, so that each tile's intrinsics stay in its own
/// AVX-512 code.
#[cfg(target_arch = "x86_64")]
macro_rules! tile512_start {
    ($r:expr, $bias:expr, $sums:expr, $p:expr) => {{
        let acc: [[__m512; VECS]; $p] = match $bias {
            Some(bias) => [std::array::from_fn(|v| _mm512_loadu_ps(bias.add(v * 16))); $p],
            None => std::array::from_fn(|i| {
                std::array::from_fn(|v| _mm512_loadu_ps($sums.add(i * BLOCK + v * 16)))
            }),
        };
        let xp: [*const f32; $p] = std::array::from_fn(|i| $r.x.wrapping_add($r.bases[i]));
        (acc, xp)
    }};
}

/// One AVX-512 register tile: BLOCK output channels x `P` positions (at
/// most POSITIONS: a short tile computes only its own), from the biases
/// (the first chunk) or `sums` (the partial sums of the earlier chunks)
/// through the chunk's steps `r`, into `sums` by position (POSITIONS rows,
/// those past `P` a copy of the last); one of the `ask` lines is asked
/// for (for writing) per step, and with `STREAMED` the weights
/// [`WEIGHTS_AHEAD`] entries on. Short tiles of one position are the
/// corners of a plan of classes: 6% of C256 14x14's steps, run as full
/// tiles until 2026-12-06; with their own tiles the layer took 0.97-0.98
/// of its time on one thread and 0.95 on two (Xeon, family 6 model 167,
/// 6-8 pairs of 1 s runs in turns).
///
/// # Safety
/// AVX-512F; `r.bases` holds `P` values, `r.x + base + c * r.chan +
/// shift` in bounds for every base, channel and tap; `r.w` holds `(c + 1)
/// * r.ntaps * BLOCK` values for the last channel `c`, `bias` BLOCK and
/// `sums` POSITIONS x BLOCK.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile512<const STREAMED: bool, const P: usize>(
    r: &Reduction,
    bias: Option<*const f32>,
    sums: *mut f32,
    ask: &Asks,
) {
    use std::arch::x86_64::*;
    let (mut acc, xp) = tile512_start!(r, bias, sums, P);
    macro_rules! step {
        ($s:expr, $wp:expr) => {
            let wp: *const f32 = $wp;
            if STREAMED {
                // A hint only: past the block's end it asks for nothing
                // that is read, and never faults.
                let ahead = wp.wrapping_add(WEIGHTS_AHEAD * BLOCK) as *const i8;
                for line in 0..BLOCK * 4 / 64 {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line));
                }
            }
            let s = $s;
            let wv: [__m512; VECS] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
            for (i, row) in acc.iter_mut().enumerate() {
                let xv = _mm512_set1_ps(*xp[i].wrapping_add(s));
                for v in 0..VECS {
                    row[v] = _mm512_fmadd_ps(wv[v], xv, row[v]);
                }
            }
        };
    }
    reduce!(r, BLOCK, ask, sums, SUMS_LINES, step);
    // A short tile's rows past its positions hold its last position's
    // sums, as its bases repeat its last: every row of the group's sums is
    // written before the write-out reads them.
    for i in 0..POSITIONS {
        for (v, a) in acc[i.min(P - 1)].iter().enumerate() {
            _mm512_storeu_ps(sums.add(i * BLOCK + v * 16), *a);
        }
    }
}

/// [`tile512`] for a full tile some of whose positions read only padding
/// with a column of taps (the kernel's index along the last axis, `KW`
/// wide): bit `c * POSITIONS + i` of `MASK` for position `i` and column
/// `c` (`TilePlan::edge_mask_at`). The tile runs every tap (a plan in
/// order, over the padded copy) or whole kernel rows of them (a plan in
/// place, reading X: `TilePlan::in_place`). The same steps in the same
/// order, except that those positions leave out those columns' products
/// and do not read their inputs (only with finite weights, whose products
/// with the padding are zeros; in X those reads would land outside the
/// position's row). The steps of one kernel row come `KW` at a time, each
/// one's column known here, so the skipped multiply-adds cost no branch.
/// On C64 56x56 3x3, 1.2% of the multiply-adds.
///
/// # Safety
/// As for [`tile512`] with `P` = POSITIONS, except that the reads of the
/// masked positions' columns need not be in bounds; `r.taps` whole kernel
/// rows in row-major order (all of them, or a plan in place's class),
/// `r.ntaps` a multiple of `KW` whose taps' last-axis index is the tap's
/// index modulo `KW`; `KW` at most [`EDGE_KW`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile512_cols<const STREAMED: bool, const KW: usize, const MASK: u64>(
    r: &Reduction,
    bias: Option<*const f32>,
    sums: *mut f32,
    ask: &Asks,
) {
    use std::arch::x86_64::*;
    const P: usize = POSITIONS;
    let (mut acc, xp) = tile512_start!(r, bias, sums, P);
    // Step `$c` of a kernel row (a constant), the positions whose bit is
    // set for its column left out.
    macro_rules! step {
        ($row:expr, $wp:expr, $c:expr) => {
            if $c < KW {
                let wp: *const f32 = $wp.add($c * BLOCK);
                if STREAMED {
                    // A hint only, as in `tile512`.
                    let ahead = wp.wrapping_add(WEIGHTS_AHEAD * BLOCK) as *const i8;
                    for line in 0..BLOCK * 4 / 64 {
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line));
                    }
                }
                let s = *$row.get_unchecked($c);
                let wv: [__m512; VECS] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
                for i in 0..P {
                    if MASK >> ($c * P + i) & 1 == 0 {
                        let xv = _mm512_set1_ps(*xp[i].wrapping_add(s));
                        for v in 0..VECS {
                            acc[i][v] = _mm512_fmadd_ps(wv[v], xv, acc[i][v]);
                        }
                    }
                }
            }
        };
    }
    debug_assert!(KW <= EDGE_KW && r.taps.len().is_multiple_of(KW) && r.ntaps.is_multiple_of(KW));
    // A kernel row's steps, each column's a constant.
    macro_rules! kernel_row {
        ($row:expr, $wp:expr) => {
            step!($row, $wp, 0);
            step!($row, $wp, 1);
            step!($row, $wp, 2);
            step!($row, $wp, 3);
            step!($row, $wp, 4);
            step!($row, $wp, 5);
            step!($row, $wp, 6);
        };
    }
    // The output lines asked for as `reduce!` does, one per step while
    // there are some, and with every tap the sums' lines beside the last
    // steps.
    let mut asks = ask.walk();
    if r.taps.len() == r.ntaps {
        let steps = &r.shifts[r.channels.start * r.ntaps..r.channels.end * r.ntaps];
        let mut wp = r.w.add(r.channels.start * r.ntaps * BLOCK);
        let rows = steps.chunks_exact(KW);
        let sums_from = rows.len().saturating_sub(SUMS_LINES.div_ceil(KW));
        for (j, row) in rows.enumerate() {
            for _ in 0..KW {
                if let Some(line) = asks.next() {
                    _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
                }
            }
            if j >= sums_from {
                let first = (j - sums_from) * KW;
                for l in first..(first + KW).min(SUMS_LINES) {
                    _mm_prefetch::<_MM_HINT_ET0>((sums as *const i8).wrapping_add(64 * l));
                }
            }
            kernel_row!(row, wp);
            wp = wp.add(KW * BLOCK);
        }
    } else {
        // A class's whole kernel rows (a plan in place, `TilePlan::in_place`):
        // each row's taps are consecutive, so are their weights.
        for c in r.channels.clone() {
            let xc = c * r.chan;
            let wc = r.w.add(c * r.ntaps * BLOCK);
            for taps in r.taps.chunks_exact(KW) {
                for _ in 0..KW {
                    if let Some(line) = asks.next() {
                        _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
                    }
                }
                let row: [usize; KW] = std::array::from_fn(|k| xc + taps[k].0);
                let wp = wc.add(taps[0].1 * BLOCK);
                kernel_row!(row, wp);
            }
        }
    }
    for line in asks {
        _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
    }
    for (i, row) in acc.iter().enumerate() {
        for (v, a) in row.iter().enumerate() {
            _mm512_storeu_ps(sums.add(i * BLOCK + v * 16), *a);
        }
    }
}

/// The widest kernel row an edge tile takes ([`tile512_cols`]).
const EDGE_KW: usize = 7;

/// An edge pattern of [`TilePlan::edge_mask_at`] for a tile whose position
/// `o` (possibly before the tile's first or past its last) is the first
/// column of an output row, so that position `o - 1 - j` is the `j`-th
/// column from the previous row's end: each position near the row's
/// start leaves out the kernel columns `left[j]` (bits) names for the
/// `j`-th column from the start, each near its end `right[j]`'s.
const fn edge_pattern(left: &[u64], right: &[u64], o: isize) -> u64 {
    let p = POSITIONS as isize;
    let mut mask = 0u64;
    let mut i = 0;
    while i < p {
        let columns = if i >= o {
            let j = (i - o) as usize;
            if j < left.len() {
                left[j]
            } else {
                0
            }
        } else {
            let j = (o - 1 - i) as usize;
            if j < right.len() {
                right[j]
            } else {
                0
            }
        };
        let mut c = 0;
        while c < EDGE_KW {
            if columns >> c & 1 != 0 {
                mask |= 1 << (c * POSITIONS + i as usize);
            }
            c += 1;
        }
        i += 1;
    }
    mask
}

/// A 3-wide kernel over a padding of one: the first column leaves out
/// kernel column 0, the last column kernel column 2.
const PAD1_K3: (&[u64], &[u64]) = (&[0b001], &[0b100]);
/// A 7-wide kernel at stride 2 over a padding of 3, an even input width:
/// the first column leaves out kernel columns 0-2, the second column 0,
/// the last columns 5 and 6.
const PAD3_K7_S2: (&[u64], &[u64]) = (&[0b111, 0b001], &[0b110_0000]);

/// The edge tiles the kernel has: (kernel width, pattern, the tile with
/// streamed weights, the tile without). Each pattern of a row start at
/// every place in a tile (for the 7x7 stride-2 layer's, whose second
/// column has a mask too, also one place before it), and for 3-wide
/// kernels a row of exactly one tile (its start and end in the same
/// tile). Over the padded copy the 7x7 stride-2 layer's tiles (its first
/// two columns and its last, 0.8% of its multiply-adds) took 1.003 of its
/// time in rounds and alike back to back (Zen 4, 2026-12-07); they are
/// here for its plan in place (`TilePlan::in_place`), which needs a tile
/// for every mask.
type EdgeTile = (usize, u64, TileFn, TileFn);
static EDGE_TILES: [EdgeTile; 16] = {
    macro_rules! entries {
        ($kw:literal, $pattern:expr, [$($o:literal),*]) => {
            [$((
                $kw,
                edge_pattern($pattern.0, $pattern.1, $o),
                tile512_cols::<true, $kw, { edge_pattern($pattern.0, $pattern.1, $o) }> as TileFn,
                tile512_cols::<false, $kw, { edge_pattern($pattern.0, $pattern.1, $o) }> as TileFn,
            )),*]
        };
    }
    const K3_ROW: u64 =
        edge_pattern(PAD1_K3.0, PAD1_K3.1, 0) | edge_pattern(PAD1_K3.0, PAD1_K3.1, 6);
    let k3 = entries!(3, PAD1_K3, [0, 1, 2, 3, 4, 5, 6]);
    let k7 = entries!(7, PAD3_K7_S2, [-1, 0, 1, 2, 3, 4, 5, 6]);
    [
        k7[0],
        k7[1],
        k7[2],
        k7[3],
        k7[4],
        k7[5],
        k7[6],
        k7[7],
        k3[0],
        k3[1],
        k3[2],
        k3[3],
        k3[4],
        k3[5],
        k3[6],
        (
            3,
            K3_ROW,
            tile512_cols::<true, 3, K3_ROW> as TileFn,
            tile512_cols::<false, 3, K3_ROW> as TileFn,
        ),
    ]
};

/// True when an AVX-512 plan in order for a kernel whose last axis is
/// `kw` wide (`ntaps` taps in all) should look up its tiles' edge masks:
/// the taps come in rows of `kw` and some edge tile is that wide.
pub(super) fn edge_tiles_apply(kw: usize, ntaps: usize) -> bool {
    (1..=EDGE_KW).contains(&kw) && ntaps.is_multiple_of(kw) && EDGE_TILES.iter().any(|e| e.0 == kw)
}

/// True when the AVX-512 kernel has an edge tile for kernel rows `kw`
/// wide and the pattern `mask` ([`edge_tile512`]).
pub(super) fn has_edge_tile(kw: usize, mask: u64) -> bool {
    edge_tile512(false, kw, mask).is_some()
}

/// The [`tile512_cols`] for a full tile whose positions leave out the
/// kernel columns `mask` names (`TilePlan::edge_mask`), or None when the
/// mask is empty (the plain tile runs it) or has no tile here.
fn edge_tile512(streamed: bool, kw: usize, mask: u64) -> Option<TileFn> {
    const _: () = assert!(POSITIONS * EDGE_KW <= 64, "an edge mask is a u64");
    if mask == 0 {
        return None;
    }
    EDGE_TILES
        .iter()
        .find(|e| (e.0, e.1) == (kw, mask))
        .map(|e| if streamed { e.2 } else { e.3 })
}

/// [`tile512`]'s twin for AVX2 with FMA: 32 output channels (the ones from
/// `r.w`, `bias` and `sums`, whose rows are still BLOCK apart) x `P`
/// positions (at most [`POSITIONS_AVX2`], whose rows it writes, those past
/// `P` a copy of the last), the same operations in the same order, so
/// the two give bit-identical sums. Its weights are a span of 32 (`span`); the chunk's
/// are in L2 ([`chunk_weight_bytes_avx2`]) and it asks for none ahead
/// (on the Zen 3, with chunks in L1, asking measured alike or 2-3%
/// slower).
///
/// # Safety
/// AVX2 and FMA; `r` as for [`tile512`] with `P` bases and rows
/// of 32 weights, `bias` 32 values and `sums` POSITIONS_AVX2 rows of 32,
/// BLOCK apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile256<const P: usize>(
    r: &Reduction,
    bias: Option<*const f32>,
    sums: *mut f32,
    ask: &Asks,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m256; VECS_AVX2]; P] = match bias {
        Some(bias) => [std::array::from_fn(|v| _mm256_loadu_ps(bias.add(v * 8))); P],
        None => std::array::from_fn(|i| {
            std::array::from_fn(|v| _mm256_loadu_ps(sums.add(i * BLOCK + v * 8)))
        }),
    };
    let xp: [*const f32; P] = std::array::from_fn(|i| r.x.wrapping_add(r.bases[i]));
    macro_rules! step {
        ($s:expr, $wp:expr) => {
            let (s, wp): (usize, *const f32) = ($s, $wp);
            // The broadcasts stay in registers and each weight vector is
            // loaded once, for the three FMAs that use it.
            let xv: [__m256; P] = std::array::from_fn(|i| _mm256_set1_ps(*xp[i].wrapping_add(s)));
            for v in 0..VECS_AVX2 {
                let wv = _mm256_loadu_ps(wp.add(v * 8));
                for (row, x) in acc.iter_mut().zip(xv) {
                    row[v] = _mm256_fmadd_ps(wv, x, row[v]);
                }
            }
        };
    }
    reduce!(r, VECS_AVX2 * 8, ask, sums, SUMS_LINES_AVX2, step);
    for i in 0..POSITIONS_AVX2 {
        for (v, a) in acc[i.min(P - 1)].iter().enumerate() {
            _mm256_storeu_ps(sums.add(i * BLOCK + v * 8), *a);
        }
    }
}

/// How a class's taps lie in what the tiles read, where an unrolled form
/// of the AVX2 tile fits them: each input channel's steps as one block of
/// instructions whose broadcasts sit at fixed offsets from a position's
/// pointer and a few registers, with no shift read and no loop branch per
/// step ([`tile_run256`]).
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum TapForm {
    /// Any taps: a step reads its shift.
    Steps,
    /// A block of a 3 x 3 kernel, `rows` x `cols` (3 x 3, 2 x 3 or 3 x 2:
    /// the whole kernel, or what an edge of a one-wide padding reads), in
    /// order, each kernel row's taps adjacent (unit stride and no
    /// dilation, over the padded copy or in X): the first tap's shift and
    /// index, and the distance between kernel rows.
    Block {
        first: usize,
        tap0: usize,
        row: usize,
        rows: usize,
        cols: usize,
    },
    /// Whole rows of a 7 x 7 kernel, `rows` of them in order, each row's
    /// taps adjacent (no dilation, in X, or over a copy at unit stride):
    /// the first tap's shift and index, and the distance between kernel
    /// rows.
    Rows7 {
        first: usize,
        tap0: usize,
        row: usize,
        rows: usize,
    },
}

impl TapForm {
    /// The form of `taps` (shift, index) of a kernel of `ntaps`.
    pub(super) fn of(taps: &[(usize, usize)], ntaps: usize) -> TapForm {
        if ntaps == 49 && !taps.is_empty() && taps.len().is_multiple_of(7) {
            let (first, tap0) = taps[0];
            let row = taps.get(7).map_or(Some(0), |t| t.0.checked_sub(first));
            let fits = |row: usize| {
                taps.iter().enumerate().all(|(k, &(shift, t))| {
                    let (dy, dx) = (k / 7, k % 7);
                    t == tap0 + dy * 7 + dx && shift == first + dy * row + dx
                })
            };
            return match row {
                Some(row) if tap0.is_multiple_of(7) && fits(row) => TapForm::Rows7 {
                    first,
                    tap0,
                    row,
                    rows: taps.len() / 7,
                },
                _ => TapForm::Steps,
            };
        }
        // A corner's 2 x 2 block is one position's: a short tile.
        let (rows, cols) = match taps.len() {
            9 => (3, 3),
            6 if taps.get(2).is_some_and(|&(_, t)| t == taps[0].1 + 2) => (2, 3),
            6 => (3, 2),
            _ => return TapForm::Steps,
        };
        if ntaps != 9 {
            return TapForm::Steps;
        }
        let (first, tap0) = taps[0];
        let Some(row) = taps[cols].0.checked_sub(first) else {
            return TapForm::Steps;
        };
        let fits = taps.iter().enumerate().all(|(k, &(shift, t))| {
            let (dy, dx) = (k / cols, k % cols);
            t == tap0 + dy * 3 + dx && shift == first + dy * row + dx
        });
        if fits {
            TapForm::Block {
                first,
                tap0,
                row,
                rows,
                cols,
            }
        } else {
            TapForm::Steps
        }
    }
}

/// One step of an unrolled AVX2 tile in assembly: the three positions'
/// inputs at `[{x0}`, `{x1}` and `{x2}` followed by `$at` broadcast, the
/// 4 weight vectors at `$w` bytes past `{w}` loaded in turn, 12 FMAs into
/// ymm0-ymm11 (position `i`'s vector `v` in ymm`4i + v`).
#[cfg(target_arch = "x86_64")]
macro_rules! asm_step {
    ($at:expr, $w:expr) => {
        asm_step!($at, $w, y y y)
    };
    // Positions marked `n` leave the step out: no broadcast, no FMAs (an
    // edge tile's column that reads padding for them, `tile_run256`).
    ($at:expr, $w:expr, $p0:ident $p1:ident $p2:ident) => {
        concat!(
            asm_broadcast!($p0, "ymm13", "{x0}", $at),
            asm_broadcast!($p1, "ymm14", "{x1}", $at),
            asm_broadcast!($p2, "ymm15", "{x2}", $at),
            "vmovups ymm12, ymmword ptr [{w} + ",
            $w,
            "]\n",
            asm_fma!($p0, "ymm0", "ymm13"),
            asm_fma!($p1, "ymm4", "ymm14"),
            asm_fma!($p2, "ymm8", "ymm15"),
            "vmovups ymm12, ymmword ptr [{w} + ",
            $w,
            " + 32]\n",
            asm_fma!($p0, "ymm1", "ymm13"),
            asm_fma!($p1, "ymm5", "ymm14"),
            asm_fma!($p2, "ymm9", "ymm15"),
            "vmovups ymm12, ymmword ptr [{w} + ",
            $w,
            " + 64]\n",
            asm_fma!($p0, "ymm2", "ymm13"),
            asm_fma!($p1, "ymm6", "ymm14"),
            asm_fma!($p2, "ymm10", "ymm15"),
            "vmovups ymm12, ymmword ptr [{w} + ",
            $w,
            " + 96]\n",
            asm_fma!($p0, "ymm3", "ymm13"),
            asm_fma!($p1, "ymm7", "ymm14"),
            asm_fma!($p2, "ymm11", "ymm15"),
        )
    };
}

/// [`asm_step!`]'s broadcast of one position's input (`y`), or nothing
/// (`n`).
#[cfg(target_arch = "x86_64")]
macro_rules! asm_broadcast {
    (y, $r:literal, $x:literal, $at:expr) => {
        concat!("vbroadcastss ", $r, ", dword ptr [", $x, $at, "]\n")
    };
    (n, $r:literal, $x:literal, $at:expr) => {
        ""
    };
}

/// [`asm_step!`]'s FMA of the weight vector in ymm12 into one position's
/// sums (`y`), or nothing (`n`).
#[cfg(target_arch = "x86_64")]
macro_rules! asm_fma {
    (y, $acc:literal, $b:literal) => {
        concat!("vfmadd231ps ", $acc, ", ymm12, ", $b, "\n")
    };
    (n, $acc:literal, $b:literal) => {
        ""
    };
}

/// A kernel row's taps as [`asm_step!`]s: 3 or 2 adjacent taps, `$row`
/// past a position's pointer, their weights from `$w` bytes on, a step
/// (128 bytes) apart.
#[cfg(target_arch = "x86_64")]
macro_rules! asm_row {
    (3, $row:expr, $w:expr) => {
        concat!(
            asm_row!(2, $row, $w),
            asm_step!(concat!($row, " + 8"), concat!($w, " + 256")),
        )
    };
    (2, $row:expr, $w:expr) => {
        concat!(
            asm_step!($row, $w),
            asm_step!(concat!($row, " + 4"), concat!($w, " + 128")),
        )
    };
    // 3 taps whose positions marked `n` leave them out, per column.
    (3, $row:expr, $w:expr, [$($c0:ident)*] [$($c1:ident)*] [$($c2:ident)*]) => {
        concat!(
            asm_step!($row, $w, $($c0)*),
            asm_step!(concat!($row, " + 4"), concat!($w, " + 128"), $($c1)*),
            asm_step!(concat!($row, " + 8"), concat!($w, " + 256"), $($c2)*),
        )
    };
}

/// [`tile256`] for a run of full tiles that run every tap or whose taps
/// have an unrolled form (`r.form`), each tile one block of assembly from
/// loading its sums (or the biases) to storing them; `r.bases` holds the
/// tiles' bases, [`POSITIONS_AVX2`] each, and tile `i`'s sums start `i`
/// tiles' rows past `sums`. The same steps in the same order, so the same
/// bits: with an unrolled form, each input channel's steps as one unrolled
/// block; otherwise a loop of steps, each reading its shift. With `share`
/// = (the run's first tile in its group, the group's tiles, the block's
/// channels), each tile first asks for its share of the group's output
/// lines (`asks`), which [`reduce!`] hands out over a tile's first steps.
///
/// Where a core's other hardware thread is busy, instructions, not FMAs,
/// set the pace: the loop's step (a shift read, 3 broadcasts, 4 weight
/// loads, 12 FMAs and the loop's own) ran at 60-79 GFLOP/s on the Zen 3
/// EPYC of 2026-12-07 in such stretches, an unrolled block of steps at
/// 76-89 (the measured FMA peak 92; weights from L2 as on C64 56x56). In
/// one process, rounds after 50 ms pauses as the bench runs them, time with
/// the unrolled blocks over time without: C64 56x56 0.84-0.89 and C256
/// 14x14 0.88-0.93 (the whole kernel only), 0.90 (with the edges' blocks)
/// on one thread, 0.85 and 0.87 on two. Assembly because LLVM spilled
/// accumulators when it scheduled the unrolled steps itself.
///
/// Each tile was then a call of its own, whose caller rebuilt its
/// arguments and whose accumulators went through memory between its
/// blocks (those that asked for lines, the middle ones, those beside which
/// the sums' lines were asked for). On the Zen 4 of 2026-12-07 (AVX-512
/// hidden, 30-40 rounds after pauses, the two ways alternating in one
/// process), time as a run over time tile by tile: C64 and C256 0.96-1.01
/// (median 0.98, ten comparisons on one and two threads), and the 7x7
/// stride-2 layer, whose 147 steps a tile make the call's cost weigh more,
/// 0.92 and 0.90 on one thread, 0.91 and 0.94 on two.
///
/// # Safety
/// AVX2 and FMA; `r` as for [`tile256`] for every tile of the run, at
/// least one input channel and one tap, every tap or an unrolled form;
/// `bias` 32 values; `sums` the run's rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_run256(
    r: &Reduction,
    bias: Option<*const f32>,
    sums: *mut f32,
    asks: &Asks,
    share: Option<(usize, usize, usize)>,
    mask: u64,
) {
    use std::arch::x86_64::*;
    const SPAN: usize = VECS_AVX2 * 8;
    let (channels, ntaps) = (r.channels.len(), r.ntaps);
    // Position `i`'s first sums `i * {ss}` bytes past `{src}`: the biases,
    // the same for every position, or its row of the earlier chunks' sums.
    let src_stride = match bias {
        Some(_) => 0,
        None => BLOCK * 4,
    };
    for (i, b) in r.bases.chunks_exact(POSITIONS_AVX2).enumerate() {
        let dst = sums.add(i * POSITIONS_AVX2 * BLOCK);
        if let Some((t, group_tiles, chans)) = share {
            let ask = Asks {
                channels: chans * (t + i) / group_tiles..chans * (t + i + 1) / group_tiles,
                ..asks.clone()
            };
            for line in ask.walk() {
                _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
            }
        }
        let src = bias.unwrap_or(dst);
        // The tile's sums from `{src}` in ymm0-ymm11 (position `i`'s vector
        // `v` in ymm`4i + v`), the loop's `{n}` turns of its steps, the sums
        // stored to `{dst}`'s rows, BLOCK floats apart.
        // SAFETY: the loads of `tile256`'s steps for these channels and
        // taps, whose bounds the caller's contract gives, and the stores of
        // its sums.
        macro_rules! tile {
            ([$($step:expr),* $(,)?], $($operands:tt)*) => {
                std::arch::asm!(
                    "vmovups ymm0, ymmword ptr [{src}]",
                    "vmovups ymm1, ymmword ptr [{src} + 32]",
                    "vmovups ymm2, ymmword ptr [{src} + 64]",
                    "vmovups ymm3, ymmword ptr [{src} + 96]",
                    "vmovups ymm4, ymmword ptr [{src} + {ss}]",
                    "vmovups ymm5, ymmword ptr [{src} + {ss} + 32]",
                    "vmovups ymm6, ymmword ptr [{src} + {ss} + 64]",
                    "vmovups ymm7, ymmword ptr [{src} + {ss} + 96]",
                    "vmovups ymm8, ymmword ptr [{src} + {ss}*2]",
                    "vmovups ymm9, ymmword ptr [{src} + {ss}*2 + 32]",
                    "vmovups ymm10, ymmword ptr [{src} + {ss}*2 + 64]",
                    "vmovups ymm11, ymmword ptr [{src} + {ss}*2 + 96]",
                    "2:",
                    $($step,)*
                    "dec {n}",
                    "jnz 2b",
                    "vmovups ymmword ptr [{dst}], ymm0",
                    "vmovups ymmword ptr [{dst} + 32], ymm1",
                    "vmovups ymmword ptr [{dst} + 64], ymm2",
                    "vmovups ymmword ptr [{dst} + 96], ymm3",
                    "vmovups ymmword ptr [{dst} + 256], ymm4",
                    "vmovups ymmword ptr [{dst} + 288], ymm5",
                    "vmovups ymmword ptr [{dst} + 320], ymm6",
                    "vmovups ymmword ptr [{dst} + 352], ymm7",
                    "vmovups ymmword ptr [{dst} + 512], ymm8",
                    "vmovups ymmword ptr [{dst} + 544], ymm9",
                    "vmovups ymmword ptr [{dst} + 576], ymm10",
                    "vmovups ymmword ptr [{dst} + 608], ymm11",
                    $($operands)*
                    src = in(reg) src,
                    ss = in(reg) src_stride,
                    dst = in(reg) dst,
                    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
                    out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
                    out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
                    out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
                    options(nostack),
                )
            };
        }
        if let TapForm::Rows7 {
            first,
            tap0,
            row,
            rows,
        } = r.form
        {
            // A turn per channel, an inner turn per kernel row of 7 taps
            // at constant offsets from each position's pointer; the
            // pointers step `{c}[1]` bytes a row and `{c}[2]` more a
            // channel, the weights 7 steps a row and `{c}[3]` bytes more a
            // channel (the kernel rows the class leaves out). Wrapping, as
            // the blocks' bases (below).
            let x = r.x.wrapping_add(r.channels.start * r.chan + first);
            let c: [usize; 4] = [
                rows,
                row * 4,
                (r.chan * 4).wrapping_sub(rows * row * 4),
                (ntaps - rows * 7) * SPAN * 4,
            ];
            macro_rules! rows7 {
                ($($column:expr),* $(,)?) => {
                    tile!(
                        [
                            "mov {k}, qword ptr [{c}]",
                            "3:",
                            $($column,)*
                            "add {x0}, qword ptr [{c} + 8]",
                            "add {x1}, qword ptr [{c} + 8]",
                            "add {x2}, qword ptr [{c} + 8]",
                            "add {w}, 896",
                            "dec {k}",
                            "jnz 3b",
                            "add {x0}, qword ptr [{c} + 16]",
                            "add {x1}, qword ptr [{c} + 16]",
                            "add {x2}, qword ptr [{c} + 16]",
                            "add {w}, qword ptr [{c} + 24]",
                        ],
                        x0 = inout(reg) x.wrapping_add(b[0]) => _,
                        x1 = inout(reg) x.wrapping_add(b[1]) => _,
                        x2 = inout(reg) x.wrapping_add(b[2]) => _,
                        w = inout(reg) r.w.add((r.channels.start * ntaps + tap0) * SPAN) => _,
                        n = inout(reg) channels => _,
                        k = out(reg) _,
                        c = in(reg) c.as_ptr(),
                    )
                };
            }
            // Column `k` of a kernel row: 4k bytes past the row's start,
            // its weights 128k bytes past the row's; the positions marked
            // `n` leave it out (bit `3k + i` of the mask for position `i`).
            macro_rules! row7 {
                ($([$($p:ident)*])*) => {
                    row7!(@ 0 1 2 3 4 5 6; $([$($p)*])*)
                };
                (@ $($k:literal)*; $([$($p:ident)*])*) => {
                    rows7!($(asm_step!(
                        concat!(" + 4*", stringify!($k)),
                        concat!("128*", stringify!($k)),
                        $($p)*
                    )),*)
                };
            }
            match mask {
                0 => row7!([y y y] [y y y] [y y y] [y y y] [y y y] [y y y] [y y y]),
                // A row's second column at position 0.
                0x1 => row7!([n y y] [y y y] [y y y] [y y y] [y y y] [y y y] [y y y]),
                // A row's first column at position 0, 1 or 2 (the last
                // column before it), or its last at position 2.
                0x4b => row7!([n n y] [n y y] [n y y] [y y y] [y y y] [y y y] [y y y]),
                0x48096 => row7!([y n n] [y n y] [y n y] [y y y] [y y y] [n y y] [n y y]),
                0x90124 => row7!([y y n] [y y n] [y y n] [y y y] [y y y] [y n y] [y n y]),
                0x120000 => row7!([y y y] [y y y] [y y y] [y y y] [y y y] [y y n] [y y n]),
                _ => unreachable!("no 7-wide row for the mask {mask:#x}"),
            }
            continue;
        }
        let TapForm::Block {
            first,
            tap0,
            row,
            rows,
            cols,
        } = r.form
        else {
            assert_eq!(mask, 0, "an AVX2 edge tile without an unrolled form");
            // Any taps of a flat reduction: one turn per step, its shift
            // read from `{sp}` (`sub -128`: a byte's immediate, where
            // `add 128` takes four).
            let x = r.x;
            tile!(
                [
                    "mov {s}, qword ptr [{sp}]",
                    asm_step!(" + {s}*4", "0"),
                    "add {sp}, 8",
                    "sub {w}, -128",
                ],
                x0 = inout(reg) x.wrapping_add(b[0]) => _,
                x1 = inout(reg) x.wrapping_add(b[1]) => _,
                x2 = inout(reg) x.wrapping_add(b[2]) => _,
                w = inout(reg) r.w.add(r.channels.start * ntaps * SPAN) => _,
                sp = inout(reg) r.shifts[r.channels.start * ntaps..].as_ptr() => _,
                s = out(reg) _,
                n = inout(reg) channels * ntaps => _,
            );
            continue;
        };
        // A turn per channel, each its block of taps: tap (dy, dx) of the
        // block `dy` rows and `dx` elements past a position's pointer, its
        // weights `3 * dy + dx` steps past the block's first; kernel rows
        // `{r1}` bytes apart, their weights 3 steps apart. A base in X may
        // be a wrapped offset before the channel, which the taps' shifts
        // bring inside (`TilePlan::bases`): the pointers wrap.
        let x = r.x.wrapping_add(r.channels.start * r.chan + first);
        macro_rules! block {
            ($($step:expr),* $(,)?) => {
                tile!(
                    [
                        $($step,)*
                        "add {x0}, {cb}",
                        "add {x1}, {cb}",
                        "add {x2}, {cb}",
                        "add {w}, 1152",
                    ],
                    x0 = inout(reg) x.wrapping_add(b[0]) => _,
                    x1 = inout(reg) x.wrapping_add(b[1]) => _,
                    x2 = inout(reg) x.wrapping_add(b[2]) => _,
                    w = inout(reg) r.w.add((r.channels.start * ntaps + tap0) * SPAN) => _,
                    n = inout(reg) channels => _,
                    r1 = in(reg) row * 4,
                    cb = in(reg) r.chan * 4,
                )
            };
        }
        // A block of 3 or 2 whole kernel rows whose columns leave out the
        // positions marked `n` (an edge tile's mask, `EDGE_MASKS_AVX2`).
        macro_rules! masked {
            (3, $($columns:tt)*) => {
                block!(
                    asm_row!(3, "", "0", $($columns)*),
                    asm_row!(3, " + {r1}", "384", $($columns)*),
                    asm_row!(3, " + {r1}*2", "768", $($columns)*),
                )
            };
            (2, $($columns:tt)*) => {
                block!(
                    asm_row!(3, "", "0", $($columns)*),
                    asm_row!(3, " + {r1}", "384", $($columns)*),
                )
            };
        }
        match (rows, cols, mask) {
            (3, 3, 0) => block!(
                asm_row!(3, "", "0"),
                asm_row!(3, " + {r1}", "384"),
                asm_row!(3, " + {r1}*2", "768"),
            ),
            (2, 3, 0) => block!(asm_row!(3, "", "0"), asm_row!(3, " + {r1}", "384")),
            (3, 2, 0) => block!(
                asm_row!(2, "", "0"),
                asm_row!(2, " + {r1}", "384"),
                asm_row!(2, " + {r1}*2", "768"),
            ),
            // Bit `3c + i`: position `i` leaves out kernel column `c`.
            (3, 3, 0x001) => masked!(3, [n y y] [y y y] [y y y]),
            (2, 3, 0x001) => masked!(2, [n y y] [y y y] [y y y]),
            (3, 3, 0x042) => masked!(3, [y n y] [y y y] [n y y]),
            (2, 3, 0x042) => masked!(2, [y n y] [y y y] [n y y]),
            (3, 3, 0x084) => masked!(3, [y y n] [y y y] [y n y]),
            (2, 3, 0x084) => masked!(2, [y y n] [y y y] [y n y]),
            (3, 3, 0x100) => masked!(3, [y y y] [y y y] [y y n]),
            (2, 3, 0x100) => masked!(2, [y y y] [y y y] [y y n]),
            (3, 3, 0x002) => masked!(3, [y n y] [y y y] [y y y]),
            (2, 3, 0x002) => masked!(2, [y n y] [y y y] [y y y]),
            (3, 3, 0x004) => masked!(3, [y y n] [y y y] [y y y]),
            (2, 3, 0x004) => masked!(2, [y y n] [y y y] [y y y]),
            _ => unreachable!("no block of {rows} x {cols} for the mask {mask:#x}"),
        }
    }
    // The ymm registers are only the assembly's clobbers, so LLVM does not
    // clear their upper halves on the way out, as it does after code whose
    // intrinsics it sees; the caller's SSE code would pay for them on
    // Intel's cores.
    _mm256_zeroupper();
}

/// A register tile, with or without the weights asked for ahead.
type TileFn = unsafe fn(&Reduction, Option<*const f32>, *mut f32, &Asks);
/// A write-out of a group's sums to the output planes.
type WriteFn = unsafe fn(*const f32, &Rows, usize, *mut f32, usize);

/// Writes a group's sums (position by position, BLOCK channels each, row
/// `i` for output position `rows[i]`, none for `usize::MAX`) to the first
/// `channels` output planes from `plane0`, `os` apart, 16 positions x 16
/// channels at a time through an in-register transpose, each run of
/// consecutive positions among the 16 by one masked store.
///
/// # Safety
/// AVX-512F; `sums` holds `rows.len()` rows of BLOCK; every position of
/// `rows` lies in the planes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_out512(
    sums: *const f32,
    rows: &Rows,
    channels: usize,
    plane0: *mut f32,
    os: usize,
) {
    use std::arch::x86_64::*;
    for q in (0..rows.len()).step_by(16) {
        let n = (rows.len() - q).min(16);
        let mut runs = [(0, 0, 0); 16];
        let nr = rows.lane_runs(q, 16, &mut runs);
        let mask = |k: usize| {
            let (lo, hi, _): (usize, usize, usize) = runs[k];
            (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16
        };
        for c0 in (0..channels).step_by(16) {
            // Rows past the count repeat the last; no run stores them.
            let r: [__m512; 16] =
                std::array::from_fn(|i| _mm512_loadu_ps(sums.add((q + i.min(n - 1)) * BLOCK + c0)));
            let cols = transpose16(r);
            if nr == 1 && runs[0].0 == 0 {
                // One run from the first lane: a store per channel.
                let (at, m) = (plane0.add(runs[0].2), mask(0));
                for (c, col) in cols.iter().enumerate().take(channels - c0) {
                    _mm512_mask_storeu_ps(at.add((c0 + c) * os), m, *col);
                }
                continue;
            }
            for (c, col) in cols.iter().enumerate().take(channels - c0) {
                let plane = plane0.add((c0 + c) * os);
                for (k, &(lo, _, at)) in runs[..nr].iter().enumerate() {
                    // Lane `lo` lands on `at`; the lanes before it are
                    // masked off, so they touch nothing, even before the
                    // plane.
                    _mm512_mask_storeu_ps(plane.wrapping_add(at).wrapping_sub(lo), mask(k), *col);
                }
            }
        }
    }
}

/// The transpose of 16 rows of 16: element j of row i goes to element i of
/// row j (pairs of lanes, then pairs of pairs, then 128-bit quarters).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose16(
    r: [std::arch::x86_64::__m512; 16],
) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    // t[2k] / t[2k+1]: rows 2k and 2k+1 interleaved, lanes 0-1 / 2-3 of
    // each quarter.
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (a, b) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    // u[4k + j]: rows 4k..4k+4 at column j of each quarter.
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let (k, j) = (i / 4, i % 4);
        let (a, b) = (
            _mm512_castps_pd(t[4 * k + j / 2]),
            _mm512_castps_pd(t[4 * k + 2 + j / 2]),
        );
        _mm512_castpd_ps(if j % 2 == 0 {
            _mm512_unpacklo_pd(a, b)
        } else {
            _mm512_unpackhi_pd(a, b)
        })
    });
    let mut out = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        let va = _mm512_shuffle_f32x4::<0x88>(u[j], u[4 + j]);
        let vb = _mm512_shuffle_f32x4::<0xdd>(u[j], u[4 + j]);
        let vc = _mm512_shuffle_f32x4::<0x88>(u[8 + j], u[12 + j]);
        let vd = _mm512_shuffle_f32x4::<0xdd>(u[8 + j], u[12 + j]);
        out[j] = _mm512_shuffle_f32x4::<0x88>(va, vc);
        out[j + 8] = _mm512_shuffle_f32x4::<0xdd>(va, vc);
        out[j + 4] = _mm512_shuffle_f32x4::<0x88>(vb, vd);
        out[j + 12] = _mm512_shuffle_f32x4::<0xdd>(vb, vd);
    }
    out
}

/// How many output planes the AVX2 write-out fills in one pass over a
/// group's positions, from the planes' stride: eight positions are half a
/// line, so each line is stored to twice, and between the two stores the
/// pass's other planes are stored to. Where the planes start at few
/// distinct offsets within 4 KiB (the span of one way of a 32 KiB, 8-way
/// L1 of 64-byte lines: on a 112x112 output, four offsets; on 32x32 and
/// 64x64 ones, one) the lines of 64 planes crowd a few sets, and each is
/// evicted before its second store. A pass then takes 4 planes per
/// distinct offset, at least 8 and at most 64 (the block). Paired 0.3 s
/// runs with AVX-512 hidden on the Zen 4 of 2026-12-06 (12 pairs, one
/// thread), against every plane in one pass: the 7x7 stride-2 layer and
/// C64 64x64 0.988-0.989 of the time, a 3x3 layer on a 112x112 image with
/// 3 input channels 0.964, C64 32x32 0.993; on two threads 0.995-1.005
/// (16 pairs). An isolated write-out of 192 positions x 64 planes from L1
/// took 16-24 ns per 8x8 block with planes 12544 floats apart and 6-8 with
/// 12576, and 7.4 in passes of 16. The AVX-512 write-out stores 16
/// positions at a time; passes of 16 or of this count there were 0.5-2.6%
/// slower and it keeps one pass.
pub(super) fn planes_per_pass(os: usize) -> usize {
    let stride = (os * std::mem::size_of::<f32>()) % 4096;
    let offsets = 4096 >> stride.trailing_zeros().min(12);
    (4 * offsets).clamp(8, BLOCK)
}

/// [`transpose_out512`] for AVX2: 8 positions x 8 channels at a time, in
/// passes of [`planes_per_pass`] channels over the positions, and channels
/// up to `channels` rounded up to 8 read from `sums`.
///
/// # Safety
/// AVX2; `sums` holds `rows.len()` rows of BLOCK; every position of `rows`
/// lies in the planes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_out256(
    sums: *const f32,
    rows: &Rows,
    channels: usize,
    plane0: *mut f32,
    os: usize,
) {
    use std::arch::x86_64::*;
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let pass = planes_per_pass(os);
    for first in (0..channels).step_by(pass) {
        let end = (first + pass).min(channels);
        for q in (0..rows.len()).step_by(8) {
            let n = (rows.len() - q).min(8);
            let mut runs = [(0, 0, 0); 16];
            let nr = rows.lane_runs(q, 8, &mut runs);
            let mut c0 = first;
            if nr == 1 && (runs[0].0, runs[0].1) == (0, 8) {
                // Eight rows, one run of eight positions: whole blocks of
                // eight channels load their rows and store their columns
                // at constant strides, with nothing walked or counted per
                // store (the general loop below spilled the columns and
                // the row addresses). Paired 0.3 s runs with AVX-512
                // hidden on the Zen 4 of 2026-12-06, one thread: a plain
                // store per channel without the walk over the runs took
                // the 7x7 stride-2 layer to 0.983-0.989 of the time and
                // C64 56x56 to 0.990-0.998; this form then to 0.967-0.976
                // and 0.991-0.997 of that (0.97 and alike on two
                // threads), C256 14x14 alike.
                let (row0, out0) = (sums.add(q * BLOCK), plane0.add(runs[0].2));
                while c0 + 8 <= end {
                    let cols = transpose8(std::array::from_fn(|i| {
                        _mm256_loadu_ps(row0.add(i * BLOCK + c0))
                    }));
                    let at = out0.add(c0 * os);
                    for (c, col) in cols.iter().enumerate() {
                        _mm256_storeu_ps(at.add(c * os), *col);
                    }
                    c0 += 8;
                }
                if c0 == end {
                    continue;
                }
            }
            let masks: [__m256i; 8] = std::array::from_fn(|k| {
                let (lo, hi, _) = runs[k];
                _mm256_and_si256(
                    _mm256_cmpgt_epi32(_mm256_set1_epi32(hi as i32), lane),
                    _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo as i32 - 1)),
                )
            });
            for c0 in (c0..end).step_by(8) {
                // Rows past the count repeat the last; no run stores them.
                let r: [__m256; 8] = std::array::from_fn(|i| {
                    _mm256_loadu_ps(sums.add((q + i.min(n - 1)) * BLOCK + c0))
                });
                let cols = transpose8(r);
                for (c, col) in cols.iter().enumerate().take(channels - c0) {
                    let plane = plane0.add((c0 + c) * os);
                    for (k, &(lo, hi, at)) in runs[..nr].iter().enumerate() {
                        let at = plane.wrapping_add(at).wrapping_sub(lo);
                        if hi - lo == 8 {
                            _mm256_storeu_ps(at, *col);
                        } else {
                            // Masked lanes are neither written nor faulted on.
                            _mm256_maskstore_ps(at, masks[k], *col);
                        }
                    }
                }
            }
        }
    }
}

/// The transpose of 8 rows of 8: element j of row i goes to element i of
/// row j (pairs of lanes, then pairs of pairs within each half, then the
/// halves).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose8(r: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    // t[2k] / t[2k+1]: rows 2k and 2k+1 interleaved, columns 0-1 / 2-3 of
    // each half.
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (a, b) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    // u[4k + j]: rows 4k..4k+4 at column j of each half.
    let u: [__m256; 8] = std::array::from_fn(|i| {
        let (k, j) = (i / 4, i % 4);
        let (a, b) = (t[4 * k + j / 2], t[4 * k + 2 + j / 2]);
        if j % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(a, b)
        } else {
            _mm256_shuffle_ps::<0xee>(a, b)
        }
    });
    std::array::from_fn(|j| {
        if j < 4 {
            _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j])
        } else {
            _mm256_permute2f128_ps::<0x31>(u[j - 4], u[j])
        }
    })
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose_out512(_: *const f32, _: &Rows, _: usize, _: *mut f32, _: usize) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
use transpose_out512 as transpose_out256;

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile512<const STREAMED: bool, const P: usize>(
    _: &Reduction,
    _: Option<*const f32>,
    _: *mut f32,
    _: &Asks,
) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile512_cols<const STREAMED: bool, const KW: usize, const MASK: u64>(
    _: &Reduction,
    _: Option<*const f32>,
    _: *mut f32,
    _: &Asks,
) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile256<const P: usize>(_: &Reduction, _: Option<*const f32>, _: *mut f32, _: &Asks) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile_run256(
    _: &Reduction,
    _: Option<*const f32>,
    _: *mut f32,
    _: &Asks,
    _: Option<(usize, usize, usize)>,
    _: u64,
) {
    unreachable!("the channel-lane kernel is only chosen on x86-64")
}
