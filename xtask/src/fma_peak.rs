//! This machine's fused multiply-add peak, measured, for `cargo xtask
//! bench`: a kernel's GFLOP/s means little until it is set against what the
//! cores can do at best.
//!
//! The loop keeps enough independent accumulator chains in registers to
//! cover the FMA latency on every port (12 chains: latency 4 x 2-3 ports),
//! never touches memory, and uses the widest vectors the CPU has.

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
