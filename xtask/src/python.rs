//! A private Python virtual environment under `target/xtask/`, with pinned
//! packages from PyPI. Nothing else is downloaded.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages the case generator needs, pinned so that regenerated cases
/// are byte-identical.
pub const CASE_REQUIREMENTS: &[&str] = &[
    "onnx==1.23.2",
    "numpy==2.4.6",
    "protobuf==7.36.2",
    "ml_dtypes==0.6.0",
    "typing_extensions==4.16.0",
];

/// onnxruntime for benchmarks and differential runs, pinned.
pub const ORT_REQUIREMENTS: &[&str] = &[
    "onnxruntime==1.32.0",
    "numpy==2.4.6",
    "flatbuffers==25.12.19",
    "packaging==26.4",
    "protobuf==7.36.2",
];

pub struct Venv {
    pub python: PathBuf,
}

/// Creates (or reuses) the environment `name` holding exactly `requirements`.
pub fn venv(target: &Path, name: &str, requirements: &[&str]) -> Result<Venv> {
    let dir = target.join("xtask").join(name);
    let python = dir.join("bin").join("python");
    let stamp = dir.join("requirements.txt");
    let wanted = requirements.join("\n");
    if python.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str())
    {
        return Ok(Venv { python });
    }
    let host = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    eprintln!(
        "xtask: creating Python environment {} with {}",
        dir.display(),
        requirements.join(" ")
    );
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    run(Command::new(&host).args(["-m", "venv"]).arg(&dir))
        .with_context(|| format!("creating a virtual environment with {host} (set PYTHON to another interpreter if needed)"))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary",
            ":all:",
        ])
        .args(requirements))
    .context("installing Python packages from PyPI")?;
    std::fs::write(&stamp, wanted)?;
    Ok(Venv { python })
}

pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// Runs a command and returns its standard output.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed with {}", out.status);
    }
    Ok(String::from_utf8(out.stdout)?)
}
