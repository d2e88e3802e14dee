//! `cargo xtask <command>`: project automation, one file per command.

mod bench;
mod diff;
mod fetch_cases;
mod fma_peak;
mod fuzz;
mod hide_avx512;
mod ort_path;
mod progress;
mod python;
mod report;
mod schema_diff;
mod scoreboard;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Project automation for onnx-conformance"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the official ONNX backend test cases for the covered operators into cases/.
    FetchCases(fetch_cases::Args),
    /// Run the libFuzzer targets in fuzz/ (nightly + cargo-fuzz) and print their statistics.
    Fuzz(fuzz::Args),
    /// Measure kernel throughput next to references run in the same process or run.
    Bench(bench::Args),
    /// Differential run: random cases through us and another runtime.
    Diff(diff::Args),
    /// Install the pinned onnxruntime wheel and print its shared library's path (for ORT_DYLIB_PATH).
    OrtPath,
    /// Run the conformance suite and write target/conformance/report.{md,json}.
    Report(report::Args),
    /// Run the suite against every runtime: target/scoreboard/{scoreboard.json,index.html}.
    Scoreboard(scoreboard::Args),
    /// Print the schema differences between versions of an operator.
    SchemaDiff(schema_diff::Args),
    /// Run a built program with AVX-512 hidden from CPUID, so that it takes its AVX2 code.
    WithoutAvx512(hide_avx512::Args),
}

/// The workspace root (the xtask crate lives in `<root>/xtask`).
pub fn project_root() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.parent().map(PathBuf::from).unwrap_or(dir)
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"))
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::FetchCases(args) => fetch_cases::run(args),
        Cmd::Fuzz(args) => fuzz::run(args),
        Cmd::Bench(args) => bench::run(args),
        Cmd::Diff(args) => diff::run(args),
        Cmd::OrtPath => ort_path::run(),
        Cmd::Report(args) => report::run(args),
        Cmd::SchemaDiff(args) => schema_diff::run(args),
        Cmd::Scoreboard(args) => scoreboard::run(args),
        Cmd::WithoutAvx512(args) => hide_avx512::run(args),
    }
}
