//! Conv, versions 1, 11 and 22.
//!
//! Numerical contract:
//! - float32 computes and accumulates in f32, float64 in f64;
//! - float16 and bfloat16 are widened to f32, computed and accumulated in
//!   f32, and rounded once (to nearest even) when the output is written;
//! - the summation order is the GEMM's (blocked along the reduction axis), so
//!   results differ from a sequential sum by normal rounding only; NaN and
//!   infinities propagate as IEEE arithmetic says.
//!
//! Paths: a direct kernel for depthwise 2-D convolution (register-blocked
//! AVX-512 for f32 with unit strides, an AVX-512 clone otherwise), a plain GEMM for 1x1 kernels without padding or
//! striding, and im2col plus GEMM in column tiles otherwise. The GEMM is our
//! AVX-512 f32 kernel (`sgemm.rs`) when the CPU has AVX-512F, with the
//! weights packed once and im2col rows written straight into its packed
//! layout; f64 (and f32 elsewhere) uses the `gemm` crate. The im2col buffer
//! holds at most `TILE_BYTES` per worker, whatever the input size. [`conv`]
//! picks its side by the CPU; the unit tests force each side
//! (`KernelPath`), so the one a machine would not pick is tested too. Work is
//! spread over the rayon pool (both cores on this machine): by (image,
//! group, tile), or by GEMM rows when there are too few tiles.
//!
//! Speed against onnxruntime on this machine (see `cargo xtask bench`):
//! 0.3-0.6 of its throughput on 3x3/7x7 shapes, about 0.75-0.8 on 1x1 and
//! depthwise (f32 depthwise with unit strides has its own AVX-512 kernel). The
//! micro-kernel runs near the core's FMA peak; what remains is im2col and
//! packing traffic (onnxruntime avoids it with NCHWc direct kernels) and
//! cache blocking for large K (C256 14x14 is the weakest shape).
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
use rayon::prelude::*;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Conv's attributes as written on the node.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    pub auto_pad: AutoPad,
    pub kernel_shape: Option<Vec<i64>>,
    pub strides: Option<Vec<i64>>,
    pub dilations: Option<Vec<i64>>,
    pub pads: Option<Vec<i64>>,
    pub group: i64,
}

impl Default for ConvAttrs {
    fn default() -> Self {
        ConvAttrs {
            auto_pad: AutoPad::NotSet,
            kernel_shape: None,
            strides: None,
            dilations: None,
            pads: None,
            group: 1,
        }
    }
}

impl ConvAttrs {
    pub fn from_ctx(ctx: &KernelCtx) -> Result<ConvAttrs, KernelError> {
        let auto_pad = match ctx.string_attr("auto_pad")?.unwrap_or("NOTSET") {
            "NOTSET" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => {
                return Err(KernelError::attribute(
                    "auto_pad",
                    format!(
                        "unknown value '{other}'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"
                    ),
                ))
            }
        };
        Ok(ConvAttrs {
            auto_pad,
            kernel_shape: ctx.ints_attr("kernel_shape")?.map(<[i64]>::to_vec),
            strides: ctx.ints_attr("strides")?.map(<[i64]>::to_vec),
            dilations: ctx.ints_attr("dilations")?.map(<[i64]>::to_vec),
            pads: ctx.ints_attr("pads")?.map(<[i64]>::to_vec),
            group: ctx.int_attr("group")?.unwrap_or(1),
        })
    }
}

/// Everything the kernels need, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub group: usize,
    pub in_spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
    pub out_spatial: Vec<usize>,
}

impl Geometry {
    pub fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.out_channels];
        s.extend(&self.out_spatial);
        s
    }

    fn in_size(&self) -> usize {
        self.in_spatial.iter().product()
    }

    fn out_size(&self) -> usize {
        self.out_spatial.iter().product()
    }

    fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// One input channel per group and few outputs per channel: the
    /// depthwise kernel, which needs no im2col.
    fn is_depthwise_2d(&self) -> bool {
        self.in_spatial.len() == 2
            && self.in_channels / self.group == 1
            && self.out_channels / self.group <= 4
            && self.group > 1
    }

    /// A 1x1 kernel with unit strides and no padding: a plain GEMM.
    fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self
                .pads_begin
                .iter()
                .chain(&self.pads_end)
                .all(|&p| p == 0)
    }

    /// Multiply-adds of the whole convolution (for GFLOP/s figures: x2).
    pub fn macs(&self) -> u64 {
        (self.batch * self.out_channels * self.out_size()) as u64
            * (self.in_channels / self.group * self.kernel_size()) as u64
    }
}

fn per_axis(
    name: &str,
    v: &Option<Vec<i64>>,
    k: usize,
    default: i64,
) -> Result<Vec<usize>, KernelError> {
    match v {
        None => Ok(vec![default as usize; k]),
        Some(v) => {
            if v.len() != k {
                return Err(KernelError::attribute(
                    name,
                    format!(
                        "expected {k} values (one per spatial axis), got {}",
                        v.len()
                    ),
                ));
            }
            v.iter()
                .map(|&s| {
                    if s < 1 {
                        Err(KernelError::attribute(
                            name,
                            format!("values must be at least 1, got {v:?}"),
                        ))
                    } else {
                        Ok(s as usize)
                    }
                })
                .collect()
        }
    }
}

/// Validates shapes and attributes and computes the output geometry.
pub fn geometry(
    a: &ConvAttrs,
    x: &[usize],
    w: &[usize],
    bias: Option<&[usize]>,
) -> Result<Geometry, KernelError> {
    if x.len() < 3 {
        return Err(KernelError::input(
            "X",
            format!("expected rank 3 or more (N, C, spatial...), got shape {x:?}"),
        ));
    }
    if w.len() != x.len() {
        return Err(KernelError::input(
            "W",
            format!("expected the rank of X ({}), got shape {w:?}", x.len()),
        ));
    }
    let k = x.len() - 2;
    if a.group < 1 {
        return Err(KernelError::attribute(
            "group",
            format!("must be at least 1, got {}", a.group),
        ));
    }
    let group = usize::try_from(a.group).map_err(|_| {
        KernelError::attribute("group", format!("{} does not fit this machine", a.group))
    })?;
    let (m, cg) = (w[0], w[1]);
    if cg.checked_mul(group) != Some(x[1]) {
        return Err(KernelError::input(
            "W",
            format!(
                "X has {} channels but W.shape[1] * group = {cg} * {group} = {}",
                x[1],
                cg as u128 * group as u128
            ),
        ));
    }
    if m % group != 0 {
        return Err(KernelError::input(
            "W",
            format!("{m} output channels (W.shape[0]) are not divisible by group {group}"),
        ));
    }
    if let Some(b) = bias {
        if b != [m] {
            return Err(KernelError::input(
                "B",
                format!("expected shape [{m}] (one per output channel), got {b:?}"),
            ));
        }
    }
    let kernel: Vec<usize> = w[2..].to_vec();
    if let Some(ks) = &a.kernel_shape {
        if ks.len() != k || ks.iter().zip(&kernel).any(|(&a, &b)| a != b as i64) {
            return Err(KernelError::attribute(
                "kernel_shape",
                format!("{ks:?} contradicts W's spatial shape {kernel:?}"),
            ));
        }
    }
    if kernel.contains(&0) {
        return Err(KernelError::input(
            "W",
            format!("kernel has an empty axis: shape {w:?}"),
        ));
    }
    let strides = per_axis("strides", &a.strides, k, 1)?;
    let dilations = per_axis("dilations", &a.dilations, k, 1)?;
    let in_spatial: Vec<usize> = x[2..].to_vec();
    let (mut pads_begin, mut pads_end) = (vec![0usize; k], vec![0usize; k]);
    if let Some(p) = &a.pads {
        if a.auto_pad != AutoPad::NotSet {
            return Err(KernelError::attribute(
                "pads",
                format!(
                    "cannot be combined with auto_pad {:?}; use one or the other",
                    a.auto_pad
                ),
            ));
        }
        if p.len() != 2 * k {
            return Err(KernelError::attribute(
                "pads",
                format!(
                    "expected {} values (begin and end per spatial axis), got {}",
                    2 * k,
                    p.len()
                ),
            ));
        }
        if p.iter().any(|&v| v < 0) {
            return Err(KernelError::attribute(
                "pads",
                format!("values must not be negative, got {p:?}"),
            ));
        }
        for i in 0..k {
            pads_begin[i] = p[i] as usize;
            pads_end[i] = p[i + k] as usize;
        }
    }
    let mut out_spatial = Vec::with_capacity(k);
    for i in 0..k {
        let (n, s, d) = (
            in_spatial[i] as i128,
            strides[i] as i128,
            dilations[i] as i128,
        );
        let span = d * (kernel[i] as i128 - 1) + 1;
        let out = match a.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                let out = (n + s - 1) / s;
                let total = ((out - 1) * s + span - n).max(0);
                let small = total / 2;
                let (b, e) = if a.auto_pad == AutoPad::SameUpper {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                pads_begin[i] = b as usize;
                pads_end[i] = e as usize;
                out
            }
            _ => {
                // A kernel longer than the padded input leaves no position:
                // the output is empty on this axis, as onnx's strict shape
                // inference and its reference implementation have it.
                let padded = n + pads_begin[i] as i128 + pads_end[i] as i128;
                if padded < span {
                    0
                } else {
                    (padded - span) / s + 1
                }
            }
        };
        // Every input coordinate the kernels compute lies inside the padded
        // extent; keeping it addressable makes their index arithmetic exact.
        let padded = n + pads_begin[i] as i128 + pads_end[i] as i128;
        if padded.max(span) > isize::MAX as i128 {
            return Err(KernelError::Invalid(format!(
                "spatial axis {i}: the padded input ({padded}) or the dilated kernel ({span}) is longer than this machine can address"
            )));
        }
        out_spatial.push(out as usize);
    }
    Ok(Geometry {
        batch: x[0],
        in_channels: x[1],
        out_channels: m,
        group,
        in_spatial,
        kernel,
        strides,
        dilations,
        pads_begin,
        pads_end,
        out_spatial,
    })
}

/// Columns of the narrowest im2col tile: a GEMM panel.
const MIN_TILE_COLUMNS: u128 = 48;

/// Refuses, before any allocation, a convolution whose output, work or
/// im2col buffer exceeds the limits.
fn check_limits(g: &Geometry, dtype: DataType, limits: &Limits) -> Result<(), KernelError> {
    let out_shape: Vec<u128> = g.out_shape().iter().map(|&d| d as u128).collect();
    Limits::check_addressable(format!("output shape {out_shape:?}"), &out_shape)?;
    let out_len: u128 = out_shape.iter().product();
    Limits::check(
        format!("output of shape {:?}", g.out_shape()),
        "max_output_bytes",
        out_len * dtype.memory_bytes() as u128,
        limits.max_output_bytes,
    )?;
    let kdim =
        (g.in_channels / g.group) as u128 * g.kernel.iter().map(|&k| k as u128).product::<u128>();
    Limits::check(
        "convolution (multiply-adds)",
        "max_conv_macs",
        out_len.saturating_mul(kdim),
        limits.max_conv_macs,
    )?;
    if !g.is_depthwise_2d() && !g.is_pointwise() {
        // f16 and bf16 are computed in f32.
        let elem = if dtype == DataType::Double { 8 } else { 4 };
        Limits::check(
            format!("im2col tile ({kdim} rows x {MIN_TILE_COLUMNS} columns)"),
            "max_im2col_bytes",
            kdim * MIN_TILE_COLUMNS * elem,
            limits.max_im2col_bytes,
        )?;
    }
    Ok(())
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
    let out = match (x.storage(), w.storage()) {
        (Storage::F32(xa), Storage::F32(wa)) => {
            let bias = b
                .and_then(|t| t.array::<f32>())
                .map(|a| a.iter().copied().collect::<Vec<_>>());
            let y = conv(&g, slice(xa)?, slice(wa)?, bias.as_deref(), scratch);
            wrap(Storage::F32(reshape(y, shape)?))?
        }
        (Storage::F64(xa), Storage::F64(wa)) => {
            let bias = b
                .and_then(|t| t.array::<f64>())
                .map(|a| a.iter().copied().collect::<Vec<_>>());
            let y = conv(&g, slice(xa)?, slice(wa)?, bias.as_deref(), scratch);
            wrap(Storage::F64(reshape(y, shape)?))?
        }
        (Storage::F16(xa), Storage::F16(wa)) => {
            let widen = |a: &ArrayD<f16>| a.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
            let bias = b.and_then(|t| t.array::<f16>()).map(widen);
            let y = conv(&g, &widen(xa), &widen(wa), bias.as_deref(), scratch);
            wrap(Storage::F16(reshape(
                y.into_iter().map(f16::from_f32).collect(),
                shape,
            )?))?
        }
        (Storage::BF16(xa), Storage::BF16(wa)) => {
            let widen = |a: &ArrayD<bf16>| a.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
            let bias = b.and_then(|t| t.array::<bf16>()).map(widen);
            let y = conv(&g, &widen(xa), &widen(wa), bias.as_deref(), scratch);
            wrap(Storage::BF16(reshape(
                y.into_iter().map(bf16::from_f32).collect(),
                shape,
            )?))?
        }
        _ => return Err(KernelError::input("W", "element type differs from X")),
    };
    Ok(vec![out])
}

fn slice<T>(a: &ArrayD<T>) -> Result<&[T], KernelError> {
    a.as_slice()
        .ok_or_else(|| KernelError::Invalid("internal: tensor is not contiguous".into()))
}

fn reshape<T>(v: Vec<T>, shape: IxDyn) -> Result<ArrayD<T>, KernelError> {
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
struct SendPtr<T>(*mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    // A method (not field access) so closures capture the whole wrapper.
    fn get(self) -> *mut T {
        self.0
    }
}

/// Which kernels Conv runs. `Auto` picks by the CPU, so on any one machine
/// it only ever exercises one side: tests force each side so that both are
/// checked wherever the CPU allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Only tests force a side; the library itself always runs `Auto`.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum KernelPath {
    Auto,
    /// Our AVX-512 kernels (`sgemm.rs`, the depthwise kernels).
    Avx512,
    /// The `gemm` crate and the plain depthwise loops.
    Portable,
}

impl KernelPath {
    /// True when the AVX-512 kernels are to run.
    fn avx512(self) -> bool {
        match self {
            KernelPath::Auto => super::sgemm::available(),
            KernelPath::Avx512 => {
                // Running them anyway would be undefined behaviour.
                assert!(
                    super::sgemm::available(),
                    "KernelPath::Avx512 on a CPU without AVX-512F"
                );
                true
            }
            KernelPath::Portable => false,
        }
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
) -> Vec<T> {
    conv_on(g, x, w, bias, scratch_bytes, KernelPath::Auto)
}

/// [`conv`] on the kernels `path` names. The choice is made once here and
/// passed down, so the per-tile GEMM calls pay nothing for it.
pub(crate) fn conv_on<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    scratch_bytes: usize,
    path: KernelPath,
) -> Vec<T> {
    let avx512 = path.avx512();
    let os = g.out_size();
    let planes = g.batch * g.out_channels;
    // Each output plane starts as its bias (or zero), written in one pass:
    // a zeroed allocation followed by a bias fill would touch it twice.
    let mut y = Vec::with_capacity(planes * os);
    for i in 0..planes {
        let b = bias.map_or(T::ZERO, |b| b[i % g.out_channels]);
        y.extend(std::iter::repeat_n(b, os));
    }
    if os == 0 || planes == 0 {
        return y;
    }
    let tile_bytes = TILE_BYTES.min(scratch_bytes);
    if g.is_depthwise_2d() {
        depthwise_2d(g, x, w, &mut y, tile_bytes, avx512);
    } else if g.is_pointwise() {
        pointwise(g, x, w, &mut y, avx512);
    } else if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && avx512 {
        // SAFETY: T is f32 (checked above), so the slices have that type.
        let (xf, wf, yf) = unsafe {
            (
                std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len()),
                std::slice::from_raw_parts_mut(y.as_mut_ptr() as *mut f32, y.len()),
            )
        };
        im2col_gemm_packed(g, xf, wf, yf, tile_bytes);
    } else {
        im2col_gemm(g, x, w, &mut y, tile_bytes, avx512);
    }
    y
}

fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// `dst[m x n] += lhs[m x k] * rhs[k x n]`, all row-major with the given
/// row strides, on up to `par` threads. f32 uses our AVX-512 kernel when
/// `avx512` is set (splitting columns across threads); otherwise the `gemm`
/// crate.
///
/// # Safety
/// The operands must hold the rows and columns their sizes and strides
/// describe; `avx512` only where the CPU has AVX-512F.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_acc<T: Real>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: usize,
    lhs: *const T,
    lhs_rs: usize,
    rhs: *const T,
    rhs_rs: usize,
    par: usize,
    avx512: bool,
) {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && avx512 {
        let (d, l, r) = (SendPtr(dst as *mut f32), lhs as usize, rhs as usize);
        let chunks = if par > 1 {
            par.min(n.div_ceil(64)).max(1)
        } else {
            1
        };
        let width = n.div_ceil(chunks).div_ceil(48) * 48;
        (0..chunks).into_par_iter().for_each(|i| {
            let j0 = i * width;
            if j0 < n {
                let w = width.min(n - j0);
                // SAFETY: each chunk writes its own columns j0..j0+w of dst.
                super::sgemm::sgemm_acc(
                    m,
                    w,
                    k,
                    l as *const f32,
                    lhs_rs,
                    (r as *const f32).add(j0),
                    rhs_rs,
                    d.get().add(j0),
                    dst_rs,
                );
            }
        });
        return;
    }
    let parallelism = if par > 1 {
        gemm::Parallelism::Rayon(par)
    } else {
        gemm::Parallelism::None
    };
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs as isize,
        true,
        lhs,
        1,
        lhs_rs as isize,
        rhs,
        1,
        rhs_rs as isize,
        T::ONE,
        T::ONE,
        false,
        false,
        false,
        parallelism,
    );
}

/// 1x1 kernels, stride 1, no padding: Y[n, g] += W[g] x X[n, g] directly.
fn pointwise<T: Real>(g: &Geometry, x: &[T], w: &[T], y: &mut [T], avx512: bool) {
    let s = g.in_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let jobs = g.batch * g.group;
    let par = if jobs >= threads() { 1 } else { threads() };
    let yp = SendPtr(y.as_mut_ptr());
    (0..jobs).into_par_iter().with_max_len(1).for_each(|job| {
        let (n, gi) = (job / g.group, job % g.group);
        let xo = (n * g.in_channels + gi * cg) * s;
        let yo = (n * g.out_channels + gi * mg) * s;
        let wo = gi * mg * cg;
        // SAFETY: each job writes its own rows of Y; X and W are only read,
        // and all offsets stay inside the buffers sized from `g`.
        unsafe {
            gemm_acc(
                mg,
                s,
                cg,
                yp.get().add(yo),
                s,
                w.as_ptr().add(wo),
                cg,
                x.as_ptr().add(xo),
                s,
                par,
                avx512,
            )
        };
    });
}

/// Column tiles of at most TILE_BYTES of im2col data, as many as keeps every
/// thread busy (a multiple of the thread count when there are few images and
/// groups), of equal width. Returns (tile width, tile count).
fn tiles_for(g: &Geometry, kdim: usize, elem: usize, tile_bytes: usize) -> (usize, usize) {
    let os = g.out_size();
    let max_tile = (tile_bytes / elem / kdim.max(1)).max(MIN_TILE_COLUMNS as usize);
    let mut tiles = os.div_ceil(max_tile);
    let per_image = g.batch * g.group;
    if per_image < threads() {
        let want = threads().div_ceil(per_image);
        tiles = tiles.div_ceil(want) * want;
    }
    let tile = os.div_ceil(tiles).max(1);
    (tile, os.div_ceil(tile))
}

/// im2col in column tiles, each followed by a GEMM into the matching columns of Y.
fn im2col_gemm<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    y: &mut [T],
    tile_bytes: usize,
    avx512: bool,
) {
    let os = g.out_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * g.kernel_size();
    let (tile, tiles) = tiles_for(g, kdim, std::mem::size_of::<T>(), tile_bytes);
    let jobs = g.batch * g.group * tiles;
    let par = if jobs >= threads() { 1 } else { threads() };
    let yp = SendPtr(y.as_mut_ptr());
    thread_local! {
        static COL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    (0..jobs).into_par_iter().with_max_len(1).for_each(|job| {
        let t = job % tiles;
        let gi = (job / tiles) % g.group;
        let n = job / tiles / g.group;
        let (j0, j1) = (t * tile, ((t + 1) * tile).min(os));
        let width = j1 - j0;
        // Take the thread's buffer out while it is in use: the GEMM below
        // may run rayon work on this thread, which can re-enter this job.
        let mut bytes = COL.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        let need = kdim * width * std::mem::size_of::<T>() + std::mem::align_of::<T>();
        if bytes.len() < need {
            bytes.resize(need, 0);
        }
        let offset = bytes.as_ptr().align_offset(std::mem::align_of::<T>());
        // SAFETY: the buffer holds `need` bytes from an aligned offset; T is
        // f32 or f64 (plain data), and im2col writes every element before the
        // GEMM reads it.
        let col = unsafe {
            std::slice::from_raw_parts_mut(bytes.as_mut_ptr().add(offset) as *mut T, kdim * width)
        };
        let xo = (n * g.in_channels + gi * cg) * g.in_size();
        im2col(g, &x[xo..xo + cg * g.in_size()], cg, j0, j1, col);
        let yo = (n * g.out_channels + gi * mg) * os + j0;
        // SAFETY: job (n, gi, t) writes rows gi*mg..(gi+1)*mg of image n,
        // columns j0..j1 only: disjoint from every other job.
        unsafe {
            gemm_acc(
                mg,
                width,
                kdim,
                yp.get().add(yo),
                os,
                w.as_ptr().add(gi * mg * kdim),
                kdim,
                col.as_ptr(),
                width,
                par,
                avx512,
            )
        };
        COL.with(|cell| *cell.borrow_mut() = bytes);
    });
}

/// The f32 path on AVX-512 machines: the weights are packed once per call,
/// and im2col writes each row straight into the GEMM's packed B layout, so
/// no separate packing pass reads the whole im2col buffer again.
fn im2col_gemm_packed(g: &Geometry, x: &[f32], w: &[f32], y: &mut [f32], tile_bytes: usize) {
    use super::sgemm::packed;
    let os = g.out_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * g.kernel_size();
    // Tiles are whole GEMM panels, spread evenly: a tile that ends in a
    // nearly empty panel would cost a full panel of work.
    let panel = packed::PANEL;
    let total = os.div_ceil(panel);
    let max_panels = (tile_bytes / std::mem::size_of::<f32>() / kdim.max(1) / panel).max(1);
    let mut tiles = total.div_ceil(max_panels);
    let per_image = g.batch * g.group;
    // Few images and few panels: keep whole tiles and split each GEMM by
    // rows instead, which divides the work evenly.
    let split_rows = per_image < threads() && total < 4 * threads();
    if per_image < threads() && !split_rows {
        let want = threads().div_ceil(per_image);
        tiles = (tiles.div_ceil(want) * want).min(total);
    }
    let bounds = |t: usize| ((t * total / tiles) * panel).min(os);
    let jobs = g.batch * g.group * tiles;
    let par = if jobs >= threads() { 1 } else { threads() };
    let packed_w: Vec<Vec<f32>> = (0..g.group)
        .map(|gi| packed::pack_a(&w[gi * mg * kdim..(gi + 1) * mg * kdim], kdim, mg, kdim))
        .collect();
    let yp = SendPtr(y.as_mut_ptr());
    thread_local! {
        static PACKED_B: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    (0..jobs).into_par_iter().with_max_len(1).for_each(|job| {
        let t = job % tiles;
        let gi = (job / tiles) % g.group;
        let n = job / tiles / g.group;
        let (j0, j1) = (bounds(t), bounds(t + 1));
        let width = j1 - j0;
        // Taken out while in use: the GEMM may run other jobs on this thread.
        let (mut pb, mut row) = PACKED_B.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        pb.resize(packed::b_len(width, kdim).max(pb.len()), 0.0);
        row.resize(width.max(row.len()), 0.0);
        let xo = (n * g.in_channels + gi * cg) * g.in_size();
        let xs = &x[xo..xo + cg * g.in_size()];
        if par > 1 && cg > 1 {
            // Few jobs: fill the packed rows in parallel, by input channel.
            let ks = g.kernel_size();
            let chunks = par.min(cg);
            let pbp = SendPtr(pb.as_mut_ptr());
            (0..chunks).into_par_iter().for_each(|i| {
                let (c0, c1) = (i * cg / chunks, (i + 1) * cg / chunks);
                let mut buf = vec![0f32; width];
                let part = &xs[c0 * g.in_size()..c1 * g.in_size()];
                im2col_rows(g, part, c1 - c0, j0, j1, &mut buf, &mut |r, values| {
                    // SAFETY: each chunk writes the rows of its own channels.
                    unsafe { packed::put_b_row_raw(pbp.get(), width, kdim, c0 * ks + r, values) }
                });
            });
        } else {
            im2col_rows(g, xs, cg, j0, j1, &mut row, &mut |r, values| {
                packed::put_b_row(&mut pb, width, kdim, r, values);
            });
        }
        let yo = (n * g.out_channels + gi * mg) * os + j0;
        let panels = packed::panels(width);
        let rows = packed::row_panels(mg);
        let (pa, pbr) = (&packed_w[gi], &pb);
        let chunks = if par > 1 {
            par.min(if split_rows { rows } else { panels })
        } else {
            1
        };
        (0..chunks).into_par_iter().for_each(|i| {
            let (cols, rws) = if split_rows {
                (0..panels, i * rows / chunks..(i + 1) * rows / chunks)
            } else {
                (i * panels / chunks..(i + 1) * panels / chunks, 0..rows)
            };
            // SAFETY: AVX-512F is present (checked by the caller); job (n, gi,
            // t) writes rows gi*mg.. of image n, columns j0..j1 only, and each
            // chunk its own panels (or row panels) of those.
            unsafe { packed::sgemm(mg, width, kdim, pa, pbr, yp.get().add(yo), os, cols, rws) };
        });
        PACKED_B.with(|cell| *cell.borrow_mut() = (pb, row));
    });
}

/// Fills `col` (kdim rows x (j1 - j0) columns) with the input values each
/// output position j0..j1 multiplies with each kernel tap, zero where the
/// tap falls in the padding.
fn im2col<T: Real>(g: &Geometry, x: &[T], cg: usize, j0: usize, j1: usize, col: &mut [T]) {
    let width = j1 - j0;
    let mut row_buf = vec![T::ZERO; width];
    im2col_rows(g, x, cg, j0, j1, &mut row_buf, &mut |row, values| {
        col[row * width..(row + 1) * width].copy_from_slice(values);
    });
}

/// im2col one row at a time: each row (input channel and kernel tap) is
/// built in `row_buf` (at least j1 - j0 long) and handed to `sink` with its
/// row number, so the caller can store it in whatever layout its GEMM wants.
fn im2col_rows<T: Real>(
    g: &Geometry,
    x: &[T],
    cg: usize,
    j0: usize,
    j1: usize,
    row_buf: &mut [T],
    sink: &mut dyn FnMut(usize, &[T]),
) {
    let rank = g.in_spatial.len();
    let width = j1 - j0;
    // 1-D and 2-D share the 2-D code with a unit leading axis.
    let (ih, iw, kh, kw, sh, sw, dh, dw, ph, pw, ow) = match rank {
        1 => (
            1,
            g.in_spatial[0],
            1,
            g.kernel[0],
            1,
            g.strides[0],
            1,
            g.dilations[0],
            0,
            g.pads_begin[0],
            g.out_spatial[0],
        ),
        2 => (
            g.in_spatial[0],
            g.in_spatial[1],
            g.kernel[0],
            g.kernel[1],
            g.strides[0],
            g.strides[1],
            g.dilations[0],
            g.dilations[1],
            g.pads_begin[0],
            g.pads_begin[1],
            g.out_spatial[1],
        ),
        _ => return im2col_nd(g, x, cg, j0, j1, row_buf, sink),
    };
    let plane = ih * iw;
    let mut row = 0;
    for c in 0..cg {
        let xc = &x[c * plane..(c + 1) * plane];
        for ky in 0..kh {
            for kx in 0..kw {
                let dst = &mut row_buf[..width];
                let off_x = (kx * dw) as isize - pw as isize;
                let (lo, hi) = inside_columns(off_x, iw, sw, ow);
                let mut j = j0;
                while j < j1 {
                    let (oy, ox0) = (j / ow, j % ow);
                    let ox1 = ow.min(ox0 + (j1 - j));
                    let d = &mut dst[j - j0..j - j0 + (ox1 - ox0)];
                    let iy = (oy * sh + ky * dh) as isize - ph as isize;
                    if iy < 0 || iy >= ih as isize {
                        d.fill(T::ZERO);
                    } else {
                        let src = &xc[iy as usize * iw..(iy as usize + 1) * iw];
                        let (a, b) = (
                            lo.clamp(ox0, ox1),
                            hi.clamp(ox0, ox1).max(lo.clamp(ox0, ox1)),
                        );
                        d[..a - ox0].fill(T::ZERO);
                        d[b - ox0..].fill(T::ZERO);
                        if a == b {
                            j += ox1 - ox0;
                            continue;
                        }
                        let start = (a as isize * sw as isize + off_x) as usize;
                        let seg = &mut d[a - ox0..b - ox0];
                        if sw == 1 {
                            seg.copy_from_slice(&src[start..start + seg.len()]);
                        } else {
                            for (i, v) in seg.iter_mut().enumerate() {
                                *v = src[start + i * sw];
                            }
                        }
                    }
                    j += ox1 - ox0;
                }
                sink(row, &row_buf[..width]);
                row += 1;
            }
        }
    }
}

/// The output columns `lo..hi` (of `ow`) whose input column
/// `ox * sw + off_x` falls inside a row of `iw` values; the others read
/// padding.
fn inside_columns(off_x: isize, iw: usize, sw: usize, ow: usize) -> (usize, usize) {
    let lo = if off_x >= 0 {
        0
    } else {
        ((-off_x) as usize).div_ceil(sw)
    };
    let hi = if (iw as isize - off_x) <= 0 {
        0
    } else {
        ((iw as isize - off_x - 1) as usize) / sw + 1
    };
    (lo.min(ow), hi.min(ow))
}

/// im2col for any spatial rank (3-D and beyond), one element at a time.
fn im2col_nd<T: Real>(
    g: &Geometry,
    x: &[T],
    cg: usize,
    j0: usize,
    j1: usize,
    row_buf: &mut [T],
    sink: &mut dyn FnMut(usize, &[T]),
) {
    let rank = g.in_spatial.len();
    let width = j1 - j0;
    let in_size = g.in_size();
    let mut in_strides = vec![1usize; rank];
    for a in (0..rank - 1).rev() {
        in_strides[a] = in_strides[a + 1] * g.in_spatial[a + 1];
    }
    let ks = g.kernel_size();
    let mut tap = vec![0usize; rank];
    let mut out_idx = vec![0usize; rank];
    for c in 0..cg {
        for k in 0..ks {
            let mut rem = k;
            for a in (0..rank).rev() {
                tap[a] = rem % g.kernel[a];
                rem /= g.kernel[a];
            }
            let row = c * ks + k;
            let dst = &mut row_buf[..width];
            let mut rem = j0;
            for a in (0..rank).rev() {
                out_idx[a] = rem % g.out_spatial[a];
                rem /= g.out_spatial[a];
            }
            for v in dst.iter_mut() {
                let mut off = 0usize;
                let mut inside = true;
                for a in 0..rank {
                    let p = (out_idx[a] * g.strides[a] + tap[a] * g.dilations[a]) as isize
                        - g.pads_begin[a] as isize;
                    if p < 0 || p >= g.in_spatial[a] as isize {
                        inside = false;
                        break;
                    }
                    off += p as usize * in_strides[a];
                }
                *v = if inside {
                    x[c * in_size + off]
                } else {
                    T::ZERO
                };
                for a in (0..rank).rev() {
                    out_idx[a] += 1;
                    if out_idx[a] < g.out_spatial[a] {
                        break;
                    }
                    out_idx[a] = 0;
                }
            }
            sink(row, &row_buf[..width]);
        }
    }
}

/// Depthwise 2-D (one input channel per group, a few outputs per group):
/// per kernel tap, a vectorizable multiply-add over the valid output span.
fn depthwise_2d<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    y: &mut [T],
    scratch_bytes: usize,
    avx512: bool,
) {
    #[cfg(target_arch = "x86_64")]
    let wide = avx512;
    // Elsewhere there are no AVX-512 kernels to choose.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx512;
    // f32 with unit strides: a register-blocked kernel over zero-padded rows.
    #[cfg(target_arch = "x86_64")]
    let rows = wide
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && g.strides == [1, 1]
        && padded_rows_len(g).is_some_and(|n| n.saturating_mul(4) <= scratch_bytes);
    let os = g.out_spatial[0] * g.out_spatial[1];
    y.par_chunks_mut(os).enumerate().for_each(|(plane, out)| {
        #[cfg(target_arch = "x86_64")]
        if rows {
            // SAFETY: T is f32 (checked above) and the CPU has AVX-512F.
            unsafe {
                let xf = std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len());
                let wf = std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len());
                let of = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len());
                depthwise_plane_rows(g, xf, wf, plane, of);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU has the features the clone is compiled for.
            unsafe { depthwise_plane_avx512(g, x, w, plane, out) };
            return;
        }
        depthwise_plane(g, x, w, plane, out);
    });
}

/// Padded row width of the depthwise row kernel: every load of 16 lanes
/// stays inside it. Dilation and padding make it large, not the input.
fn padded_row_width(g: &Geometry) -> usize {
    let (ow, kw, dw) = (g.out_spatial[1], g.kernel[1], g.dilations[1]);
    (ow.div_ceil(16) * 16).saturating_add((kw - 1).saturating_mul(dw))
}

/// Elements of the depthwise row kernel's padded copy of one plane.
fn padded_rows_len(g: &Geometry) -> Option<usize> {
    g.in_spatial[0].checked_mul(padded_row_width(g))
}

/// One depthwise plane, f32, unit strides: the input plane is copied into
/// zero-padded rows, then each block of 16 outputs accumulates every tap in
/// one register and is stored once (on top of the bias already in `out`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn depthwise_plane_rows(g: &Geometry, x: &[f32], w: &[f32], plane: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let mg = g.out_channels / g.group;
    let (n, m) = (plane / g.out_channels, plane % g.out_channels);
    let c = m / mg;
    let xc = &x[(n * g.in_channels + c) * ih * iw..(n * g.in_channels + c + 1) * ih * iw];
    let wm = &w[m * kh * kw..(m + 1) * kh * kw];
    let pwid = padded_row_width(g);
    thread_local! {
        static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut padded = PADDED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    padded.clear();
    padded.resize(padded_rows_len(g).unwrap_or(0), 0.0);
    for r in 0..ih {
        // Output column ox reads input column ox + kx * dw - pw.
        let row = &mut padded[r * pwid..(r + 1) * pwid];
        let src = &xc[r * iw..(r + 1) * iw];
        let (from, to) = (pw, (pw + iw).min(pwid));
        if from < to {
            row[from..to].copy_from_slice(&src[..to - from]);
        }
    }
    let tail = ow % 16;
    let tail_mask: __mmask16 = if tail == 0 {
        0xFFFF
    } else {
        ((1u32 << tail) - 1) as u16
    };
    // Four blocks of 16 outputs at a time: four independent FMA chains hide
    // the FMA latency that a single accumulator would wait on.
    const B: usize = 4;
    let blocks = ow.div_ceil(16);
    let mask_of = |b: usize| -> __mmask16 {
        if (b + 1) * 16 <= ow {
            0xFFFF
        } else {
            tail_mask
        }
    };
    for oy in 0..oh {
        let orow = out.as_mut_ptr().add(oy * ow);
        let mut b0 = 0;
        while b0 < blocks {
            let nb = B.min(blocks - b0);
            let mut acc = [_mm512_setzero_ps(); B];
            for (i, a) in acc.iter_mut().enumerate().take(nb) {
                *a = _mm512_maskz_loadu_ps(mask_of(b0 + i), orow.add((b0 + i) * 16));
            }
            for ky in 0..kh {
                let iy = (oy + ky * dh) as isize - ph as isize;
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let prow = padded.as_ptr().add(iy as usize * pwid + b0 * 16);
                for kx in 0..kw {
                    let wv = _mm512_set1_ps(*wm.get_unchecked(ky * kw + kx));
                    let p = prow.add(kx * dw);
                    for (i, a) in acc.iter_mut().enumerate().take(nb) {
                        *a = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p.add(i * 16)), *a);
                    }
                }
            }
            for (i, a) in acc.iter().enumerate().take(nb) {
                _mm512_mask_storeu_ps(orow.add((b0 + i) * 16), mask_of(b0 + i), *a);
            }
            b0 += nb;
        }
    }
    PADDED.with(|p| *p.borrow_mut() = padded);
}

/// `depthwise_plane` compiled for AVX-512, so its loops vectorize 16 lanes
/// wide (a closure would not inherit the target feature, hence a function).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn depthwise_plane_avx512<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    plane: usize,
    out: &mut [T],
) {
    depthwise_plane(g, x, w, plane, out);
}

/// One output plane of a depthwise convolution: per kernel tap, a
/// multiply-add over the span of output columns whose input is inside.
#[inline(always)]
fn depthwise_plane<T: Real>(g: &Geometry, x: &[T], w: &[T], plane: usize, out: &mut [T]) {
    let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let mg = g.out_channels / g.group;
    let (n, m) = (plane / g.out_channels, plane % g.out_channels);
    let c = m / mg;
    let xc = &x[(n * g.in_channels + c) * ih * iw..(n * g.in_channels + c + 1) * ih * iw];
    let wm = &w[m * kh * kw..(m + 1) * kh * kw];
    for ky in 0..kh {
        for kx in 0..kw {
            let wv = wm[ky * kw + kx];
            let off_x = (kx * dw) as isize - pw as isize;
            let (lo, hi) = inside_columns(off_x, iw, sw, ow);
            if lo >= hi {
                continue;
            }
            for oy in 0..oh {
                let iy = (oy * sh + ky * dh) as isize - ph as isize;
                if iy < 0 || iy >= ih as isize {
                    continue;
                }
                let src = &xc[iy as usize * iw..(iy as usize + 1) * iw];
                let dst = &mut out[oy * ow + lo..oy * ow + hi];
                let start = (lo as isize * sw as isize + off_x) as usize;
                if sw == 1 {
                    for (d, s) in dst.iter_mut().zip(&src[start..start + (hi - lo)]) {
                        *d += wv * *s;
                    }
                } else {
                    for (i, d) in dst.iter_mut().enumerate() {
                        *d += wv * src[start + i * sw];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_bound::Arithmetic;
    use crate::test_rng::Rng;

    /// The obvious direct convolution in f64: the oracle for the fast paths.
    fn reference(g: &Geometry, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
        let rank = g.in_spatial.len();
        let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
        let os: usize = g.out_spatial.iter().product();
        let ks: usize = g.kernel.iter().product();
        let is: usize = g.in_spatial.iter().product();
        let mut y = vec![0.0; g.batch * g.out_channels * os];
        for n in 0..g.batch {
            for m in 0..g.out_channels {
                let gi = m / mg;
                for o in 0..os {
                    let mut acc = bias.map_or(0.0, |b| b[m]);
                    let mut oi = vec![0; rank];
                    let mut r = o;
                    for a in (0..rank).rev() {
                        oi[a] = r % g.out_spatial[a];
                        r /= g.out_spatial[a];
                    }
                    for c in 0..cg {
                        for k in 0..ks {
                            let mut ki = vec![0; rank];
                            let mut r = k;
                            for a in (0..rank).rev() {
                                ki[a] = r % g.kernel[a];
                                r /= g.kernel[a];
                            }
                            let mut off = 0;
                            let mut inside = true;
                            for a in 0..rank {
                                let p = (oi[a] * g.strides[a] + ki[a] * g.dilations[a]) as i64
                                    - g.pads_begin[a] as i64;
                                if p < 0 || p >= g.in_spatial[a] as i64 {
                                    inside = false;
                                }
                                off = off * g.in_spatial[a] + p.max(0) as usize;
                            }
                            if inside {
                                let xv = x[(n * g.in_channels + gi * cg + c) * is + off];
                                let wv = w[(m * cg + c) * ks + k];
                                acc += xv * wv;
                            }
                        }
                    }
                    y[(n * g.out_channels + m) * os + o] = acc;
                }
            }
        }
        y
    }

    /// A random valid geometry: any rank 1-3, group, depthwise, 1x1,
    /// stride, dilation, padding and `auto_pad`; None when the draw is
    /// invalid (the rejection tests cover those).
    fn random_geometry(r: &mut Rng) -> Option<Geometry> {
        let rank = 1 + r.below(3) as usize;
        let group = [1, 1, 2, 3][r.below(4) as usize];
        let depthwise = r.below(4) == 0;
        let cg = if depthwise {
            1
        } else {
            1 + r.below(3) as usize
        };
        let mg = 1 + r.below(3) as usize;
        let pointwise = r.below(5) == 0;
        let mut x_shape = vec![1 + r.below(2) as usize, cg * group];
        let mut w_shape = vec![mg * group, cg];
        let mut attrs = ConvAttrs {
            group: group as i64,
            ..Default::default()
        };
        let mut strides = vec![];
        let mut dil = vec![];
        let mut pads = vec![0i64; 2 * rank];
        for a in 0..rank {
            x_shape.push(1 + r.below(7) as usize);
            w_shape.push(if pointwise {
                1
            } else {
                1 + r.below(3) as usize
            });
            strides.push(if pointwise { 1 } else { 1 + r.below(3) as i64 });
            dil.push(1 + r.below(2) as i64);
            if !pointwise {
                pads[a] = r.below(3) as i64;
                pads[a + rank] = r.below(3) as i64;
            }
        }
        attrs.strides = Some(strides);
        attrs.dilations = Some(dil);
        attrs.auto_pad = [
            AutoPad::NotSet,
            AutoPad::SameUpper,
            AutoPad::SameLower,
            AutoPad::Valid,
        ][r.below(4) as usize];
        if attrs.auto_pad == AutoPad::NotSet {
            attrs.pads = Some(pads);
        }
        let m = w_shape[0];
        geometry(&attrs, &x_shape, &w_shape, Some(&[m])).ok()
    }

    /// X, W and B for `g`, exact in f32 so that both precisions and the
    /// reference see the same values.
    fn random_inputs(g: &Geometry, r: &mut Rng) -> [Vec<f64>; 3] {
        let lens = [
            g.batch * g.in_channels * g.in_size(),
            g.out_channels * g.in_channels / g.group * g.kernel_size(),
            g.out_channels,
        ];
        lens.map(|n| {
            (0..n)
                .map(|_| r.signed_unit() as f32 as f64)
                .collect::<Vec<f64>>()
        })
    }

    /// Runs `g` on the kernels of `path` in f32 and in f64 and checks every
    /// output against the direct f64 reference, within the bound of the
    /// strict verdict policy (`error_bound.rs`):
    /// `2 * (gamma_n * (sum |w*x| + |b|) + n * eta)` with `n = K + 1`.
    /// That bound holds for any summation order, blocked or fused, so every
    /// path must meet it, and it follows from the reduction length where a
    /// picked tolerance would be too loose for short sums and too tight
    /// for long ones.
    fn check_against_reference(
        what: &str,
        g: &Geometry,
        [x, w, b]: &[Vec<f64>; 3],
        scratch: usize,
        path: KernelPath,
    ) {
        let want = reference(g, x, w, Some(b));
        let abs = |v: &[f64]| v.iter().map(|a| a.abs()).collect::<Vec<_>>();
        // All terms non-negative: the reference sums their magnitudes.
        let magnitude = reference(g, &abs(x), &abs(w), Some(&abs(b)));
        let n = g.in_channels / g.group * g.kernel_size() + 1;
        let narrow = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<_>>();
        let got32 = conv_on(g, &narrow(x), &narrow(w), Some(&narrow(b)), scratch, path);
        let got64 = conv_on(g, x, w, Some(b), scratch, path);
        let (f32_sum, f64_sum) = (
            Arithmetic::of(DataType::Float).unwrap(),
            Arithmetic::of(DataType::Double).unwrap(),
        );
        for i in 0..want.len() {
            for (precision, got, bound) in [
                ("f32", got32[i] as f64, f32_sum.bound(n, magnitude[i])),
                ("f64", got64[i], f64_sum.bound(n, magnitude[i])),
            ] {
                assert!(
                    (got - want[i]).abs() <= bound,
                    "{what}, {path:?}, {precision} at {i}: {got} vs {}, bound {bound} ({g:?})",
                    want[i]
                );
            }
        }
    }

    /// Every kernel of one path: random geometries (so depthwise, 1x1 and
    /// im2col of any rank), then shapes chosen for the GEMM kernels' edges:
    /// reductions longer than one block of `sgemm::KC`, rows and columns
    /// off the 8 x 48 panels, many tiles under a small scratch, and both
    /// more and fewer jobs than threads.
    fn check_path(path: KernelPath) {
        let mut r = Rng::new(0x9E3779B97F4A7C15);
        let mut checked = 0;
        for case in 0..300 {
            let Some(g) = random_geometry(&mut r) else {
                continue;
            };
            let inputs = random_inputs(&g, &mut r);
            check_against_reference(&format!("case {case}"), &g, &inputs, TILE_BYTES, path);
            checked += 1;
        }
        assert!(checked > 200, "only {checked} random geometries were valid");

        let pads = |p: i64, rank: usize| Some(vec![p; 2 * rank]);
        // (what, attributes, X shape, W shape, scratch bytes)
        type Shape<'a> = (&'a str, ConvAttrs, &'a [usize], &'a [usize], usize);
        let targeted: [Shape; 10] = [
            (
                "3x3, 13 rows, 323 columns",
                ConvAttrs {
                    pads: pads(1, 2),
                    ..Default::default()
                },
                &[1, 5, 17, 19],
                &[13, 5, 3, 3],
                TILE_BYTES,
            ),
            (
                "the same in 4 KiB tiles",
                ConvAttrs {
                    pads: pads(1, 2),
                    ..Default::default()
                },
                &[1, 5, 17, 19],
                &[13, 5, 3, 3],
                4096,
            ),
            (
                "K = 360, three images",
                ConvAttrs::default(),
                &[3, 40, 12, 12],
                &[9, 40, 3, 3],
                TILE_BYTES,
            ),
            (
                "1-D, K = 900, stride 2",
                ConvAttrs {
                    strides: Some(vec![2]),
                    ..Default::default()
                },
                &[1, 300, 20],
                &[10, 300, 3],
                TILE_BYTES,
            ),
            (
                "1x1, two images",
                ConvAttrs::default(),
                &[2, 37, 15, 15],
                &[20, 37, 1, 1],
                TILE_BYTES,
            ),
            (
                "1x1, K = 300",
                ConvAttrs::default(),
                &[1, 300, 7, 9],
                &[17, 300, 1, 1],
                TILE_BYTES,
            ),
            (
                "grouped, strided, dilated",
                ConvAttrs {
                    group: 3,
                    strides: Some(vec![2, 2]),
                    dilations: Some(vec![2, 2]),
                    pads: pads(2, 2),
                    ..Default::default()
                },
                &[1, 12, 16, 16],
                &[15, 4, 3, 3],
                TILE_BYTES,
            ),
            (
                "depthwise, unit strides",
                ConvAttrs {
                    group: 6,
                    pads: pads(1, 2),
                    ..Default::default()
                },
                &[2, 6, 13, 35],
                &[12, 1, 3, 3],
                TILE_BYTES,
            ),
            (
                "depthwise, stride 2",
                ConvAttrs {
                    group: 6,
                    strides: Some(vec![2, 2]),
                    pads: pads(1, 2),
                    ..Default::default()
                },
                &[2, 6, 13, 35],
                &[12, 1, 3, 3],
                TILE_BYTES,
            ),
            (
                "3-D",
                ConvAttrs {
                    pads: pads(1, 3),
                    ..Default::default()
                },
                &[1, 3, 5, 6, 7],
                &[4, 3, 2, 3, 2],
                TILE_BYTES,
            ),
        ];
        for (what, attrs, x, w, scratch) in targeted {
            let g = geometry(&attrs, x, w, Some(&[w[0]])).unwrap();
            let inputs = random_inputs(&g, &mut r);
            check_against_reference(what, &g, &inputs, scratch, path);
        }
    }

    #[test]
    fn portable_kernels_meet_the_rounding_bound() {
        check_path(KernelPath::Portable);
    }

    /// Ignored where the building CPU lacks AVX-512F (`build.rs`), which
    /// the summary counts; `KernelPath::Avx512` fails it on such a CPU
    /// when it runs anyway.
    #[test]
    #[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
    fn avx512_kernels_meet_the_rounding_bound() {
        check_path(KernelPath::Avx512);
    }

    #[test]
    fn unaddressable_extents_are_rejected() {
        for attrs in [
            ConvAttrs {
                pads: Some(vec![i64::MAX, i64::MAX]),
                ..ConvAttrs::default()
            },
            ConvAttrs {
                dilations: Some(vec![i64::MAX]),
                pads: Some(vec![i64::MAX, 0]),
                ..ConvAttrs::default()
            },
        ] {
            let e = geometry(&attrs, &[1, 1, 4], &[1, 1, 3], None).unwrap_err();
            assert!(
                e.to_string()
                    .contains("longer than this machine can address"),
                "{e}"
            );
        }
        // Huge but addressable: a stride as long as the padding still works.
        let attrs = ConvAttrs {
            pads: Some(vec![1 << 40, 0]),
            strides: Some(vec![1 << 40]),
            ..ConvAttrs::default()
        };
        let g = geometry(&attrs, &[1, 1, 4], &[1, 1, 1], None).unwrap();
        assert_eq!(g.out_spatial, [2]);
        let y = conv(&g, &[1f32, 2.0, 3.0, 4.0], &[2.0], None, TILE_BYTES);
        assert_eq!(y, [0.0, 2.0]);
    }

    #[test]
    fn depthwise_scratch_stays_within_the_limit() {
        // Dilation and padding, not the input, make the row kernel's padded
        // copy large; under a small scratch limit the plain kernel runs.
        let attrs = ConvAttrs {
            dilations: Some(vec![1, 1000]),
            pads: Some(vec![0, 1000, 0, 0]),
            group: 2,
            ..ConvAttrs::default()
        };
        let g = geometry(&attrs, &[1, 2, 4, 4], &[2, 1, 2, 2], None).unwrap();
        assert!(g.is_depthwise_2d());
        assert!(padded_rows_len(&g).unwrap() * 4 > 1024);
        let x: Vec<f64> = (0..32).map(|v| v as f64).collect();
        let w: Vec<f64> = (1..=8).map(|v| v as f64).collect();
        let want = reference(&g, &x, &w, None);
        let (x32, w32): (Vec<f32>, Vec<f32>) = (
            x.iter().map(|&v| v as f32).collect(),
            w.iter().map(|&v| v as f32).collect(),
        );
        for scratch in [1024, 1 << 20] {
            let got = conv(&g, &x32, &w32, None, scratch);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            assert_eq!(got, want, "scratch {scratch}");
        }
    }

    #[test]
    fn tiles_cover_large_outputs() {
        // More output columns than one tile holds, with padding and stride.
        let attrs = ConvAttrs {
            pads: Some(vec![1, 1, 1, 1]),
            strides: Some(vec![1, 2]),
            ..Default::default()
        };
        let g = geometry(&attrs, &[1, 40, 70, 90], &[3, 40, 3, 3], None).unwrap();
        let mut r = Rng::new(7);
        let xs: Vec<f64> = (0..40 * 70 * 90).map(|_| r.signed_unit()).collect();
        let ws: Vec<f64> = (0..3 * 40 * 9).map(|_| r.signed_unit()).collect();
        assert!(g.out_size() > TILE_BYTES / 8 / (40 * 9));
        let want = reference(&g, &xs, &ws, None);
        let got = conv(&g, &xs, &ws, None, TILE_BYTES);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-9);
        }
        // The f32 path (packed im2col on AVX-512 machines) over many tiles.
        let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
        let w32: Vec<f32> = ws.iter().map(|&v| v as f32).collect();
        let got = conv(&g, &x32, &w32, None, TILE_BYTES);
        for (a, b) in got.iter().zip(&want) {
            assert!((*a as f64 - b).abs() < 1e-3, "{a} vs {b}");
        }
    }

    fn geo_err(attrs: ConvAttrs, x: &[usize], w: &[usize], b: Option<&[usize]>) -> String {
        geometry(&attrs, x, w, b).unwrap_err().to_string()
    }

    /// (output size, pad begin, pad end) of a 1-D geometry.
    fn one_axis(
        auto_pad: AutoPad,
        stride: i64,
        dilation: i64,
        input: usize,
        kernel: usize,
    ) -> (usize, usize, usize) {
        let attrs = ConvAttrs {
            auto_pad,
            strides: Some(vec![stride]),
            dilations: Some(vec![dilation]),
            ..Default::default()
        };
        let g = geometry(&attrs, &[1, 1, input], &[1, 1, kernel], None).unwrap();
        (g.out_spatial[0], g.pads_begin[0], g.pads_end[0])
    }

    #[test]
    fn auto_pad_formulas() {
        // in 5, k 3, stride 2: out 3, total pad 2 -> (1, 1)
        assert_eq!(one_axis(AutoPad::SameUpper, 2, 1, 5, 3), (3, 1, 1));
        // in 4, k 4, stride 1: total 3 -> UPPER (1, 2), LOWER (2, 1)
        assert_eq!(one_axis(AutoPad::SameUpper, 1, 1, 4, 4), (4, 1, 2));
        assert_eq!(one_axis(AutoPad::SameLower, 1, 1, 4, 4), (4, 2, 1));
        // stride larger than the kernel: in 7, k 2, stride 4 -> out 2, total max(0, 4+2-7)=0
        assert_eq!(one_axis(AutoPad::SameUpper, 4, 1, 7, 2), (2, 0, 0));
        // dilated kernel: k 3, d 2 -> span 5; VALID on 9 -> 5; SAME_LOWER keeps 9
        assert_eq!(one_axis(AutoPad::Valid, 1, 2, 9, 3), (5, 0, 0));
        assert_eq!(one_axis(AutoPad::SameLower, 1, 2, 9, 3), (9, 2, 2));
    }

    /// The error for a 1-D input of 5 and a kernel of 3 under `attrs`.
    fn err_1d(attrs: ConvAttrs) -> String {
        geo_err(attrs, &[1, 1, 5], &[1, 1, 3], None)
    }

    #[test]
    fn bad_shapes_and_attributes_are_rejected() {
        let d = ConvAttrs::default;
        assert!(geo_err(d(), &[1, 2], &[1, 2], None).contains("input 'X': expected rank 3 or more"));
        assert!(geo_err(d(), &[1, 2, 5], &[1, 2, 3, 3], None)
            .contains("input 'W': expected the rank of X (3)"));
        assert!(
            geo_err(ConvAttrs { group: 2, ..d() }, &[1, 3, 5], &[2, 1, 3], None)
                .contains("X has 3 channels but W.shape[1] * group = 1 * 2 = 2")
        );
        assert!(
            geo_err(ConvAttrs { group: 2, ..d() }, &[1, 2, 5], &[3, 1, 3], None)
                .contains("3 output channels (W.shape[0]) are not divisible by group 2")
        );
        assert!(geo_err(d(), &[1, 1, 5], &[2, 1, 3], Some(&[3]))
            .contains("input 'B': expected shape [2]"));
        assert!(err_1d(ConvAttrs {
            strides: Some(vec![0]),
            ..d()
        })
        .contains("attribute 'strides': values must be at least 1"));
        assert!(err_1d(ConvAttrs {
            dilations: Some(vec![-1]),
            ..d()
        })
        .contains("attribute 'dilations': values must be at least 1"));
        assert!(err_1d(ConvAttrs {
            strides: Some(vec![1, 1]),
            ..d()
        })
        .contains("attribute 'strides': expected 1 values"));
        assert!(err_1d(ConvAttrs {
            pads: Some(vec![1]),
            ..d()
        })
        .contains("attribute 'pads': expected 2 values"));
        assert!(err_1d(ConvAttrs {
            pads: Some(vec![1, -1]),
            ..d()
        })
        .contains("attribute 'pads': values must not be negative"));
        assert!(err_1d(ConvAttrs {
            pads: Some(vec![0, 0]),
            auto_pad: AutoPad::Valid,
            ..d()
        })
        .contains("attribute 'pads': cannot be combined with auto_pad"));
        assert!(err_1d(ConvAttrs {
            kernel_shape: Some(vec![2]),
            ..d()
        })
        .contains("attribute 'kernel_shape': [2] contradicts W's spatial shape [3]"));
        // A kernel longer than the padded input is valid: an empty output.
        let g = geometry(&d(), &[1, 1, 2], &[1, 1, 3], None).unwrap();
        assert_eq!(g.out_spatial, [0]);
        assert!(conv(&g, &[1f32, 2.0], &[1.0, 1.0, 1.0], None, TILE_BYTES).is_empty());
        let dilated = ConvAttrs {
            dilations: Some(vec![3]),
            pads: Some(vec![1, 1]),
            ..d()
        };
        assert_eq!(
            geometry(&dilated, &[1, 1, 2], &[1, 1, 3], None)
                .unwrap()
                .out_spatial,
            [0]
        );
        assert!(
            geo_err(ConvAttrs { group: 0, ..d() }, &[1, 1, 2], &[1, 1, 3], None)
                .contains("attribute 'group': must be at least 1")
        );
    }
}
