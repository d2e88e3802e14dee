//! `cargo xtask ort-path`: installs the pinned onnxruntime wheel in the
//! xtask's own virtual environment (if needed) and prints the path of the
//! shared library inside it, for `ORT_DYLIB_PATH`.

use crate::python;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The onnxruntime shared library of the pinned wheel, installing it first.
pub fn library() -> Result<PathBuf> {
    let env = python::venv(&crate::target_dir(), "ort-venv", python::ORT_REQUIREMENTS)?;
    let venv = env
        .python
        .parent()
        .and_then(Path::parent)
        .context("venv layout")?;
    let lib = venv.join("lib");
    for py in std::fs::read_dir(&lib).with_context(|| format!("reading {}", lib.display()))? {
        let capi = py?.path().join("site-packages/onnxruntime/capi");
        if let Ok(entries) = std::fs::read_dir(&capi) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("libonnxruntime.so") {
                    return Ok(e.path());
                }
            }
        }
    }
    anyhow::bail!(
        "the onnxruntime wheel in {} holds no libonnxruntime.so",
        venv.display()
    )
}

pub fn run() -> Result<()> {
    println!("{}", library()?.display());
    Ok(())
}
