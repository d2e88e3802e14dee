//! `cargo xtask diff --against <onnxruntime|tract>`: seeded random cases for
//! every version of the covered operators, run through our kernels and
//! through another runtime (in a child process, so that its crashes are
//! findings, not the end of the run). Disagreements are shrunk while they
//! still disagree and written as case folders under `target/differential/`.

mod gen;
mod shrink;

use anyhow::{bail, Context, Result};
use gen::Case;
use onnx_conformance::{compare, graph, proto, verdict, Limits, Tensor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The runtime to compare with: onnxruntime or tract.
    #[arg(long)]
    against: String,
    /// Only these operators (Pad, Conv, CenterCropPad); default: all three.
    #[arg(long = "op")]
    ops: Vec<String>,
    /// Random cases per operator.
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Seed of the case generator; the same seed gives the same cases.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fail when a disagreement is not a known finding (cases/differential/known.toml).
    #[arg(long)]
    strict: bool,
    /// Write disagreements without shrinking them first.
    #[arg(long)]
    no_shrink: bool,
}

/// What the other runtime did with a case.
#[derive(Debug, Clone)]
enum Theirs {
    Ok(Vec<Tensor>),
    Error(String),
    Crash(String),
}

/// How the two sides relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Agree,
    BothError,
    Values,
    TheirsError,
    OursError,
    Crash,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Agree => "agree",
            Kind::BothError => "both_error",
            Kind::Values => "values",
            Kind::TheirsError => "theirs_error",
            Kind::OursError => "ours_error",
            Kind::Crash => "crash",
        }
    }

    fn disagrees(self) -> bool {
        !matches!(self, Kind::Agree | Kind::BothError)
    }
}

/// The other runtime, running in `runtime_worker`.
struct Worker {
    exe: PathBuf,
    backend: String,
    env: Vec<(String, String)>,
    child: Option<(Child, ChildStdin, Receiver<String>)>,
}

impl Worker {
    fn spawn(&mut self) -> Result<()> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg(&self.backend)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.exe.display()))?;
        let stdin = child.stdin.take().context("worker stdin")?;
        let stdout = child.stdout.take().context("worker stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.child = Some((child, stdin, rx));
        Ok(())
    }

    fn run(&mut self, dir: &Path) -> Result<Theirs> {
        if self.child.is_none() {
            self.spawn()?;
        }
        let (child, stdin, rx) = self.child.as_mut().context("worker")?;
        let sent = writeln!(stdin, "{}", dir.display()).and_then(|_| stdin.flush());
        let reply = match sent {
            Ok(()) => rx.recv_timeout(Duration::from_secs(60)),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        let theirs = match reply {
            Ok(line) if line == "ok" => Theirs::Ok(read_outputs(&dir.join("actual"))?),
            Ok(line) => Theirs::Error(line.trim_start_matches("err ").to_string()),
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                return Ok(Theirs::Crash("no answer within 60 s (killed)".into()));
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                self.child = None;
                return Ok(Theirs::Crash(format!(
                    "the runtime's process died: {status}"
                )));
            }
        };
        Ok(theirs)
    }
}

fn read_outputs(dir: &Path) -> Result<Vec<Tensor>> {
    let mut out = Vec::new();
    for k in 0.. {
        let p = dir.join(format!("output_{k}.pb"));
        if !p.exists() {
            break;
        }
        out.push(proto::load_tensor(&std::fs::read(&p)?)?.1);
    }
    Ok(out)
}

/// Writes a case folder: model.onnx and test_data_set_0/input_K.pb.
fn write_case(
    dir: &Path,
    model: &onnx_conformance::Model,
    inputs: &[Tensor],
    outputs: &[Tensor],
) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let ds = dir.join("test_data_set_0");
    std::fs::create_dir_all(&ds)?;
    std::fs::write(dir.join("model.onnx"), proto::save_model(model)?)?;
    let names = graph::feed_names(model);
    for (k, t) in inputs.iter().enumerate() {
        std::fs::write(
            ds.join(format!("input_{k}.pb")),
            proto::save_tensor(names.get(k).copied().unwrap_or(""), t)?,
        )?;
    }
    for (k, t) in outputs.iter().enumerate() {
        std::fs::write(
            ds.join(format!("output_{k}.pb")),
            proto::save_tensor("y", t)?,
        )?;
    }
    Ok(())
}

/// One evaluated case.
struct Evaluated {
    kind: Kind,
    ours: Result<Vec<Tensor>, String>,
    theirs: Theirs,
    detail: String,
}

fn evaluate(case: &Case, seed: u64, worker: &mut Worker, work: &Path) -> Result<Evaluated> {
    let (model, inputs) = gen::build(case, seed);
    let ours = graph::run(
        &model,
        &inputs,
        Limits {
            max_output_bytes: 1 << 27,
            ..Limits::default()
        },
    )
    .map_err(|e| e.to_string());
    write_case(work, &model, &inputs, &[])?;
    let theirs = worker.run(work)?;
    let (kind, detail) = match (&ours, &theirs) {
        (_, Theirs::Crash(m)) => (Kind::Crash, m.clone()),
        (Ok(_), Theirs::Error(m)) => (Kind::TheirsError, m.clone()),
        (Err(e), Theirs::Ok(_)) => (Kind::OursError, e.clone()),
        (Err(_), Theirs::Error(_)) => (Kind::BothError, String::new()),
        (Ok(a), Theirs::Ok(b)) => {
            let mut problems = Vec::new();
            if a.len() != b.len() {
                problems.push(format!("{} outputs vs {}", a.len(), b.len()));
            }
            let policies = verdict::policies(&model, &inputs, verdict::Tolerance::Strict);
            for ((x, y), policy) in a.iter().zip(b).zip(&policies) {
                let policy = match policy {
                    Ok(p) => p,
                    Err(e) => {
                        problems.push(e.clone());
                        continue;
                    }
                };
                match compare::compare(x, y, policy) {
                    Err(s) => problems.push(s),
                    Ok(m) if m.mismatches > 0 => {
                        problems.push(compare::describe(&m, x.shape(), policy))
                    }
                    Ok(_) => {}
                }
            }
            if problems.is_empty() {
                (Kind::Agree, String::new())
            } else {
                (Kind::Values, problems.join("; "))
            }
        }
    };
    Ok(Evaluated {
        kind,
        ours,
        theirs,
        detail,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Known {
    #[serde(default)]
    finding: Vec<Finding>,
}

/// A known disagreement: every listed tag must be present, the kind must
/// match, and so must the other runtime's message when one is given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Finding {
    runtime: String,
    op: String,
    kind: String,
    #[serde(default)]
    tags: Vec<String>,
    message: Option<String>,
    reason: String,
    /// The case folder under cases/differential/ that reproduces it.
    case: Option<String>,
}

fn load_known(root: &Path) -> Result<Vec<Finding>> {
    let p = root.join("cases/differential/known.toml");
    if !p.exists() {
        return Ok(Vec::new());
    }
    let k: Known = toml::from_str(&std::fs::read_to_string(&p)?)
        .with_context(|| format!("in {}", p.display()))?;
    Ok(k.finding)
}

fn known_reason<'a>(
    known: &'a [Finding],
    runtime: &str,
    case: &Case,
    e: &Evaluated,
) -> Option<&'a Finding> {
    let tags = case.tags();
    let message = match &e.theirs {
        Theirs::Error(m) | Theirs::Crash(m) => m.clone(),
        Theirs::Ok(_) => e.detail.clone(),
    };
    known.iter().find(|f| {
        f.runtime == runtime
            && f.op == case.op()
            && f.kind == e.kind.name()
            && f.tags.iter().all(|t| tags.contains(t))
            && f.message
                .as_ref()
                .is_none_or(|m| crate::fetch_cases::glob(&format!("*{m}*"), &message))
    })
}

fn build_worker(backend: &str) -> Result<Worker> {
    let root = crate::project_root();
    let target = crate::target_dir().join("worker");
    let mut env = Vec::new();
    if backend == "onnxruntime" {
        let lib = crate::ort_path::library()?;
        env.push(("ORT_DYLIB_PATH".to_string(), lib.display().to_string()));
    } else if backend != "tract" {
        bail!("--against must be onnxruntime or tract, not '{backend}'");
    }
    eprintln!(
        "xtask: building runtime_worker with feature {backend} (target dir {})",
        target.display()
    );
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "--bin",
            "runtime_worker",
            "--features",
            backend,
        ])
        .env("CARGO_TARGET_DIR", &target)
        .status()?;
    if !status.success() {
        bail!("building runtime_worker failed");
    }
    Ok(Worker {
        exe: target.join("release/runtime_worker"),
        backend: backend.to_string(),
        env,
        child: None,
    })
}

fn describe_side(r: &Result<Vec<Tensor>, String>) -> String {
    match r {
        Ok(v) => v
            .iter()
            .map(|t| format!("tensor({}) {:?}", t.dtype(), t.shape()))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("error: {e}"),
    }
}

fn describe_theirs(t: &Theirs) -> String {
    match t {
        Theirs::Ok(v) => describe_side(&Ok(v.clone())),
        Theirs::Error(e) => format!("error: {e}"),
        Theirs::Crash(e) => format!("crash: {e}"),
    }
}

pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
    let known = load_known(&root)?;
    let mut worker = build_worker(&args.against)?;
    let out_root = crate::target_dir().join("differential").join(&args.against);
    let work = crate::target_dir().join("differential").join(format!(
        "work-{}-{}",
        args.against,
        std::process::id()
    ));
    if out_root.exists() {
        std::fs::remove_dir_all(&out_root)?;
    }
    std::fs::create_dir_all(&out_root)?;
    let ops: Vec<&str> = if args.ops.is_empty() {
        gen::OPS.to_vec()
    } else {
        gen::OPS
            .iter()
            .copied()
            .filter(|o| args.ops.iter().any(|a| a.eq_ignore_ascii_case(o)))
            .collect()
    };
    if ops.is_empty() {
        bail!("--op must name Pad, Conv or CenterCropPad");
    }
    // (op, version, feature) -> kind -> count
    let mut table: BTreeMap<(String, i64, String), BTreeMap<Kind, usize>> = BTreeMap::new();
    let mut unknown = Vec::new();
    let mut written = 0;
    for op in ops {
        let mut rng = gen::Rng::new(args.seed.wrapping_mul(31).wrapping_add(op.len() as u64));
        for i in 0..args.count {
            let case = gen::random(op, &mut rng);
            let data_seed = rng.next_u64();
            let e = evaluate(&case, data_seed, &mut worker, &work)?;
            *table
                .entry((op.to_string(), case.version(), case.feature()))
                .or_default()
                .entry(e.kind)
                .or_default() += 1;
            if !e.kind.disagrees() {
                continue;
            }
            let (case, e) = if args.no_shrink {
                (case, e)
            } else {
                shrink_case(case, e, data_seed, &mut worker, &work)?
            };
            let finding = known_reason(&known, &args.against, &case, &e);
            let reason = finding.map(|f| match &f.case {
                Some(c) => format!("{} (reproduced by cases/differential/{c})", f.reason),
                None => f.reason.clone(),
            });
            let name = format!(
                "{}_v{}_{}_{i}",
                op.to_lowercase(),
                case.version(),
                e.kind.name()
            );
            let dir = out_root.join(&name);
            let (model, inputs) = gen::build(&case, data_seed);
            let expected: Vec<Tensor> = e.ours.clone().unwrap_or_default();
            write_case(&dir, &model, &inputs, &expected)?;
            let note = format!(
                "# {name}\n\nruntime: {}\nkind: {}\nknown: {}\ncase: {:?}\ntags: {}\n\nours: {}\ntheirs: {}\n\ndetail: {}\n",
                args.against,
                e.kind.name(),
                reason.as_deref().unwrap_or("no"),
                case,
                case.tags().join(", "),
                describe_side(&e.ours),
                describe_theirs(&e.theirs),
                e.detail
            );
            std::fs::write(dir.join("NOTE.md"), note)?;
            written += 1;
            if reason.is_none() {
                unknown.push(format!(
                    "{name}: {} ({})",
                    e.kind.name(),
                    e.detail.chars().take(160).collect::<String>()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    print_table(&args, &table);
    println!(
        "\n{written} disagreements written to {}",
        out_root.display()
    );
    if !unknown.is_empty() {
        println!("{} are not known findings:", unknown.len());
        for u in unknown.iter().take(40) {
            println!("  {u}");
        }
        if args.strict {
            bail!(
                "{} disagreements against {} are not listed in cases/differential/known.toml",
                unknown.len(),
                args.against
            );
        }
    }
    Ok(())
}

/// Applies simplifications while the case still disagrees in the same way.
fn shrink_case(
    mut case: Case,
    mut e: Evaluated,
    seed: u64,
    worker: &mut Worker,
    work: &Path,
) -> Result<(Case, Evaluated)> {
    let mut budget = 400;
    'outer: while budget > 0 {
        for cand in shrink::candidates(&case) {
            budget -= 1;
            if budget == 0 {
                break 'outer;
            }
            let ce = evaluate(&cand, seed, worker, work)?;
            if ce.kind == e.kind {
                case = cand;
                e = ce;
                continue 'outer;
            }
        }
        break;
    }
    Ok((case, e))
}

fn print_table(args: &Args, table: &BTreeMap<(String, i64, String), BTreeMap<Kind, usize>>) {
    println!(
        "\nDifferential run against {} (seed {}, {} cases per operator)",
        args.against, args.seed, args.count
    );
    println!(
        "{:<14} {:>4}  {:<22} {:>5} {:>6} {:>6} {:>7} {:>7} {:>7} {:>6}",
        "op", "ver", "feature", "cases", "agree", "both✗", "values", "theirs✗", "ours✗", "crash"
    );
    let mut totals: BTreeMap<Kind, usize> = BTreeMap::new();
    for ((op, v, feature), kinds) in table {
        let n = |k: Kind| kinds.get(&k).copied().unwrap_or(0);
        let total: usize = kinds.values().sum();
        for (k, c) in kinds {
            *totals.entry(*k).or_default() += c;
        }
        println!(
            "{:<14} {:>4}  {:<22} {:>5} {:>6} {:>6} {:>7} {:>7} {:>7} {:>6}",
            op,
            v,
            feature,
            total,
            n(Kind::Agree),
            n(Kind::BothError),
            n(Kind::Values),
            n(Kind::TheirsError),
            n(Kind::OursError),
            n(Kind::Crash)
        );
    }
    let n = |k: Kind| totals.get(&k).copied().unwrap_or(0);
    println!(
        "{:<14} {:>4}  {:<22} {:>5} {:>6} {:>6} {:>7} {:>7} {:>7} {:>6}",
        "total",
        "",
        "",
        totals.values().sum::<usize>(),
        n(Kind::Agree),
        n(Kind::BothError),
        n(Kind::Values),
        n(Kind::TheirsError),
        n(Kind::OursError),
        n(Kind::Crash)
    );
}
