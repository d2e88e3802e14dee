//! `cargo xtask bench --hide-avx512`: the bench run again under a preloaded
//! library (`hide_avx512.c`) that makes CPUID report no AVX-512, so that
//! our kernels and onnxruntime's both take their AVX2 + FMA code. Machines
//! vary from session to session; this measures the AVX2 comparison on
//! whichever one is at hand.

use anyhow::{bail, ensure, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// Set in the rerun's environment, so that it measures instead of
/// rerunning again.
const MARKER: &str = "ONNX_BENCH_AVX512_HIDDEN";

/// glibc's tunable that masks the AVX-512 features from its own choice of
/// string functions.
const GLIBC_HWCAPS: &str =
    "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512ER,-AVX512PF";

/// Whether this process is the rerun.
pub fn active() -> bool {
    std::env::var_os(MARKER).is_some()
}

/// Builds the library and replaces this process with the same command
/// under it.
pub fn rerun() -> Result<()> {
    let library = build()?;
    let mut args = std::env::args_os();
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    args.next();
    // glibc picks its memcpy and memset before any library's constructor
    // runs, from CPUID as it was: its tunable takes AVX-512 out of that
    // choice too (seen in a profile: `__memset_avx512_unaligned_erms`
    // without it, `__memset_avx2_unaligned_erms` with it).
    let tunables = match std::env::var("GLIBC_TUNABLES") {
        Ok(t) if !t.is_empty() => format!("{t}:{GLIBC_HWCAPS}"),
        _ => GLIBC_HWCAPS.to_string(),
    };
    let err = Command::new(exe)
        .args(args)
        .env("LD_PRELOAD", &library)
        .env("GLIBC_TUNABLES", tunables)
        .env(MARKER, "1")
        .exec();
    Err(err).context("rerunning the bench with AVX-512 hidden")
}

/// In the rerun: fails unless AVX-512 is really gone (CPUID faulting may
/// be unavailable, and then the library changes nothing).
pub fn check() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        ensure!(
            !std::arch::is_x86_feature_detected!("avx512f"),
            "--hide-avx512: AVX-512 is still visible (is CPUID faulting, `cpuid_fault` in \
             /proc/cpuinfo, available on this machine?)"
        );
        ensure!(
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
            "--hide-avx512: this CPU has no AVX2 + FMA to fall back on"
        );
        println!("AVX-512 hidden from CPUID (--hide-avx512): both sides run AVX2 + FMA code\n");
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    bail!("--hide-avx512 is for x86-64")
}

/// Compiles `hide_avx512.c` into target/xtask/bench.
fn build() -> Result<PathBuf> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        bail!("--hide-avx512 needs Linux on x86-64 (ARCH_SET_CPUID)");
    }
    let dir = crate::target_dir().join("xtask").join("bench");
    std::fs::create_dir_all(&dir)?;
    let source = dir.join("hide_avx512.c");
    std::fs::write(&source, include_str!("hide_avx512.c"))?;
    let library = dir.join("libhide_avx512.so");
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .context("running cc to build the AVX-512-hiding library")?;
    ensure!(status.success(), "cc failed on {}", source.display());
    Ok(library)
}
