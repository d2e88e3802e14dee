//! CenterCropPad, version 18.
//!
//! Numerical contract: elements are copied bit-exactly; padding is 0, ""
//! or false. Per axis in `axes` (all axes by default), an input larger than
//! the target is cropped starting at `floor((in - target) / 2)`; a smaller
//! one is padded with `floor((target - in) / 2)` elements before and the
//! rest after. The work is one call of Pad's block writer with negative
//! pads for the crops, so contiguous runs are copied whole.

use super::pad::{pad_tensor, FillValue, Mode, PadSpec};
use super::{check_type, KernelCtx, OpOutput};
use crate::error::KernelError;
use crate::tensor::{DataType, Tensor};

pub const VERSIONS: [i64; 1] = [18];

pub fn allowed_types(_version: i64) -> Vec<DataType> {
    use DataType::*;
    vec![
        Bfloat16, Bool, Complex128, Complex64, Double, Float, Float16, Int16, Int32, Int64, Int8,
        String, Uint16, Uint32, Uint64, Uint8,
    ]
}

pub fn run(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> OpOutput {
    if inputs.len() != 2 {
        return Err(KernelError::Invalid(format!(
            "CenterCropPad takes 2 inputs (input_data, shape), got {}",
            inputs.len()
        )));
    }
    let data = ctx.required_input(inputs, 0, "input_data")?;
    let shape = ctx.required_input(inputs, 1, "shape")?;
    check_type("input_data", data.dtype(), &allowed_types(ctx.version))?;
    let axes = ctx.ints_attr("axes")?.map(<[i64]>::to_vec);
    let spec = crop_pad_spec(data.shape(), shape, axes.as_deref())?;
    Ok(vec![pad_tensor(
        data,
        &spec,
        Mode::Constant,
        &FillValue::Default,
        ctx.limits.max_output_bytes,
    )?])
}

/// The per-axis (begin, end) pads, negative for crops, that turn `input`
/// into the centered target shape.
pub fn crop_pad_spec(
    input: &[usize],
    shape: &Tensor,
    axes: Option<&[i64]>,
) -> Result<PadSpec, KernelError> {
    let rank = input.len();
    if rank == 0 {
        return Err(KernelError::input(
            "input_data",
            "expected rank 1 or more, got a scalar",
        ));
    }
    if !matches!(shape.dtype(), DataType::Int32 | DataType::Int64) {
        return Err(KernelError::input(
            "shape",
            format!(
                "expected tensor(int32) or tensor(int64), got tensor({})",
                shape.dtype()
            ),
        ));
    }
    if shape.rank() != 1 {
        return Err(KernelError::input(
            "shape",
            format!("expected a 1-D tensor, got shape {:?}", shape.shape()),
        ));
    }
    let targets = shape.to_i64_vec().unwrap_or_default();
    let axes = super::normalize_axes(axes, rank, |m| KernelError::attribute("axes", m))?;
    if targets.len() != axes.len() {
        return Err(KernelError::input(
            "shape",
            format!(
                "expected {} values (one per axis in {axes:?}), got {}",
                axes.len(),
                targets.len()
            ),
        ));
    }
    let mut spec = PadSpec {
        begin: vec![0; rank],
        end: vec![0; rank],
    };
    for (&axis, &t) in axes.iter().zip(&targets) {
        if t < 0 {
            return Err(KernelError::input(
                "shape",
                format!("target size {t} for axis {axis} is negative"),
            ));
        }
        let n = input[axis] as i64;
        let diff = t - n;
        // For a crop (diff < 0) the larger half goes at the end, so the
        // start rounds down; for a pad the extra element goes at the end too.
        let begin = if diff >= 0 { diff / 2 } else { -((-diff) / 2) };
        spec.begin[axis] = begin;
        spec.end[axis] = diff - begin;
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        input: &[usize],
        targets: Vec<i64>,
        axes: Option<&[i64]>,
    ) -> Result<PadSpec, KernelError> {
        crop_pad_spec(input, &Tensor::from_vec(&[targets.len()], targets), axes)
    }

    #[test]
    fn odd_differences_round_the_start_down() {
        // crop 7 -> 4: start 1, keep 1..5 (remove 1 before, 2 after)
        let s = spec(&[7], vec![4], None).unwrap();
        assert_eq!((s.begin[0], s.end[0]), (-1, -2));
        // pad 4 -> 7: 1 before, 2 after
        let s = spec(&[4], vec![7], None).unwrap();
        assert_eq!((s.begin[0], s.end[0]), (1, 2));
        let s = spec(&[3, 5, 6], vec![9, 2], Some(&[-1, 0])).unwrap();
        assert_eq!((s.begin, s.end), (vec![-0, 0, 1], vec![-1, 0, 2]));
    }

    #[test]
    fn bad_inputs_are_rejected() {
        let e = spec(&[3, 4], vec![2], None).unwrap_err();
        assert_eq!(
            e,
            KernelError::input("shape", "expected 2 values (one per axis in [0, 1]), got 1")
        );
        let e = spec(&[3, 4], vec![2, -1], None).unwrap_err();
        assert_eq!(
            e,
            KernelError::input("shape", "target size -1 for axis 1 is negative")
        );
        let e = crop_pad_spec(&[3], &Tensor::from_vec(&[1], vec![2.0f32]), None).unwrap_err();
        assert_eq!(
            e,
            KernelError::input(
                "shape",
                "expected tensor(int32) or tensor(int64), got tensor(float)"
            )
        );
        let e = spec(&[], vec![], None).unwrap_err();
        assert_eq!(
            e,
            KernelError::input("input_data", "expected rank 1 or more, got a scalar")
        );
        let e = spec(&[3, 4], vec![2, 2], Some(&[1, -1])).unwrap_err();
        assert_eq!(
            e,
            KernelError::attribute("axes", "axis 1 is repeated in [1, -1]")
        );
        let e = spec(&[3, 4], vec![2], Some(&[2])).unwrap_err();
        assert_eq!(
            e,
            KernelError::attribute("axes", "axis 2 is out of range [-2, 1] for rank 2")
        );
    }
}
