//! `cargo xtask bench`: kernel throughput next to references measured in the
//! same run. Release build; numbers are medians of repeated runs.

mod conv;
mod load;
mod pad;

use anyhow::{Context, Result};
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
    /// Hide AVX-512 from CPUID, for this process and onnxruntime's, so
    /// that both sides run their AVX2 + FMA kernels: the AVX2 comparison on
    /// an AVX-512 machine (Linux on x86-64 with CPUID faulting, and a C
    /// compiler `cc`).
    #[arg(long)]
    hide_avx512: bool,
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

/// All threads' FMA peak below this multiple of one core's means the
/// threads shared cores: two free cores measured 1.8-2.2x here, two threads
/// on one core 0.9-1.2x.
const SHARED_CORES_BELOW: f64 = 1.5;

pub fn run(args: Args) -> Result<()> {
    if args.hide_avx512 && !crate::hide_avx512::active() {
        return crate::hide_avx512::rerun();
    }
    if args.hide_avx512 {
        crate::hide_avx512::check()?;
    }
    retain_freed_memory();
    let threads = rayon_threads();
    let (peak_one, isa) = crate::fma_peak::single_core();
    let peak_all = crate::fma_peak::all_cores(threads);
    let tile_step = crate::fma_peak::tile_step_single_core();
    println!(
        "FMA peak ({isa}, measured): {:.1} GFLOP/s on one core, {:.1} GFLOP/s on {threads} threads",
        peak_one / 1e9,
        peak_all / 1e9
    );
    if let Some(step) = tile_step {
        println!(
            "the dense Conv tile's step with its operands in L1: {:.1} GFLOP/s on one core ({:.0}% of the FMA peak)",
            step / 1e9,
            100.0 * step / peak_one
        );
    }
    println!();
    let mut figures = Figures {
        peak_one_core_gflops: peak_one / 1e9,
        peak_all_cores_gflops: peak_all / 1e9,
        tile_step_one_core_gflops: tile_step.map(|f| f / 1e9),
        threads,
        isa: isa.to_string(),
        avx512_hidden: args.hide_avx512,
        ..Figures::default()
    };
    let want =
        |op: &str| args.ops.is_empty() || args.ops.iter().any(|o| o.eq_ignore_ascii_case(op));
    if want("pad") {
        let watch = load::Watch::start(&[]);
        pad::bench_pad(args.reps, &mut figures)?;
        figures.note_load(watch.finish("Pad", &[]));
        figures.note_cores("Pad");
    }
    if want("center-crop-pad") || want("ccp") {
        let watch = load::Watch::start(&[]);
        pad::bench_center_crop_pad(args.reps, &mut figures)?;
        figures.note_load(watch.finish("CenterCropPad", &[]));
        figures.note_cores("CenterCropPad");
    }
    if want("conv") {
        conv::bench_conv(args.reps, &mut figures)?;
    }
    // The machine's cores again: on a virtual machine two virtual CPUs may
    // share one physical core for a while (seen here: the all-thread peak
    // at one core's), and then every all-thread figure measured that.
    let peak_one_end = crate::fma_peak::single_core().0;
    let peak_all_end = crate::fma_peak::all_cores(threads);
    println!(
        "\nFMA peak at the end: {:.1} GFLOP/s on one core, {:.1} GFLOP/s on {threads} threads",
        peak_one_end / 1e9,
        peak_all_end / 1e9
    );
    figures.peak_one_core_gflops_at_end = peak_one_end / 1e9;
    figures.peak_all_cores_gflops_at_end = peak_all_end / 1e9;
    figures.cores_shared = threads > 1
        && ([(peak_one, peak_all), (peak_one_end, peak_all_end)]
            .iter()
            .any(|&(one, all)| cores_shared(one, all))
            || figures.cores.iter().any(|c| c.cores_shared));
    if figures.cores_shared {
        println!(
            "warning: the {threads} threads ran below {SHARED_CORES_BELOW}x one core's peak at the \
             start or the end of this run or after one of its sections (`cores` in the JSON says \
             which): the CPUs were sharing cores, and the {threads}-thread figures measure that as \
             much as the kernels"
        );
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
pub struct Figures {
    isa: String,
    /// `--hide-avx512`: both sides ran with AVX-512 hidden from CPUID.
    avx512_hidden: bool,
    threads: usize,
    peak_one_core_gflops: f64,
    peak_all_cores_gflops: f64,
    /// The same, measured again after the last figure.
    peak_one_core_gflops_at_end: f64,
    peak_all_cores_gflops_at_end: f64,
    /// One core running the dense Conv tile's step from L1
    /// (`fma_peak::tile_step_single_core`); null without AVX2 or AVX-512.
    tile_step_one_core_gflops: Option<f64>,
    /// True when either measurement had all threads below
    /// `SHARED_CORES_BELOW` times one core: the all-thread figures are then
    /// not the kernels' alone.
    cores_shared: bool,
    copy_speed: Vec<CopyFigure>,
    conv: Vec<ConvFigure>,
    /// Per section, the CPU time that went elsewhere while it ran.
    load: Vec<load::SectionLoad>,
    /// Per section that ran on more than one thread, the FMA peaks
    /// measured right after it.
    cores: Vec<SectionCores>,
}

/// The FMA peaks measured right after a section of the bench: the start
/// and end measurements alone cannot say which sections two virtual CPUs
/// sharing one core for a while fell on (a run here flagged at its end
/// had CenterCropPad, early in it, at 0.67 of the copy, its other runs at
/// 1.3-1.5).
#[derive(serde::Serialize)]
pub struct SectionCores {
    section: String,
    peak_one_core_gflops: f64,
    peak_all_cores_gflops: f64,
    /// All threads below `SHARED_CORES_BELOW` times one core.
    cores_shared: bool,
}

/// Whether all threads' FMA peak `all` says they shared cores, against one
/// core's `one`.
fn cores_shared(one: f64, all: f64) -> bool {
    all < SHARED_CORES_BELOW * one
}

impl Figures {
    /// Measures the cores again after a section that ran our side on more
    /// than one thread, keeps it, and warns when they were shared.
    fn note_cores(&mut self, section: &str) {
        let threads = self.threads;
        if threads <= 1 {
            return;
        }
        let (one, all) = (
            crate::fma_peak::single_core().0,
            crate::fma_peak::all_cores(threads),
        );
        let shared = cores_shared(one, all);
        if shared {
            println!(
                "warning: right after {section}, {threads} threads reached {:.1} GFLOP/s against \
                 one core's {:.1}: the CPUs were sharing cores, and this section's figures on \
                 {threads} threads measure that as much as the kernels",
                all / 1e9,
                one / 1e9
            );
        }
        self.cores.push(SectionCores {
            section: section.into(),
            peak_one_core_gflops: one / 1e9,
            peak_all_cores_gflops: all / 1e9,
            cores_shared: shared,
        });
    }

    /// Keeps a section's load from elsewhere, warning when it is large.
    fn note_load(&mut self, load: Option<load::SectionLoad>) {
        if let Some(load) = load {
            load::warn(&load);
            self.load.push(load);
        }
    }
}

/// A data-movement kernel against a plain copy of the same input bytes
/// (`to_vec` on one thread); both sides allocate their output.
#[derive(serde::Serialize)]
pub struct CopyFigure {
    operator: String,
    case: String,
    copy_ms: f64,
    ours_ms: f64,
    /// copy time / our time: 1.0 is copy speed.
    ratio: f64,
}

impl CopyFigure {
    fn new(operator: &str, case: &str, copy: Duration, ours: Duration) -> CopyFigure {
        CopyFigure {
            operator: operator.into(),
            case: case.into(),
            copy_ms: copy.as_secs_f64() * 1e3,
            ours_ms: ours.as_secs_f64() * 1e3,
            ratio: copy.as_secs_f64() / ours.as_secs_f64(),
        }
    }
}

/// One Conv shape at one thread count, ours against onnxruntime.
#[derive(serde::Serialize)]
pub struct ConvFigure {
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
    /// onnxruntime time / our time, above 1.0 we are faster: the median of
    /// `round_ratios`, each round's two sides timed within a tenth of a
    /// second of each other (`conv::Spread`).
    ratio: f64,
    /// `onnxruntime_ms / ours_ms`, the medians of all of each side's runs:
    /// which of the machine's states each side's median falls in can
    /// decide it (`conv::Spread`).
    ratio_of_medians: f64,
    /// onnxruntime's median over ours per round of alternation, in order:
    /// how far the machine's slow and fast stretches move it.
    round_ratios: Vec<f64>,
    round_ratio_low: f64,
    round_ratio_high: f64,
    /// onnxruntime's fastest run over our fastest.
    best_ratio: f64,
    /// Every timed run of each side, in order (rounds of equal length).
    ours_samples_ms: Vec<f64>,
    onnxruntime_samples_ms: Vec<f64>,
}

/// How long `alternating_medians` keeps alternating, at the least. Thirty
/// pairs of CenterCropPad and its copy span about 4 ms here, Pad's about
/// 30 ms: one slow stretch of one side then sets the median. Six runs of
/// `--op pad --op center-crop-pad` each on a Zen 5 EPYC: CenterCropPad
/// 0.83-1.74 of the copy with 30 pairs per mode, 1.24-1.78 with 300;
/// Pad's modes 0.94-1.29 and 0.91-1.13.
const MIN_ALTERNATION: Duration = Duration::from_millis(500);

/// The medians of at least `reps` runs each of `a` and `b`, run in turn
/// after a warm-up run of each (for [`MIN_ALTERNATION`] at the least), so
/// that load from elsewhere on the machine falls on both sides alike.
fn alternating_medians(
    reps: usize,
    a: &mut dyn FnMut(),
    b: &mut dyn FnMut(),
) -> (Duration, Duration) {
    a();
    b();
    let mut times = (Vec::new(), Vec::new());
    let start = Instant::now();
    while times.0.len() < reps.max(1) || start.elapsed() < MIN_ALTERNATION {
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

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_cores_are_all_threads_below_one_and_a_half_cores() {
        // Two free cores measured 1.8-2.2x one core here, two threads on
        // one core 0.9-1.2x.
        assert!(cores_shared(117.0, 116.5));
        assert!(cores_shared(117.0, 140.0));
        assert!(!cores_shared(117.0, 176.0));
        assert!(!cores_shared(117.0, 228.0));
    }
}
