//! Helper operators: Add, Sub, Div, Max, Concat, Constant, Gather, Shape and
//! Slice, at the versions in effect at opset 18.
//!
//! They exist to run function bodies (CenterCropPad's `*_expanded` cases),
//! not as covered operators: they support the element types those graphs
//! use (integers and floats; any type for the data-movement ones), follow
//! the spec's semantics, and are not tuned for speed.

use super::{KernelCtx, OpOutput};
use crate::error::KernelError;
use crate::model::AttrValue;
use crate::tensor::{Storage, Tensor};
use ndarray::{ArrayD, Axis, IxDyn, Slice, Zip};

/// The numpy broadcast of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, KernelError> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(KernelError::Invalid(format!(
                "shapes {a:?} and {b:?} do not broadcast"
            )));
        };
    }
    Ok(out)
}

fn zip_with<T: Copy>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    f: impl Fn(T, T) -> Result<T, KernelError>,
) -> Result<ArrayD<T>, KernelError> {
    let shape = IxDyn(&broadcast_shape(a.shape(), b.shape())?);
    let (Some(av), Some(bv)) = (a.broadcast(shape.clone()), b.broadcast(shape)) else {
        return Err(KernelError::Invalid("internal: broadcast failed".into()));
    };
    let mut err = None;
    let out = Zip::from(&av).and(&bv).map_collect(|&x, &y| {
        f(x, y).unwrap_or_else(|e| {
            err.get_or_insert(e);
            x
        })
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out.as_standard_layout().into_owned()),
    }
}

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Div,
    Max,
}

macro_rules! int_arith {
    ($op:expr, $a:expr, $b:expr) => {
        match $op {
            Arith::Add => Ok($a.wrapping_add($b)),
            Arith::Sub => Ok($a.wrapping_sub($b)),
            Arith::Max => Ok($a.max($b)),
            // Integer division truncates toward zero, as onnxruntime does.
            Arith::Div => $a
                .checked_div($b)
                .ok_or_else(|| KernelError::Invalid("integer division by zero".into())),
        }
    };
}

macro_rules! float_arith {
    ($op:expr, $a:expr, $b:expr) => {
        Ok(match $op {
            Arith::Add => $a + $b,
            Arith::Sub => $a - $b,
            Arith::Div => $a / $b,
            // NaN propagates, as the spec's Max does.
            Arith::Max => {
                if $a.is_nan() || $b.is_nan() {
                    $a + $b
                } else {
                    $a.max($b)
                }
            }
        })
    };
}

fn arith(op: Arith, ctx: &KernelCtx, a: &Tensor, b: &Tensor) -> Result<Tensor, KernelError> {
    ctx.check_output(&broadcast_shape(a.shape(), b.shape())?, a.dtype())?;
    if a.dtype() != b.dtype() {
        return Err(KernelError::input(
            "B",
            format!(
                "expected the element type of A ({}), got {}",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let storage =
        match (a.storage(), b.storage()) {
            (Storage::I64(x), Storage::I64(y)) => {
                Storage::I64(zip_with(x, y, |p, q| int_arith!(op, p, q))?)
            }
            (Storage::I32(x), Storage::I32(y)) => {
                Storage::I32(zip_with(x, y, |p, q| int_arith!(op, p, q))?)
            }
            (Storage::F32(x), Storage::F32(y)) => {
                Storage::F32(zip_with(x, y, |p, q| float_arith!(op, p, q))?)
            }
            (Storage::F64(x), Storage::F64(y)) => {
                Storage::F64(zip_with(x, y, |p, q| float_arith!(op, p, q))?)
            }
            _ => return Err(KernelError::Type {
                name: "A".into(),
                dtype: a.dtype(),
                allowed:
                    "tensor(int32), tensor(int64), tensor(float), tensor(double) (helper operator)"
                        .into(),
            }),
        };
    Tensor::new(a.dtype(), storage).map_err(KernelError::Invalid)
}

fn binary(op: Arith, ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let a = ctx.required_input(inputs, 0, "A")?;
    let b = ctx.required_input(inputs, 1, "B")?;
    Ok(vec![arith(op, ctx, a, b)?])
}

pub fn add(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    binary(Arith::Add, ctx, inputs)
}

pub fn sub(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    binary(Arith::Sub, ctx, inputs)
}

pub fn div(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    binary(Arith::Div, ctx, inputs)
}

/// Max of one or more inputs, broadcasting.
pub fn max(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let first = ctx.required_input(inputs, 0, "data_0")?;
    let mut acc = first.clone();
    for (i, t) in inputs.iter().enumerate().skip(1) {
        let t = t.ok_or_else(|| KernelError::input(&format!("data_{i}"), "missing"))?;
        acc = arith(Arith::Max, ctx, &acc, t)?;
    }
    Ok(vec![acc])
}

fn axis_attr(
    ctx: &KernelCtx,
    name: &str,
    default: Option<i64>,
    rank: usize,
) -> Result<usize, KernelError> {
    let a = ctx
        .int_attr(name)?
        .or(default)
        .ok_or_else(|| KernelError::attribute(name, "required but missing"))?;
    normalize_axis(a, rank).ok_or_else(|| {
        KernelError::attribute(name, format!("axis {a} is out of range for rank {rank}"))
    })
}

fn normalize_axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        None
    } else {
        Some(if a < 0 { a + r } else { a } as usize)
    }
}

pub fn concat(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let first = ctx.required_input(inputs, 0, "inputs")?;
    let axis = axis_attr(ctx, "axis", None, first.rank())?;
    let all: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    for t in &all {
        if t.dtype() != first.dtype() || t.rank() != first.rank() {
            return Err(KernelError::input(
                "inputs",
                "all inputs must share element type and rank",
            ));
        }
    }
    macro_rules! cat {
        ($var:ident) => {{
            let views: Vec<_> = all
                .iter()
                .map(|t| match t.storage() {
                    Storage::$var(a) => Ok(a.view()),
                    _ => Err(KernelError::input("inputs", "mixed storage")),
                })
                .collect::<Result<_, _>>()?;
            Storage::$var(ndarray::concatenate(Axis(axis), &views).map_err(|e| {
                KernelError::input(
                    "inputs",
                    format!("shapes do not concatenate on axis {axis}: {e}"),
                )
            })?)
        }};
    }
    let storage = match first.storage() {
        Storage::I64(_) => cat!(I64),
        Storage::I32(_) => cat!(I32),
        Storage::F32(_) => cat!(F32),
        Storage::F64(_) => cat!(F64),
        _ => {
            return Err(KernelError::Invalid(format!(
                "helper Concat does not handle {}",
                first.dtype()
            )))
        }
    };
    Ok(vec![
        Tensor::new(first.dtype(), storage).map_err(KernelError::Invalid)?
    ])
}

pub fn constant(ctx: &KernelCtx, _inputs: &[Option<&Tensor>]) -> OpOutput {
    let node = ctx.node;
    if node.attributes.len() != 1 {
        return Err(KernelError::attribute(
            "value",
            format!(
                "Constant needs exactly one value attribute, got {}",
                node.attributes.len()
            ),
        ));
    }
    let attr = &node.attributes[0];
    let t = match (attr.name.as_str(), &attr.value) {
        ("value", AttrValue::Tensor(t)) => t.clone(),
        ("value_int", AttrValue::Int(v)) => Tensor::scalar(*v),
        ("value_ints", AttrValue::Ints(v)) => Tensor::from_vec(&[v.len()], v.clone()),
        ("value_float", AttrValue::Float(v)) => Tensor::scalar(*v),
        ("value_floats", AttrValue::Floats(v)) => Tensor::from_vec(&[v.len()], v.clone()),
        ("value_string", AttrValue::String(v)) => Tensor::scalar(v.clone()),
        ("value_strings", AttrValue::Strings(v)) => Tensor::from_vec(&[v.len()], v.clone()),
        (name, v) => {
            return Err(KernelError::attribute(
                name,
                format!(
                    "unsupported Constant attribute of type {} (sparse_value is not supported)",
                    v.type_name()
                ),
            ))
        }
    };
    Ok(vec![t])
}

pub fn shape(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let data = ctx.required_input(inputs, 0, "data")?;
    let dims: Vec<i64> = data.shape().iter().map(|&d| d as i64).collect();
    let r = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(ctx.int_attr("start")?.unwrap_or(0));
    let end = clamp(ctx.int_attr("end")?.unwrap_or(r));
    let picked = if start < end {
        dims[start..end].to_vec()
    } else {
        Vec::new()
    };
    Ok(vec![Tensor::from_vec(&[picked.len()], picked)])
}

pub fn gather(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let data = ctx.required_input(inputs, 0, "data")?;
    let idx_t = ctx.required_input(inputs, 1, "indices")?;
    if data.rank() == 0 {
        return Err(KernelError::input("data", "Gather needs rank 1 or more"));
    }
    let axis = axis_attr(ctx, "axis", Some(0), data.rank())?;
    let dim = data.shape()[axis] as i64;
    let raw = match idx_t.dtype() {
        crate::DataType::Int32 | crate::DataType::Int64 => idx_t.to_i64_vec().unwrap_or_default(),
        other => {
            return Err(KernelError::input(
                "indices",
                format!("expected tensor(int32) or tensor(int64), got tensor({other})"),
            ))
        }
    };
    let idx: Vec<usize> = raw
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + dim } else { i };
            if (0..dim).contains(&j) {
                Ok(j as usize)
            } else {
                Err(KernelError::input(
                    "indices",
                    format!("index {i} is out of range for axis {axis} of size {dim}"),
                ))
            }
        })
        .collect::<Result<_, _>>()?;
    let mut out_shape: Vec<usize> = data.shape()[..axis].to_vec();
    out_shape.extend(idx_t.shape());
    out_shape.extend(&data.shape()[axis + 1..]);
    ctx.check_output(&out_shape, data.dtype())?;
    let storage = crate::map_storage!(data.storage(), a => {
        a.select(Axis(axis), &idx)
            .into_shape_with_order(IxDyn(&out_shape))
            .map_err(|e| KernelError::Invalid(format!("internal: {e}")))?
    });
    Ok(vec![
        Tensor::new(data.dtype(), storage).map_err(KernelError::Invalid)?
    ])
}

pub fn slice(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    let data = ctx.required_input(inputs, 0, "data")?;
    let ints = |i: usize, name: &str| -> Result<Option<Vec<i64>>, KernelError> {
        match inputs.get(i).copied().flatten() {
            None => Ok(None),
            Some(t) => match t.dtype() {
                crate::DataType::Int32 | crate::DataType::Int64 => Ok(t.to_i64_vec()),
                other => Err(KernelError::input(
                    name,
                    format!("expected tensor(int32) or tensor(int64), got tensor({other})"),
                )),
            },
        }
    };
    let starts =
        ints(1, "starts")?.ok_or_else(|| KernelError::input("starts", "required but missing"))?;
    let ends =
        ints(2, "ends")?.ok_or_else(|| KernelError::input("ends", "required but missing"))?;
    let rank = data.rank();
    let axes = ints(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(KernelError::input(
            "ends",
            "starts, ends, axes and steps must have the same length",
        ));
    }
    let mut slices: Vec<Slice> = (0..rank).map(|_| Slice::from(..)).collect();
    let mut seen = vec![false; rank];
    for i in 0..starts.len() {
        let a = normalize_axis(axes[i], rank).ok_or_else(|| {
            KernelError::input(
                "axes",
                format!("axis {} is out of range for rank {rank}", axes[i]),
            )
        })?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(KernelError::input("axes", format!("axis {a} is repeated")));
        }
        let dim = data.shape()[a] as i64;
        if steps[i] == 0 {
            return Err(KernelError::input("steps", "a step of 0 is not allowed"));
        }
        // A step longer than the axis takes one element at most, so larger
        // magnitudes (up to i64::MIN, which has no negation) mean the same.
        let step = steps[i].clamp(-dim.max(1), dim.max(1));
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        slices[a] = if step > 0 {
            let s = norm(starts[i]).clamp(0, dim);
            let e = norm(ends[i]).clamp(0, dim).max(s);
            Slice::new(s as isize, Some(e as isize), step as isize)
        } else {
            // Walk down from start (inclusive) to end (exclusive): ndarray
            // takes the range [end + 1, start + 1) and reverses it.
            let s = norm(starts[i]).clamp(-1, dim - 1);
            let e = norm(ends[i]).clamp(-1, dim - 1).min(s);
            Slice::new((e + 1) as isize, Some((s + 1) as isize), step as isize)
        };
    }
    let storage = crate::map_storage!(data.storage(), a => {
        let mut v = a.view();
        for (ax, s) in slices.iter().enumerate() {
            v.slice_axis_inplace(Axis(ax), *s);
        }
        v.as_standard_layout().into_owned()
    });
    Ok(vec![
        Tensor::new(data.dtype(), storage).map_err(KernelError::Invalid)?
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Node;
    use crate::ops::Limits;

    fn ctx(node: &Node) -> KernelCtx<'_> {
        KernelCtx {
            node,
            version: 18,
            limits: Limits::default(),
            prepared: None,
        }
    }

    fn i64s(t: &Tensor) -> Vec<i64> {
        t.to_i64_vec().unwrap()
    }

    #[test]
    fn arithmetic_broadcasts_and_truncates() {
        let n = Node::default();
        let a = Tensor::from_vec(&[2, 2], vec![7i64, -7, 4, 9]);
        let b = Tensor::from_vec(&[2], vec![2i64, 3]);
        assert_eq!(
            i64s(&div(&ctx(&n), &[Some(&a), Some(&b)]).unwrap()[0]),
            vec![3, -2, 2, 3]
        );
        assert_eq!(
            i64s(&sub(&ctx(&n), &[Some(&a), Some(&b)]).unwrap()[0]),
            vec![5, -10, 2, 6]
        );
        assert_eq!(
            i64s(&max(&ctx(&n), &[Some(&a), Some(&b)]).unwrap()[0]),
            vec![7, 3, 4, 9]
        );
        let zero = Tensor::from_vec(&[1], vec![0i64]);
        assert!(div(&ctx(&n), &[Some(&a), Some(&zero)])
            .unwrap_err()
            .to_string()
            .contains("division by zero"));
        let c = Tensor::from_vec(&[3], vec![1i64, 2, 3]);
        assert!(add(&ctx(&n), &[Some(&a), Some(&c)])
            .unwrap_err()
            .to_string()
            .contains("do not broadcast"));
    }

    #[test]
    fn broadcasts_and_gathers_are_bounded_by_the_output_limit() {
        let n = Node::default();
        let small = KernelCtx {
            node: &n,
            version: 18,
            limits: Limits {
                max_output_bytes: 1024,
                ..Limits::default()
            },
            prepared: None,
        };
        // 200 x 200 int64 from two 200-element inputs: 320 000 bytes.
        let col = Tensor::from_vec(&[200, 1], vec![1i64; 200]);
        let row = Tensor::from_vec(&[1, 200], vec![1i64; 200]);
        let e = add(&small, &[Some(&col), Some(&row)]).unwrap_err();
        assert!(
            e.to_string()
                .contains("output of shape [200, 200] needs 320000"),
            "{e}"
        );
        let data = Tensor::from_vec(&[1, 200], vec![1i64; 200]);
        let idx = Tensor::from_vec(&[200], vec![0i64; 200]);
        let e = gather(&small, &[Some(&data), Some(&idx)]).unwrap_err();
        assert_eq!(e.kind(), "limit", "{e}");
        assert!(gather(&ctx(&n), &[Some(&data), Some(&idx)]).is_ok());
    }

    #[test]
    fn extreme_slice_steps_mean_one_element() {
        let n = Node::default();
        let data = Tensor::from_vec(&[4], vec![0i64, 1, 2, 3]);
        let one = |v: i64| Tensor::from_vec(&[1], vec![v]);
        let (lo, hi) = (one(0), one(4));
        let y = slice(
            &ctx(&n),
            &[
                Some(&data),
                Some(&lo),
                Some(&hi),
                None,
                Some(&one(i64::MAX)),
            ],
        );
        assert_eq!(i64s(&y.unwrap()[0]), vec![0]);
        let (top, bottom) = (one(-1), one(i64::MIN));
        let y = slice(
            &ctx(&n),
            &[
                Some(&data),
                Some(&top),
                Some(&bottom),
                None,
                Some(&one(i64::MIN)),
            ],
        );
        assert_eq!(i64s(&y.unwrap()[0]), vec![3]);
    }

    #[test]
    fn slice_follows_the_clamping_rules() {
        let n = Node::default();
        let x = Tensor::from_vec(&[6], vec![0i64, 1, 2, 3, 4, 5]);
        let t = |v: Vec<i64>| Tensor::from_vec(&[v.len()], v);
        let run = |s, e, st| {
            i64s(
                &slice(
                    &ctx(&n),
                    &[
                        Some(&x),
                        Some(&t(vec![s])),
                        Some(&t(vec![e])),
                        None,
                        Some(&t(vec![st])),
                    ],
                )
                .unwrap()[0],
            )
        };
        assert_eq!(run(1, 100, 2), vec![1, 3, 5]);
        assert_eq!(run(-2, 6, 1), vec![4, 5]);
        assert_eq!(run(100, -100, -2), vec![5, 3, 1]);
        assert_eq!(run(4, 1, -1), vec![4, 3, 2]);
        assert_eq!(run(3, 3, 1), Vec::<i64>::new());
    }

    #[test]
    fn gather_and_shape() {
        let n = Node::default();
        let x = Tensor::from_vec(&[3, 4, 5], vec![0f32; 60]);
        let s = shape(&ctx(&n), &[Some(&x)]).unwrap().remove(0);
        assert_eq!(i64s(&s), vec![3, 4, 5]);
        let idx = Tensor::from_vec(&[2], vec![-1i64, 0]);
        assert_eq!(
            i64s(&gather(&ctx(&n), &[Some(&s), Some(&idx)]).unwrap()[0]),
            vec![5, 3]
        );
        let bad = Tensor::from_vec(&[1], vec![3i64]);
        assert!(gather(&ctx(&n), &[Some(&s), Some(&bad)])
            .unwrap_err()
            .to_string()
            .contains("out of range"));
    }
}
