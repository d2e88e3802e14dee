//! The `conformance` test target: one libtest-mimic trial per case and data
//! set, named `<source>/<case>` (data set N > 0 adds `#N`).
//!
//! `ONNX_CASES` (`:`-separated folders) replaces the default `cases/`.
//! `ONNX_BACKEND` picks the runtime under test (default: ours).

mod compare;
mod discover;
mod expectations;
mod run_case;

use anyhow::{bail, Result};
use expectations::{Expect, Expectations};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use onnx_conformance::backend::{Backend, Ours};
use std::path::PathBuf;
use std::sync::Arc;

fn main() {
    let args = Arguments::from_args();
    let trials = match trials() {
        Ok(t) => t,
        Err(e) => vec![Trial::test("discovery", move || {
            Err(format!("{e:#}").into())
        })],
    };
    libtest_mimic::run(&args, trials).exit();
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target"))
}

fn backend() -> Result<Arc<dyn Backend>> {
    let name = std::env::var("ONNX_BACKEND").unwrap_or_else(|_| "ours".to_string());
    match name.as_str() {
        "" | "ours" => Ok(Arc::new(Ours::default())),
        other => bail!("unknown ONNX_BACKEND '{other}' (this build knows: ours)"),
    }
}

fn trials() -> Result<Vec<Trial>> {
    let default_root = manifest_dir().join("cases");
    let roots = discover::roots(&default_root);
    let using_default = roots == [default_root.clone()];
    let cases = discover::discover(&roots)?;
    let expectations = Arc::new(Expectations::load(&default_root.join("expectations.toml"))?);
    let backend = backend()?;
    let target = target_dir();
    let mut trials = Vec::new();
    let mut names = Vec::new();
    for case in cases {
        let case = Arc::new(case);
        if case.data_sets.is_empty() {
            let id = case.id();
            let dir = case.dir.display().to_string();
            trials.push(Trial::test(id.clone(), move || {
                Err(format!("case {id} ({dir}) has no test_data_set_* folder").into())
            }));
            names.push(case.id());
            continue;
        }
        for ds in 0..case.data_sets.len() {
            let name = if ds == 0 {
                case.id()
            } else {
                format!("{}#{ds}", case.id())
            };
            let expect = expectations.lookup(&name, backend.name());
            let (case, backend, target) = (case.clone(), backend.clone(), target.clone());
            names.push(name.clone());
            trials.push(Trial::ignorable_test(name, move || {
                outcome(expect, || {
                    run_case::check(&case, ds, backend.as_ref(), &target)
                })
            }));
        }
    }
    if using_default {
        let stale: Vec<String> = expectations
            .unused(&names, backend.name())
            .iter()
            .map(|e| format!("{} ({})", e.trial, e.reason))
            .collect();
        trials.push(Trial::test("expectations/no-stale-entries", move || {
            if stale.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "cases/expectations.toml lists entries that match no trial; remove them:\n  {}",
                    stale.join("\n  ")
                )
                .into())
            }
        }));
    }
    Ok(trials)
}

/// Applies the expectation to a trial's result.
fn outcome(expect: Expect, run: impl FnOnce() -> Result<()>) -> Result<Completion, Failed> {
    match expect {
        Expect::Skip(reason) => Ok(Completion::ignored_with(format!("skipped: {reason}"))),
        Expect::Pass => run().map(|()| Completion::Completed).map_err(|e| format!("{e:#}").into()),
        Expect::Fail(reason) => match run() {
            Ok(()) => Err(format!(
                "listed as an expected failure ({reason}) but it passes: remove it from cases/expectations.toml"
            )
            .into()),
            Err(_) => Ok(Completion::ignored_with(format!("expected failure: {reason}"))),
        },
    }
}
