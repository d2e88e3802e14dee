//! `cargo xtask diff --against <runtime>` (any of the scoreboard's but
//! ours: onnxruntime, tract, rten, candle, onnx-reference): seeded random cases for
//! every version of the covered operators, run through our kernels and
//! through another runtime (in a child process, so that its crashes are
//! findings, not the end of the run). Disagreements are shrunk while they
//! still disagree and written as case folders under `target/differential/`.

mod adjudicate;
mod campaign;
mod gen;
mod observed;
mod shrink;

use adjudicate::{Settled, Side};
use anyhow::{bail, Context, Result};
use campaign::{Line, Row, Shards, Summary};
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
    /// The runtime to compare with: onnxruntime, tract, rten, candle or
    /// onnx-reference (onnx's ReferenceEvaluator, through the command
    /// backend).
    #[arg(long, required_unless_present = "merge", default_value = "")]
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
    /// Checks the judge: perturbs our own outputs the way a named bug
    /// would (`conv-notset-stride-gt-kernel`: Conv with auto_pad NOTSET and
    /// a stride larger than the kernel), so that a run must fail.
    #[arg(long, hide = true)]
    plant_bug: Option<String>,
    /// Run shard K of N (`K/N`, from 1): every N-th case of each operator,
    /// the same cases a whole run with this seed gives. Each shard writes
    /// its own folder with a summary.json for `--merge`.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Merge the shard folders of one campaign (written by `--shard`) into
    /// the table of the whole campaign, and judge it as one run would.
    #[arg(long, num_args = 1.., value_name = "DIR", conflicts_with_all = ["shard", "plant_bug"])]
    merge: Vec<PathBuf>,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not K/N"))?;
    let k: usize = k.parse().map_err(|_| format!("'{k}' is not a number"))?;
    let n: usize = n.parse().map_err(|_| format!("'{n}' is not a number"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("shard {k}/{n}: K must be within 1..=N"));
    }
    Ok((k, n))
}

/// Bugs `--plant-bug` can plant in our results.
const PLANTABLE: &[&str] = &["conv-notset-stride-gt-kernel"];

/// Whether the planted bug applies to this case.
fn planted_here(bug: Option<&str>, case: &Case) -> bool {
    match (bug, case) {
        (Some("conv-notset-stride-gt-kernel"), Case::Conv(c)) => {
            c.auto_pad == "NOTSET" && c.strides.iter().zip(&c.kernel).any(|(s, k)| s > k)
        }
        _ => false,
    }
}

/// A value regression: the first element of each float output moves by
/// about 1% (plus 0.5, so zeros move too).
fn plant(outputs: &mut [Tensor]) {
    use onnx_conformance::Storage;
    for t in outputs.iter_mut() {
        let dtype = t.dtype();
        let mut s = t.storage().clone();
        let bump = |v: f64| v + 0.5 + v.abs() * 1e-2;
        match &mut s {
            Storage::F32(a) => a
                .iter_mut()
                .take(1)
                .for_each(|v| *v = bump(*v as f64) as f32),
            Storage::F64(a) => a.iter_mut().take(1).for_each(|v| *v = bump(*v)),
            Storage::F16(a) => a
                .iter_mut()
                .take(1)
                .for_each(|v| *v = half::f16::from_f64(bump(v.to_f64()))),
            Storage::BF16(a) => a
                .iter_mut()
                .take(1)
                .for_each(|v| *v = half::bf16::from_f64(bump(v.to_f64()))),
            _ => {}
        }
        if let Ok(planted) = Tensor::new(dtype, s) {
            *t = planted;
        }
    }
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
    /// Properties seen in the outputs (`observed.rs`), matched by `when`
    /// like the case's own.
    observed: Vec<String>,
}

fn evaluate(
    case: &Case,
    seed: u64,
    worker: &mut Worker,
    work: &Path,
    plant_bug: Option<&str>,
) -> Result<Evaluated> {
    let (model, inputs) = gen::build(case, seed);
    let limits = Limits {
        max_output_bytes: 1 << 27,
        ..Limits::default()
    };
    let mut ours = model
        .prepare(limits)
        .and_then(|prepared| prepared.run(&inputs))
        .map_err(|e| e.to_string());
    if planted_here(plant_bug, case) {
        if let Ok(outputs) = ours.as_mut() {
            plant(outputs);
        }
    }
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
    let mut observed = Vec::new();
    if let (Kind::Values, Ok(a), Theirs::Ok(b)) = (kind, &ours, &theirs) {
        observed.extend(onnx_conformance::observed::observed(&model, &inputs, a, b));
        if let (Case::Pad(c), Some(x)) = (case, inputs.first()) {
            observed.extend(observed::pad_reflections(c, x, b));
        }
    }
    Ok(Evaluated {
        kind,
        ours,
        theirs,
        detail,
        observed,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Known {
    #[serde(default)]
    finding: Vec<Finding>,
}

/// A known disagreement in which the oracle sides with us. It matches when
/// the runtime, operator and kind match, every predicate of `when` holds
/// for the case's parameters, and (when given) the other runtime's message
/// contains `message`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Finding {
    runtime: String,
    op: String,
    kind: String,
    /// Predicates on the case's parameters: `name` (a property the case
    /// has, such as `same_pad_negative`) or `name:a|b` (the parameter
    /// `name` is `a` or `b`, such as `auto_pad:SAME_UPPER|SAME_LOWER`).
    #[serde(default)]
    when: Vec<String>,
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
    for f in &k.finding {
        if f.reason.trim().is_empty() {
            bail!(
                "{}: a finding for {} {} has no reason",
                p.display(),
                f.runtime,
                f.op
            );
        }
    }
    Ok(k.finding)
}

/// Whether one `when` predicate holds for the case's properties.
fn holds(predicate: &str, properties: &[String]) -> bool {
    match predicate.split_once(':') {
        None => properties.iter().any(|p| p == predicate),
        Some((name, values)) => values
            .split('|')
            .any(|v| properties.contains(&format!("{name}:{v}"))),
    }
}

/// The known finding that explains a disagreement, only when the oracle
/// sides with us: a finding can excuse the other runtime, never our kernels.
/// What a finding's `when` is matched against: the case's parameters, then
/// what was seen in the outputs.
fn properties(case: &Case, e: &Evaluated) -> Vec<String> {
    let mut properties = case.tags();
    properties.extend(e.observed.iter().cloned());
    properties
}

fn known_finding<'a>(
    known: &'a [Finding],
    runtime: &str,
    case: &Case,
    e: &Evaluated,
    settled: Settled,
) -> Option<&'a Finding> {
    if settled != Settled::OursRight {
        return None;
    }
    let properties = properties(case, e);
    let message = match &e.theirs {
        Theirs::Error(m) | Theirs::Crash(m) => m.clone(),
        Theirs::Ok(_) => e.detail.clone(),
    };
    known.iter().find(|f| {
        f.runtime == runtime
            && f.op == case.op()
            && f.kind == e.kind.name()
            && f.when.iter().all(|p| holds(p, &properties))
            && f.message
                .as_ref()
                .is_none_or(|m| crate::fetch_cases::glob(&format!("*{m}*"), &message))
    })
}

/// The runtimes `--against` takes: the scoreboard's, but ours.
fn runtimes_to_compare() -> impl Iterator<Item = &'static crate::scoreboard::Runtime> {
    crate::scoreboard::RUNTIMES
        .iter()
        .filter(|r| r.name != "ours")
}

/// The worker that runs cases through runtime `name` (a scoreboard name):
/// built with the runtime's cargo feature, with the environment the
/// scoreboard gives it (onnxruntime's library, the onnx reference's Python).
fn build_worker(name: &str) -> Result<Worker> {
    let Some(rt) = runtimes_to_compare().find(|r| r.name == name) else {
        bail!(
            "--against must be one of {}, not '{name}'",
            runtimes_to_compare()
                .map(|r| r.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let (backend, env) = crate::scoreboard::prepare(rt, None)?;
    let root = crate::project_root();
    let target = crate::target_dir().join("worker");
    eprintln!(
        "xtask: building runtime_worker for {name} (features '{}', target dir {})",
        rt.features,
        target.display()
    );
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(&root)
        .args(["build", "--release", "--bin", "runtime_worker"]);
    if !rt.features.is_empty() {
        cmd.args(["--features", rt.features]);
    }
    let status = cmd.env("CARGO_TARGET_DIR", &target).status()?;
    if !status.success() {
        bail!("building runtime_worker failed");
    }
    Ok(Worker {
        exe: target.join("release/runtime_worker"),
        backend,
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

/// A disagreement waiting for the oracle.
struct Pending {
    op_index: usize,
    index: usize,
    name: String,
    dir: PathBuf,
    case: Case,
    seed: u64,
    e: Evaluated,
}

pub fn run(args: Args) -> Result<()> {
    if !args.merge.is_empty() {
        let parts = args
            .merge
            .iter()
            .map(|d| Summary::read(d))
            .collect::<Result<Vec<_>>>()?;
        let whole = Summary::merge(parts)?;
        let out = crate::target_dir()
            .join("differential")
            .join(format!("{}-merged", whole.against));
        std::fs::create_dir_all(&out)?;
        whole.write(&out)?;
        print_table(&whole);
        println!(
            "\nmerged summary written to {}",
            out.join("summary.json").display()
        );
        return conclude(&whole, args.strict);
    }
    if let Some(bug) = &args.plant_bug {
        if !PLANTABLE.contains(&bug.as_str()) {
            bail!("--plant-bug {bug}: known bugs are {}", PLANTABLE.join(", "));
        }
        eprintln!("xtask: planting the bug '{bug}' in our own results; this run must fail");
    }
    let root = crate::project_root();
    let known = load_known(&root)?;
    let mut worker = build_worker(&args.against)?;
    let out_root = crate::target_dir()
        .join("differential")
        .join(match args.shard {
            None => args.against.clone(),
            Some((k, n)) => format!("{}-shard-{k}-of-{n}", args.against),
        });
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
    let plant_bug = args.plant_bug.as_deref();
    let mut table: BTreeMap<(String, i64, String), Row> = BTreeMap::new();
    let mut pending = Vec::new();
    let (k, n) = args.shard.unwrap_or((1, 1));
    let per_op = (0..args.count)
        .filter(|&i| Summary::in_shard(i, k, n))
        .count();
    let mut progress = crate::progress::Progress::new("cases", (per_op * ops.len()) as u64);
    for op in &ops {
        let op_index = gen::OPS.iter().position(|o| o == op).unwrap_or(0);
        let mut rng = gen::Rng::new(args.seed.wrapping_mul(31).wrapping_add(op.len() as u64));
        for i in 0..args.count {
            // Every case is drawn, so a shard's cases are the whole run's.
            let case = gen::random(op, &mut rng);
            let data_seed = rng.next_u64();
            if !Summary::in_shard(i, k, n) {
                continue;
            }
            let e = evaluate(&case, data_seed, &mut worker, &work, plant_bug)?;
            progress.inc(1);
            let key = (op.to_string(), case.version(), case.feature());
            *Summary::count(&mut table, &key)
                .kinds
                .entry(e.kind.name().to_string())
                .or_default() += 1;
            if !e.kind.disagrees() {
                continue;
            }
            let (case, e) = if args.no_shrink {
                (case, e)
            } else {
                shrink_case(case, e, data_seed, &mut worker, &work, plant_bug)?
            };
            let name = format!(
                "{}_v{}_{}_{i}",
                op.to_lowercase(),
                case.version(),
                e.kind.name()
            );
            let dir = out_root.join(&name);
            let (model, inputs) = gen::build(&case, data_seed);
            write_case(&dir, &model, &inputs, &[])?;
            pending.push((
                key,
                Pending {
                    op_index,
                    index: i,
                    name,
                    dir,
                    case,
                    seed: data_seed,
                    e,
                },
            ));
        }
    }
    progress.finish();
    let _ = std::fs::remove_dir_all(&work);

    eprintln!(
        "xtask: asking the oracle about {} disagreements",
        pending.len()
    );
    let folders: Vec<PathBuf> = pending.iter().map(|(_, p)| p.dir.clone()).collect();
    let answers = adjudicate::ask(&folders, &work.with_extension("oracle"))?;
    let mut failures = Vec::new();
    let mut ours_wrong = Vec::new();
    for ((key, p), answer) in pending.iter().zip(&answers) {
        let (model, inputs) = gen::build(&p.case, p.seed);
        let ours = match &p.e.ours {
            Ok(v) => Side::Outputs(v),
            Err(_) => Side::Rejected,
        };
        let theirs = match &p.e.theirs {
            Theirs::Ok(v) => Side::Outputs(v),
            Theirs::Error(_) => Side::Rejected,
            Theirs::Crash(_) => Side::Crashed,
        };
        let (settled, why) = adjudicate::settle(&model, &inputs, ours, theirs, answer);
        *Summary::count(&mut table, key)
            .settled
            .entry(settled.name().to_string())
            .or_default() += 1;
        let finding = known_finding(&known, &args.against, &p.case, &p.e, settled);
        let reason = finding.map(|f| match &f.case {
            Some(c) => format!("{} (reproduced by cases/differential/{c})", f.reason),
            None => f.reason.clone(),
        });
        // The folder becomes a case whose expected outputs are the oracle's.
        write_case(&p.dir, &model, &inputs, &answer.outputs)?;
        let note = format!(
            "# {}\n\nruntime: {}\nkind: {}\noracle: {} ({})\nverdict: {} ({why})\nknown: {}\ncase: {:?}\nproperties: {}\n\nours: {}\ntheirs: {}\n\ndetail: {}\n",
            p.name,
            args.against,
            p.e.kind.name(),
            answer.status,
            answer.why,
            settled.name(),
            reason.as_deref().unwrap_or("no"),
            p.case,
            properties(&p.case, &p.e).join(", "),
            describe_side(&p.e.ours),
            describe_theirs(&p.e.theirs),
            p.e.detail
        );
        std::fs::write(p.dir.join("NOTE.md"), note)?;
        let line = Line {
            op_index: p.op_index,
            case: p.index,
            text: format!(
                "{}: {} ({}): {}",
                p.name,
                p.e.kind.name(),
                settled.name(),
                why.chars().take(200).collect::<String>()
            ),
        };
        match standing(settled, reason.is_some()) {
            Standing::OursWrong => ours_wrong.push(line),
            Standing::Accounted => {}
            Standing::Unexplained => failures.push(line),
        }
    }
    let summary = Summary {
        against: args.against.clone(),
        seed: args.seed,
        count: args.count,
        ops: ops.iter().map(|o| o.to_string()).collect(),
        plant_bug: args.plant_bug.clone(),
        shards: Shards {
            parts: vec![k],
            of: n,
        },
        rows: table.into_values().collect(),
        disagreements: pending.len(),
        ours_wrong,
        failures,
    };
    summary.write(&out_root)?;
    print_table(&summary);
    println!(
        "\n{} disagreements written to {} (expected outputs from the oracle)",
        pending.len(),
        out_root.display()
    );
    conclude(&summary, args.strict)
}

/// Where a settled disagreement leaves the run.
#[derive(Debug, PartialEq)]
enum Standing {
    /// The oracle finds our result wrong: fails every run.
    OursWrong,
    /// Both right, undefined by the spec, or theirs wrong as a known
    /// finding says.
    Accounted,
    /// Anything else (theirs wrong with no finding for it, not settled):
    /// fails a `--strict` run.
    Unexplained,
}

/// The standing of a disagreement the oracle settled as `settled`, where
/// `known` says whether a finding explains it (findings apply only when
/// ours is right).
fn standing(settled: Settled, known: bool) -> Standing {
    match settled {
        // Neither: our result is not the spec's either (or we refuse a
        // valid model), so it is our bug whatever theirs is.
        Settled::TheirsRight | Settled::Neither => Standing::OursWrong,
        Settled::OursRight if known => Standing::Accounted,
        Settled::BothRight | Settled::Undefined => Standing::Accounted,
        Settled::OursRight | Settled::Unsettled => Standing::Unexplained,
    }
}

/// Lists what the campaign holds against us and fails the run on it:
/// always for a disagreement the oracle settles for the other runtime,
/// with `strict` for any that no known finding settles for us.
fn conclude(s: &Summary, strict: bool) -> Result<()> {
    if !s.ours_wrong.is_empty() {
        println!(
            "{} disagreements where the oracle sides with {} or with neither side (our bug):",
            s.ours_wrong.len(),
            s.against
        );
        for u in s.ours_wrong.iter().take(40) {
            println!("  {}", u.text);
        }
    }
    if !s.failures.is_empty() {
        println!(
            "{} disagreements are neither settled for us by a known finding nor undefined:",
            s.failures.len()
        );
        for u in s.failures.iter().take(40) {
            println!("  {}", u.text);
        }
    }
    if !s.ours_wrong.is_empty() {
        bail!(
            "{} disagreements against {} where the oracle finds our result wrong (it sides with {} or with neither): our kernels are wrong there",
            s.ours_wrong.len(),
            s.against,
            s.against
        );
    }
    if strict && !s.failures.is_empty() {
        bail!(
            "{} disagreements against {} are not known findings settled in our favour (cases/differential/known.toml)",
            s.failures.len(),
            s.against
        );
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
    plant_bug: Option<&str>,
) -> Result<(Case, Evaluated)> {
    let mut budget = 400;
    'outer: while budget > 0 {
        for cand in shrink::candidates(&case) {
            budget -= 1;
            if budget == 0 {
                break 'outer;
            }
            let ce = evaluate(&cand, seed, worker, work, plant_bug)?;
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

fn print_table(s: &Summary) {
    let shard = if s.shards.of > 1 {
        format!("; shards {:?} of {}", s.shards.parts, s.shards.of)
    } else {
        String::new()
    };
    println!(
        "\nDifferential run against {} (seed {}, {} cases per operator{shard}); disagreements settled by the oracle",
        s.against, s.seed, s.count
    );
    let header = [
        "cases",
        "agree",
        "both✗",
        "values",
        "theirs✗",
        "ours✗",
        "crash",
        "ours✓",
        "theirs✓",
        "both✓",
        "neither",
        "undef",
        "unsettled",
    ];
    let line = |op: &str, v: &str, feature: &str, cells: &[usize]| {
        let mut s = format!("{op:<14} {v:>4}  {feature:<22}");
        for (h, c) in header.iter().zip(cells) {
            s.push_str(&format!(" {:>w$}", c, w = h.chars().count().max(5)));
        }
        s
    };
    let mut head = format!("{:<14} {:>4}  {:<22}", "op", "ver", "feature");
    for h in header {
        head.push_str(&format!(" {:>w$}", h, w = h.chars().count().max(5)));
    }
    println!("{head}");
    let cells = |r: &Row| {
        let k = |x: Kind| r.kinds.get(x.name()).copied().unwrap_or(0);
        let s = |x: Settled| r.settled.get(x.name()).copied().unwrap_or(0);
        vec![
            r.kinds.values().sum(),
            k(Kind::Agree),
            k(Kind::BothError),
            k(Kind::Values),
            k(Kind::TheirsError),
            k(Kind::OursError),
            k(Kind::Crash),
            s(Settled::OursRight),
            s(Settled::TheirsRight),
            s(Settled::BothRight),
            s(Settled::Neither),
            s(Settled::Undefined),
            s(Settled::Unsettled),
        ]
    };
    let mut total = Row::default();
    for row in &s.rows {
        for (k, c) in &row.kinds {
            *total.kinds.entry(k.clone()).or_default() += c;
        }
        for (k, c) in &row.settled {
            *total.settled.entry(k.clone()).or_default() += c;
        }
        println!(
            "{}",
            line(&row.op, &row.version.to_string(), &row.feature, &cells(row))
        );
    }
    println!("{}", line("total", "", "", &cells(&total)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_wrong_result_fails_every_run_whatever_theirs_is() {
        for known in [false, true] {
            assert_eq!(standing(Settled::TheirsRight, known), Standing::OursWrong);
            // Both sides wrong is still our bug, not a strict-only failure.
            assert_eq!(standing(Settled::Neither, known), Standing::OursWrong);
            assert_eq!(standing(Settled::BothRight, known), Standing::Accounted);
            assert_eq!(standing(Settled::Undefined, known), Standing::Accounted);
            assert_eq!(standing(Settled::Unsettled, known), Standing::Unexplained);
        }
        assert_eq!(standing(Settled::OursRight, true), Standing::Accounted);
        assert_eq!(standing(Settled::OursRight, false), Standing::Unexplained);
    }

    fn conv(auto_pad: &'static str, strides: Vec<usize>) -> Case {
        Case::Conv(gen::ConvCase {
            version: 11,
            dtype: onnx_conformance::DataType::Float,
            batch: 1,
            in_per_group: 1,
            out_per_group: 1,
            group: 1,
            spatial: vec![4],
            kernel: vec![1],
            strides,
            dilations: vec![1],
            pads: None,
            auto_pad,
            bias: false,
        })
    }

    fn values_disagreement() -> Evaluated {
        Evaluated {
            kind: Kind::Values,
            ours: Ok(Vec::new()),
            theirs: Theirs::Ok(Vec::new()),
            detail: "values differ".into(),
            observed: Vec::new(),
        }
    }

    const ORT_SAME: &str = "[[finding]]\nruntime = \"onnxruntime\"\nop = \"Conv\"\nkind = \"values\"\nwhen = [\"auto_pad:SAME_UPPER|SAME_LOWER\", \"same_pad_negative\"]\nreason = \"r\"\n";

    #[test]
    fn findings_match_by_predicates_and_only_when_ours_is_right() {
        let known: Known = toml::from_str(ORT_SAME).unwrap();
        let e = values_disagreement();
        let same = conv("SAME_UPPER", vec![4]);
        let notset = conv("NOTSET", vec![4]);
        let find = |c: &Case, s| known_finding(&known.finding, "onnxruntime", c, &e, s).is_some();
        assert!(same.tags().contains(&"same_pad_negative".to_string()));
        assert!(find(&same, Settled::OursRight));
        // The old tag (stride > kernel) is set for NOTSET too: the
        // predicates are not.
        assert!(notset.tags().contains(&"stride_gt_kernel".to_string()));
        assert!(!find(&notset, Settled::OursRight));
        // Never an excuse for our own error.
        assert!(!find(&same, Settled::TheirsRight));
        assert!(!find(&same, Settled::Neither));
        assert!(!find(&same, Settled::Unsettled));
        assert!(!find(&same, Settled::Undefined));
        // SAME with a stride that leaves no negative padding: not the bug.
        assert!(!find(&conv("SAME_UPPER", vec![1]), Settled::OursRight));
        assert!(toml::from_str::<Known>("[[finding]]\nruntime = \"x\"\nop = \"Conv\"\nkind = \"values\"\ntags = []\nreason = \"r\"\n").is_err());
    }

    #[test]
    fn every_committed_values_finding_names_a_property_seen_in_the_outputs() {
        // A values finding matched by the case's parameters alone would
        // excuse any wrong output of that kind of case; each must name what
        // the runtime is seen to compute.
        let known: Known =
            toml::from_str(include_str!("../../../cases/differential/known.toml")).unwrap();
        let seen: Vec<&str> = onnx_conformance::observed::PROPERTIES
            .iter()
            .copied()
            .chain(observed::REFLECTIONS.iter().map(|(name, _)| *name))
            .collect();
        for f in known.finding.iter().filter(|f| f.kind == "values") {
            assert!(
                f.when.iter().any(|p| seen.contains(&p.as_str())),
                "{} {} finding ({}) names no observed property of {seen:?}",
                f.runtime,
                f.op,
                f.reason
            );
        }
    }

    #[test]
    fn a_reflect_finding_matches_only_the_output_it_describes() {
        // The committed list: tract's zero-filled reflection excuses a
        // reflect case past the axis only where that is what was seen.
        let known: Known =
            toml::from_str(include_str!("../../../cases/differential/known.toml")).unwrap();
        let case = Case::Pad(gen::PadCase {
            version: 11,
            dtype: onnx_conformance::DataType::Float,
            shape: vec![2],
            pads: vec![2, 1],
            axes: None,
            mode: "reflect",
            value: None,
        });
        let mut e = values_disagreement();
        let find = |e: &Evaluated| {
            known_finding(&known.finding, "tract", &case, e, Settled::OursRight).is_some()
        };
        assert!(!find(&e));
        e.observed = vec!["reflect_into_zeroed_output".into()];
        assert!(find(&e));
        // Another runtime's reflection is not tract's.
        e.observed = vec!["reflect_modulo_length".into()];
        assert!(!find(&e));
    }

    #[test]
    fn kernel_exceeds_input_is_tagged_where_the_output_is_empty_only() {
        let with = |kernel: usize, dilation: usize, pads: Option<Vec<usize>>, auto_pad| {
            let mut c = conv(auto_pad, vec![1]);
            if let Case::Conv(cc) = &mut c {
                (cc.kernel, cc.dilations, cc.pads) = (vec![kernel], vec![dilation], pads);
            }
            c.tags().contains(&"kernel_exceeds_input".to_string())
        };
        // spatial 4: a dilated extent of 5 leaves nothing unless padded.
        assert!(with(5, 1, Some(vec![0, 0]), "NOTSET"));
        assert!(with(2, 4, Some(vec![0, 0]), "NOTSET"));
        assert!(!with(4, 1, Some(vec![0, 0]), "NOTSET"));
        assert!(!with(5, 1, Some(vec![1, 0]), "NOTSET"));
        assert!(with(5, 1, None, "VALID"));
        assert!(!with(4, 1, None, "VALID"));
        assert!(!with(9, 1, None, "SAME_UPPER"));
    }

    #[test]
    fn the_planted_bug_hits_notset_with_stride_above_kernel_only() {
        let bug = Some("conv-notset-stride-gt-kernel");
        assert!(planted_here(bug, &conv("NOTSET", vec![4])));
        assert!(!planted_here(bug, &conv("NOTSET", vec![1])));
        assert!(!planted_here(bug, &conv("SAME_UPPER", vec![4])));
        assert!(!planted_here(None, &conv("NOTSET", vec![4])));
        let mut out = vec![Tensor::from_vec(&[2], vec![2.0f32, 3.0])];
        plant(&mut out);
        assert_eq!(
            out[0].array::<f32>().unwrap().as_slice().unwrap(),
            &[2.52, 3.0]
        );
    }
}
