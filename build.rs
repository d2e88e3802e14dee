//! Two facts about this build, for the library and its tests:
//! - `cfg(no_avx512)` when the CPU building the crate lacks AVX-512F (and
//!   `cfg(no_avx2)` when it lacks AVX2 with FMA), so that the tests of our
//!   kernels for it are marked ignored (with the
//!   reason) where they cannot run. libtest fixes what is ignored when the
//!   tests are compiled; the kernels themselves still choose at run time.
//!   Tests are run on the machine that builds them (no cross-compiling here).
//! - the versions of the runtime crates this build links, read from
//!   `Cargo.lock` (what cargo resolved, not the range `Cargo.toml` allows),
//!   as `ONNXC_VERSION_<CRATE>` compile-time variables: each backend reports
//!   its runtime's version with every run's results (`Backend::version`),
//!   and numbers written by hand would drift the day the lock file moves.

use std::path::Path;

/// The crates whose versions backends report.
const RUNTIME_CRATES: &[&str] = &["rten", "candle-onnx", "tract-onnx", "ort"];

fn main() {
    // Rerun only for these files: the AVX-512 answer depends on the
    // machine, not on the sources, and without the lines cargo would rerun
    // the script whenever any file of the package (the thousands under
    // cases/ included) changes.
    println!("cargo:rerun-if-changed=build.rs");
    avx512();
    runtime_versions();
}

fn avx512() {
    println!("cargo::rustc-check-cfg=cfg(no_avx512)");
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    if !avx512 {
        println!("cargo::rustc-cfg=no_avx512");
    }
    println!("cargo::rustc-check-cfg=cfg(no_avx2)");
    #[cfg(target_arch = "x86_64")]
    let avx2 =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    if !avx2 {
        println!("cargo::rustc-cfg=no_avx2");
    }
}

fn runtime_versions() {
    let lock =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    // Built as a dependency of another workspace (the fuzz crate), the lock
    // file may be elsewhere: the versions are then unknown, not guessed.
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    for krate in RUNTIME_CRATES {
        let versions = locked_versions(&text, krate);
        let value = if versions.is_empty() {
            "unknown".to_string()
        } else {
            versions.join("/")
        };
        let var = krate.to_uppercase().replace('-', "_");
        println!("cargo:rustc-env=ONNXC_VERSION_{var}={value}");
    }
}

/// The versions of `name` in a Cargo.lock (`[[package]]` tables, `name`
/// then `version` lines).
fn locked_versions(lock: &str, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() != format!("name = \"{name}\"") {
            continue;
        }
        if let Some(v) = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("version = \""))
            .and_then(|v| v.strip_suffix('"'))
        {
            found.push(v.to_string());
        }
    }
    found
}
