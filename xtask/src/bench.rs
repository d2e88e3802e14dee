//! `cargo xtask bench`: kernel throughput next to references measured in the
//! same run. Release build; numbers are medians of repeated runs.

use anyhow::Result;
use onnx_conformance::ops::pad::{pad_tensor, pads_for_all_axes, FillValue, Mode};
use onnx_conformance::Tensor;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only these operators (pad, conv, center-crop-pad); default: all.
    #[arg(long = "op")]
    ops: Vec<String>,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 30)]
    reps: usize,
}

/// The median wall time of `reps` runs of `f`, after one warm-up run.
pub fn median(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn gbs(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

pub fn run(args: Args) -> Result<()> {
    let want =
        |op: &str| args.ops.is_empty() || args.ops.iter().any(|o| o.eq_ignore_ascii_case(op));
    if want("pad") {
        bench_pad(args.reps)?;
    }
    Ok(())
}

fn bench_pad(reps: usize) -> Result<()> {
    let shape = [1usize, 64, 224, 224];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let x = Tensor::from_vec(&shape, data.clone());
    let bytes = n * 4;
    let copy = median(reps, || {
        black_box(black_box(&data).to_vec());
    });
    println!(
        "Pad: 1x64x224x224 float32, pads 2 on the last two axes ({:.1} MB in)",
        bytes as f64 / 1e6
    );
    println!(
        "{:<10} {:>10} {:>12} {:>18}",
        "mode", "time", "GB/s (in)", "ratio vs copy"
    );
    println!(
        "{:<10} {:>8.3}ms {:>12.2} {:>18}",
        "copy",
        copy.as_secs_f64() * 1e3,
        gbs(bytes, copy),
        "1.00"
    );
    let spec = pads_for_all_axes(&[0, 0, 2, 2, 0, 0, 2, 2], None, 4, "pads")?;
    for (name, mode) in [
        ("constant", Mode::Constant),
        ("reflect", Mode::Reflect),
        ("edge", Mode::Edge),
        ("wrap", Mode::Wrap),
    ] {
        let t = median(reps, || {
            black_box(
                pad_tensor(black_box(&x), &spec, mode, &FillValue::Default, 1 << 30).expect("pad"),
            );
        });
        println!(
            "{:<10} {:>8.3}ms {:>12.2} {:>18.2}",
            name,
            t.as_secs_f64() * 1e3,
            gbs(bytes, t),
            copy.as_secs_f64() / t.as_secs_f64()
        );
    }
    Ok(())
}
