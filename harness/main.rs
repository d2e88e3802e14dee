//! The `conformance` test target: one libtest-mimic trial per case and data
//! set, named `<source>/<case>` (data set N > 0 adds `#N`), plus one trial
//! per other version of the case's operator, `<source>/<case>@<Op>-<version>`.
//!
//! `ONNX_CASES` (`:`-separated folders) replaces the default `cases/`.
//! `ONNX_BACKEND` picks the runtime under test (default: ours).
//! `ONNX_TRIAL_TIMEOUT=<seconds>` records a trial that runs longer as a
//! timeout. `ONNX_REPORT=<file>` writes every trial's outcome as JSON (used by
//! `cargo xtask report`). `ONNX_LIMITS=name=value,...` overrides resource
//! limits (`Limits::with_overrides`).
//!
//! A case folder with `expected_error.toml` is invalid input: its trial
//! passes when the input is rejected with the expected error (`invalid.rs`).

mod cli;
mod discover;
mod expectations;
mod invalid;
mod reading;
mod record;
mod run_case;
mod timeout;
mod variants;

use anyhow::{bail, Result};
use cli::Cli;
use expectations::{Expect, Expectations, Explained};
use libtest_mimic::{Completion, Failed, Trial};
use onnx_conformance::backend::{Backend, Ours};
use onnx_conformance::Limits;
use record::{with, Judgement, Meta, MetaExt, Outcome, Recorder, SuiteListing};
use run_case::{Prepared, Verdict};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn main() {
    let mut cli = Cli::from_env();
    let recorder = Recorder::from_env();
    let (trials, judged) = match trials(&recorder, &cli) {
        Ok(t) => t,
        Err(e) => (
            vec![Trial::test("discovery", move || {
                Err(format!("{e:#}").into())
            })],
            None,
        ),
    };
    let trials = cli.select(trials);
    let conclusion = libtest_mimic::run(&cli.args, trials);
    // Entries that no trial's failure used can only be told after all
    // trials ran, so this check follows the run (and needs a complete one).
    let stale = match judged {
        Some(c) if cli.is_complete() => stale_after_run(&c.expectations, c.backend.name()),
        _ => Vec::new(),
    };
    if let Some(path) = std::env::var_os("ONNX_REPORT") {
        if let Err(e) = recorder.write(Path::new(&path)) {
            eprintln!(
                "could not write the trial report to {}: {e:#}",
                Path::new(&path).display()
            );
        }
    }
    if !stale.is_empty() {
        eprintln!(
            "\nerror: cases/expectations.toml has expected failures that explained no failure in this complete run; \
             make them match the failure they describe, or remove them:\n  {}",
            stale.join("\n  ")
        );
        std::process::exit(101);
    }
    conclusion.exit();
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target"))
}

fn limits() -> Result<Limits> {
    match std::env::var("ONNX_LIMITS") {
        Ok(spec) => Limits::default()
            .with_overrides(&spec)
            .map_err(|e| anyhow::anyhow!("ONNX_LIMITS={spec}: {e}")),
        Err(_) => Ok(Limits::default()),
    }
}

fn backend(limits: Limits) -> Result<Arc<dyn Backend>> {
    let name = std::env::var("ONNX_BACKEND").unwrap_or_else(|_| "ours".to_string());
    match name.as_str() {
        "" | "ours" => Ok(Arc::new(Ours { limits })),
        other => match onnx_conformance::backend::by_name(other) {
            Ok(b) => Ok(Arc::from(b)),
            Err(e) => bail!("ONNX_BACKEND={other}: {e}"),
        },
    }
}

struct Ctx {
    expectations: Expectations,
    backend: Arc<dyn Backend>,
    target: PathBuf,
    recorder: Recorder,
    limits: Limits,
    /// With `--exact`, the trial names asked for: only those are built.
    only: Option<Vec<String>>,
    /// `ONNX_TRIAL_TIMEOUT`: the time limit of one trial's run.
    trial_timeout: Option<std::time::Duration>,
}

impl Ctx {
    /// Whether the trial named `name` (without its reading label) is to be
    /// built.
    fn wants(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| {
            only.iter()
                .any(|n| n.split_once('~').map_or(n.as_str(), |(n, _)| n) == name)
        })
    }

    /// Whether any trial of data set `base` at another version is wanted.
    fn wants_variants_of(&self, base: &str) -> bool {
        self.only.as_ref().is_none_or(|only| {
            only.iter().any(|n| {
                n.strip_prefix(base)
                    .is_some_and(|rest| rest.starts_with('@'))
            })
        })
    }
}

/// The trials, and the context whose expectations they were judged by when
/// the default cases run (staleness is judged for those only).
fn trials(recorder: &Recorder, cli: &Cli) -> Result<(Vec<Trial>, Option<Arc<Ctx>>)> {
    let default_root = manifest_dir().join("cases");
    let roots = discover::roots(&default_root);
    let using_default = roots == [default_root.clone()];
    // `--exact NAME` (how cargo-nextest runs each trial) reads only the
    // cases the names lead to; anything else reads every case.
    let located = cli
        .exact_names()
        .and_then(|names| discover::locate(&roots, names));
    let whole = located.is_none();
    let cases = match &located {
        Some(cases) => cases.clone(),
        None => discover::discover(&roots)?,
    };
    let limits = limits()?;
    let ctx = Arc::new(Ctx {
        expectations: Expectations::load(&default_root.join("expectations.toml"))?,
        backend: backend(limits)?,
        target: target_dir(),
        recorder: recorder.clone(),
        limits,
        only: located
            .as_ref()
            .and(cli.exact_names())
            .map(<[String]>::to_vec),
        trial_timeout: timeout::from_env()?,
    });
    recorder.judging(ctx.backend.clone());
    let mut trials = Vec::new();
    let mut names = Vec::new();
    for case in cases {
        case_trials(&ctx, Arc::new(case), &mut trials, &mut names);
    }
    if using_default && whole {
        // Records of parts of this run (nextest partitions) can then be
        // held to what a whole run is held to when they are merged.
        recorder.list_suite(|| SuiteListing {
            backend: ctx.backend.name().to_string(),
            trials: names.clone(),
            expected_failures: ctx.expectations.ids(ctx.backend.name()),
        });
        let stale: Vec<String> = ctx
            .expectations
            .unused(&names, ctx.backend.name())
            .iter()
            .map(|e| format!("{} ({})", e.trial.as_deref().unwrap_or("*"), e.reason))
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
    Ok((trials, using_default.then_some(ctx)))
}

/// Every trial of one case, with their names.
fn case_trials(
    ctx: &Arc<Ctx>,
    case: Arc<discover::Case>,
    trials: &mut Vec<Trial>,
    names: &mut Vec<String>,
) {
    if let Some(problem) = case.layout_error.clone() {
        let id = case.id();
        names.push(id.clone());
        trials.push(Trial::test(id.clone(), move || {
            Err(format!("case {id}: {problem}").into())
        }));
        return;
    }
    if case.expected_error.is_some() {
        trials.push(invalid_trial(ctx, &case, names));
        return;
    }
    if case.data_sets.is_empty() {
        let id = case.id();
        let dir = case.dir.display().to_string();
        names.push(id.clone());
        trials.push(Trial::test(id.clone(), move || {
            Err(format!("case {id} ({dir}) has no test_data_set_* folder").into())
        }));
        return;
    }
    let meta = Meta::of_case(&case);
    for ds in 0..case.data_sets.len() {
        let name = if ds == 0 {
            case.id()
        } else {
            format!("{}#{ds}", case.id())
        };
        if !ctx.wants_variants_of(&name) && !ctx.wants(&name) {
            continue;
        }
        let base = name.clone();
        let name = reading::label(name, meta.later_reading.as_deref());
        names.push(name.clone());
        if ctx.wants(&base) {
            let (c, case2, meta2) = (ctx.clone(), case.clone(), meta.clone().named(&name, false));
            trials.push(trial(ctx, name, meta2, move || {
                run_case::check_verdict(&case2, ds, c.backend.as_ref(), &c.target, c.limits)
            }));
        }
        if !ctx.wants_variants_of(&base) {
            continue;
        }
        // Variants are built here, at discovery: a bug in building them
        // for odd input must fail one trial, not stop the whole run.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut more = Vec::new();
            let t = version_trials(ctx, &case, ds, &meta, &mut more);
            (t, more)
        }));
        match built {
            Ok((t, more)) => {
                trials.extend(t);
                names.extend(more);
            }
            Err(_) => {
                let id = format!("{}@versions", case.id());
                names.push(id.clone());
                trials.push(Trial::test(id.clone(), move || {
                    Err(format!("{id}: building the version variants panicked").into())
                }));
            }
        }
    }
}

/// The `@<Op>-<version>` trials of one data set of a single-node case.
fn version_trials(
    ctx: &Arc<Ctx>,
    case: &Arc<discover::Case>,
    ds: usize,
    meta: &Meta,
    names: &mut Vec<String>,
) -> Vec<Trial> {
    let versions = variants::versions_of(&meta.op);
    if versions.is_empty() {
        return Vec::new();
    }
    let prepared = match run_case::prepare(case, ds, ctx.limits) {
        Ok(p) => p,
        Err(_) => return Vec::new(), // the base trial reports the problem
    };
    let Some((_, from)) = variants::single_node(&prepared.model) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let base = if ds == 0 {
        case.id()
    } else {
        format!("{}#{ds}", case.id())
    };
    for &to in versions.iter().filter(|&&v| v != from) {
        if !ctx.wants(&format!("{base}@{}-{to}", meta.op)) {
            continue;
        }
        let rewritten = variants::at_version(&prepared, from, to);
        let later = rewritten.as_ref().ok().and_then(|p| {
            variants::single_node(&p.model).and_then(|(n, v)| reading::later_reading(n, v))
        });
        let name = reading::label(format!("{base}@{}-{to}", meta.op), later.as_deref());
        names.push(name.clone());
        let mut m = meta.clone().named(&name, true);
        m.version = to;
        m.later_reading = later;
        match rewritten {
            Ok(p) => {
                let c = ctx.clone();
                let label = format!(
                    "case {name} ({} rewritten for {}-{to})",
                    case.dir.display(),
                    meta.op
                );
                let dir = run_case::artifact_dir(&ctx.target, case, &format!("@{}-{to}", meta.op));
                let p: Arc<Prepared> = Arc::new(p);
                out.push(trial(ctx, name, m, move || {
                    run_case::run_prepared(&label, &p, c.backend.as_ref(), &dir)
                }));
            }
            Err(reason) => {
                ctx.recorder
                    .push(m.outcome(Outcome::NotExpressible, Some(reason.clone()), None));
                let r = reason.clone();
                out.push(
                    Trial::ignorable_test(name, move || {
                        Ok(Completion::ignored_with(format!("not expressible: {r}")))
                    })
                    .with_ignored_flag(true),
                );
            }
        }
    }
    out
}

/// The trial of an invalid case: it passes when the input is rejected.
fn invalid_trial(ctx: &Arc<Ctx>, case: &Arc<discover::Case>, names: &mut Vec<String>) -> Trial {
    let name = case.id();
    let expected = invalid::ExpectedError::load(case).ok();
    // The report groups invalid trials in one section, by error kind.
    let mut meta = Meta::of_case(case).named(&name, false);
    meta.op = "invalid input".into();
    meta.version = 0;
    meta.dtype = expected.as_ref().map_or("?".into(), |e| e.kind.clone());
    let about_limits = expected.as_ref().is_some_and(|e| e.is_about_limits());
    let other = ctx.backend.name() != "ours";
    if about_limits && other {
        names.push(name.clone());
        let reason = "about this suite's resource limits, not an ONNX rule".to_string();
        ctx.recorder
            .push(meta.outcome(Outcome::Skipped, Some(reason.clone()), None));
        return Trial::ignorable_test(name, move || Ok(Completion::ignored_with(reason)))
            .with_ignored_flag(true);
    }
    if let Some(quote) = expected
        .as_ref()
        .and_then(|e| e.undefined.clone())
        .filter(|_| other)
    {
        // Whatever the runtime does is allowed: it is run and recorded, not
        // judged, and reported as ignored.
        let (c, case) = (ctx.clone(), case.clone());
        return Trial::ignorable_test(name, move || {
            let seen =
                invalid::run_other(&case, c.backend.as_ref(), c.limits).describe(c.backend.name());
            let message = format!("undefined by the spec ({quote}); {seen}");
            c.recorder
                .push(meta.outcome(Outcome::Undefined, Some(message.clone()), None));
            Ok(Completion::ignored_with(message))
        });
    }
    if other {
        // Cases with limits of their own were skipped above.
        if let Some(reason) = invalid::cannot_run(case, ctx.backend.as_ref(), ctx.limits) {
            ctx.recorder
                .push(meta.outcome(Outcome::CannotRun, Some(reason.clone()), None));
            let r = format!("cannot run: {reason}");
            return Trial::ignorable_test(name, move || Ok(Completion::ignored_with(r)))
                .with_ignored_flag(true);
        }
    }
    // Only judged trials can use an expectation: an entry naming an
    // undefined or unrunnable one matches nothing and is reported as stale.
    names.push(name.clone());
    let (c, case) = (ctx.clone(), case.clone());
    trial(ctx, name, meta, move || {
        invalid::check(&case, c.backend.as_ref(), c.limits)
    })
}

/// A trial that applies the expectations to a run's verdict and records it.
fn trial(
    ctx: &Arc<Ctx>,
    name: String,
    meta: Meta,
    run: impl FnOnce() -> Verdict + Send + 'static,
) -> Trial {
    let expect = ctx.expectations.lookup(&name, ctx.backend.name());
    let c = ctx.clone();
    let trial_name = name.clone();
    Trial::ignorable_test(name, move || {
        let (outcome, result) = match &expect {
            Expect::Skip(reason) => (
                with(Outcome::Skipped, reason, None),
                Ok(Completion::ignored_with(format!("skipped: {reason}"))),
            ),
            Expect::Pass | Expect::Fail(_) => match timeout::run_within(c.trial_timeout, run) {
                Some(v) => judge(&c, &trial_name, &expect, &v),
                None => {
                    let m = format!(
                        "did not finish within {:?} (ONNX_TRIAL_TIMEOUT)",
                        c.trial_timeout.unwrap_or_default()
                    );
                    (with(Outcome::Timeout, &m, None), Err(Failed::from(m)))
                }
            },
        };
        c.recorder.push(outcome.record(&meta));
        result
    })
}

type Judged = (Judgement, Result<Completion, Failed>);

/// Holds a run's verdict to the expectations: a failure passes only when an
/// entry names its kind and message; a listed trial must fail so.
fn judge(c: &Ctx, name: &str, expect: &Expect, v: &Verdict) -> Judged {
    let backend = c.backend.name();
    let (Some(m), Some(kind)) = (v.failure.clone(), v.kind) else {
        return match expect {
            Expect::Fail(listed) => {
                let m = format!(
                    "listed as an expected failure but it passes: remove the entry from cases/expectations.toml ({})",
                    listed.join("; ")
                );
                (
                    with(Outcome::UnexpectedPass, &m, Some(v)),
                    Err(Failed::from(m)),
                )
            }
            _ => match run_case::spec_room(v, backend) {
                Some(Err(m)) => (with(Outcome::Fail, &m, Some(v)), Err(Failed::from(m))),
                Some(Ok(m)) => (
                    with(Outcome::Undefined, &m, Some(v)),
                    Ok(Completion::ignored_with(m)),
                ),
                None => (with(Outcome::Pass, "", Some(v)), Ok(Completion::Completed)),
            },
        };
    };
    if let Some(Explained { reason, id }) =
        c.expectations.explain(name, backend, kind, &m, &v.observed)
    {
        // The record keeps what failed as well as why it is listed: the
        // scoreboard shows a known wrong answer as a wrong answer.
        let record = format!("known ({reason}): [{kind}] {m}");
        let judgement = Judgement {
            explained_by: Some(id),
            ..with(Outcome::ExpectedFailure, &record, Some(v))
        };
        return (
            judgement,
            Ok(Completion::ignored_with(format!(
                "expected {kind} failure: {reason}"
            ))),
        );
    }
    let m = match expect {
        Expect::Fail(listed) => format!(
            "fails another way than cases/expectations.toml expects ({}); it failed with {kind}: {m}",
            listed.join("; ")
        ),
        _ => format!("[{kind}] {m}"),
    };
    (with(Outcome::Fail, &m, Some(v)), Err(Failed::from(m)))
}

/// After a complete run, every expected failure of this backend must have
/// explained a failure: the ones that did not are stale. Returns them,
/// described.
fn stale_after_run(expectations: &Expectations, backend: &str) -> Vec<String> {
    expectations
        .unexplained(backend)
        .iter()
        .map(|e| format!("{} ({})", e.describe(), e.reason))
        .collect()
}
