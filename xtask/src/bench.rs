//! `cargo xtask bench`: kernel throughput next to references measured in the
//! same run. Release build; numbers are medians of repeated runs.

use crate::python;
use anyhow::{Context, Result};
use onnx_conformance::model::{AttrValue, Attribute, Graph, Model, Node, ValueInfo};
use onnx_conformance::ops::conv::{geometry, ConvAttrs};
use onnx_conformance::ops::pad::{pad_tensor, pads_for_all_axes, FillValue, Mode};
use onnx_conformance::{proto, DataType, Limits, Tensor};
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only these operators (pad, conv, center-crop-pad); default: all.
    #[arg(long = "op")]
    ops: Vec<String>,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Also write every figure as JSON to target/bench/bench.json (or
    /// `--json-path`), for CI to keep.
    #[arg(long)]
    json: bool,
    /// Where `--json` writes.
    #[arg(long, requires = "json")]
    json_path: Option<std::path::PathBuf>,
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

/// Keeps freed memory in the process (no unmapping of large blocks, no heap
/// trimming). On this kind of machine a page fault costs far more than the
/// copy into the page, so a fresh 6 MB output can cost more than the
/// convolution. onnxruntime reuses memory through its arena; this gives our
/// side, and the plain-copy reference, the same footing.
fn retain_freed_memory() {
    // SAFETY: mallopt only tunes glibc's allocator; it is called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

pub fn run(args: Args) -> Result<()> {
    retain_freed_memory();
    let threads = rayon_threads();
    let (peak_one, isa) = crate::fma_peak::single_core();
    let peak_all = crate::fma_peak::all_cores(threads);
    println!(
        "FMA peak ({isa}, measured): {:.1} GFLOP/s on one core, {:.1} GFLOP/s on {threads} threads",
        peak_one / 1e9,
        peak_all / 1e9
    );
    println!();
    let mut figures = Figures {
        peak_one_core_gflops: peak_one / 1e9,
        peak_all_cores_gflops: peak_all / 1e9,
        threads,
        isa: isa.to_string(),
        ..Figures::default()
    };
    let want =
        |op: &str| args.ops.is_empty() || args.ops.iter().any(|o| o.eq_ignore_ascii_case(op));
    if want("pad") {
        bench_pad(args.reps)?;
    }
    if want("center-crop-pad") || want("ccp") {
        bench_center_crop_pad(args.reps)?;
    }
    if want("conv") {
        bench_conv(args.reps, &mut figures)?;
    }
    if args.json {
        let path = args
            .json_path
            .unwrap_or_else(|| crate::target_dir().join("bench").join("bench.json"));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nfigures: {}", path.display());
    }
    Ok(())
}

/// Every figure of one bench run, as `--json` writes it.
#[derive(serde::Serialize, Default)]
struct Figures {
    isa: String,
    threads: usize,
    peak_one_core_gflops: f64,
    peak_all_cores_gflops: f64,
    conv: Vec<ConvFigure>,
}

/// One Conv shape at one thread count, ours against onnxruntime.
#[derive(serde::Serialize)]
struct ConvFigure {
    shape: String,
    threads: usize,
    gflop: f64,
    ours_prepare_ms: f64,
    ours_ms: f64,
    ours_gflops: f64,
    ours_share_of_peak: f64,
    onnxruntime_session_ms: f64,
    onnxruntime_ms: f64,
    onnxruntime_gflops: f64,
    onnxruntime_share_of_peak: f64,
    /// onnxruntime time / our time: above 1.0 we are faster.
    ratio: f64,
}

fn bench_pad(reps: usize) -> Result<()> {
    /// The medians of `reps` runs each of `a` and `b`, run in turn after a
    /// warm-up run of each.
    fn alternating_medians(
        reps: usize,
        a: &mut dyn FnMut(),
        b: &mut dyn FnMut(),
    ) -> (Duration, Duration) {
        a();
        b();
        let mut times = (Vec::new(), Vec::new());
        for _ in 0..reps.max(1) {
            let t = Instant::now();
            a();
            times.0.push(t.elapsed());
            let t = Instant::now();
            b();
            times.1.push(t.elapsed());
        }
        times.0.sort();
        times.1.sort();
        (times.0[times.0.len() / 2], times.1[times.1.len() / 2])
    }

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
    }
    Ok(())
}

fn bench_center_crop_pad(reps: usize) -> Result<()> {
    use onnx_conformance::ops::center_crop_pad::crop_pad_spec;
    let shape = [1usize, 3, 512, 512];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i % 977) as f32).collect();
    let x = Tensor::from_vec(&shape, data.clone());
    let target = Tensor::from_vec(&[4], vec![1i64, 3, 448, 600]);
    let spec = crop_pad_spec(x.shape(), &target, None)?;
    let bytes = n * 4;
    let out_bytes = 3 * 448 * 600 * 4;
    // As for Pad: the copy runs between the kernel's runs, so that load
    // from elsewhere on the machine falls on both.
    let mut times = (Vec::new(), Vec::new());
    for rep in 0..=reps.max(1) {
        let t = Instant::now();
        black_box(black_box(&data).to_vec());
        let copy = t.elapsed();
        let t = Instant::now();
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
        // The first round warms up.
        if rep > 0 {
            times.0.push(copy);
            times.1.push(t.elapsed());
        }
    }
    times.0.sort();
    times.1.sort();
    let (copy, t) = (times.0[times.0.len() / 2], times.1[times.1.len() / 2]);
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
    Ok(())
}

/// One Conv shape of the benchmark: (name, N, C, H, W, M, k, stride, pad, group).
type ConvShape = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

const CONV_SHAPES: &[ConvShape] = &[
    ("C64 56x56 M64 3x3 p1", 1, 64, 56, 56, 64, 3, 1, 1, 1),
    ("C3 224x224 M64 7x7 s2 p3", 1, 3, 224, 224, 64, 7, 2, 3, 1),
    ("C256 14x14 M256 3x3 p1", 1, 256, 14, 14, 256, 3, 1, 1, 1),
    (
        "C256 56x56 depthwise 3x3 p1",
        1,
        256,
        56,
        56,
        256,
        3,
        1,
        1,
        256,
    ),
    ("N8 C64 56x56 M64 1x1", 8, 64, 56, 56, 64, 1, 1, 0, 1),
];

fn conv_model(s: &ConvShape) -> (Model, Tensor) {
    let &(_, n, c, h, w, m, k, stride, pad, group) = s;
    let mut seed = 12345u64;
    let mut rnd = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    };
    let weights = Tensor::from_vec(&[m, c / group, k, k], rnd(m * c / group * k * k));
    let bias = Tensor::from_vec(&[m], rnd(m));
    let x = Tensor::from_vec(&[n, c, h, w], rnd(n * c * h * w));
    let attr = Attribute::new;
    let model = Model {
        ir_version: 10,
        opset_import: vec![(String::new(), 22)],
        graph: Graph {
            name: "conv".into(),
            nodes: vec![Node {
                name: "conv".into(),
                op_type: "Conv".into(),
                inputs: vec!["X".into(), "W".into(), "B".into()],
                outputs: vec!["Y".into()],
                attributes: vec![
                    attr("kernel_shape", AttrValue::Ints(vec![k as i64; 2])),
                    attr("strides", AttrValue::Ints(vec![stride as i64; 2])),
                    attr("pads", AttrValue::Ints(vec![pad as i64; 4])),
                    attr("group", AttrValue::Int(group as i64)),
                ],
                ..Node::default()
            }],
            initializers: vec![("W".into(), weights), ("B".into(), bias)],
            inputs: vec![ValueInfo {
                name: "X".into(),
                dtype: Some(DataType::Float),
                shape: Some(
                    vec![n as i64, c as i64, h as i64, w as i64]
                        .into_iter()
                        .map(Some)
                        .collect(),
                ),
            }],
            outputs: vec![ValueInfo {
                name: "Y".into(),
                dtype: Some(DataType::Float),
                shape: None,
            }],
        },
    };
    (model, x)
}

fn bench_conv(reps: usize, figures: &mut Figures) -> Result<()> {
    let dir = crate::target_dir().join("xtask").join("bench");
    std::fs::create_dir_all(&dir)?;
    let env = python::venv(&crate::target_dir(), "ort-venv", python::ORT_REQUIREMENTS)?;
    let script = dir.join("bench_ort.py");
    std::fs::write(&script, include_str!("bench_ort.py"))?;
    let mut cases = Vec::new();
    let mut models = Vec::new();
    for (i, s) in CONV_SHAPES.iter().enumerate() {
        let (model, x) = conv_model(s);
        let path = dir.join(format!("conv_{i}.onnx"));
        std::fs::write(&path, proto::save_model(&model)?)?;
        models.push(serde_json::json!({ "path": path, "inputs": [[s.1, s.2, s.3, s.4]] }));
        cases.push((model, x));
    }
    let all = rayon_threads();
    let counts: Vec<usize> = if all > 1 { vec![1, all] } else { vec![1] };
    for threads in counts {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let mut ours = Vec::new();
        for (model, x) in &cases {
            let limits = Limits::default();
            let inputs = std::slice::from_ref(x);
            // Preparation (kernel choice, weight packing) is per model, as
            // onnxruntime's session creation is; timed on its own.
            let (prep, run) = pool.install(|| -> Result<(Duration, Duration)> {
                let prep = median(reps.min(10), || {
                    black_box(model.prepare(limits).expect("prepare"));
                });
                let prepared = model.prepare(limits)?;
                let run = median(reps, || {
                    black_box(prepared.run(black_box(inputs)).expect("conv"));
                });
                Ok((prep, run))
            })?;
            ours.push((prep, run));
        }
        let config = serde_json::json!({ "threads": threads, "reps": reps, "models": models });
        let out = python::output(
            Command::new(&env.python)
                .arg(&script)
                .arg(config.to_string()),
        )
        .context("timing onnxruntime")?;
        let report: serde_json::Value = serde_json::from_str(&out)?;
        let column = |key: &str| -> Result<Vec<f64>> {
            Ok(report[key]
                .as_array()
                .with_context(|| format!("onnxruntime report lacks {key}"))?
                .iter()
                .filter_map(|v| v.as_f64())
                .collect())
        };
        let (ort, sessions) = (column("times_ms")?, column("session_ms")?);
        let peak = if threads == 1 {
            figures.peak_one_core_gflops
        } else {
            figures.peak_all_cores_gflops
        };
        println!(
            "Conv float32 on {threads} thread(s): ours vs onnxruntime {} (intra_op_num_threads = {threads}); peak {peak:.1} GFLOP/s",
            report["version"].as_str().unwrap_or("?")
        );
        println!(
            "{:<30} {:>9} {:>10} {:>8} {:>6} {:>10} {:>8} {:>6} {:>9}",
            "shape", "prepare", "ours", "GFLOP/s", "peak", "ort", "GFLOP/s", "peak", "ours/ort"
        );
        for (i, s) in CONV_SHAPES.iter().enumerate() {
            let &(_, n, c, h, w, m, k, stride, pad, group) = s;
            let attrs = ConvAttrs {
                strides: Some(vec![stride as i64; 2]),
                pads: Some(vec![pad as i64; 4]),
                group: group as i64,
                ..ConvAttrs::default()
            };
            let g = geometry(&attrs, &[n, c, h, w], &[m, c / group, k, k], None)?;
            let gflop = 2.0 * g.macs() as f64 / 1e9;
            let (prep, run) = ours[i];
            let (ms, o) = (run.as_secs_f64() * 1e3, ort[i]);
            let (ours_gflops, ort_gflops) = (gflop / ms * 1e3, gflop / o * 1e3);
            println!(
                "{:<30} {:>7.3}ms {:>8.3}ms {:>8.1} {:>5.0}% {:>8.3}ms {:>8.1} {:>5.0}% {:>9.2}",
                s.0,
                prep.as_secs_f64() * 1e3,
                ms,
                ours_gflops,
                100.0 * ours_gflops / peak,
                o,
                ort_gflops,
                100.0 * ort_gflops / peak,
                o / ms
            );
            figures.conv.push(ConvFigure {
                shape: s.0.to_string(),
                threads,
                gflop,
                ours_prepare_ms: prep.as_secs_f64() * 1e3,
                ours_ms: ms,
                ours_gflops,
                ours_share_of_peak: ours_gflops / peak,
                onnxruntime_session_ms: sessions.get(i).copied().unwrap_or(f64::NAN),
                onnxruntime_ms: o,
                onnxruntime_gflops: ort_gflops,
                onnxruntime_share_of_peak: ort_gflops / peak,
                ratio: o / ms,
            });
        }
        println!();
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
