//! Records the versions of the runtime crates this build links, read from
//! `Cargo.lock` (what cargo resolved, not the range `Cargo.toml` allows), as
//! `ONNXC_VERSION_<CRATE>` compile-time variables: each backend reports its
//! runtime's version with every run's results (`Backend::version`), and
//! writing the numbers by hand would drift the day the lock file moves.

use std::path::Path;

/// The crates whose versions backends report.
const RUNTIME_CRATES: &[&str] = &["rten", "candle-onnx", "tract-onnx", "ort"];

fn main() {
    let lock =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed=build.rs");
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
