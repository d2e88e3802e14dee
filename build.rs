//! Sets `cfg(no_avx512)` when the CPU building the crate lacks AVX-512F, so
//! that the tests of our AVX-512 kernels are marked ignored (with the
//! reason) where they cannot run. libtest fixes what is ignored when the
//! tests are compiled; the kernels themselves still choose at run time.
//! Tests are run on the machine that builds them (no cross-compiling here).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_avx512)");
    // The answer depends on the machine, not on the sources: without this
    // line cargo would rerun the script whenever any file of the package
    // (the thousands under cases/ included) changes.
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    if !avx512 {
        println!("cargo::rustc-cfg=no_avx512");
    }
}
