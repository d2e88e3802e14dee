//! This machine's fused multiply-add peak, measured, for `cargo xtask
//! bench`: a kernel's GFLOP/s means little until it is set against what the
//! cores can do at best.
//!
//! The loop keeps enough independent accumulator chains in registers to
//! cover the FMA latency on every port (12 chains: latency 4 x 2-3 ports),
//! never touches memory, and uses the widest vectors the CPU has. A second
//! loop runs the dense Conv tile's step from L1 (its loads with its FMAs),
//! the limit on cores whose loads take FMA slots.

use std::time::Instant;

/// Floating-point operations per second (an FMA counts two) of one core,
/// and the instruction set measured.
pub fn single_core() -> (f64, &'static str) {
    // Best of several: a slice of the time may go to another process.
    let (mut best, mut isa) = (0f64, "scalar");
    for _ in 0..5 {
        let (f, i) = once();
        if f > best {
            (best, isa) = (f, i);
        }
    }
    (best, isa)
}

/// The same loop on `threads` threads at once: the machine's peak, lower
/// than cores x one core when the clock drops with every core busy.
pub fn all_cores(threads: usize) -> f64 {
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let flops: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(count_flops)).collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        best = best.max(flops / t.elapsed().as_secs_f64());
    }
    best
}

/// Floating-point operations per second of one core running the step of
/// the dense Conv register tile (`direct_lanes.rs` in the library) with
/// its operands in L1: per step, the weights of the tile's channels loaded
/// as 4 vectors, one broadcast per position (6 with AVX-512, 3 with AVX2),
/// and an FMA for each (vector, position) pair. onnxruntime's AVX-512
/// NCHWc kernel takes the same step. None where neither instruction set
/// runs. On cores where loads take FMA slots (an Intel Xeon of family 6
/// model 167: 68-88% of the FMA peak) this, not the FMA peak, is what a
/// register-tiled convolution can reach; on a Zen 4 it is the FMA peak.
pub fn tile_step_single_core() -> Option<f64> {
    let mut best: Option<f64> = None;
    for _ in 0..5 {
        let t = Instant::now();
        let (flops, sum) = tile_steps(TILE_STEPS)?;
        std::hint::black_box(sum);
        let rate = flops / t.elapsed().as_secs_f64();
        best = Some(best.map_or(rate, |b| b.max(rate)));
    }
    best
}

/// Steps of [`tile_step_single_core`]'s loop per measurement (about 25 ms
/// on a 3.5 GHz core with two FMA units).
const TILE_STEPS: usize = 4_000_000;

/// The weights (16 KiB) and the inputs the loop reads, both in L1, and
/// values whose products and sums stay exact in f32 for short runs.
const TILE_WEIGHT: f32 = 0.5;
const TILE_INPUT: f32 = 0.25;

/// Runs `steps` steps of the tile loop on the widest instruction set the
/// CPU has: the floating-point operations done and the sum of every
/// accumulator lane at the end.
fn tile_steps(steps: usize) -> Option<(f64, f32)> {
    let w = vec![TILE_WEIGHT; 4096];
    let x = vec![TILE_INPUT; 1024];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked).
            let sum = unsafe { tile_loop_avx512(&w, &x, steps) };
            return Some((steps as f64 * 24.0 * 16.0 * 2.0, sum));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked).
            let sum = unsafe { tile_loop_avx2(&w, &x, steps) };
            return Some((steps as f64 * 12.0 * 8.0 * 2.0, sum));
        }
    }
    let _ = (w, x, steps);
    None
}

/// 6 positions x 4 vectors of 16: 24 accumulators, 4 weight vectors and a
/// broadcast in AVX-512's 32 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_loop_avx512(w: &[f32], x: &[f32], steps: usize) -> f32 {
    use std::arch::x86_64::*;
    assert!(w.len() >= 4096 && x.len() >= 512 + 6);
    let mut acc = [[_mm512_setzero_ps(); 4]; 6];
    for s in 0..steps {
        // SAFETY: `s % 64` blocks of 64 lie in `w`, `s % 512 + 6` in `x`.
        let (wp, xp) = unsafe { (w.as_ptr().add((s % 64) * 64), x.as_ptr().add(s % 512)) };
        let wv: [__m512; 4] = std::array::from_fn(|v| unsafe { _mm512_loadu_ps(wp.add(v * 16)) });
        for (i, row) in acc.iter_mut().enumerate() {
            let b = _mm512_set1_ps(unsafe { *xp.add(i) });
            for (a, wv) in row.iter_mut().zip(wv) {
                *a = _mm512_fmadd_ps(wv, b, *a);
            }
        }
    }
    let mut sum = _mm512_setzero_ps();
    for a in acc.iter().flatten() {
        sum = _mm512_add_ps(sum, *a);
    }
    _mm512_reduce_add_ps(sum)
}

/// 3 positions x 4 vectors of 8: 12 accumulators, the 3 broadcasts and a
/// weight vector in AVX2's 16 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_loop_avx2(w: &[f32], x: &[f32], steps: usize) -> f32 {
    use std::arch::x86_64::*;
    assert!(w.len() >= 4096 && x.len() >= 512 + 3);
    let mut acc = [[_mm256_setzero_ps(); 4]; 3];
    for s in 0..steps {
        // SAFETY: `s % 128` blocks of 32 lie in `w`, `s % 512 + 3` in `x`.
        let (wp, xp) = unsafe { (w.as_ptr().add((s % 128) * 32), x.as_ptr().add(s % 512)) };
        let b: [__m256; 3] = std::array::from_fn(|i| _mm256_set1_ps(unsafe { *xp.add(i) }));
        for v in 0..4 {
            let wv = unsafe { _mm256_loadu_ps(wp.add(v * 8)) };
            for (row, b) in acc.iter_mut().zip(b) {
                row[v] = _mm256_fmadd_ps(wv, b, row[v]);
            }
        }
    }
    let mut lanes = [0f32; 8];
    let mut sum = _mm256_setzero_ps();
    for a in acc.iter().flatten() {
        sum = _mm256_add_ps(sum, *a);
    }
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().sum()
}

fn once() -> (f64, &'static str) {
    let t = Instant::now();
    let flops = count_flops();
    (flops / t.elapsed().as_secs_f64(), isa_name())
}

fn isa_name() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "AVX-512";
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "AVX2+FMA";
        }
    }
    "scalar"
}

/// Runs the loop once (about 50 ms on a 3 GHz core) and returns the
/// floating-point operations it did.
fn count_flops() -> f64 {
    const ITERS: u64 = 4_000_000;
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked).
            let sink = unsafe { fma_loop_avx512(ITERS) };
            std::hint::black_box(sink);
            return ITERS as f64 * 12.0 * 16.0 * 2.0;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked).
            let sink = unsafe { fma_loop_avx2(ITERS) };
            std::hint::black_box(sink);
            return ITERS as f64 * 12.0 * 8.0 * 2.0;
        }
    }
    let mut acc = [1.0f32; 12];
    for _ in 0..ITERS {
        for a in acc.iter_mut() {
            *a = a.mul_add(0.999_999, 1e-7);
        }
    }
    std::hint::black_box(acc);
    ITERS as f64 * 12.0 * 2.0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_avx2(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let (m, c) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, m, c);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for a in acc {
        sum = _mm256_add_ps(sum, a);
    }
    _mm256_cvtss_f32(sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_loop_avx512(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let (m, c) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
    let mut acc = [_mm512_set1_ps(1.0); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, m, c);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for a in acc {
        sum = _mm512_add_ps(sum, a);
    }
    _mm512_reduce_add_ps(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tile loop does the multiply-adds it counts: every product is
    /// TILE_WEIGHT x TILE_INPUT, exact in f32, and so are the sums of a
    /// short run, so the lanes' total is the count of FMA lanes times it.
    #[test]
    fn the_tile_loop_does_the_fmas_it_counts() {
        let steps = 1000;
        let Some((flops, sum)) = tile_steps(steps) else {
            return;
        };
        let lanes = flops / 2.0;
        assert_eq!(lanes % steps as f64, 0.0);
        assert_eq!(sum as f64, lanes * (TILE_WEIGHT * TILE_INPUT) as f64);
    }
}
