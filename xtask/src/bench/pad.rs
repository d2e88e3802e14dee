//! Pad and CenterCropPad against a plain copy of the same input bytes.

use super::{alternating_medians, gbs, CopyFigure, Figures};
use anyhow::Result;
use onnx_conformance::ops::pad::{pad_tensor, pads_for_all_axes, FillValue, Mode};
use onnx_conformance::Tensor;
use std::hint::black_box;

pub fn bench_pad(reps: usize, figures: &mut Figures) -> Result<()> {
    let shape = [1usize, 64, 224, 224];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let x = Tensor::from_vec(&shape, data.clone());
    let bytes = n * 4;
    let out_bytes = 64 * 228 * 228 * 4;
    println!(
        "Pad: 1x64x224x224 float32, pads 2 on the last two axes ({:.1} MB in, {:.1} MB out)",
        bytes as f64 / 1e6,
        out_bytes as f64 / 1e6
    );
    println!(
        "copy: the input copied into a new vector (to_vec) on one thread, timed in turn with \
         each mode; both times include allocating the output"
    );
    println!(
        "{:<10} {:>10} {:>10} {:>12} {:>15}",
        "mode", "copy", "pad", "GB/s (out)", "copy/pad time"
    );
    let spec = pads_for_all_axes(&[0, 0, 2, 2, 0, 0, 2, 2], None, 4, "pads")?;
    for (name, mode) in [
        ("constant", Mode::Constant),
        ("reflect", Mode::Reflect),
        ("edge", Mode::Edge),
        ("wrap", Mode::Wrap),
    ] {
        // The copy runs between the pad's runs rather than once before
        // them, so that load from elsewhere on the machine falls on both.
        let (copy, t) = alternating_medians(
            reps,
            &mut || {
                black_box(black_box(&data).to_vec());
            },
            &mut || {
                black_box(
                    pad_tensor(black_box(&x), &spec, mode, &FillValue::Default, 1 << 30)
                        .expect("pad"),
                );
            },
        );
        println!(
            "{:<10} {:>8.3}ms {:>8.3}ms {:>12.2} {:>15.2}",
            name,
            copy.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e3,
            gbs(out_bytes, t),
            copy.as_secs_f64() / t.as_secs_f64()
        );
        figures
            .copy_speed
            .push(CopyFigure::new("Pad", name, copy, t));
    }
    Ok(())
}

pub fn bench_center_crop_pad(reps: usize, figures: &mut Figures) -> Result<()> {
    use onnx_conformance::ops::center_crop_pad::crop_pad_spec;
    let shape = [1usize, 3, 512, 512];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i % 977) as f32).collect();
    let x = Tensor::from_vec(&shape, data.clone());
    let target = Tensor::from_vec(&[4], vec![1i64, 3, 448, 600]);
    let spec = crop_pad_spec(x.shape(), &target, None)?;
    let bytes = n * 4;
    let out_bytes = 3 * 448 * 600 * 4;
    // As for Pad: the copy runs between the kernel's runs.
    let (copy, t) = alternating_medians(
        reps,
        &mut || {
            black_box(black_box(&data).to_vec());
        },
        &mut || {
            black_box(
                pad_tensor(
                    black_box(&x),
                    &spec,
                    Mode::Constant,
                    &FillValue::Default,
                    1 << 30,
                )
                .expect("ccp"),
            );
        },
    );
    println!();
    println!(
        "CenterCropPad: 1x3x512x512 float32 -> 1x3x448x600 (crop H, pad W; {:.1} MB in, {:.1} MB out)",
        bytes as f64 / 1e6,
        out_bytes as f64 / 1e6
    );
    println!(
        "copy: the input copied into a new vector (to_vec) on one thread, timed in turn; \
         both times include allocating the output"
    );
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>15}",
        "", "copy", "kernel", "GB/s (out)", "copy/kernel time"
    );
    println!(
        "{:<16} {:>8.3}ms {:>8.3}ms {:>12.2} {:>15.2}",
        "center-crop-pad",
        copy.as_secs_f64() * 1e3,
        t.as_secs_f64() * 1e3,
        gbs(out_bytes, t),
        copy.as_secs_f64() / t.as_secs_f64()
    );
    figures.copy_speed.push(CopyFigure::new(
        "CenterCropPad",
        "1x3x512x512 -> 1x3x448x600",
        copy,
        t,
    ));
    Ok(())
}
