//! Pad, versions 1, 2, 11, 13, 18, 19, 21, 23, 24 and 25.
//!
//! Numerical contract: Pad moves elements and never computes with them, so
//! the output holds bit-exact copies of input elements or of the pad value.
//! NaN payloads, signed zeros and sub-byte bit patterns are preserved.
//!
//! Semantics we follow where the spec leaves room:
//! - Negative pads remove elements ("add or remove (if negative)"): each axis
//!   is first cropped by its negative pads, then padded by its positive pads.
//!   Removing more than the axis holds is an error.
//! - `reflect` with a pad at least the axis length repeats the reflection, as
//!   numpy.pad does (period `2 * (n - 1)`; an axis of length 1 repeats its
//!   value). The spec's own example 2 needs this.
//! - Non-constant modes cannot pad an empty axis (there is nothing to copy).
//! - Repeated `axes` are rejected (the spec calls them undefined behaviour).
//! - Pad-1's documentation example writes `paddings = [0, 0, 2, 0]` for what
//!   its attribute text (and every later version) spells `[0, 2, 0, 0]`; we
//!   follow the attribute text: `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`.

use super::{allowed_list, check_type, KernelCtx, OpOutput};
use crate::error::KernelError;
use crate::limits::{LimitExceeded, Limits};
use crate::tensor::{DataType, Element, Storage, Tensor};
use half::f16;
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn};
use std::mem::MaybeUninit;

/// The versions at which Pad changed.
pub const VERSIONS: [i64; 10] = [1, 2, 11, 13, 18, 19, 21, 23, 24, 25];

/// Padding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

impl Mode {
    pub fn parse(s: &str, version: i64) -> Result<Mode, KernelError> {
        match s {
            "constant" => Ok(Mode::Constant),
            "reflect" => Ok(Mode::Reflect),
            "edge" => Ok(Mode::Edge),
            "wrap" if version >= 19 => Ok(Mode::Wrap),
            "wrap" => Err(KernelError::attribute(
                "mode",
                format!("'wrap' is not supported by Pad-{version} (added in Pad-19); expected constant, reflect or edge"),
            )),
            other => Err(KernelError::attribute(
                "mode",
                format!(
                    "unknown mode '{other}'; expected constant, reflect, edge{}",
                    if version >= 19 { " or wrap" } else { "" }
                ),
            )),
        }
    }
}

/// The element types Pad-`version` allows for `T`.
pub fn allowed_types(version: i64) -> Vec<DataType> {
    use DataType::*;
    if version < 11 {
        return vec![Float16, Float, Double];
    }
    let mut t = vec![
        Uint8, Uint16, Uint32, Uint64, Int8, Int16, Int32, Int64, Float16, Float, Double,
    ];
    if version >= 13 {
        t.extend([Bfloat16, String, Bool, Complex64, Complex128]);
    }
    if version >= 21 {
        t.extend([
            Float8E4M3FN,
            Float8E4M3FNUZ,
            Float8E5M2,
            Float8E5M2FNUZ,
            Uint4,
            Int4,
        ]);
    }
    if version >= 23 {
        t.push(Float4E2M1);
    }
    if version >= 24 {
        t.push(Float8E8M0);
    }
    if version >= 25 {
        t.extend([Uint2, Int2]);
    }
    t
}

/// Pads for every axis of the input, after `axes` has been applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PadSpec {
    pub begin: Vec<i64>,
    pub end: Vec<i64>,
}

/// The kernel entry point, for every version.
pub fn run(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let v = ctx.version;
    let data = ctx.required_input(inputs, 0, "data")?;
    check_type("data", data.dtype(), &allowed_types(v))?;
    let rank = data.rank();
    let mode = Mode::parse(ctx.string_attr("mode")?.unwrap_or("constant"), v)?;
    let (spec, value) = if v < 11 {
        if inputs.len() > 1 {
            return Err(KernelError::input(
                "pads",
                format!(
                    "Pad-{v} takes one input (pads are an attribute until Pad-11), got {}",
                    inputs.len()
                ),
            ));
        }
        let attr = if v == 1 { "paddings" } else { "pads" };
        let pads = ctx.ints_attr(attr)?.ok_or_else(|| {
            KernelError::attribute(attr, format!("required by Pad-{v} but missing"))
        })?;
        let spec = pads_for_all_axes(pads, None, rank, attr)?;
        let value = ctx.float_attr("value")?.unwrap_or(0.0);
        (spec, FillValue::Float(value))
    } else {
        let max_inputs = if v >= 18 { 4 } else { 3 };
        if inputs.len() > max_inputs {
            return Err(KernelError::Invalid(format!(
                "Pad-{v} takes at most {max_inputs} inputs, got {}",
                inputs.len()
            )));
        }
        for attr in ["pads", "paddings", "value"] {
            if ctx.node.attribute(attr).is_some() {
                return Err(KernelError::attribute(
                    attr,
                    format!("not an attribute of Pad-{v} (pads and constant_value are inputs since Pad-11)"),
                ));
            }
        }
        let pads_t = ctx.required_input(inputs, 1, "pads")?;
        if pads_t.dtype() != DataType::Int64 {
            return Err(KernelError::input(
                "pads",
                format!("expected tensor(int64), got tensor({})", pads_t.dtype()),
            ));
        }
        if pads_t.rank() != 1 {
            return Err(KernelError::input(
                "pads",
                format!("expected a 1-D tensor, got shape {:?}", pads_t.shape()),
            ));
        }
        let pads = pads_t.to_i64_vec().unwrap_or_default();
        let axes = match inputs.get(3).copied().flatten() {
            Some(axes_t) => {
                if !matches!(axes_t.dtype(), DataType::Int32 | DataType::Int64) {
                    return Err(KernelError::input(
                        "axes",
                        format!(
                            "expected tensor(int32) or tensor(int64), got tensor({})",
                            axes_t.dtype()
                        ),
                    ));
                }
                if axes_t.rank() != 1 {
                    return Err(KernelError::input(
                        "axes",
                        format!("expected a 1-D tensor, got shape {:?}", axes_t.shape()),
                    ));
                }
                Some(axes_t.to_i64_vec().unwrap_or_default())
            }
            None => None,
        };
        let spec = pads_for_all_axes(&pads, axes.as_deref(), rank, "pads")?;
        let value = match inputs.get(2).copied().flatten() {
            Some(c) => {
                if c.dtype() != data.dtype() {
                    return Err(KernelError::input(
                        "constant_value",
                        format!(
                            "expected the element type of data ({}), got {}",
                            data.dtype(),
                            c.dtype()
                        ),
                    ));
                }
                if c.len() != 1 {
                    return Err(KernelError::input(
                        "constant_value",
                        format!("expected a scalar (one element), got shape {:?}", c.shape()),
                    ));
                }
                FillValue::Tensor(c.clone())
            }
            None => FillValue::Default,
        };
        (spec, value)
    };
    let out = pad_tensor(data, &spec, mode, &value, ctx.limits.max_output_bytes)?;
    Ok(vec![out])
}

/// Expands `pads` (and optional `axes`) to one (begin, end) pair per axis.
pub fn pads_for_all_axes(
    pads: &[i64],
    axes: Option<&[i64]>,
    rank: usize,
    what: &str,
) -> Result<PadSpec, KernelError> {
    let axes = super::normalize_axes(axes, rank, |m| KernelError::input("axes", m))?;
    if pads.len() != 2 * axes.len() {
        return Err(KernelError::input(
            what,
            format!(
                "expected {} values (2 x {} axes), got {}",
                2 * axes.len(),
                axes.len(),
                pads.len()
            ),
        ));
    }
    let mut spec = PadSpec {
        begin: vec![0; rank],
        end: vec![0; rank],
    };
    for (i, &a) in axes.iter().enumerate() {
        spec.begin[a] = pads[i];
        spec.end[a] = pads[i + axes.len()];
    }
    Ok(spec)
}

/// The pad value before conversion to the data's element type.
pub enum FillValue {
    /// Pad-1/2's float attribute.
    Float(f32),
    /// Pad-11+'s `constant_value` input (same type as the data).
    Tensor(Tensor),
    /// 0, "" or false.
    Default,
}

fn fill_of<T: Clone + Default>(
    value: &FillValue,
    pick: impl Fn(&Tensor) -> Option<T>,
    from_f32: impl Fn(f32) -> Option<T>,
) -> T {
    match value {
        FillValue::Default => T::default(),
        FillValue::Tensor(t) => pick(t).unwrap_or_default(),
        FillValue::Float(f) => from_f32(*f).unwrap_or_default(),
    }
}

fn first<T: Element>(t: &Tensor) -> Option<T> {
    t.array::<T>().and_then(|a| a.iter().next().cloned())
}

/// Pads any tensor. Negative pads crop first; the output size in bytes is
/// checked against `max_output_bytes` before anything is allocated.
pub fn pad_tensor(
    data: &Tensor,
    spec: &PadSpec,
    mode: Mode,
    value: &FillValue,
    max_output_bytes: u64,
) -> Result<Tensor, KernelError> {
    let plan = plan(data.shape(), spec, mode)?;
    let total: u128 = plan.out_shape.iter().map(|&d| d as u128).product();
    Limits::check(
        format!("output of shape {:?}", plan.out_shape),
        "max_output_bytes",
        total.saturating_mul(output_element_bytes(data, value) as u128),
        max_output_bytes,
    )?;
    macro_rules! go {
        ($a:expr, $fill:expr) => {{
            let out = apply_copy(&plan, $a.view(), $fill, PARALLEL)?;
            out
        }};
    }
    let storage = match data.storage() {
        Storage::F32(a) => Storage::F32(go!(a, fill_of(value, first::<f32>, Some))),
        Storage::F64(a) => Storage::F64(go!(a, fill_of(value, first::<f64>, |f| Some(f as f64)))),
        Storage::F16(a) => Storage::F16(go!(
            a,
            fill_of(value, first::<f16>, |f| Some(f16::from_f32(f)))
        )),
        Storage::BF16(a) => Storage::BF16(go!(a, fill_of(value, first::<half::bf16>, no_float))),
        Storage::I8(a) => Storage::I8(go!(a, fill_of(value, first::<i8>, no_float))),
        Storage::I16(a) => Storage::I16(go!(a, fill_of(value, first::<i16>, no_float))),
        Storage::I32(a) => Storage::I32(go!(a, fill_of(value, first::<i32>, no_float))),
        Storage::I64(a) => Storage::I64(go!(a, fill_of(value, first::<i64>, no_float))),
        Storage::U8(a) => Storage::U8(go!(a, fill_of(value, first::<u8>, no_float))),
        Storage::U16(a) => Storage::U16(go!(a, fill_of(value, first::<u16>, no_float))),
        Storage::U32(a) => Storage::U32(go!(a, fill_of(value, first::<u32>, no_float))),
        Storage::U64(a) => Storage::U64(go!(a, fill_of(value, first::<u64>, no_float))),
        Storage::Bool(a) => Storage::Bool(go!(a, fill_of(value, first::<bool>, no_float))),
        Storage::Str(a) => Storage::Str(apply(
            &plan,
            a.view(),
            &fill_of(value, first::<String>, no_float),
        )?),
        Storage::C64(a) => Storage::C64(go!(
            a,
            fill_of(value, first::<num_complex::Complex<f32>>, no_float)
        )),
        Storage::C128(a) => Storage::C128(go!(
            a,
            fill_of(value, first::<num_complex::Complex<f64>>, no_float)
        )),
        Storage::Bits(a) => {
            let fill = match value {
                FillValue::Tensor(t) => match t.storage() {
                    Storage::Bits(b) => b.iter().next().copied().unwrap_or(0),
                    _ => 0,
                },
                _ => 0,
            };
            Storage::Bits(go!(a, fill))
        }
    };
    Tensor::new(data.dtype(), storage).map_err(KernelError::Invalid)
}

/// An upper bound of the bytes one output element holds: a string output
/// element is a copy of some input string or of the fill value.
fn output_element_bytes(data: &Tensor, value: &FillValue) -> usize {
    let mut bytes = data.dtype().memory_bytes();
    if let Storage::Str(a) = data.storage() {
        let fill = match value {
            FillValue::Tensor(t) => first::<String>(t).map_or(0, |s| s.len()),
            _ => 0,
        };
        bytes += a.iter().map(String::len).max().unwrap_or(0).max(fill);
    }
    bytes
}

/// Pad-1/2's float `value` only applies to float types; other types never see it.
fn no_float<T>(_: f32) -> Option<T> {
    None
}

/// Per-axis work after validation: crop offsets, kept length, pads.
#[derive(Debug)]
struct Plan {
    crop_begin: Vec<usize>,
    kept: Vec<usize>,
    begin: Vec<usize>,
    end: Vec<usize>,
    out_shape: Vec<usize>,
    mode: Mode,
}

fn plan(shape: &[usize], spec: &PadSpec, mode: Mode) -> Result<Plan, KernelError> {
    let rank = shape.len();
    let mut p = Plan {
        crop_begin: vec![0; rank],
        kept: vec![0; rank],
        begin: vec![0; rank],
        end: vec![0; rank],
        out_shape: vec![0; rank],
        mode,
    };
    let mut nonzero: u128 = 1;
    #[allow(clippy::needless_range_loop)] // several per-axis arrays advance together
    for axis in 0..rank {
        let (b, e) = (spec.begin[axis], spec.end[axis]);
        let n = shape[axis] as u128;
        let crop = b.min(0).unsigned_abs() as u128 + e.min(0).unsigned_abs() as u128;
        if crop > n {
            return Err(KernelError::input(
                "pads",
                format!(
                    "axis {axis}: pads ({b}, {e}) remove {crop} elements but the axis holds {n}"
                ),
            ));
        }
        let kept = n - crop;
        let grow = b.max(0) as u128 + e.max(0) as u128;
        // Copying from an empty axis is impossible only when the output
        // has elements at all (another axis may be empty too).
        let others_empty = shape.iter().enumerate().any(|(a, &d)| {
            let (b, e) = (spec.begin[a] as i128, spec.end[a] as i128);
            a != axis && d as i128 + b + e <= 0
        });
        if kept == 0 && grow > 0 && mode != Mode::Constant && !others_empty {
            return Err(KernelError::input(
                "pads",
                format!("axis {axis} is empty{}; mode {mode:?} has nothing to copy from (only constant mode can pad an empty axis)",
                    if n > 0 { " after cropping" } else { "" }),
            ));
        }
        let out = kept + grow;
        // ndarray addresses a shape whose non-zero lengths multiply to at
        // most isize::MAX, even when another axis is empty.
        nonzero = nonzero.saturating_mul(out.max(1));
        if nonzero > isize::MAX as u128 {
            return Err(LimitExceeded {
                what: format!("output axis {axis} of length {out} (with the axes before it)"),
                limit: "max_output_bytes",
                needed: nonzero,
                allowed: isize::MAX as u64,
            }
            .into());
        }
        p.crop_begin[axis] = b.min(0).unsigned_abs() as usize;
        p.kept[axis] = kept as usize;
        p.begin[axis] = b.max(0) as usize;
        p.end[axis] = e.max(0) as usize;
        p.out_shape[axis] = out as usize;
    }
    Ok(p)
}

/// When and how finely an output is split across the rayon pool.
#[derive(Clone, Copy, Debug)]
struct Parallel {
    /// Below this many output bytes the calling thread writes everything:
    /// waking a helper costs more than such a copy.
    min_bytes: usize,
    /// Pieces per thread (the caller and its helpers). More than one, so
    /// that a thread slowed by other work on the machine leaves its
    /// remaining pieces to the others.
    pieces_per_thread: usize,
    /// The smallest piece, in bytes, so a task's bookkeeping stays small next
    /// to its copying.
    chunk_bytes: usize,
}

const PARALLEL: Parallel = Parallel {
    min_bytes: 256 << 10,
    pieces_per_thread: 4,
    chunk_bytes: 64 << 10,
};

/// Pads element types that are plain data. The output is written once, in
/// place, without being initialised first, so the pad makes one pass over
/// its memory as a copy does; pieces of it are written in parallel.
fn apply_copy<T: Copy + Send + Sync>(
    plan: &Plan,
    input: ArrayViewD<'_, T>,
    fill: T,
    par: Parallel,
) -> Result<ArrayD<T>, KernelError> {
    let contiguous = input.as_standard_layout();
    let src = contiguous
        .as_slice()
        .ok_or_else(|| KernelError::Invalid("internal: input is not contiguous".into()))?;
    let out_len: usize = plan.out_shape.iter().product();
    let mut out: Vec<T> = Vec::with_capacity(out_len);
    if out_len > 0 {
        let rows = Rows::new(plan, src, input.shape(), fill);
        let dst = &mut out.spare_capacity_mut()[..out_len];
        if out_len.saturating_mul(size_of::<T>()) < par.min_bytes {
            rows.write(dst, 0);
        } else {
            write_shared(&rows, dst, par);
        }
        // SAFETY: the capacity is `out_len`, and `Rows::write` initialised
        // every element of `dst`, which is all of it: the pieces tile the
        // output and a row's runs tile the row (checked in debug builds).
        unsafe { out.set_len(out_len) };
    }
    ArrayD::from_shape_vec(IxDyn(&plan.out_shape), out)
        .map_err(|e| KernelError::Invalid(format!("internal: {e}")))
}

/// Writes `dst` in pieces, each claimed by whichever thread is free next
/// (`parallel::share`): the calling thread writes pieces itself and never
/// waits for a helper that has not started. Handing the loop to the pool
/// (a parallel iterator called from outside it) measured slower than one
/// thread on this 2-core machine whenever the other core had other work.
fn write_shared<T: Copy + Send + Sync>(
    rows: &Rows<'_, T>,
    dst: &mut [MaybeUninit<T>],
    par: Parallel,
) {
    let threads = rayon::current_num_threads().max(1);
    let pieces = threads.saturating_mul(par.pieces_per_thread).max(1);
    let chunk = dst
        .len()
        .div_ceil(pieces)
        .max(par.chunk_bytes.div_ceil(size_of::<T>()))
        .max(1);
    write_pieces(rows, dst, chunk);
}

/// `dst` in pieces of `chunk` elements (the last may be shorter), shared
/// between threads.
fn write_pieces<T: Copy + Send + Sync>(
    rows: &Rows<'_, T>,
    dst: &mut [MaybeUninit<T>],
    chunk: usize,
) {
    let len = dst.len();
    let out = SharedOut(dst.as_mut_ptr());
    crate::ops::parallel::share(len.div_ceil(chunk), &|i| {
        let start = i * chunk;
        // SAFETY: piece i (start..start + its length, inside `dst`) is
        // written by this task alone, and `dst` outlives `share`.
        let piece =
            unsafe { std::slice::from_raw_parts_mut(out.at(start), chunk.min(len - start)) };
        rows.write(piece, start);
    });
}

/// The output's start, shared by the tasks that write its pieces.
struct SharedOut<T>(*mut MaybeUninit<T>);
// SAFETY: each task writes its own piece (see `write_pieces`).
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    fn at(&self, start: usize) -> *mut MaybeUninit<T> {
        self.0.wrapping_add(start)
    }
}

/// Copies of at most this many elements are moved one by one.
const SHORT_RUN: usize = 8;

/// A stretch of an output row, in elements. Source offsets count from the
/// first kept element of the row's source row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    /// The pad value.
    Fill { len: usize },
    /// Source elements in order.
    Copy { src: usize, len: usize },
    /// One source element repeated (edge padding of the innermost axis).
    Splat { src: usize, len: usize },
    /// The `len` source elements before `end`, last first (reflection of
    /// the innermost axis).
    Rev { end: usize, len: usize },
}

impl Run {
    fn len(self) -> usize {
        match self {
            Run::Fill { len } | Run::Copy { len, .. } | Run::Splat { len, .. } => len,
            Run::Rev { len, .. } => len,
        }
    }
}

/// Appends `run`, merging it into the last run when they continue each
/// other, so that a row is a few long runs rather than many short ones.
fn push_run(runs: &mut Vec<Run>, run: Run) {
    if run.len() == 0 {
        return;
    }
    let merged = match (runs.last().copied(), run) {
        (Some(Run::Fill { len: a }), Run::Fill { len: b }) => Some(Run::Fill { len: a + b }),
        (Some(Run::Copy { src, len }), Run::Copy { src: s, len: l }) if src + len == s => {
            Some(Run::Copy { src, len: len + l })
        }
        // Single elements may also start or extend a repeat or a reversal.
        (Some(Run::Copy { src, len: 1 }), Run::Copy { src: s, len: 1 }) if s == src => {
            Some(Run::Splat { src, len: 2 })
        }
        (Some(Run::Copy { src, len: 1 }), Run::Copy { src: s, len: 1 }) if s + 1 == src => {
            Some(Run::Rev {
                end: src + 1,
                len: 2,
            })
        }
        (Some(Run::Splat { src, len }), Run::Copy { src: s, len: 1 }) if s == src => {
            Some(Run::Splat { src, len: len + 1 })
        }
        (Some(Run::Rev { end, len }), Run::Copy { src: s, len: 1 }) if s + len + 1 == end => {
            Some(Run::Rev { end, len: len + 1 })
        }
        _ => None,
    };
    match merged {
        Some(m) => *runs.last_mut().expect("merged with the last run") = m,
        None => runs.push(run),
    }
}

/// The output seen as rows: a row is everything under one index of the
/// axes before the innermost padded or cropped axis (the row axis). Every
/// row has the same runs; only its source row differs, or it is all pad
/// value when an outer index lies in a constant pad.
struct Rows<'a, T> {
    src: &'a [T],
    /// Per axis before the row axis, per output index along it: the input
    /// offset it reads from, or `None` inside a constant pad. Looked up so
    /// that moving to the next row costs an addition, not a walk over the
    /// axes with their pad arithmetic.
    offsets: Vec<Vec<Option<usize>>>,
    /// Offset of the first kept element of the row axis in a source row.
    row_base: usize,
    row_len: usize,
    runs: Vec<Run>,
    /// Where each run starts in the row.
    starts: Vec<usize>,
    /// The order whole rows write their runs in: the longest copy first,
    /// then the rest in output order. In output order alone, wrap padding
    /// reads the end of the source row first, a line the hardware
    /// prefetcher has not fetched yet, and the row's main copy then starts
    /// on a second miss (wrap measured 0.88 of the copy against 1.04-1.09
    /// for reflect and edge on an AMD EPYC). After the main copy the pads
    /// read lines it brought in, and writing them in output order keeps
    /// the stores going forward from row to row (in source order, wrap's
    /// last store of a row was at the row's start).
    order: Vec<usize>,
    fill: T,
}

impl<'a, T: Copy> Rows<'a, T> {
    fn new(plan: &Plan, src: &'a [T], in_shape: &[usize], fill: T) -> Self {
        let rank = in_shape.len();
        // Axes from `tail` on are untouched, so a block of them is
        // contiguous in input and output alike.
        let tail = (0..rank)
            .rev()
            .find(|&a| plan.begin[a] != 0 || plan.end[a] != 0 || plan.kept[a] != in_shape[a])
            .map_or(0, |a| a + 1);
        let mut runs = Vec::new();
        let (outer, row_base, row_len) = if tail == 0 {
            let len = src.len();
            push_run(&mut runs, Run::Copy { src: 0, len });
            (0, 0, len)
        } else {
            let a = tail - 1;
            let blk: usize = in_shape[tail..].iter().product();
            let (b, n, e) = (plan.begin[a], plan.kept[a], plan.end[a]);
            let pad = |runs: &mut Vec<Run>, from: i64, to: i64| {
                if plan.mode == Mode::Constant {
                    let len = (to - from) as usize * blk;
                    push_run(runs, Run::Fill { len });
                } else {
                    for j in from..to {
                        let src = source_index(j, n, plan.mode) * blk;
                        push_run(runs, Run::Copy { src, len: blk });
                    }
                }
            };
            pad(&mut runs, -(b as i64), 0);
            push_run(
                &mut runs,
                Run::Copy {
                    src: 0,
                    len: n * blk,
                },
            );
            pad(&mut runs, n as i64, (n + e) as i64);
            (a, plan.crop_begin[a] * blk, plan.out_shape[a] * blk)
        };
        let starts = runs
            .iter()
            .scan(0, |at, r| {
                let s = *at;
                *at += r.len();
                Some(s)
            })
            .collect();
        debug_assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), row_len);
        let main = (0..runs.len())
            .filter(|&k| matches!(runs[k], Run::Copy { .. }))
            .max_by_key(|&k| runs[k].len());
        let order: Vec<usize> = main
            .into_iter()
            .chain((0..runs.len()).filter(|&k| Some(k) != main))
            .collect();
        Rows {
            src,
            offsets: outer_offsets(plan, in_shape, outer),
            row_base,
            row_len,
            runs,
            starts,
            order,
            fill,
        }
    }

    /// Writes the output elements `start..start + dst.len()`.
    fn write(&self, dst: &mut [MaybeUninit<T>], start: usize) {
        let mut at = Cursor::new(&self.offsets, self.row_base, start / self.row_len);
        let col = start % self.row_len;
        // Only a piece's first and last rows can be partial.
        let head = if col == 0 {
            0
        } else {
            (self.row_len - col).min(dst.len())
        };
        let (first, rest) = dst.split_at_mut(head);
        if head > 0 {
            self.write_part(first, at.source(), col);
            at.advance(&self.offsets);
        }
        let mut rows = rest.chunks_exact_mut(self.row_len);
        for row in &mut rows {
            match at.source() {
                Some(base) => self.write_whole_row(row, base),
                None => row.fill(MaybeUninit::new(self.fill)),
            }
            at.advance(&self.offsets);
        }
        let last = rows.into_remainder();
        if !last.is_empty() {
            self.write_part(last, at.source(), 0);
        }
    }

    /// Writes the row elements `col..col + dst.len()` of a row whose source
    /// starts at `source` (`None`: the row is all pad value).
    fn write_part(&self, dst: &mut [MaybeUninit<T>], source: Option<usize>, col: usize) {
        match source {
            Some(base) => self.write_row(dst, base, col),
            None => dst.fill(MaybeUninit::new(self.fill)),
        }
    }

    /// Writes a whole row whose source starts at `base`: the runs in
    /// `order` (the longest copy first), with no search for where a piece
    /// starts.
    #[inline]
    fn write_whole_row(&self, dst: &mut [MaybeUninit<T>], base: usize) {
        for &k in &self.order {
            let (run, start) = (self.runs[k], self.starts[k]);
            self.write_run(&mut dst[start..start + run.len()], run, base, 0);
        }
    }

    /// Writes the row elements `col..col + dst.len()` of a row whose source
    /// starts at `base`.
    fn write_row(&self, dst: &mut [MaybeUninit<T>], base: usize, col: usize) {
        let end = col + dst.len();
        let mut k = self.starts.partition_point(|&s| s <= col) - 1;
        let (mut at, mut w) = (col, 0);
        while at < end {
            let (s0, run) = (self.starts[k], self.runs[k]);
            let (lo, hi) = (at - s0, (end - s0).min(run.len()));
            self.write_run(&mut dst[w..w + (hi - lo)], run, base, lo);
            w += hi - lo;
            at = s0 + hi;
            k += 1;
        }
    }

    /// Writes the elements `lo..lo + dst.len()` of `run`, in a row whose
    /// source starts at `base`.
    #[inline(always)]
    fn write_run(&self, d: &mut [MaybeUninit<T>], run: Run, base: usize, lo: usize) {
        let hi = lo + d.len();
        match run {
            Run::Fill { .. } => d.fill(MaybeUninit::new(self.fill)),
            Run::Copy { src, .. } => {
                let from = &self.src[base + src + lo..base + src + hi];
                if from.len() <= SHORT_RUN {
                    // A few elements of wrap padding per row: a call
                    // to memcpy would cost more than moving them.
                    for (o, &v) in d.iter_mut().zip(from) {
                        o.write(v);
                    }
                } else {
                    // Front to back (`row_copy`): glibc's memcpy of a row
                    // reads its end first.
                    super::row_copy::copy_row(from, d);
                }
            }
            Run::Splat { src, .. } => d.fill(MaybeUninit::new(self.src[base + src])),
            Run::Rev { end: e, .. } => {
                let from = &self.src[base + e - hi..base + e - lo];
                for (o, &v) in d.iter_mut().zip(from.iter().rev()) {
                    o.write(v);
                }
            }
        }
    }
}

/// For each of the first `outer` axes, the input offset each output index
/// reads from (`None` inside a constant pad).
fn outer_offsets(plan: &Plan, in_shape: &[usize], outer: usize) -> Vec<Vec<Option<usize>>> {
    let mut stride: usize = in_shape[outer..].iter().product();
    let mut offsets = vec![Vec::new(); outer];
    for a in (0..outer).rev() {
        offsets[a] = (0..plan.out_shape[a])
            .map(|i| {
                let j = i as i64 - plan.begin[a] as i64;
                let j = if (0..plan.kept[a] as i64).contains(&j) {
                    j as usize
                } else if plan.mode == Mode::Constant {
                    return None;
                } else {
                    source_index(j, plan.kept[a], plan.mode)
                };
                Some((plan.crop_begin[a] + j) * stride)
            })
            .collect();
        stride *= in_shape[a];
    }
    offsets
}

/// A row's outer index, with the source offset of every prefix of it so
/// that stepping the last axis recomputes one sum.
struct Cursor {
    idx: Vec<usize>,
    /// `base[a]`: the source offset from the axes before `a` (and the row
    /// axis' crop); `base[outer]` is the row's.
    base: Vec<Option<usize>>,
}

impl Cursor {
    /// The cursor at row number `row`.
    fn new(offsets: &[Vec<Option<usize>>], row_base: usize, mut row: usize) -> Cursor {
        let outer = offsets.len();
        let mut idx = vec![0; outer];
        for a in (0..outer).rev() {
            let n = offsets[a].len();
            idx[a] = row % n;
            row /= n;
        }
        let mut c = Cursor {
            idx,
            base: vec![Some(row_base); outer + 1],
        };
        c.refresh(offsets, 0);
        c
    }

    fn source(&self) -> Option<usize> {
        self.base[self.idx.len()]
    }

    /// Moves to the next row (past the last one it wraps to the first).
    #[inline]
    fn advance(&mut self, offsets: &[Vec<Option<usize>>]) {
        for a in (0..self.idx.len()).rev() {
            self.idx[a] += 1;
            if self.idx[a] < offsets[a].len() {
                self.refresh(offsets, a);
                return;
            }
            self.idx[a] = 0;
        }
        self.refresh(offsets, 0);
    }

    /// Recomputes the offsets of the prefixes that end at `from` or later.
    #[inline]
    fn refresh(&mut self, offsets: &[Vec<Option<usize>>], from: usize) {
        for a in from..self.idx.len() {
            self.base[a + 1] = self.base[a]
                .zip(offsets[a][self.idx[a]])
                .map(|(b, o)| b + o);
        }
    }
}

/// The general path, for strings: clones each element.
fn apply<T: Clone>(
    plan: &Plan,
    input: ArrayViewD<'_, T>,
    fill: &T,
) -> Result<ArrayD<T>, KernelError> {
    // Tensors are kept in standard layout, so this borrows; cropping is done
    // by offsets in the writer, not by a relayout copy.
    let contiguous = input.as_standard_layout();
    let src = contiguous
        .as_slice()
        .ok_or_else(|| KernelError::Invalid("internal: input is not contiguous".into()))?;
    let rank = plan.kept.len();
    let out_len: usize = plan.out_shape.iter().product();
    let mut out = Vec::with_capacity(out_len);
    // Axes from `tail` on are neither padded nor cropped: blocks there are
    // contiguous in both input and output and copy in one go.
    let tail = (0..rank)
        .rev()
        .find(|&a| plan.begin[a] != 0 || plan.end[a] != 0 || plan.kept[a] != input.len_of(Axis(a)))
        .map_or(0, |a| a + 1);
    let mut inner = vec![1usize; rank + 1];
    let mut out_inner = vec![1usize; rank + 1];
    for a in (0..rank).rev() {
        inner[a] = inner[a + 1] * input.len_of(Axis(a));
        out_inner[a] = out_inner[a + 1] * plan.out_shape[a];
    }
    // Constant runs are copied from a prepared row: memcpy beats a
    // per-element fill loop for short runs.
    let widest = (0..rank)
        .map(|a| (plan.begin[a].max(plan.end[a])).saturating_mul(out_inner[a + 1]))
        .max()
        .unwrap_or(0);
    let fill_row = if plan.mode == Mode::Constant {
        vec![fill.clone(); widest.min(FILL_ROW)]
    } else {
        Vec::new()
    };
    let w = Writer {
        plan,
        tail,
        inner: &inner,
        out_inner: &out_inner,
        fill_row: &fill_row,
    };
    if out_len > 0 {
        w.write(&mut out, src, 0);
    }
    debug_assert_eq!(out.len(), out_len);
    ArrayD::from_shape_vec(IxDyn(&plan.out_shape), out)
        .map_err(|e| KernelError::Invalid(format!("internal: {e}")))
}

struct Writer<'a, T> {
    plan: &'a Plan,
    tail: usize,
    /// Input elements per index of each axis (product of later input sizes).
    inner: &'a [usize],
    /// Output elements per index of each axis.
    out_inner: &'a [usize],
    /// The pad value, repeated (constant mode only).
    fill_row: &'a [T],
}

/// The longest prepared run of pad values, in elements.
const FILL_ROW: usize = 16 * 1024;

impl<T: Clone> Writer<'_, T> {
    /// Appends the cropped and padded form of `block` (the input sub-array
    /// at `axis`, uncropped) to `out`, in row-major order. Writing strictly
    /// in order lets the output grow by `extend`, so no element is written
    /// twice and no output memory is touched before it is written.
    fn write(&self, out: &mut Vec<T>, block: &[T], axis: usize) {
        if axis >= self.tail {
            out.extend_from_slice(&block[..self.inner[axis]]);
            return;
        }
        let n = self.plan.kept[axis];
        let first = self.plan.crop_begin[axis];
        let step = self.inner[axis + 1];
        let sub = |j: usize| &block[(first + j) * step..(first + j + 1) * step];
        let (b, e) = (self.plan.begin[axis], self.plan.end[axis]);
        let leaf = axis + 1 >= self.tail;
        let emit_pad = |out: &mut Vec<T>, j: i64| {
            if leaf {
                out.extend_from_slice(sub(source_index(j, n, self.plan.mode)));
            } else {
                self.write(out, sub(source_index(j, n, self.plan.mode)), axis + 1);
            }
        };
        if self.plan.mode == Mode::Constant {
            self.fill(out, b * self.out_inner[axis + 1]);
        } else {
            for k in 0..b {
                emit_pad(out, k as i64 - b as i64);
            }
        }
        if leaf {
            out.extend_from_slice(&block[first * step..(first + n) * step]);
        } else {
            for j in 0..n {
                self.write(out, sub(j), axis + 1);
            }
        }
        if self.plan.mode == Mode::Constant {
            self.fill(out, e * self.out_inner[axis + 1]);
        } else {
            for k in 0..e {
                emit_pad(out, (n + k) as i64);
            }
        }
    }

    /// Appends `count` pad values.
    fn fill(&self, out: &mut Vec<T>, mut count: usize) {
        while count > 0 {
            let run = count.min(self.fill_row.len());
            if run == 0 {
                break; // unreachable: fill_row covers the widest run
            }
            out.extend_from_slice(&self.fill_row[..run]);
            count -= run;
        }
    }
}

/// The input index a padded position `j` (outside `0..n`) copies from.
/// `n > 0` is guaranteed by `plan`.
pub fn source_index(j: i64, n: usize, mode: Mode) -> usize {
    let n_i = n as i64;
    match mode {
        Mode::Edge | Mode::Constant => j.clamp(0, n_i - 1) as usize,
        Mode::Wrap => j.rem_euclid(n_i) as usize,
        Mode::Reflect => {
            if n == 1 {
                return 0;
            }
            let period = 2 * (n_i - 1);
            let m = j.rem_euclid(period);
            (if m >= n_i { period - m } else { m }) as usize
        }
    }
}

/// Lists the allowed types for messages.
pub fn allowed_text(version: i64) -> String {
    allowed_list(&allowed_types(version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AttrValue, Node};

    fn pad_f32(shape: &[usize], data: Vec<f32>, pads: &[i64], mode: Mode, value: f32) -> Tensor {
        let t = Tensor::from_vec(shape, data);
        let spec = pads_for_all_axes(pads, None, shape.len(), "pads").unwrap();
        pad_tensor(&t, &spec, mode, &FillValue::Float(value), 1 << 30).unwrap()
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.array::<f32>().unwrap().iter().copied().collect()
    }

    const DATA: [f32; 6] = [1.0, 1.2, 2.3, 3.4, 4.5, 5.7];

    // The three examples of seed 000 (Pad-18 documentation), which are also
    // the first three of the Pad-19 documentation.
    #[test]
    fn spec_example_1_constant() {
        let y = pad_f32(&[3, 2], DATA.to_vec(), &[0, 2, 0, 0], Mode::Constant, 0.0);
        assert_eq!(y.shape(), &[3, 4]);
        assert_eq!(
            values(&y),
            vec![0.0, 0.0, 1.0, 1.2, 0.0, 0.0, 2.3, 3.4, 0.0, 0.0, 4.5, 5.7]
        );
    }

    #[test]
    fn spec_example_2_reflect_beyond_axis_length() {
        let y = pad_f32(&[3, 2], DATA.to_vec(), &[0, 2, 0, 0], Mode::Reflect, 0.0);
        assert_eq!(
            values(&y),
            vec![1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]
        );
    }

    #[test]
    fn spec_example_3_edge() {
        let y = pad_f32(&[3, 2], DATA.to_vec(), &[0, 2, 0, 0], Mode::Edge, 0.0);
        assert_eq!(
            values(&y),
            vec![1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]
        );
    }

    // Example 4 of the Pad-19 documentation (wrap).
    #[test]
    fn spec_example_4_wrap() {
        let y = pad_f32(&[3, 2], DATA.to_vec(), &[2, 1, 1, 1], Mode::Wrap, 0.0);
        assert_eq!(y.shape(), &[6, 4]);
        assert_eq!(
            values(&y),
            vec![
                3.4, 2.3, 3.4, 2.3, //
                5.7, 4.5, 5.7, 4.5, //
                1.2, 1.0, 1.2, 1.0, //
                3.4, 2.3, 3.4, 2.3, //
                5.7, 4.5, 5.7, 4.5, //
                1.2, 1.0, 1.2, 1.0,
            ]
        );
    }

    #[test]
    fn reflect_repeats_like_numpy() {
        // np.pad([1,2,3], (5,0), 'reflect') == [2,1,2,3,2,1,2,3]
        let y = pad_f32(&[3], vec![1.0, 2.0, 3.0], &[5, 0], Mode::Reflect, 0.0);
        assert_eq!(values(&y), vec![2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0]);
        // np.pad([1,2,3], (0,6), 'reflect') == [1,2,3,2,1,2,3,2,1]
        let y = pad_f32(&[3], vec![1.0, 2.0, 3.0], &[0, 6], Mode::Reflect, 0.0);
        assert_eq!(
            values(&y),
            vec![1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]
        );
        let y = pad_f32(&[1], vec![7.0], &[2, 3], Mode::Reflect, 0.0);
        assert_eq!(values(&y), vec![7.0; 6]);
    }

    #[test]
    fn negative_pads_crop_then_pad() {
        // Remove the first column, add one 9 at the end of each row.
        let y = pad_f32(
            &[2, 3],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[0, -1, 0, 1],
            Mode::Constant,
            9.0,
        );
        assert_eq!(y.shape(), &[2, 3]);
        assert_eq!(values(&y), vec![2.0, 3.0, 9.0, 5.0, 6.0, 9.0]);
        // Mixed on one axis with edge: crop the end, pad the beginning.
        let y = pad_f32(&[4], vec![1.0, 2.0, 3.0, 4.0], &[2, -3], Mode::Edge, 0.0);
        assert_eq!(values(&y), vec![1.0, 1.0, 1.0]);
        // Reflect after a crop reflects the cropped axis.
        let y = pad_f32(&[4], vec![1.0, 2.0, 3.0, 4.0], &[-1, 2], Mode::Reflect, 0.0);
        assert_eq!(values(&y), vec![2.0, 3.0, 4.0, 3.0, 2.0]);
    }

    #[test]
    fn cropping_more_than_the_axis_holds_is_an_error() {
        let t = Tensor::from_vec(&[2, 3], vec![0f32; 6]);
        let spec = pads_for_all_axes(&[0, -2, 0, -2], None, 2, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Default, 1 << 30).unwrap_err();
        assert_eq!(
            e,
            KernelError::input(
                "pads",
                "axis 1: pads (-2, -2) remove 4 elements but the axis holds 3"
            )
        );
    }

    #[test]
    fn non_constant_modes_reject_empty_axes() {
        let t = Tensor::from_vec(&[2, 0], Vec::<f32>::new());
        let spec = pads_for_all_axes(&[0, 1, 0, 0], None, 2, "pads").unwrap();
        for mode in [Mode::Edge, Mode::Reflect, Mode::Wrap] {
            let e = pad_tensor(&t, &spec, mode, &FillValue::Default, 1 << 30).unwrap_err();
            assert!(e.to_string().contains("axis 1 is empty"), "{e}");
        }
        let y = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Float(5.0), 1 << 30).unwrap();
        assert_eq!(values(&y), vec![5.0, 5.0]);
    }

    #[test]
    fn empty_outputs_need_nothing_to_copy() {
        // Axis 0 is emptied by the crop and padded by edge, but axis 1 has
        // no elements: the output [1, 0] is empty, so there is nothing to copy.
        let t = Tensor::from_vec(&[1, 0], Vec::<f32>::new());
        let spec = pads_for_all_axes(&[-1, 0, 1, 0], None, 2, "pads").unwrap();
        let y = pad_tensor(&t, &spec, Mode::Edge, &FillValue::Default, 1 << 30).unwrap();
        assert_eq!(y.shape(), &[1, 0]);
    }

    #[test]
    fn huge_pads_are_refused_before_allocating() {
        let t = Tensor::from_vec(&[2], vec![0f32; 2]);
        let spec = pads_for_all_axes(&[1_000_000_000_000, 0], None, 1, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Default, 1 << 30).unwrap_err();
        match &e {
            KernelError::Limit(l) => {
                assert_eq!(l.limit, "max_output_bytes");
                assert_eq!(l.needed, 4_000_000_000_008);
            }
            other => panic!("expected a limit error, got {other:?}"),
        }
        let spec = pads_for_all_axes(&[i64::MAX, i64::MAX], None, 1, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Edge, &FillValue::Default, 1 << 30).unwrap_err();
        assert_eq!(e.kind(), "limit", "{e}");
        // An empty axis beside a huge one: no elements, but no addressable
        // shape either.
        let t = Tensor::from_vec(&[0, 1], Vec::<f32>::new());
        let spec = pads_for_all_axes(&[0, i64::MAX, 0, i64::MAX], None, 2, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Default, 1 << 30).unwrap_err();
        assert_eq!(e.kind(), "limit", "{e}");
    }

    #[test]
    fn string_outputs_count_their_text() {
        let long = "x".repeat(1000);
        let t = Tensor::from_vec(&[1], vec![long]);
        let spec = pads_for_all_axes(&[0, 99], None, 1, "pads").unwrap();
        // 100 copies of a 1000-byte string: about 100 kB, over a 64 kB limit.
        let e = pad_tensor(&t, &spec, Mode::Edge, &FillValue::Default, 64 << 10).unwrap_err();
        assert!(e.to_string().contains("max_output_bytes"), "{e}");
        assert!(pad_tensor(&t, &spec, Mode::Edge, &FillValue::Default, 1 << 20).is_ok());
    }

    #[test]
    fn axes_are_normalized_and_checked() {
        let s = pads_for_all_axes(&[1, 2, 3, 4], Some(&[-1, 0]), 3, "pads").unwrap();
        assert_eq!(s.begin, vec![2, 0, 1]);
        assert_eq!(s.end, vec![4, 0, 3]);
        let e = pads_for_all_axes(&[1, 2, 3, 4], Some(&[0, -3]), 3, "pads").unwrap_err();
        assert_eq!(
            e,
            KernelError::input("axes", "axis 0 is repeated in [0, -3]")
        );
        let e = pads_for_all_axes(&[1, 2], Some(&[3]), 3, "pads").unwrap_err();
        assert_eq!(
            e,
            KernelError::input("axes", "axis 3 is out of range [-3, 2] for rank 3")
        );
        let e = pads_for_all_axes(&[1, 2, 3], None, 2, "pads").unwrap_err();
        assert_eq!(
            e,
            KernelError::input("pads", "expected 4 values (2 x 2 axes), got 3")
        );
    }

    #[test]
    fn wrap_is_rejected_before_version_19() {
        assert!(Mode::parse("wrap", 19).is_ok());
        let e = Mode::parse("wrap", 18).unwrap_err();
        assert!(e.to_string().contains("added in Pad-19"), "{e}");
        let e = Mode::parse("mirror", 25).unwrap_err();
        assert!(e.to_string().contains("unknown mode 'mirror'"), "{e}");
    }

    #[test]
    fn strings_and_sub_byte_types_pad() {
        let t = Tensor::from_vec(&[2], vec!["a".to_string(), "b".to_string()]);
        let spec = pads_for_all_axes(&[1, 1], None, 1, "pads").unwrap();
        let y = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Default, 100).unwrap();
        let got: Vec<String> = y.array::<String>().unwrap().iter().cloned().collect();
        assert_eq!(got, vec!["", "a", "b", ""]);
        let bits = Tensor::new(
            DataType::Int4,
            Storage::Bits(ArrayD::from_shape_vec(IxDyn(&[2]), vec![3, 0xE]).unwrap()),
        )
        .unwrap();
        let y = pad_tensor(&bits, &spec, Mode::Edge, &FillValue::Default, 100).unwrap();
        assert_eq!(y.dtype(), DataType::Int4);
        assert_eq!(
            y.storage(),
            &Storage::Bits(ArrayD::from_shape_vec(IxDyn(&[4]), vec![3, 3, 0xE, 0xE]).unwrap())
        );
    }

    /// Every mode, on random shapes and pads, against a per-element oracle
    /// written from the definition (independent of the block writer).
    #[test]
    fn block_writer_matches_per_element_definition() {
        let mut rng = crate::test_rng::Rng::new(0x2545F4914F6CDD1D);
        let mut next = |m: u64| rng.below(m);
        for _ in 0..400 {
            let rank = 1 + next(4) as usize;
            let shape: Vec<usize> = (0..rank).map(|_| 1 + next(4) as usize).collect();
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let mut pads = Vec::new();
            for _ in 0..2 * rank {
                pads.push(next(7) as i64 - 1);
            }
            for (a, &d) in shape.iter().enumerate() {
                // keep at least one element per axis so every mode applies
                while pads[a].min(0).abs() + pads[a + rank].min(0).abs() >= d as i64 {
                    pads[a] = pads[a].max(0);
                    pads[a + rank] = pads[a + rank].max(0);
                }
            }
            let mode = [Mode::Constant, Mode::Reflect, Mode::Edge, Mode::Wrap][next(4) as usize];
            let y = pad_f32(&shape, data.clone(), &pads, mode, -1.0);
            let out_shape = y.shape().to_vec();
            let got = values(&y);
            let mut idx = vec![0usize; rank];
            for (flat, g) in got.iter().enumerate() {
                let mut rem = flat;
                for a in (0..rank).rev() {
                    idx[a] = rem % out_shape[a];
                    rem /= out_shape[a];
                }
                let mut src = 0usize;
                let mut constant = false;
                for a in 0..rank {
                    let crop_b = pads[a].min(0).unsigned_abs() as i64;
                    let kept = shape[a] as i64 - crop_b - pads[a + rank].min(0).abs();
                    let j = idx[a] as i64 - pads[a].max(0);
                    let j = if (0..kept).contains(&j) {
                        j
                    } else if mode == Mode::Constant {
                        constant = true;
                        0
                    } else {
                        source_index(j, kept as usize, mode) as i64
                    };
                    src = src * shape[a] + (j + crop_b) as usize;
                }
                let want = if constant { -1.0 } else { data[src] };
                assert_eq!(
                    *g, want,
                    "shape {shape:?} pads {pads:?} mode {mode:?} at {idx:?}"
                );
            }
        }
    }

    /// The output of padding `shape` by `pads`, element by element from the
    /// definition: the flat input index each output element copies, or
    /// `None` for the pad value.
    fn per_element(shape: &[usize], pads: &[i64], mode: Mode) -> (Vec<usize>, Vec<Option<usize>>) {
        let rank = shape.len();
        let out_shape: Vec<usize> = (0..rank)
            .map(|a| (shape[a] as i64 + pads[a] + pads[a + rank]) as usize)
            .collect();
        let total: usize = out_shape.iter().product();
        let mut want = Vec::with_capacity(total);
        for flat in 0..total {
            let mut rem = flat;
            let mut idx = vec![0usize; rank];
            for a in (0..rank).rev() {
                idx[a] = rem % out_shape[a];
                rem /= out_shape[a];
            }
            let mut src = Some(0usize);
            for a in 0..rank {
                let crop_b = pads[a].min(0).abs();
                let kept = shape[a] as i64 - crop_b - pads[a + rank].min(0).abs();
                let j = idx[a] as i64 - pads[a].max(0);
                let j = if (0..kept).contains(&j) {
                    Some(j)
                } else if mode == Mode::Constant {
                    None
                } else {
                    Some(source_index(j, kept as usize, mode) as i64)
                };
                src = match (src, j) {
                    (Some(s), Some(j)) => Some(s * shape[a] + (j + crop_b) as usize),
                    _ => None,
                };
            }
            want.push(src);
        }
        (out_shape, want)
    }

    /// The in-place writer, serial and cut into pieces of many sizes across
    /// the pool (pieces start and end inside rows and runs), against the
    /// per-element definition; the cloning path used for strings against
    /// the same. Shapes include empty axes, unpadded inner axes (rows of
    /// blocks) and pads longer than the axis.
    #[test]
    fn parallel_writer_matches_per_element_definition() {
        let mut rng = crate::test_rng::Rng::new(0x9E3779B97F4A7C15);
        let mut next = |m: u64| rng.below(m);
        let modes = [Mode::Constant, Mode::Reflect, Mode::Edge, Mode::Wrap];
        let mut parallel_cases = 0;
        for case in 0..1500 {
            let rank = 1 + next(4) as usize;
            let big = case % 50 == 0;
            let shape: Vec<usize> = (0..rank)
                .map(|_| next(if big { 24 } else { 6 }) as usize)
                .collect();
            let mut pads: Vec<i64> = (0..2 * rank).map(|_| next(9) as i64 - 2).collect();
            // Often leave the innermost axes alone, so rows are made of
            // blocks longer than one element.
            let untouched = next(rank as u64 + 1) as usize;
            for a in rank - untouched.min(rank - 1)..rank {
                if next(2) == 0 {
                    pads[a] = 0;
                    pads[a + rank] = 0;
                }
            }
            for (a, &d) in shape.iter().enumerate() {
                if pads[a].min(0).abs() + pads[a + rank].min(0).abs() > d as i64 {
                    pads[a] = pads[a].max(0);
                    pads[a + rank] = pads[a + rank].max(0);
                }
            }
            let mode = modes[next(4) as usize];
            let spec = pads_for_all_axes(&pads, None, rank, "pads").unwrap();
            let Ok(plan) = plan(&shape, &spec, mode) else {
                continue; // an empty axis to copy from, in a non-constant mode
            };
            let n: usize = shape.iter().product();
            let data: Vec<u32> = (0..n as u32).map(|i| i + 1000).collect();
            let input = ArrayD::from_shape_vec(IxDyn(&shape), data.clone()).unwrap();
            let fill = u32::MAX;
            let (out_shape, want) = per_element(&shape, &pads, mode);
            let want: Vec<u32> = want.iter().map(|s| s.map_or(fill, |i| data[i])).collect();
            let pieces = Parallel {
                min_bytes: 0,
                pieces_per_thread: 1 + next(8) as usize,
                chunk_bytes: 1 + next(64) as usize,
            };
            let what = format!("shape {shape:?} pads {pads:?} mode {mode:?} {pieces:?}");
            for par in [PARALLEL, pieces] {
                let got = apply_copy(&plan, input.view(), fill, par).unwrap();
                assert_eq!(got.shape(), &out_shape[..], "{what}");
                assert_eq!(got.iter().copied().collect::<Vec<_>>(), want, "{what}");
            }
            parallel_cases += (want.len() > 1) as usize;
            let strings = input.mapv(|v| v.to_string());
            let got = apply(&plan, strings.view(), &fill.to_string()).unwrap();
            let want: Vec<String> = want.iter().map(u32::to_string).collect();
            assert_eq!(got.iter().cloned().collect::<Vec<_>>(), want, "{what}");
        }
        assert!(parallel_cases > 500, "{parallel_cases}");
    }

    /// Pieces claimed by several threads at once, in every mode and at
    /// piece sizes that cut rows and runs, against the per-element
    /// definition.
    #[test]
    fn pieces_written_by_several_threads_match_the_definition() {
        let shape = [3usize, 5, 7];
        let pads = [1i64, -1, 2, 0, 2, 3];
        let n: usize = shape.iter().product();
        let data: Vec<u32> = (0..n as u32).map(|i| i + 1000).collect();
        let fill = u32::MAX;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for mode in [Mode::Constant, Mode::Reflect, Mode::Edge, Mode::Wrap] {
            let spec = pads_for_all_axes(&pads, None, shape.len(), "pads").unwrap();
            let plan = plan(&shape, &spec, mode).unwrap();
            let rows = Rows::new(&plan, &data, &shape, fill);
            let (_, want) = per_element(&shape, &pads, mode);
            let want: Vec<u32> = want.iter().map(|s| s.map_or(fill, |i| data[i])).collect();
            for chunk in [1, 3, 7, 40, want.len()] {
                // A value no element should keep, so that reading every
                // element back is defined whatever the writer did.
                let mut out = vec![MaybeUninit::new(7u32); want.len()];
                pool.install(|| write_pieces(&rows, &mut out, chunk));
                // SAFETY: every element was initialised above.
                let got: Vec<u32> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
                assert_eq!(got, want, "mode {mode:?} chunk {chunk}");
            }
        }
    }

    #[test]
    fn runs_merge_into_repeats_and_reversals() {
        // Edge, reflect and wrap pads of a 4-element innermost axis.
        let runs = |mode, b: i64, e: i64| {
            let spec = pads_for_all_axes(&[0, b, 0, e], None, 2, "pads").unwrap();
            let p = plan(&[2, 4], &spec, mode).unwrap();
            Rows::new(&p, &[0u8; 8], &[2, 4], 0).runs
        };
        use Run::*;
        assert_eq!(
            runs(Mode::Edge, 3, 2),
            vec![
                Splat { src: 0, len: 3 },
                Copy { src: 0, len: 4 },
                Splat { src: 3, len: 2 }
            ]
        );
        assert_eq!(
            runs(Mode::Reflect, 3, 2),
            vec![
                Rev { end: 4, len: 3 },
                Copy { src: 0, len: 4 },
                Rev { end: 3, len: 2 }
            ]
        );
        assert_eq!(
            runs(Mode::Wrap, 3, 2),
            vec![
                Copy { src: 1, len: 3 },
                Copy { src: 0, len: 4 },
                Copy { src: 0, len: 2 }
            ]
        );
        assert_eq!(
            runs(Mode::Constant, 3, -1),
            vec![Fill { len: 3 }, Copy { src: 0, len: 3 }]
        );
    }

    #[test]
    fn pad_before_11_takes_one_input() {
        // Until Pad-11 the pads are an attribute: a second input is an error.
        let node = Node::new(
            "",
            "Pad",
            &["x", "p"],
            &["y"],
            vec![("pads", AttrValue::Ints(vec![0, 0]))],
        );
        let ctx = KernelCtx {
            node: &node,
            version: 2,
            limits: Limits::default(),
            prepared: None,
        };
        let x = Tensor::from_vec(&[1], vec![1f32]);
        let p = Tensor::from_vec(&[2], vec![0i64, 0]);
        let e = run(&ctx, &[Some(&x), Some(&p)]).unwrap_err();
        assert!(e.to_string().contains("takes one input"), "{e}");
        assert_eq!(run(&ctx, &[Some(&x)]).unwrap()[0].shape(), &[1]);
    }

    #[test]
    fn a_long_string_pad_value_counts_against_the_limit() {
        // 100 elements, 99 of them copies of a 1000-byte pad value: about
        // 100 kB, over a 64 kB limit, though the data's strings are short.
        let t = Tensor::from_vec(&[1], vec!["a".to_string()]);
        let value = FillValue::Tensor(Tensor::from_vec(&[1], vec!["x".repeat(1000)]));
        let spec = pads_for_all_axes(&[0, 99], None, 1, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Constant, &value, 64 << 10).unwrap_err();
        assert!(e.to_string().contains("max_output_bytes"), "{e}");
        assert!(pad_tensor(&t, &spec, Mode::Constant, &value, 1 << 20).is_ok());
    }

    #[test]
    fn an_empty_output_needs_no_source_whichever_axis_empties_it() {
        // Axis 0 is empty and edge-padded; axis 1 (length 2) is cropped to
        // nothing by pads (-1, -1). The output [1, 0] holds no element, so
        // there is nothing to copy and no error.
        let t = Tensor::from_vec(&[0, 2], Vec::<f32>::new());
        let spec = pads_for_all_axes(&[1, -1, 0, -1], None, 2, "pads").unwrap();
        let y = pad_tensor(&t, &spec, Mode::Edge, &FillValue::Default, 1 << 30).unwrap();
        assert_eq!(y.shape(), &[1, 0]);
    }

    #[test]
    fn isize_max_elements_are_addressable_and_then_too_many_bytes() {
        // ndarray addresses up to isize::MAX elements, so an output of
        // exactly that many is refused by the byte limit, with its size.
        let t = Tensor::from_vec(&[1], vec![0f32]);
        let spec = pads_for_all_axes(&[isize::MAX as i64 - 1, 0], None, 1, "pads").unwrap();
        let e = pad_tensor(&t, &spec, Mode::Constant, &FillValue::Default, 1 << 30).unwrap_err();
        match &e {
            KernelError::Limit(l) => assert_eq!(l.needed, 4 * isize::MAX as u128, "{e}"),
            other => panic!("expected a limit error, got {other:?}"),
        }
    }

    #[test]
    fn allowed_text_lists_the_versions_type_constraint() {
        // Pad-1/2's T: float16, float, double.
        assert_eq!(
            allowed_text(2),
            "tensor(float16), tensor(float), tensor(double)"
        );
    }
}
