//! Conv against onnxruntime, on one thread and on all, as shares of the
//! measured FMA peak. The two sides alternate in rounds per shape; on one
//! thread both sides of a round run on the same CPU.

use super::{load, median, rayon_threads, ConvFigure, Figures};
use crate::python;
use anyhow::{bail, Context, Result};
use onnx_conformance::model::{AttrValue, Attribute, Graph, Model, Node, ValueInfo};
use onnx_conformance::ops::conv::{geometry, ConvAttrs};
use onnx_conformance::{proto, DataType, Limits, Tensor};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

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

/// Timed runs per side in one round of alternation between ours and
/// onnxruntime: each round's runs measured alike, while the machine's
/// speed moved by up to 40% from one round to the next (a round is ~0.1 s
/// here); the more rounds, the more evenly both sides meet its slow and
/// fast stretches.
const PER_ROUND: usize = 3;
/// The fewest rounds per shape, for small `--reps`.
const MIN_ROUNDS: usize = 5;

/// The pause before each side's round.
const SETTLE: Duration = Duration::from_millis(50);

/// How the two sides' times spread over a shape's rounds: the machine's
/// speed moves from round to round (both sides alike within a round), so a
/// ratio of medians near 1.0 says little without these.
///
/// The ratio the bench reports is the median of the rounds' ratios, each
/// a comparison of the two sides in the same stretch of the machine. The
/// ratio of the two sides' medians over all their runs compares one
/// side's typical state with the other's: on the Zen 4 of 2026-12-07,
/// where two threads ran at one thread's speed in some rounds and at two
/// threads' in others, both sides' runs fell into those two modes, and
/// with ten rounds the median of one side landed in the slow mode and the
/// other's in the fast one. N8 C64 1x1 on two threads: every round's ratio
/// 0.97-1.28 (eight of ten at 1.14 or more, median 1.24), ours 1.18-1.56
/// ms in four rounds and 2.13-2.63 in six, onnxruntime's 1.41-1.86 in
/// five and 2.56-2.82 in five, so the ratio of medians came out 0.87; C256
/// 14x14 on two threads in another run, rounds 0.54-1.94 with a median of
/// 1.02, ratio of medians 0.63. Both figures are printed and kept.
struct Spread {
    /// Each round's onnxruntime median over its median of ours.
    round_ratios: Vec<f64>,
    /// Their median (the mean of the middle two for an even count).
    paired: f64,
    /// The lowest and highest of them.
    low: f64,
    high: f64,
    /// onnxruntime's fastest run over our fastest: the two kernels in the
    /// machine's quietest moments.
    best: f64,
    /// Every timed run, in order.
    ours: Vec<f64>,
    theirs: Vec<f64>,
}

impl Spread {
    /// From both sides' runs in rounds of `per_round` each, in order.
    fn new(ours: &[f64], theirs: &[f64], per_round: usize) -> Spread {
        let round_ratios: Vec<f64> = ours
            .chunks(per_round.max(1))
            .zip(theirs.chunks(per_round.max(1)))
            .map(|(o, t)| median_of(&mut t.to_vec()) / median_of(&mut o.to_vec()))
            .collect();
        let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let low = round_ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let high = round_ratios
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let mut sorted = round_ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let paired = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Spread {
            paired,
            low,
            high,
            best: fastest(theirs) / fastest(ours),
            round_ratios,
            ours: ours.to_vec(),
            theirs: theirs.to_vec(),
        }
    }
}

fn median_of(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `bench_ort.py` running with every model's session open, timing one on
/// request.
struct OrtServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Its first line: session creation times and the version.
    hello: serde_json::Value,
}

impl OrtServer {
    fn start(python: &Path, script: &Path, config: &serde_json::Value) -> Result<OrtServer> {
        let mut child = Command::new(python)
            .arg(script)
            .arg(config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut server = OrtServer {
            child,
            stdin,
            stdout,
            hello: serde_json::Value::Null,
        };
        server.hello = server.read().context("onnxruntime did not start")?;
        Ok(server)
    }

    fn read(&mut self) -> Result<serde_json::Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("bench_ort.py ended early (see its error above)");
        }
        serde_json::from_str(&line).with_context(|| format!("bench_ort.py printed {line:?}"))
    }

    /// `reps` timed runs of model `model`, in milliseconds, on CPU `cpu`
    /// only when one is given.
    fn time(&mut self, model: usize, reps: usize, cpu: Option<usize>) -> Result<Vec<f64>> {
        let stdin = self
            .stdin
            .as_mut()
            .context("bench_ort.py's input is closed")?;
        writeln!(
            stdin,
            "{}",
            serde_json::json!({ "model": model, "reps": reps, "cpu": cpu })
        )?;
        stdin.flush()?;
        let reply = self.read()?;
        Ok(reply["samples_ms"]
            .as_array()
            .context("onnxruntime reply lacks samples_ms")?
            .iter()
            .filter_map(|v| v.as_f64())
            .collect())
    }

    fn session_ms(&self) -> Result<Vec<f64>> {
        Ok(self.hello["session_ms"]
            .as_array()
            .context("onnxruntime reply lacks session_ms")?
            .iter()
            .filter_map(|v| v.as_f64())
            .collect())
    }

    fn finish(mut self) -> Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            bail!("bench_ort.py failed with {status}");
        }
        Ok(())
    }
}

pub fn bench_conv(reps: usize, figures: &mut Figures) -> Result<()> {
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
    let cpus = one_cpu_per_round();
    let counts: Vec<usize> = if all > 1 { vec![1, all] } else { vec![1] };
    for threads in counts {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let config = serde_json::json!({ "threads": threads, "models": models });
        let mut ort = OrtServer::start(&env.python, &script, &config)?;
        if figures.avx512_hidden && ort.hello["avx512f"] != serde_json::Value::Bool(false) {
            bail!(
                "--hide-avx512: onnxruntime's process still sees AVX-512 (it reported {})",
                ort.hello["avx512f"]
            );
        }
        // The server's CPU time is the bench's own.
        let server = [ort.child.id()];
        let watch = load::Watch::start(&server);
        let mut ours = Vec::new();
        let mut ort_ms = Vec::new();
        let mut spreads = Vec::new();
        for (i, (model, x)) in cases.iter().enumerate() {
            let limits = Limits::default();
            let inputs = std::slice::from_ref(x);
            // Preparation (kernel choice, weight packing) is per model, as
            // onnxruntime's session creation is; timed on its own.
            let prep = pool.install(|| {
                median(reps.min(10), || {
                    black_box(model.prepare(limits).expect("prepare"));
                })
            });
            let prepared = model.prepare(limits)?;
            // Rounds alternate between the two sides, so that a slow stretch
            // of the machine hits both; each side's figure is the median of
            // all its samples.
            let rounds = reps.div_ceil(PER_ROUND).max(MIN_ROUNDS);
            let per_round = reps.div_ceil(rounds).max(1);
            let (mut mine, mut theirs) = (Vec::new(), Vec::new());
            for round in 0..rounds {
                // On one thread both sides of a round run on the same CPU,
                // a different one each round (see `one_cpu_per_round`).
                let cpu = (threads == 1 && !cpus.is_empty()).then(|| cpus[round % cpus.len()]);
                // Each side's pool threads spin for a while after their
                // work (onnxruntime's by default): a pause between sides
                // lets them stop before the other side is timed.
                std::thread::sleep(SETTLE);
                pool.install(|| {
                    if let Some(cpu) = cpu {
                        pin_current_thread(cpu);
                    }
                    black_box(prepared.run(black_box(inputs)).expect("conv"));
                    for _ in 0..per_round {
                        let t = Instant::now();
                        black_box(prepared.run(black_box(inputs)).expect("conv"));
                        mine.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                });
                theirs.extend(ort.time(i, per_round, cpu)?);
            }
            spreads.push(Spread::new(&mine, &theirs, per_round));
            ours.push((prep, Duration::from_secs_f64(median_of(&mut mine) / 1e3)));
            ort_ms.push(median_of(&mut theirs));
        }
        let (report, sessions) = (ort.hello.clone(), ort.session_ms()?);
        let section_load = watch.finish(&format!("Conv on {threads} thread(s)"), &server);
        ort.finish()?;
        let ort = ort_ms;
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
            "{:<30} {:>9} {:>10} {:>8} {:>6} {:>10} {:>8} {:>6} {:>9} {:>11} {:>6} {:>8}",
            "shape",
            "prepare",
            "ours",
            "GFLOP/s",
            "peak",
            "ort",
            "GFLOP/s",
            "peak",
            "ours/ort",
            "rounds",
            "best",
            "medians"
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
                "{:<30} {:>7.3}ms {:>8.3}ms {:>8.1} {:>5.0}% {:>8.3}ms {:>8.1} {:>5.0}% {:>9.2} {:>11} {:>6.2} {:>8.2}",
                s.0,
                prep.as_secs_f64() * 1e3,
                ms,
                ours_gflops,
                100.0 * ours_gflops / peak,
                o,
                ort_gflops,
                100.0 * ort_gflops / peak,
                spreads[i].paired,
                format!("{:.2}-{:.2}", spreads[i].low, spreads[i].high),
                spreads[i].best,
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
                ratio: spreads[i].paired,
                ratio_of_medians: o / ms,
                round_ratios: spreads[i].round_ratios.clone(),
                round_ratio_low: spreads[i].low,
                round_ratio_high: spreads[i].high,
                best_ratio: spreads[i].best,
                ours_samples_ms: spreads[i].ours.clone(),
                onnxruntime_samples_ms: spreads[i].theirs.clone(),
            });
        }
        figures.note_load(section_load);
        if threads > 1 {
            figures.note_cores(&format!("Conv on {threads} threads"));
        }
        println!();
    }
    Ok(())
}

/// The CPUs this process may run on, for pinning one-thread rounds.
///
/// This machine's CPUs are not equally fast at a given moment: pinned runs
/// of the same kernel, 0.2 s apart, were 1.5x apart on one CPU against the
/// other, and which CPU was the slow one changed within seconds. Left to the
/// scheduler, our pool thread and onnxruntime's process each stay on the
/// CPU they last ran on, often not the same one, so a run's one-thread
/// ratio measured the CPUs as much as the kernels. Empty where the set
/// cannot be read (then nothing is pinned).
#[cfg(target_os = "linux")]
fn one_cpu_per_round() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set the call fills in.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(not(target_os = "linux"))]
fn one_cpu_per_round() -> Vec<usize> {
    Vec::new()
}

/// Keeps the calling thread on `cpu` (one of [`one_cpu_per_round`]'s); says
/// so once when it cannot, since the one-thread figures are then unpinned.
#[cfg(target_os = "linux")]
fn pin_current_thread(cpu: usize) {
    // SAFETY: as above; pid 0 is the calling thread.
    let failed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
    };
    if failed {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "xtask: could not pin the bench thread to CPU {cpu} ({}): one-thread rounds run unpinned",
                std::io::Error::last_os_error()
            )
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_keeps_every_run_and_the_extremes_of_the_rounds() {
        // Two rounds of three runs: in the second the machine is slow for
        // us (4 ms) and less so for onnxruntime (3 ms). Each round's ratio
        // is of its medians (the middle run), not of its means.
        let ours = [2.2, 2.0, 9.0, 4.0, 4.4, 4.2];
        let theirs = [2.1, 2.2, 2.0, 3.3, 3.0, 3.15];
        let s = Spread::new(&ours, &theirs, 3);
        assert_eq!(s.round_ratios, vec![2.1 / 2.2, 3.15 / 4.2]);
        assert_eq!((s.low, s.high), (3.15 / 4.2, 2.1 / 2.2));
        assert_eq!(s.best, 2.0 / 2.0);
        assert_eq!(
            (s.ours.as_slice(), s.theirs.as_slice()),
            (&ours[..], &theirs[..])
        );
        // Two rounds: the reported ratio is the mean of the middle two.
        assert_eq!(s.paired, (2.1 / 2.2 + 3.15 / 4.2) / 2.0);
    }

    /// The reported ratio pairs the sides round by round: where the
    /// machine runs in two modes and one side's median falls in the slow
    /// one and the other's in the fast one, the ratio of the medians says
    /// the faster side is slower, and the paired median does not.
    #[test]
    fn the_ratio_pairs_the_rounds() {
        // Five rounds of one run each; ours is 20% faster when both sides
        // meet the same mode, but three of its five runs met the slow mode
        // (twice the time) and two of onnxruntime's.
        let slow = [true, true, false, true, false];
        let ours: Vec<f64> = slow.iter().map(|&s| if s { 2.0 } else { 1.0 }).collect();
        let theirs: Vec<f64> = [true, false, false, true, false]
            .iter()
            .map(|&s| if s { 2.4 } else { 1.2 })
            .collect();
        let s = Spread::new(&ours, &theirs, 1);
        let ratio_of_medians = median_of(&mut theirs.clone()) / median_of(&mut ours.clone());
        // The medians: ours 2.0 (slow), theirs 1.2 (fast), 0.6. Round 2
        // pairs our slow run with their fast one (0.6); the other four
        // rounds meet one mode on both sides and give 1.2.
        assert!((ratio_of_medians - 0.6).abs() < 1e-12);
        assert!((s.paired - 1.2).abs() < 1e-12, "{}", s.paired);
        assert!((s.low - 0.6).abs() < 1e-12 && (s.high - 1.2).abs() < 1e-12);
    }
}
