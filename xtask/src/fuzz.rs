//! `cargo xtask fuzz`: runs the libFuzzer targets in `fuzz/` for a fixed
//! time each, with the flags that make a finding of every panic, overflow
//! and oversized allocation, and prints executions, speed and coverage.
//!
//! libFuzzer builds need a nightly toolchain and cargo-fuzz; this command
//! says so instead of failing obscurely when they are missing.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Every target in `fuzz/fuzz_targets/`.
pub const TARGETS: &[&str] = &[
    "decode_tensor",
    "load_model",
    "run_pad",
    "run_conv",
    "run_center_crop_pad",
    "run_helpers",
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Targets run at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Targets (default: all).
    targets: Vec<String>,
}

struct Stats {
    target: String,
    runs: u64,
    exec_per_sec: u64,
    coverage: String,
    crashed: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let targets: Vec<String> = if args.targets.is_empty() {
        TARGETS.iter().map(|s| s.to_string()).collect()
    } else {
        args.targets.clone()
    };
    for t in &targets {
        if !TARGETS.contains(&t.as_str()) {
            bail!("unknown fuzz target '{t}'; known: {}", TARGETS.join(", "));
        }
    }
    let fuzz_dir = crate::project_root().join("fuzz");
    check_tools()?;
    eprintln!("xtask: building the fuzz targets (nightly, address sanitizer, debug assertions)");
    let status = Command::new("cargo")
        .args(["+nightly", "fuzz", "build", "-a"])
        .current_dir(&fuzz_dir)
        .status()
        .context("running cargo fuzz build")?;
    if !status.success() {
        bail!("cargo fuzz build failed");
    }
    let mut results = Vec::new();
    for chunk in targets.chunks(args.jobs.max(1)) {
        let handles: Vec<_> = chunk
            .iter()
            .map(|t| {
                let (t, dir, secs) = (t.clone(), fuzz_dir.clone(), args.seconds);
                std::thread::spawn(move || run_target(&dir, &t, secs))
            })
            .collect();
        for h in handles {
            results.push(h.join().expect("fuzz thread")?);
        }
    }
    println!(
        "| target | seconds | executions | exec/s | coverage | result |\n|---|---|---|---|---|---|"
    );
    for s in &results {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            s.target,
            args.seconds,
            s.runs,
            s.exec_per_sec,
            s.coverage,
            s.crashed.as_deref().unwrap_or("no finding")
        );
    }
    let crashed: Vec<&Stats> = results.iter().filter(|s| s.crashed.is_some()).collect();
    if !crashed.is_empty() {
        bail!(
            "{} target(s) found a crash; the inputs are in fuzz/artifacts/<target>/ (fix, then keep each in fuzz/regressions/<target>/)",
            crashed.len()
        );
    }
    Ok(())
}

/// Whether `program args` runs and succeeds.
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn check_tools() -> Result<()> {
    if !succeeds("rustup", &["run", "nightly", "rustc", "--version"]) {
        bail!("libFuzzer builds need a nightly toolchain (`rustup toolchain install nightly`)");
    }
    if !succeeds("cargo", &["fuzz", "--version"]) {
        bail!("cargo-fuzz is not installed (`cargo install cargo-fuzz`)");
    }
    Ok(())
}

fn run_target(fuzz_dir: &Path, target: &str, seconds: u64) -> Result<Stats> {
    let corpus = fuzz_dir.join("corpus").join(target);
    std::fs::create_dir_all(&corpus)?;
    let log = crate::target_dir()
        .join("xtask")
        .join(format!("fuzz-{target}.log"));
    std::fs::create_dir_all(log.parent().expect("log folder"))?;
    eprintln!(
        "xtask: fuzzing {target} for {seconds} s (log: {})",
        log.display()
    );
    let out = Command::new("cargo")
        .args(["+nightly", "fuzz", "run", "-a", target])
        .arg(&corpus)
        .arg(fuzz_dir.join("seeds").join(target))
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        // The targets run under 1 MiB limits: any allocation this large is
        // one the limits failed to bound.
        .arg("-malloc_limit_mb=256")
        .arg("-rss_limit_mb=4096")
        .arg("-timeout=10")
        .arg("-print_final_stats=1")
        .current_dir(fuzz_dir)
        .output()
        .with_context(|| format!("running cargo fuzz run {target}"))?;
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    std::fs::write(&log, &text)?;
    let stat = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let coverage = text
        .lines()
        .rev()
        .find_map(|l| l.split(" cov: ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("?")
        .to_string();
    let crashed = (!out.status.success()).then(|| {
        text.lines()
            .find(|l| l.contains("panicked at") || l.contains("ERROR: "))
            .unwrap_or("the fuzzer exited with an error")
            .trim()
            .to_string()
    });
    Ok(Stats {
        target: target.to_string(),
        runs: stat("stat::number_of_executed_units:"),
        exec_per_sec: stat("stat::average_exec_per_sec:"),
        coverage,
        crashed,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_target_file_is_listed() {
        let dir = crate::project_root().join("fuzz/fuzz_targets");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.trim_end_matches(".rs").to_string()
            })
            .collect();
        files.sort();
        let mut listed: Vec<String> = super::TARGETS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(files, listed);
    }
}
