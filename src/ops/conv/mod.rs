//! Conv, versions 1, 11 and 22.
//!
//! Numerical contract:
//! - float32 computes and accumulates in f32, float64 in f64;
//! - float16 and bfloat16 are widened to f32, computed and accumulated in
//!   f32, and rounded once (to nearest even) when the output is written;
//! - the summation order is the GEMM's (blocked along the reduction axis) or
//!   the direct kernel's ((input channel, tap) order with FMA), so results
//!   differ from a sequential sum by normal rounding only, within the same
//!   bound; NaN and infinities propagate as IEEE arithmetic says (padding is
//!   multiplied as zeros by the im2col and direct paths, skipped by the
//!   depthwise kernels' edge code and, when every weight is finite and the
//!   reduction is long, by the channel-lane kernel, whose tiles then read X
//!   and only the taps inside it; each skipped product is an exact zero:
//!   `tile_plan.rs`).
//!
//! Paths: a direct kernel for depthwise 2-D convolution (register-blocked
//! AVX-512 or AVX2 with FMA for f32 with unit strides, clones of the plain
//! loop for that instruction set otherwise; it writes each output once,
//! starting from the bias), a plain GEMM for 1x1 kernels without padding or
//! striding, two direct kernels for f32 (any rank, stride, dilation and
//! group; both read a zero-padded copy of the input split by stride phase,
//! so every tap is one constant shift): `direct_lanes.rs` when a group's
//! output channels fill blocks of 64 (`lanes_pay`; 64 channels x 6 output
//! positions in registers with AVX-512, 16 x 6 with AVX2, no padded
//! position computed, the tile transposed on the way out), `direct.rs`
//! where `direct_pays` says it
//! beats the GEMM (4 output channels x a row of positions, AVX-512 or
//! AVX2), and im2col plus GEMM in column tiles otherwise. For f32 the GEMM
//! is ours (`sgemm.rs`) when the CPU has AVX-512F or AVX2 with FMA (one
//! packed layout, a micro-kernel per instruction set), and it adds each
//! output row's bias as it stores the product (`Onto::RowBias`), so every
//! path but the `gemm` crate's writes each output once. Constant weights (an
//! initializer) are packed once per model for the path the run will take
//! (`prepared.rs`, `packing.rs`), else once per call; im2col rows are
//! written straight into the GEMM's packed layout. f64, and f32 on other
//! CPUs, use the `gemm` crate; float16 and bfloat16 are widened to f32
//! first, so they take the f32 paths. The im2col buffer holds at most
//! `TILE_BYTES` per worker, whatever the input size, and the direct
//! kernels' input copy is taken only when it fits the scratch limit.
//! [`conv`] picks its side by the CPU; the unit tests force each side
//! (`KernelPath`), so the ones a machine would not pick are tested too.
//! Work is spread over the rayon pool (both cores on this machine), from a
//! pool thread.
//!
//! Speed against onnxruntime 1.32: `cargo xtask bench` measures it, with
//! figures in the README. On a Zen 3 EPYC (AVX2, no AVX-512) the AVX2
//! channel-lane kernel ran the dense bench shapes at 80-88% of the FMA
//! peak back to back, 95% of a call's samples in its tile (C256 14x14).
//! On an AVX-512 Xeon (2 cores) the channel-lane tile runs at about 94%
//! of the FMA peak with its operands in L1; whole
//! dense convolutions reached 56-81% of the peak in this session's bench
//! runs, onnxruntime's NCHWc kernels 62-87%. The input copy and the
//! transposed write-out cost 3-12% each of a call. The depthwise kernel
//! runs above onnxruntime (memory bounds it).
//!
//! `auto_pad` SAME_UPPER / SAME_LOWER give an output of `ceil(in / stride)`
//! per axis in every version; Conv-1's text ("output size matches input
//! size") says the same for stride 1, and runtimes apply the later formula.

use super::{check_type, KernelCtx, OpOutput};
use crate::error::KernelError;
use crate::limits::Limits;
use crate::tensor::{DataType, Storage, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use std::borrow::Cow;

mod depthwise;
mod direct;
mod direct_lanes;
mod direct_rows;
mod geometry;
mod im2col;
mod im2col_gemm;
pub(crate) mod packing;
mod planes;
pub use planes::Planes;
mod pointwise;
mod prepared;
#[cfg(test)]
mod tests;
mod tile_plan;

use crate::ops::sgemm::Isa;
use depthwise::*;
use geometry::*;
pub use geometry::{geometry, AutoPad, ConvAttrs, Geometry};
use im2col_gemm::*;
use packing::{DirectWeights, LaneWeights, PackedWeights};
use pointwise::*;
pub use prepared::prepare;

/// The versions at which Conv changed.
pub const VERSIONS: [i64; 3] = [1, 11, 22];

/// Bytes of im2col buffer per worker.
const TILE_BYTES: usize = 1 << 20;

pub fn allowed_types(version: i64) -> Vec<DataType> {
    let mut t = vec![DataType::Float16, DataType::Float, DataType::Double];
    if version >= 22 {
        t.push(DataType::Bfloat16);
    }
    t
}

pub fn run(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let v = ctx.version;
    if inputs.len() > 3 {
        return Err(KernelError::Invalid(format!(
            "Conv takes at most 3 inputs, got {}",
            inputs.len()
        )));
    }
    let x = ctx.required_input(inputs, 0, "X")?;
    let w = ctx.required_input(inputs, 1, "W")?;
    let b = inputs.get(2).copied().flatten();
    let allowed = allowed_types(v);
    check_type("X", x.dtype(), &allowed)?;
    for (name, t) in [("W", Some(w)), ("B", b)] {
        if let Some(t) = t {
            if t.dtype() != x.dtype() {
                return Err(KernelError::input(
                    name,
                    format!(
                        "expected the element type of X ({}), got {}",
                        x.dtype(),
                        t.dtype()
                    ),
                ));
            }
        }
    }
    let attrs = ConvAttrs::from_ctx(ctx)?;
    let g = geometry(&attrs, x.shape(), w.shape(), b.map(|t| t.shape()))?;
    check_limits(&g, x.dtype(), &ctx.limits)?;
    let scratch = ctx.limits.max_im2col_bytes.min(usize::MAX as u64) as usize;
    let shape = IxDyn(&g.out_shape());
    let wrap = |s: Storage| Tensor::new(x.dtype(), s).map_err(KernelError::Invalid);
    let prepared = prepared::of(ctx);
    // Widened weights from preparation, when it made them (W is constant).
    let widened_w = prepared
        .map(|p| p.widened.as_slice())
        .filter(|v| !v.is_empty());
    let packs = Packs {
        gemm: prepared.and_then(|p| p.packed.as_ref()),
        direct: prepared.and_then(|p| p.direct.as_ref()),
        lanes: prepared.and_then(|p| p.lanes.as_ref()),
        plans: prepared.map(|p| &p.plans),
    };
    let out = match (x.storage(), w.storage()) {
        (Storage::F32(xa), Storage::F32(wa)) => {
            let bias = b
                .and_then(|t| t.array::<f32>())
                .map(|a| a.iter().copied().collect::<Vec<_>>());
            let y = conv_prepacked(&g, slice(xa)?, slice(wa)?, bias.as_deref(), scratch, packs);
            wrap(Storage::F32(planes_array(y, shape)?))?
        }
        (Storage::F64(xa), Storage::F64(wa)) => {
            let bias = b
                .and_then(|t| t.array::<f64>())
                .map(|a| a.iter().copied().collect::<Vec<_>>());
            let y = conv(&g, slice(xa)?, slice(wa)?, bias.as_deref(), scratch);
            wrap(Storage::F64(planes_array(y, shape)?))?
        }
        (Storage::F16(xa), Storage::F16(wa)) => {
            let widen = |a: &ArrayD<f16>| a.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
            let bias = b.and_then(|t| t.array::<f16>()).map(widen);
            let w = widened_w.map_or_else(|| widen(wa).into(), Cow::Borrowed);
            let y = conv_prepacked(&g, &widen(xa), &w, bias.as_deref(), scratch, packs);
            wrap(Storage::F16(reshape(
                y.iter().map(|&v| f16::from_f32(v)).collect(),
                shape,
            )?))?
        }
        (Storage::BF16(xa), Storage::BF16(wa)) => {
            let widen = |a: &ArrayD<bf16>| a.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
            let bias = b.and_then(|t| t.array::<bf16>()).map(widen);
            let w = widened_w.map_or_else(|| widen(wa).into(), Cow::Borrowed);
            let y = conv_prepacked(&g, &widen(xa), &w, bias.as_deref(), scratch, packs);
            wrap(Storage::BF16(reshape(
                y.iter().map(|&v| bf16::from_f32(v)).collect(),
                shape,
            )?))?
        }
        _ => return Err(KernelError::input("W", "element type differs from X")),
    };
    Ok(vec![out])
}

pub(super) fn slice<T>(a: &ArrayD<T>) -> Result<&[T], KernelError> {
    a.as_slice()
        .ok_or_else(|| KernelError::Invalid("internal: tensor is not contiguous".into()))
}

/// [`reshape`] for the planes of a call.
fn planes_array<T: Real>(y: Planes<T>, shape: IxDyn) -> Result<ArrayD<T>, KernelError> {
    y.into_array(shape)
        .map_err(|e| KernelError::Invalid(format!("internal: {e}")))
}

pub(super) fn reshape<T>(v: Vec<T>, shape: IxDyn) -> Result<ArrayD<T>, KernelError> {
    ArrayD::from_shape_vec(shape, v).map_err(|e| KernelError::Invalid(format!("internal: {e}")))
}

/// The element types the compute paths run in.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
{
    const ZERO: Self;
    const ONE: Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

/// A raw pointer that may cross threads; every user writes a disjoint region.
#[derive(Clone, Copy)]
pub(super) struct SendPtr<T>(*mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    // A method (not field access) so closures capture the whole wrapper.
    fn get(self) -> *mut T {
        self.0
    }
}

/// Which kernels Conv runs. `Auto` picks by the CPU, so on any one machine
/// it only ever exercises one side: tests force each side so that every one
/// the CPU can run is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Only tests force a side; the library itself always runs `Auto`.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum KernelPath {
    Auto,
    /// Our kernels for AVX-512F (`sgemm.rs`, the depthwise kernels).
    Avx512,
    /// Our kernels for AVX2 with FMA, with im2col and GEMM where `Auto`
    /// may pick the direct kernel.
    Avx2,
    /// The direct kernel for AVX2 with FMA wherever it can run (f32, not
    /// 1x1 or depthwise, the buffer within the scratch limit), whatever its
    /// speed; `Avx2` elsewhere.
    DirectAvx2,
    /// The same for AVX-512F; `Avx512` elsewhere.
    DirectAvx512,
    /// The channel-lane direct kernel (AVX-512F) wherever it can run;
    /// `Avx512` elsewhere.
    LanesAvx512,
    /// The same for AVX2 with FMA; `Avx2` elsewhere.
    LanesAvx2,
    /// The `gemm` crate and the plain depthwise loops.
    Portable,
}

impl KernelPath {
    /// The instruction set the kernels are to use.
    fn isa(self) -> Isa {
        let forced = match self {
            KernelPath::Auto => return Isa::detect(),
            KernelPath::Avx512 | KernelPath::DirectAvx512 | KernelPath::LanesAvx512 => Isa::Avx512,
            KernelPath::Avx2 | KernelPath::DirectAvx2 | KernelPath::LanesAvx2 => Isa::Avx2,
            KernelPath::Portable => return Isa::Portable,
        };
        // Running kernels the CPU lacks would be undefined behaviour.
        assert!(
            forced.supported(),
            "KernelPath::{self:?} on a CPU without {forced:?}"
        );
        forced
    }
}

/// Computes the convolution for a validated geometry. `x`, `w` and `bias`
/// are row-major buffers of the shapes `g` was built from.
pub fn conv<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    scratch_bytes: usize,
) -> Planes<T> {
    conv_on(
        g,
        x,
        w,
        bias,
        scratch_bytes,
        KernelPath::Auto,
        Packs::default(),
    )
}

/// [`conv`] with weights packed ahead (`prepared.rs`), each used when it
/// was packed for this geometry and this CPU's kernels.
fn conv_prepacked(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    scratch_bytes: usize,
    packs: Packs,
) -> Planes<f32> {
    let kdim = g.in_channels / g.group * g.kernel_size();
    let isa = Isa::detect();
    let packs = Packs {
        gemm: packs
            .gemm
            .filter(|p| p.fits(g.out_channels, g.group, kdim, isa)),
        direct: packs
            .direct
            .filter(|p| p.fits(g.out_channels, g.group, kdim)),
        lanes: packs.lanes.filter(|p| {
            p.fits(g.out_channels, g.group, kdim) && p.span() == direct_lanes::span(isa)
        }),
        plans: packs.plans,
    };
    conv_on(g, x, w, bias, scratch_bytes, KernelPath::Auto, packs)
}

/// Weights packed ahead for the f32 kernels, each built from the same `w`
/// for the same geometry (`fits`); the ones missing are packed per call.
#[derive(Clone, Copy, Default)]
pub(crate) struct Packs<'a> {
    /// For the GEMM of the instruction set the call runs on.
    pub gemm: Option<&'a PackedWeights>,
    /// For the direct kernel.
    pub direct: Option<&'a DirectWeights>,
    /// For the channel-lane direct kernel.
    pub lanes: Option<&'a LaneWeights>,
    /// Where the channel-lane kernel keeps its tile plan between calls.
    pub plans: Option<&'a direct_lanes::PlanCache>,
}

/// When `Auto` takes the direct kernel over im2col + GEMM, from single-
/// thread measurements of both on an AVX-512 Xeon (a probe over nine
/// shapes: 3x3 with 16 to 512 channels on 7x7 to 112x112 images, stride
/// 1 and 2, and the 7x7 stride-2 first layer). With AVX-512 the direct
/// kernel ran 1.1x to 2x the GEMM on every one, including 7x7 images where
/// it computes 1.29 positions per output; its AVX2 twin (3 vectors of 8
/// lanes, against 4 x 24 for the GEMM) beat the AVX2 GEMM only on the
/// first layer (3 input channels, where im2col is most of the work) and
/// trailed it by 15-30% elsewhere.
fn direct_pays(g: &Geometry, layout: &direct::Layout, isa: Isa) -> bool {
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    mg >= direct::OCB
        && match isa {
            Isa::Avx512 => layout.waste(g) <= 1.5,
            Isa::Avx2 => cg <= DIRECT_AVX2_MAX_CHANNELS && layout.waste(g) <= 1.25,
            Isa::Portable => false,
        }
}

/// Input channels per group up to which AVX2 takes the direct kernel.
pub(super) const DIRECT_AVX2_MAX_CHANNELS: usize = 4;

/// [`conv`] on the kernels `path` names. The choice is made once here and
/// passed down, so the per-tile GEMM calls pay nothing for it.
pub(crate) fn conv_on<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    scratch_bytes: usize,
    path: KernelPath,
    packs: Packs,
) -> Planes<T> {
    let isa = path.isa();
    let kdim = g.in_channels / g.group * g.kernel_size();
    debug_assert!(packs
        .gemm
        .is_none_or(|p| p.fits(g.out_channels, g.group, kdim, isa)));
    debug_assert!(packs
        .direct
        .is_none_or(|p| p.fits(g.out_channels, g.group, kdim)));
    let os = g.out_size();
    let planes = g.batch * g.out_channels;
    let tile_bytes = TILE_BYTES.min(scratch_bytes);
    if kdim == 0 {
        // No input channels (X [N, 0, ...] and W [M, 0, ...] are valid):
        // every output is its channel's bias, or zero. Answered here, as
        // the kernels assume a reduction of at least one term.
        let mut y = Planes::uninit(planes * os);
        fill_bias(g, bias, y.spare());
        // SAFETY: `fill_bias` initialised all planes * os elements.
        unsafe { y.assume_init() };
        return y;
    }
    if g.is_depthwise_2d() {
        // The depthwise kernels start from the bias themselves and write
        // every element once: no fill pass over the output first.
        let mut y = Planes::uninit(planes * os);
        if os > 0 {
            let out = y.spare();
            rayon::scope(|_| depthwise_2d(g, x, w, bias, out, tile_bytes, isa));
        }
        // SAFETY: depthwise_2d wrote all planes * os elements.
        unsafe { y.assume_init() };
        return y;
    }
    let is_f32 = std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>();
    if is_f32 && os > 0 && planes > 0 {
        if let Some((layout, kernel)) = direct_layout(g, path, scratch_bytes) {
            // SAFETY: T is f32 (checked above), so the slices have that type.
            let (xf, wf, bf) = unsafe {
                (
                    std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                    std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len()),
                    bias.map(|b| std::slice::from_raw_parts(b.as_ptr() as *const f32, b.len())),
                )
            };
            let mut y = Planes::<T>::uninit(planes * os);
            let out = y.spare();
            // SAFETY: T is f32; `out` is planes * os elements.
            let out = unsafe {
                std::slice::from_raw_parts_mut(
                    out.as_mut_ptr() as *mut std::mem::MaybeUninit<f32>,
                    planes * os,
                )
            };
            match kernel {
                DirectKernel::Positions => {
                    let mut packed = None;
                    let dw = packed_or(packs.direct, &mut packed, || {
                        DirectWeights::new(g.out_channels, g.group, kdim, wf)
                    });
                    rayon::scope(|_| direct::conv_direct(g, &layout, xf, dw, bf, out, isa));
                }
                DirectKernel::Channels => {
                    let mut packed = None;
                    let lw = packed_or(packs.lanes, &mut packed, || {
                        let span = direct_lanes::span(isa);
                        LaneWeights::in_spans(g.out_channels, g.group, kdim, wf, span)
                    });
                    rayon::scope(|_| {
                        direct_lanes::conv_direct_lanes(
                            g,
                            &layout,
                            xf,
                            lw,
                            bf,
                            out,
                            isa,
                            packs.plans,
                        )
                    });
                }
            }
            // SAFETY: both kernels write all planes * os elements.
            unsafe { y.assume_init() };
            return y;
        }
    }
    let mut y = Planes::uninit(planes * os);
    if os == 0 || planes == 0 {
        return y;
    }
    let out = y.spare();
    // The whole call on a pool thread: called from outside the pool (the
    // main thread of a model run), each parallel loop would otherwise be
    // handed over to the pool and waited for, which measured 20-30% slower
    // on the 2-core bench shapes.
    rayon::scope(|_| {
        if g.is_pointwise() {
            pointwise(g, x, w, bias, out, isa);
            return;
        }
        if is_f32 && isa != Isa::Portable {
            // SAFETY: T is f32 (checked above), so the slices have that type.
            let (xf, wf, bf, yf) = unsafe {
                (
                    std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                    std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len()),
                    bias.map(|b| std::slice::from_raw_parts(b.as_ptr() as *const f32, b.len())),
                    std::slice::from_raw_parts_mut(
                        out.as_mut_ptr() as *mut std::mem::MaybeUninit<f32>,
                        out.len(),
                    ),
                )
            };
            im2col_gemm_packed(g, xf, wf, bf, yf, tile_bytes, isa, packs.gemm);
            return;
        }
        // Each output plane starts as its bias (or zero), in one parallel
        // pass: a zeroed allocation followed by a bias fill would touch it
        // twice, and one thread alone measured a fifth of a 2-thread call.
        fill_bias(g, bias, out);
        // SAFETY: `fill_bias` initialised every element.
        let yv = unsafe { &mut *(out as *mut [std::mem::MaybeUninit<T>] as *mut [T]) };
        im2col_gemm(g, x, w, yv, tile_bytes, isa);
    });
    // SAFETY: every path above wrote all planes * os elements.
    unsafe { y.assume_init() };
    y
}

/// Each output channel's bias, or zeros without one: what the GEMM paths
/// store their products onto.
fn bias_or_zeros<T: Real>(bias: Option<&[T]>, channels: usize) -> Cow<'_, [T]> {
    bias.map_or_else(|| vec![T::ZERO; channels].into(), Cow::Borrowed)
}

/// Writes each output plane of `out` (`planes x out_size`) as its channel's
/// bias, or zero, in tasks of about 64 KiB spread over the pool.
fn fill_bias<T: Real>(g: &Geometry, bias: Option<&[T]>, out: &mut [std::mem::MaybeUninit<T>]) {
    let os = g.out_size();
    if os == 0 {
        return;
    }
    let per_task = ((64 << 10) / std::mem::size_of::<T>()).max(1);
    let tasks = out.len().div_ceil(per_task);
    let len = out.len();
    let op = SendPtr(out.as_mut_ptr());
    crate::ops::parallel::share(tasks, &|task| {
        let (start, end) = (task * per_task, ((task + 1) * per_task).min(len));
        let mut i = start;
        while i < end {
            let plane = i / os;
            let b = bias.map_or(T::ZERO, |b| b[plane % g.out_channels]);
            let stop = ((plane + 1) * os).min(end);
            // SAFETY: task `task` alone writes elements start..end of `out`.
            unsafe {
                for k in i..stop {
                    op.get().add(k).write(std::mem::MaybeUninit::new(b));
                }
            }
            i = stop;
        }
    });
}

/// The weights packed ahead when there are some, else packed now into
/// `slot`.
fn packed_or<'a, W>(
    ahead: Option<&'a W>,
    slot: &'a mut Option<W>,
    pack: impl FnOnce() -> W,
) -> &'a W {
    match ahead {
        Some(w) => w,
        None => slot.insert(pack()),
    }
}

/// The two direct kernels: what their vector lanes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DirectKernel {
    /// Positions (`direct.rs`): AVX-512 or AVX2.
    Positions,
    /// Output channels (`direct_lanes.rs`): AVX-512 or AVX2.
    Channels,
}

/// The direct kernel `path` runs for `g` (f32, neither 1x1 nor depthwise,
/// checked by the caller), and its layout: forced by the `Direct` and
/// `Lanes` paths, or picked by `Auto` where `lanes_pay` or `direct_pays`
/// says it beats im2col + GEMM. Its buffer must fit the scratch limit
/// either way.
fn direct_layout(
    g: &Geometry,
    path: KernelPath,
    scratch_bytes: usize,
) -> Option<(direct::Layout, DirectKernel)> {
    let isa = Isa::detect();
    let kernel = match path {
        KernelPath::LanesAvx512 | KernelPath::LanesAvx2 => DirectKernel::Channels,
        _ if g.is_pointwise() => return None,
        KernelPath::DirectAvx2 | KernelPath::DirectAvx512 => DirectKernel::Positions,
        KernelPath::Auto
            if isa != Isa::Portable && lanes_pay(g.out_channels / g.group, g.kernel_size()) =>
        {
            DirectKernel::Channels
        }
        KernelPath::Auto if isa != Isa::Portable => DirectKernel::Positions,
        _ => return None,
    };
    let layout = direct::Layout::new(g);
    let fits = layout.bytes() <= scratch_bytes;
    let pays = path != KernelPath::Auto
        || kernel == DirectKernel::Channels
        || direct_pays(g, &layout, isa);
    (fits && pays).then_some((layout, kernel))
}

/// When `Auto` takes the channel-lane kernel: when the output channels of
/// a group fill its blocks of 64 (so no lane computes a channel that is
/// not there). On AVX-512 a one-thread probe of both direct kernels (3x3
/// with 64 to 512 channels on 7x7 to 56x56 images, and the 7x7 stride-2
/// first layer) had it as fast or faster on every shape, most on 14x14
/// and 7x7 images, whose rows the position kernel pads to whole vectors.
/// On AVX2 (a Zen 3 EPYC, 1 s runs of prepared models against the paths
/// AVX2 took before, im2col + GEMM or for 3 input channels `direct.rs`)
/// it was faster or alike on every shape tried, on one and two threads:
/// C128 28x28 89 against 76 GFLOP/s on one thread, C512 7x7 72 against
/// 51, C64 14x14 80 against 37, C64 112x112 stride 2 65 against 54, C64
/// 28x28 to 192 channels 5x5 81 against 79, the 7x7 stride-2 first layer
/// 75-79 against 33; the bench's C64 56x56 and C256 14x14 83-88 against
/// 69-70.
///
/// `prepare` packs weights by the same rule, from W's shape alone; only
/// kernels larger than 1x1 were measured, so 1x1 kernels keep their paths.
pub(super) fn lanes_pay(out_channels_per_group: usize, taps: usize) -> bool {
    taps > 1
        && out_channels_per_group > 0
        && out_channels_per_group.is_multiple_of(direct_lanes::BLOCK)
}

pub(super) fn threads() -> usize {
    rayon::current_num_threads().max(1)
}
