//! Conv's attributes, the validated geometry of one convolution, and the
//! limits checked before anything is allocated.

use super::*;

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

    pub(super) fn in_size(&self) -> usize {
        self.in_spatial.iter().product()
    }

    pub(super) fn out_size(&self) -> usize {
        self.out_spatial.iter().product()
    }

    pub(super) fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// One input channel per group and few outputs per channel: the
    /// depthwise kernel, which needs no im2col.
    pub(super) fn is_depthwise_2d(&self) -> bool {
        self.in_spatial.len() == 2
            && self.in_channels / self.group == 1
            && self.out_channels / self.group <= 4
            && self.group > 1
    }

    /// A 1x1 kernel with unit strides and no padding: a plain GEMM.
    pub(super) fn is_pointwise(&self) -> bool {
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

pub(super) fn per_axis(
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
                // the output is empty on this axis. The spec gives no size
                // here; onnx's strict shape inference (trunc(room / s) + 1)
                // and its reference (floor(room / s) + 1, an error below 0)
                // both give 0 where the overrun equals the stride, and
                // disagree elsewhere (1, or a negative size).
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
pub(super) const MIN_TILE_COLUMNS: u128 = 48;

/// Refuses, before any allocation, a convolution whose output, work or
/// im2col buffer exceeds the limits.
pub(super) fn check_limits(
    g: &Geometry,
    dtype: DataType,
    limits: &Limits,
) -> Result<(), KernelError> {
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

/// Strides of a row-major array of `extents` (the last axis's is 1).
pub(super) fn row_major_strides(extents: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; extents.len()];
    for a in (0..extents.len().saturating_sub(1)).rev() {
        st[a] = st[a + 1] * extents[a + 1];
    }
    st
}
