//! Conv weights packed once for the GEMM micro-kernels, so that a model run
//! many times (or a call with many tiles) does not repack them.

use crate::ops::sgemm::{packed, Isa};

/// Every group's weights (`out_channels / group` rows of `kdim` values) in
/// the packed A layout of `sgemm::packed`, for the kernels of one `Isa`.
/// The im2col path uses them; the 1x1 path still packs per call (its A,
/// channels x channels, is small next to the image it multiplies), and the
/// depthwise path needs none.
pub(crate) struct PackedWeights {
    isa: Isa,
    out_channels: usize,
    group: usize,
    kdim: usize,
    /// One packed A per group; empty for `Isa::Portable`, whose GEMM (the
    /// `gemm` crate) packs for itself.
    groups: Vec<Vec<f32>>,
}

impl PackedWeights {
    /// Packs `w` (`g_out_channels` rows of `kdim` values, the Conv weights
    /// with the input channels of a group and the kernel taps flattened,
    /// `group` consecutive blocks of rows) for the kernels of `isa`.
    pub(crate) fn new(
        g_out_channels: usize,
        group: usize,
        kdim: usize,
        w: &[f32],
        isa: Isa,
    ) -> PackedWeights {
        assert!(group > 0 && g_out_channels.is_multiple_of(group));
        assert!(w.len() >= g_out_channels * kdim);
        let mg = g_out_channels / group;
        // With no rows or no reduction a group's packed A is empty, but it
        // is there: the GEMM then writes each row's bias (a Conv with no
        // input channels is valid; its output is the bias).
        let groups = if isa == Isa::Portable {
            Vec::new()
        } else {
            (0..group)
                .map(|gi| packed::pack_a(&w[gi * mg * kdim..(gi + 1) * mg * kdim], kdim, mg, kdim))
                .collect()
        };
        PackedWeights {
            isa,
            out_channels: g_out_channels,
            group,
            kdim,
            groups,
        }
    }

    /// True when these weights were packed for this shape and these kernels.
    pub(crate) fn fits(&self, out_channels: usize, group: usize, kdim: usize, isa: Isa) -> bool {
        (self.out_channels, self.group, self.kdim, self.isa) == (out_channels, group, kdim, isa)
    }

    /// Group `gi`'s packed A.
    pub(crate) fn group(&self, gi: usize) -> &[f32] {
        &self.groups[gi]
    }
}

/// Conv weights in blocks of `B` output channels, for the direct kernels:
/// per group, per block, per span of `span` of its channels (one span of
/// `B` unless asked otherwise), each (input channel, tap) entry as `span`
/// consecutive values (output channels past the group's end zero), the
/// whole starting at a 64-byte boundary so that no vector load of a block
/// straddles two cache lines. A kernel that takes a block a span at a time
/// then reads each span's weights as one run: read `B` apart, a span of 16
/// of a block of 64 used a quarter of L1's sets and missed where its 16
/// KiB chunk should have stayed (perf on Zen 3: most of the tile's samples
/// on the first FMAs after the weight loads; contiguous spans measured
/// 2-6% faster on C64 56x56, C256 14x14 and the 7x7 stride-2 layer, one
/// and two threads, paired 0.3 s runs).
pub(crate) struct BlockedWeights<const B: usize> {
    out_channels: usize,
    group: usize,
    kdim: usize,
    blocks: usize,
    span: usize,
    data: Vec<f32>,
    /// Where the packed values start in `data`.
    start: usize,
    /// Every weight is finite: a product with a padding zero is a zero.
    finite: bool,
}

/// For `direct.rs`: blocks of its register tile's output channels.
pub(crate) type DirectWeights = BlockedWeights<{ super::direct::OCB }>;
/// For `direct_lanes.rs`: blocks of 64 output channels, 4 vectors.
pub(crate) type LaneWeights = BlockedWeights<{ super::direct_lanes::BLOCK }>;

impl<const B: usize> BlockedWeights<B> {
    /// Packs `w` (`out_channels` rows of `kdim` values, `group` consecutive
    /// blocks of rows).
    pub(crate) fn new(out_channels: usize, group: usize, kdim: usize, w: &[f32]) -> Self {
        Self::in_spans(out_channels, group, kdim, w, B)
    }

    /// [`Self::new`] with each block stored as spans of `span` channels
    /// (a divisor of `B`).
    pub(crate) fn in_spans(
        out_channels: usize,
        group: usize,
        kdim: usize,
        w: &[f32],
        span: usize,
    ) -> Self {
        assert!(span > 0 && B.is_multiple_of(span));
        assert!(group > 0 && out_channels.is_multiple_of(group));
        assert!(w.len() >= out_channels * kdim);
        let mg = out_channels / group;
        let blocks = mg.div_ceil(B);
        let len = group * blocks * kdim * B;
        // Without short-circuiting, so that the test vectorises (in the
        // packing loop it took the C256 layer's preparation 0.67-0.71 ->
        // 0.82-1.08 ms).
        let finite = w[..out_channels * kdim]
            .iter()
            .fold(true, |all, v| all & v.is_finite());
        let mut data = vec![0f32; len + 15];
        let start = data.as_ptr().align_offset(64).min(15);
        let packed = &mut data[start..start + len];
        // In runs of 64 reduction entries, so that both the rows read and
        // the entries written stay in cache (row by row, each write of a
        // 590 000-weight layer missed: 1.5 ms to prepare).
        const RUN: usize = 64;
        for gi in 0..group {
            for b in 0..blocks {
                let dst = &mut packed[(gi * blocks + b) * kdim * B..][..kdim * B];
                for j0 in (0..kdim).step_by(RUN) {
                    let j1 = (j0 + RUN).min(kdim);
                    for o in 0..B.min(mg - b * B) {
                        let src = &w[(gi * mg + b * B + o) * kdim..][j0..j1];
                        let at = o / span * kdim * span + o % span;
                        for (j, &v) in (j0..j1).zip(src) {
                            dst[at + j * span] = v;
                        }
                    }
                }
            }
        }
        BlockedWeights {
            out_channels,
            group,
            kdim,
            blocks,
            span,
            data,
            start,
            finite,
        }
    }

    /// True when every weight is finite (so a kernel may leave out their
    /// products with padding zeros).
    pub(crate) fn finite(&self) -> bool {
        self.finite
    }

    /// Channels per span of a block.
    pub(crate) fn span(&self) -> usize {
        self.span
    }

    /// True when these weights were packed for this shape.
    pub(crate) fn fits(&self, out_channels: usize, group: usize, kdim: usize) -> bool {
        (self.out_channels, self.group, self.kdim) == (out_channels, group, kdim)
    }

    /// Block `b` of group `gi`: its spans, each `kdim` entries of `span`
    /// values.
    pub(crate) fn block(&self, gi: usize, b: usize) -> &[f32] {
        &self.data[self.start + (gi * self.blocks + b) * self.kdim * B..][..self.kdim * B]
    }
}
