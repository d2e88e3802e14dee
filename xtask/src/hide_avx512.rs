//! Programs run with AVX-512 hidden from CPUID: `cargo xtask without-avx512
//! -- <program> [args]`, and `cargo xtask bench --hide-avx512` (the bench
//! run again so). A preloaded library (`hide_avx512.c`) makes CPUID report
//! no AVX-512, so that our kernels, and onnxruntime's in the bench, take
//! their AVX2 + FMA code: the AVX2 paths judged and measured on whichever
//! machine is at hand, AVX-512 or not.
//!
//! The library's SIGSEGV handler must stay in place: a program that puts its
//! own there (rustc does, for its stack-overflow report) dies at its next
//! CPUID. So run built binaries (a test binary, the bench), not cargo.

use anyhow::{bail, ensure, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only check, in this process, that AVX-512 is hidden (run under the
    /// library by the command itself).
    #[arg(long, hide = true)]
    verify: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Set in the environment of what runs under the library.
const MARKER: &str = "ONNX_AVX512_HIDDEN";

/// glibc picks its memcpy and memset before any library's constructor
/// runs, from CPUID as it was: its tunable takes AVX-512 out of that choice
/// too (seen in a profile: `__memset_avx512_unaligned_erms` without it,
/// `__memset_avx2_unaligned_erms` with it).
const GLIBC_HWCAPS: &str =
    "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512ER,-AVX512PF";

/// `cargo xtask without-avx512`: checks that the library hides AVX-512
/// here (in a child under it), then replaces this process with the
/// command under it.
pub fn run(args: Args) -> Result<()> {
    if args.verify {
        return check();
    }
    let Some((program, rest)) = args.command.split_first() else {
        bail!("without-avx512: no program given (cargo xtask without-avx512 -- <program> [args])");
    };
    let library = build()?;
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    let status = under(&mut Command::new(exe), &library)
        .args(["without-avx512", "--verify"])
        .status()
        .context("checking that AVX-512 is hidden")?;
    ensure!(
        status.success(),
        "without-avx512: AVX-512 could not be hidden here"
    );
    let err = under(&mut Command::new(program), &library)
        .args(rest)
        .exec();
    Err(err).with_context(|| format!("running {program}"))
}

/// Whether this process runs under the library.
pub fn active() -> bool {
    std::env::var_os(MARKER).is_some()
}

/// For the bench: replaces this process with the same command under the
/// library.
pub fn rerun() -> Result<()> {
    let library = build()?;
    let mut args = std::env::args_os();
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    args.next();
    let err = under(&mut Command::new(exe), &library).args(args).exec();
    Err(err).context("rerunning the bench with AVX-512 hidden")
}

/// `cmd` with the library preloaded and glibc told the same.
fn under<'a>(cmd: &'a mut Command, library: &Path) -> &'a mut Command {
    let tunables = match std::env::var("GLIBC_TUNABLES") {
        Ok(t) if !t.is_empty() => format!("{t}:{GLIBC_HWCAPS}"),
        _ => GLIBC_HWCAPS.to_string(),
    };
    cmd.env("LD_PRELOAD", library)
        .env("GLIBC_TUNABLES", tunables)
        .env(MARKER, "1")
}

/// Under the library: fails unless AVX-512 is really gone (CPUID faulting
/// may be unavailable, and then the library changes nothing).
pub fn check() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        ensure!(
            !std::arch::is_x86_feature_detected!("avx512f"),
            "AVX-512 is still visible (is CPUID faulting, `cpuid_fault` in /proc/cpuinfo, \
             available on this machine?)"
        );
        ensure!(
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
            "this CPU has no AVX2 + FMA to fall back on"
        );
        println!("AVX-512 hidden from CPUID: AVX2 + FMA code runs\n");
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    bail!("hiding AVX-512 is for x86-64")
}

/// Compiles `hide_avx512.c` into target/xtask.
fn build() -> Result<PathBuf> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        bail!("hiding AVX-512 needs Linux on x86-64 (ARCH_SET_CPUID)");
    }
    let dir = crate::target_dir().join("xtask");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_without_a_program_is_refused() {
        let err = run(Args {
            verify: false,
            command: vec![],
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("no program given"), "{err:#}");
    }

    /// Outside the library the check sees the CPU as it is: it refuses
    /// wherever AVX-512 is visible, and passes on an AVX2-only CPU.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_check_refuses_while_avx512_is_visible() {
        let visible = std::arch::is_x86_feature_detected!("avx512f");
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        match check() {
            Err(e) => {
                let e = format!("{e:#}");
                assert!(visible || !avx2, "{e}");
                assert!(
                    e.contains(if visible { "still visible" } else { "no AVX2" }),
                    "{e}"
                );
            }
            Ok(()) => assert!(!visible && avx2),
        }
    }
}
