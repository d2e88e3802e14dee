//! `cargo xtask scoreboard`: the conformance suite against every runtime
//! this project can judge, each run in its own child process (so a runtime
//! that cannot be built, or that takes the whole process down, costs only
//! its own column), gathered into `target/scoreboard/scoreboard.json`, a
//! self-contained `index.html` and a summary table on stdout. Alarms (a
//! runtime that executed nothing, or lost passes against `--baseline`) make
//! the command fail, so CI can gate on it.

mod page;

use anyhow::{bail, Context, Result};
use onnx_conformance::trial_record::{Outcome, TrialRecord, TrialRecords};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Runtimes to run, comma-separated (default: every one in the table).
    #[arg(long, value_delimiter = ',')]
    runtimes: Vec<String>,
    /// An earlier scoreboard.json: adds the "changed since" view and the
    /// pass-drop alarm.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Fail when a runtime has more than this many fewer passes than in the
    /// baseline.
    #[arg(long, default_value_t = 0)]
    max_drop: usize,
    /// Time limit in seconds of one trial (ONNX_TRIAL_TIMEOUT; also
    /// ONNX_COMMAND_TIMEOUT, the limit of one run of a command runtime).
    #[arg(long)]
    trial_timeout: Option<u64>,
    /// Where to write the scoreboard (default: target/scoreboard).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Build the scoreboard from the records an earlier run left in the
    /// output folder (`records-<runtime>.json`, or a folder
    /// `records-<runtime>/` of ONNX_RECORD_DIR records, one subfolder per
    /// part of a split run) instead of running the suite again: to
    /// re-render the page, or gather runs made elsewhere.
    #[arg(long)]
    reuse: bool,
    /// Build the runtimes' suites in release mode. By default they are
    /// debug builds, as `cargo test` and CI run the suite: the expectations
    /// hold for those (a runtime built with overflow checks panics where a
    /// release build misbehaves otherwise), and CI's builds are reused.
    #[arg(long)]
    release: bool,
}

/// What a runtime needs before its run, besides its cargo features.
#[derive(Clone, Copy, Debug)]
enum Setup {
    None,
    /// onnxruntime's shared library (ORT_DYLIB_PATH), from the pinned wheel.
    OrtLibrary,
    /// A program under xtask/src/runtimes/ speaking the command backend's
    /// protocol, run by the Python of the cases venv (which has onnx).
    PythonCommand(&'static str),
}

/// One runtime of the scoreboard (and of `diff --against`): adding a
/// runtime is one entry here.
#[derive(Clone, Copy, Debug)]
pub struct Runtime {
    pub name: &'static str,
    pub features: &'static str,
    /// ONNX_BACKEND, for in-process runtimes; command runtimes compute theirs.
    backend: &'static str,
    setup: Setup,
}

pub const RUNTIMES: &[Runtime] = &[
    Runtime {
        name: "ours",
        features: "",
        backend: "ours",
        setup: Setup::None,
    },
    Runtime {
        name: "onnxruntime",
        features: "onnxruntime",
        backend: "onnxruntime",
        setup: Setup::OrtLibrary,
    },
    Runtime {
        name: "tract",
        features: "tract",
        backend: "tract",
        setup: Setup::None,
    },
    Runtime {
        name: "rten",
        features: "rten",
        backend: "rten",
        setup: Setup::None,
    },
    Runtime {
        name: "candle",
        features: "candle",
        backend: "candle",
        setup: Setup::None,
    },
    Runtime {
        name: "onnx-reference",
        features: "",
        backend: "",
        setup: Setup::PythonCommand("onnx_reference.py"),
    },
];

/// The scoreboard's outcomes: finer than the harness's where a failure's
/// kind matters to a reader (wrong values vs a refusal vs a crash). A
/// failure listed in cases/expectations.toml is still a failure of its kind
/// here, marked `known` (`Row::known`): a reader choosing a runtime needs
/// to see that it computes a wrong answer, not that the answer is expected.
pub const OUTCOMES: &[&str] = &[
    "pass",
    "wrong",
    "error",
    "crash",
    "timeout",
    "undefined",
    "not_applicable",
    "skipped",
    "cannot_run",
];

/// The scoreboard outcome of one trial record.
pub fn outcome_of(r: &TrialRecord) -> &'static str {
    match r.outcome {
        // An expected failure that passed still computed the right thing:
        // for the runtime's standing it is a pass.
        Outcome::Pass | Outcome::UnexpectedPass => "pass",
        Outcome::Fail | Outcome::ExpectedFailure => match r.failure.map(|k| k.name()) {
            // Accepting input that must be refused is wrong behaviour too.
            Some("values") | Some("accepted") => "wrong",
            Some("panic") => "crash",
            Some("timeout") => "timeout",
            _ => "error",
        },
        Outcome::Undefined => "undefined",
        Outcome::NotExpressible => "not_applicable",
        Outcome::Skipped => "skipped",
        Outcome::CannotRun => "cannot_run",
        Outcome::Timeout => "timeout",
    }
}

/// Whether a result shows the runtime actually ran the trial's model (not
/// skipped, not inexpressible, not refused by our own loader before the
/// runtime saw it).
fn executed(row: &Row) -> bool {
    match row.outcome.as_str() {
        "skipped" | "cannot_run" | "not_applicable" => false,
        "error" => !row
            .message
            .as_deref()
            .is_some_and(|m| m.contains("our loader")),
        _ => true,
    }
}

/// One trial of one runtime in scoreboard.json.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub runtime: String,
    pub trial: String,
    pub operator: String,
    pub op_version: i64,
    pub element_type: String,
    pub outcome: String,
    /// The harness's failure kind (values, error, panic, accepted, timeout).
    #[serde(default)]
    pub failure: Option<String>,
    #[serde(default)]
    pub max_abs: Option<f64>,
    #[serde(default)]
    pub bound_units: Option<f64>,
    #[serde(default)]
    pub message: Option<String>,
    /// A failure cases/expectations.toml lists for this runtime (its
    /// reason is in `message`).
    #[serde(default)]
    pub known: bool,
}

/// One runtime's run in scoreboard.json.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RuntimeRun {
    pub name: String,
    pub version: String,
    pub features: String,
    pub backend: String,
    /// `ran`, or `failed` when the run could not be built or died before
    /// writing its records (then `message` says why).
    pub status: String,
    #[serde(default)]
    pub message: Option<String>,
    /// Prefix of the command that reproduces one trial (append the name).
    pub repro: String,
    pub counts: BTreeMap<String, usize>,
    /// How many of its failures (wrong, error, crash, timeout) are known.
    #[serde(default)]
    pub known: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub runtime: String,
    pub trial: String,
    pub before: String,
    pub after: String,
}

/// scoreboard.json's layout version: 2 reports known failures by their kind
/// with `known` set, where 1 had an `expected_failure` outcome.
pub const SCHEMA: u32 = 2;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Scoreboard {
    pub schema: u32,
    /// Seconds since the Unix epoch when the scoreboard was written.
    pub generated_unix: u64,
    pub outcomes: Vec<String>,
    pub runtimes: Vec<RuntimeRun>,
    pub results: Vec<Row>,
    /// With --baseline: the baseline file and what changed since.
    #[serde(default)]
    pub baseline: Option<String>,
    #[serde(default)]
    pub changes: Vec<Change>,
}

pub fn rows_of(runtime: &str, t: &TrialRecords) -> Vec<Row> {
    t.records
        .iter()
        .map(|r| Row {
            runtime: runtime.to_string(),
            trial: r.meta.trial.clone(),
            operator: r.meta.op.clone(),
            op_version: r.meta.version,
            element_type: r.meta.dtype.clone(),
            outcome: outcome_of(r).to_string(),
            failure: r.failure.map(|k| k.name().to_string()),
            max_abs: r.max_abs,
            bound_units: r.bound_units,
            message: r.message.clone(),
            known: r.outcome == Outcome::ExpectedFailure,
        })
        .collect()
}

fn known(rows: &[Row], runtime: &str) -> usize {
    rows.iter()
        .filter(|r| r.runtime == runtime && r.known)
        .count()
}

fn counts(rows: &[Row], runtime: &str) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = OUTCOMES.iter().map(|o| (o.to_string(), 0)).collect();
    for r in rows.iter().filter(|r| r.runtime == runtime) {
        *m.entry(r.outcome.clone()).or_insert(0) += 1;
    }
    m
}

/// Per runtime, the trials whose standing changed against the baseline:
/// newly passing, and newly not passing (wrong, error, crash, ...).
pub fn changes(baseline: &Scoreboard, now: &Scoreboard) -> Vec<Change> {
    let before: BTreeMap<(&str, &str), &str> = baseline
        .results
        .iter()
        .map(|r| ((r.runtime.as_str(), r.trial.as_str()), r.outcome.as_str()))
        .collect();
    let mut out = Vec::new();
    for r in &now.results {
        if let Some(&b) = before.get(&(r.runtime.as_str(), r.trial.as_str())) {
            if (b == "pass") != (r.outcome == "pass") {
                out.push(Change {
                    runtime: r.runtime.clone(),
                    trial: r.trial.clone(),
                    before: b.to_string(),
                    after: r.outcome.clone(),
                });
            }
        }
    }
    out
}

/// Everything that should fail the command, one line each.
pub fn alarms(now: &Scoreboard, baseline: Option<&Scoreboard>, max_drop: usize) -> Vec<String> {
    let mut out = Vec::new();
    for rt in &now.runtimes {
        let rows: Vec<&Row> = now
            .results
            .iter()
            .filter(|r| r.runtime == rt.name)
            .collect();
        if rt.status != "ran" || rows.is_empty() {
            out.push(format!(
                "{}: executed no trial ({})",
                rt.name,
                rt.message.as_deref().unwrap_or("no trial records")
            ));
            continue;
        }
        if !rows.iter().any(|r| executed(r)) {
            out.push(format!(
                "{}: all {} trials were skipped, not run, or rejected by our own loader",
                rt.name,
                rows.len()
            ));
        }
        if let Some(base) = baseline {
            if let Some(old) = base.runtimes.iter().find(|b| b.name == rt.name) {
                let was = old.counts.get("pass").copied().unwrap_or(0);
                let is = rt.counts.get("pass").copied().unwrap_or(0);
                if was > is + max_drop {
                    out.push(format!(
                        "{}: passes dropped from {was} to {is} (more than --max-drop {max_drop})",
                        rt.name
                    ));
                }
            }
        }
    }
    out
}

/// Quotes a value for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The environment and ONNX_BACKEND for one runtime, preparing what it
/// needs (also for `diff`'s worker).
pub fn prepare(
    rt: &Runtime,
    trial_timeout: Option<u64>,
) -> Result<(String, Vec<(String, String)>)> {
    let mut envs = Vec::new();
    if let Some(t) = trial_timeout {
        envs.push(("ONNX_TRIAL_TIMEOUT".to_string(), t.to_string()));
        envs.push(("ONNX_COMMAND_TIMEOUT".to_string(), t.to_string()));
    }
    let backend = match rt.setup {
        Setup::None => rt.backend.to_string(),
        Setup::OrtLibrary => {
            let lib = crate::ort_path::library().context("installing onnxruntime")?;
            envs.push(("ORT_DYLIB_PATH".into(), lib.display().to_string()));
            rt.backend.to_string()
        }
        Setup::PythonCommand(script) => {
            let env = crate::python::venv(
                &crate::target_dir(),
                "cases-venv",
                crate::python::CASE_REQUIREMENTS,
            )
            .context("preparing the Python environment with onnx")?;
            let program = crate::project_root()
                .join("xtask/src/runtimes")
                .join(script);
            // Served: one interpreter per worker instead of one per trial
            // (seconds instead of most of an hour for the suite).
            envs.push(("ONNX_COMMAND_SERVE".into(), "1".into()));
            format!("command:{} {}", env.python.display(), program.display())
        }
    };
    envs.push(("ONNX_BACKEND".into(), backend.clone()));
    Ok((backend, envs))
}

fn repro(rt: &Runtime, backend: &str) -> String {
    let ort = match rt.setup {
        Setup::OrtLibrary => "ORT_DYLIB_PATH=$(cargo xtask ort-path) ",
        _ => "",
    };
    let features = if rt.features.is_empty() {
        String::new()
    } else {
        format!(" --features {}", rt.features)
    };
    format!(
        "{ort}ONNX_BACKEND={} cargo test{features} --test conformance -- --exact ",
        shell_quote(backend)
    )
}

/// A runtime's records from an earlier run, and the backend they name:
/// `records-<runtime>.json`, or a folder `records-<runtime>/` of
/// `ONNX_RECORD_DIR` records (itself, or one subfolder per part of a split
/// run), merged and held to the checks of a whole run as `report --merge`
/// holds them.
fn reuse(rt: &Runtime, records: &Path) -> Result<(String, TrialRecords)> {
    let folder = records.with_extension("");
    let t: TrialRecords = if folder.is_dir() {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(&folder)
            .with_context(|| format!("--reuse: reading {}", folder.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        if parts.is_empty() {
            parts.push(folder.clone());
        }
        parts.sort();
        let (merged, listing) = crate::report::merge_dirs(&parts)
            .with_context(|| format!("--reuse: merging the records in {}", folder.display()))?;
        let what = format!("the folders of {}", folder.display());
        if let Some(problem) = crate::report::held_to_whole_run(listing.as_ref(), &merged, &what) {
            bail!("{}: {problem}", folder.display());
        }
        merged
    } else {
        let text = std::fs::read_to_string(records)
            .with_context(|| format!("--reuse: reading {} for {}", records.display(), rt.name))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a trial report", records.display()))?
    };
    let backend = match rt.setup {
        Setup::PythonCommand(_) => t.backend.clone(),
        _ => rt.backend.to_string(),
    };
    Ok((backend, t))
}

pub fn run(args: Args) -> Result<()> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| crate::target_dir().join("scoreboard"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let chosen: Vec<&Runtime> = if args.runtimes.is_empty() {
        RUNTIMES.iter().collect()
    } else {
        let mut v = Vec::new();
        for name in &args.runtimes {
            match RUNTIMES.iter().find(|r| r.name == name) {
                Some(r) => v.push(r),
                None => bail!(
                    "unknown runtime '{name}' (the scoreboard knows: {})",
                    RUNTIMES
                        .iter()
                        .map(|r| r.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        v
    };
    let baseline: Option<Scoreboard> = match &args.baseline {
        Some(p) => Some(
            serde_json::from_str(
                &std::fs::read_to_string(p)
                    .with_context(|| format!("reading the baseline {}", p.display()))?,
            )
            .with_context(|| format!("{} is not a scoreboard.json", p.display()))?,
        ),
        None => None,
    };
    let mut runs = Vec::new();
    let mut results = Vec::new();
    for (i, rt) in chosen.iter().enumerate() {
        eprintln!(
            "xtask: scoreboard runtime {}/{}: {}",
            i + 1,
            chosen.len(),
            rt.name
        );
        let records = out.join(format!("records-{}.json", rt.name));
        let attempt = if args.reuse {
            reuse(rt, &records)
        } else {
            prepare(rt, args.trial_timeout).and_then(|(backend, envs)| {
                let features = (!rt.features.is_empty()).then_some(rt.features);
                crate::report::run_conformance(features, &envs, &records, rt.name, args.release)
                    .map(|t| (backend, t))
            })
        };
        let (status, message, backend, version) = match attempt {
            Ok((backend, t)) => {
                results.extend(rows_of(rt.name, &t));
                // The runtime's name and version as its records give it,
                // else the backend name.
                let version = Some(t.runtime_version.clone())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| t.backend.clone());
                ("ran", None, backend, version)
            }
            Err(e) => {
                eprintln!("xtask: {} could not run: {e:#}", rt.name);
                (
                    "failed",
                    Some(format!("{e:#}")),
                    rt.backend.to_string(),
                    String::new(),
                )
            }
        };
        runs.push(RuntimeRun {
            name: rt.name.to_string(),
            version,
            features: rt.features.to_string(),
            repro: repro(rt, &backend),
            backend,
            status: status.to_string(),
            message,
            counts: BTreeMap::new(),
            known: 0,
        });
    }
    for r in &mut runs {
        r.counts = counts(&results, &r.name);
        r.known = known(&results, &r.name);
    }
    let mut board = Scoreboard {
        schema: SCHEMA,
        generated_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        outcomes: OUTCOMES.iter().map(|s| s.to_string()).collect(),
        runtimes: runs,
        results,
        baseline: args.baseline.as_ref().map(|p| p.display().to_string()),
        changes: Vec::new(),
    };
    if let Some(b) = &baseline {
        board.changes = changes(b, &board);
    }
    let json_path = out.join("scoreboard.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&board)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let html_path = out.join("index.html");
    std::fs::write(&html_path, page::render(&board)?)
        .with_context(|| format!("writing {}", html_path.display()))?;
    print!("{}", summary_table(&board));
    eprintln!(
        "xtask: wrote {} and {}",
        json_path.display(),
        html_path.display()
    );
    let alarms = alarms(&board, baseline.as_ref(), args.max_drop);
    if !alarms.is_empty() {
        bail!("scoreboard alarms:\n  {}", alarms.join("\n  "));
    }
    Ok(())
}

/// The stdout table: per runtime, its version, status and outcome counts.
pub fn summary_table(b: &Scoreboard) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = write!(s, "| runtime | version | trials |");
    for o in OUTCOMES {
        let _ = write!(s, " {o} |");
    }
    s.push_str(" of the failures, known |\n");
    s.push_str(&"|---".repeat(4 + OUTCOMES.len()));
    s.push_str("|\n");
    for rt in &b.runtimes {
        let total: usize = rt.counts.values().sum();
        let version = if rt.status == "ran" {
            rt.version.clone()
        } else {
            "could not run".to_string()
        };
        let _ = write!(s, "| {} | {} | {} |", rt.name, version, total);
        for o in OUTCOMES {
            let _ = write!(s, " {} |", rt.counts.get(*o).copied().unwrap_or(0));
        }
        let _ = writeln!(s, " {} |", rt.known);
    }
    s
}

#[cfg(test)]
mod tests;
