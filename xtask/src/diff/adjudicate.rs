//! Settles each disagreement of a differential run with an independent
//! oracle (`adjudicate.py`: the numpy oracles of the case generator and
//! onnx's checker), run in one batch through the xtask's pinned Python
//! environment. Both sides are judged against the oracle under the same
//! strict verdict policy as the conformance suite.

use anyhow::{Context, Result};
use onnx_conformance::{compare, verdict, Model, Tensor};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Who the oracle sides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Settled {
    /// Our result (or rejection) is what the spec gives; theirs is not.
    OursRight,
    /// Theirs is right and ours is not: our bug, always a failure.
    TheirsRight,
    /// Both are within the policy of the oracle (a pair can differ by
    /// more than one side's share of the bound).
    BothRight,
    /// Neither side gives what the spec gives.
    Neither,
    /// The spec calls the behaviour undefined or does not address it.
    Undefined,
    /// The oracle could not decide.
    Unsettled,
}

impl Settled {
    pub fn name(self) -> &'static str {
        match self {
            Settled::OursRight => "ours right",
            Settled::TheirsRight => "theirs right",
            Settled::BothRight => "both right",
            Settled::Neither => "neither",
            Settled::Undefined => "undefined by the spec",
            Settled::Unsettled => "not settled",
        }
    }
}

/// The oracle's answer for one case folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// ok, invalid, undefined or unavailable.
    pub status: String,
    pub why: String,
    pub outputs: Vec<Tensor>,
}

#[derive(Deserialize)]
struct VerdictFile {
    status: String,
    why: String,
}

/// Runs the oracle once over every folder and reads its answers.
pub fn ask(folders: &[PathBuf], scratch: &Path) -> Result<Vec<Answer>> {
    if folders.is_empty() {
        return Ok(Vec::new());
    }
    let target = crate::target_dir();
    let env = crate::python::venv(&target, "cases-venv", crate::python::CASE_REQUIREMENTS)?;
    std::fs::create_dir_all(scratch)?;
    std::fs::write(
        scratch.join("adjudicate.py"),
        include_str!("../adjudicate.py"),
    )?;
    std::fs::write(
        scratch.join("gen_oracle_cases.py"),
        include_str!("../gen_oracle_cases.py"),
    )?;
    let list = scratch.join("folders.txt");
    let text: String = folders
        .iter()
        .map(|f| format!("{}\n", f.display()))
        .collect();
    std::fs::write(&list, text)?;
    crate::python::run(
        Command::new(&env.python)
            .arg(scratch.join("adjudicate.py"))
            .arg(&list),
    )
    .context("running the oracle (adjudicate.py)")?;
    folders.iter().map(|f| read_answer(f)).collect()
}

fn read_answer(folder: &Path) -> Result<Answer> {
    let dir = folder.join("oracle");
    let file = dir.join("verdict.json");
    let v: VerdictFile = serde_json::from_str(
        &std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?,
    )
    .with_context(|| format!("parsing {}", file.display()))?;
    Ok(Answer {
        status: v.status,
        why: v.why,
        outputs: super::read_outputs(&dir)?,
    })
}

/// What one side did: its outputs, a clean rejection, or a crash.
#[derive(Debug, Clone, Copy)]
pub enum Side<'a> {
    Outputs(&'a [Tensor]),
    Rejected,
    Crashed,
}

/// Whether a side is right by the oracle: `Ok(None)` right, `Ok(Some(why))`
/// right only under arithmetic the spec leaves open (a float16/bfloat16
/// Conv summed in that type), `Err(why not)` wrong.
fn judge(
    side: Side,
    answer: &Answer,
    policies: &[Result<compare::Policy, String>],
) -> Result<Option<String>, String> {
    match (answer.status.as_str(), side) {
        ("invalid", Side::Rejected) => Ok(None),
        ("invalid", _) => Err(format!(
            "accepted a model the spec rejects ({})",
            answer.why
        )),
        ("ok", Side::Outputs(outs)) => {
            if outs.len() != answer.outputs.len() {
                return Err(format!(
                    "{} outputs, the spec gives {}",
                    outs.len(),
                    answer.outputs.len()
                ));
            }
            let mut open = Vec::new();
            for (k, (o, e)) in outs.iter().zip(&answer.outputs).enumerate() {
                let policy = match policies.get(k) {
                    Some(Ok(p)) => p,
                    Some(Err(why)) => return Err(why.clone()),
                    None => return Err(format!("no policy for output {k}")),
                };
                match compare::compare(e, o, policy) {
                    Err(s) => return Err(s),
                    Ok(m) if m.mismatches > 0 => {
                        match compare::within_unspecified(e, o, policy, &m) {
                            Some(why) => open.push(format!("output {k}: {why}")),
                            None => return Err(compare::describe(&m, e.shape(), policy)),
                        }
                    }
                    Ok(_) => {}
                }
            }
            Ok((!open.is_empty()).then(|| open.join("; ")))
        }
        ("ok", Side::Rejected) => Err("rejected a model the spec accepts".into()),
        (_, Side::Crashed) => Err("crashed".into()),
        (status, _) => Err(format!("oracle status '{status}'")),
    }
}

/// Settles one disagreement; the text explains the verdict.
pub fn settle(
    model: &Model,
    inputs: &[Tensor],
    ours: Side,
    theirs: Side,
    answer: &Answer,
) -> (Settled, String) {
    match answer.status.as_str() {
        "undefined" => return (Settled::Undefined, answer.why.clone()),
        "ok" | "invalid" => {}
        _ => return (Settled::Unsettled, answer.why.clone()),
    }
    let policies = verdict::policies(model, inputs, verdict::Tolerance::Strict);
    // Ours is held to the float32 sum rounded once that our kernels promise
    // (README): the spec's room must not hide our own regression.
    let o = judge(ours, answer, &policies).and_then(|open| match open {
        None => Ok(None),
        Some(why) => Err(format!(
            "our float16/bfloat16 Conv must be a float32 sum rounded once: {why}"
        )),
    });
    let t = judge(theirs, answer, &policies);
    let why = |side: &str, r: &Result<Option<String>, String>| match r {
        Ok(None) => format!("{side}: as the spec"),
        Ok(Some(open)) => format!(
            "{side}: undefined by the spec (it does not fix the accumulation precision): {open}"
        ),
        Err(e) => format!("{side}: {e}"),
    };
    let text = format!("{}; {}", why("ours", &o), why("theirs", &t));
    let settled = match (o.is_ok(), &t) {
        (true, Err(_)) => Settled::OursRight,
        // Ours is wrong whatever the room theirs had.
        (false, Ok(_)) => Settled::TheirsRight,
        (true, Ok(None)) => Settled::BothRight,
        (true, Ok(Some(_))) => Settled::Undefined,
        (false, Err(_)) => Settled::Neither,
    };
    (settled, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_conformance::model::{Graph, Node, ValueInfo};

    /// One `op` node at `opset` from graph inputs `inputs` to output `y`.
    fn single_node(op: &str, opset: i64, inputs: &[&str]) -> Model {
        let v = |n: &str| ValueInfo {
            name: n.into(),
            ..ValueInfo::default()
        };
        Model {
            ir_version: 8,
            opset_import: vec![(String::new(), opset)],
            graph: Graph {
                name: "g".into(),
                nodes: vec![Node::new("", op, inputs, &["y"], vec![])],
                initializers: Vec::new(),
                inputs: inputs.iter().map(|n| v(n)).collect(),
                outputs: vec![v("y")],
            },
        }
    }

    fn pad_model() -> Model {
        single_node("Pad", 18, &["x", "p"])
    }

    fn ok(values: &[f32]) -> Answer {
        Answer {
            status: "ok".into(),
            why: "numpy".into(),
            outputs: vec![Tensor::from_vec(&[values.len()], values.to_vec())],
        }
    }

    #[test]
    fn the_oracle_picks_a_side() {
        let m = pad_model();
        let right = [Tensor::from_vec(&[2], vec![0.0f32, 1.0])];
        let wrong = [Tensor::from_vec(&[2], vec![0.0f32, 1.5])];
        let a = ok(&[0.0, 1.0]);
        let s = |o, t| settle(&m, &[], o, t, &a).0;
        assert_eq!(
            s(Side::Outputs(&right), Side::Outputs(&wrong)),
            Settled::OursRight
        );
        assert_eq!(
            s(Side::Outputs(&wrong), Side::Outputs(&right)),
            Settled::TheirsRight
        );
        assert_eq!(
            s(Side::Outputs(&wrong), Side::Outputs(&wrong)),
            Settled::Neither
        );
        assert_eq!(s(Side::Outputs(&right), Side::Rejected), Settled::OursRight);
        assert_eq!(
            s(Side::Rejected, Side::Outputs(&right)),
            Settled::TheirsRight
        );
        assert_eq!(s(Side::Outputs(&right), Side::Crashed), Settled::OursRight);
        // Data movement is judged bit for bit, also against the oracle.
        let neg_zero = [Tensor::from_vec(&[2], vec![-0.0f32, 1.0])];
        assert_eq!(
            s(Side::Outputs(&neg_zero), Side::Outputs(&right)),
            Settled::TheirsRight
        );
    }

    /// A float16 Conv of four ones by four ones: only as accurate as a
    /// float16 sum is undefined for them and wrong for ours.
    #[test]
    fn a_half_type_conv_only_as_good_as_a_half_sum_is_theirs_undefined_and_ours_wrong() {
        use half::f16;
        let m = single_node("Conv", 22, &["x", "w"]);
        let ones = || Tensor::from_vec(&[1, 1, 1, 4], vec![f16::ONE; 4]);
        let inputs = [ones(), ones()];
        let y = |value: f32| [Tensor::from_vec(&[1, 1, 1, 1], vec![f16::from_f32(value)])];
        let answer = Answer {
            status: "ok".into(),
            why: "numpy".into(),
            outputs: y(4.0).to_vec(),
        };
        let Some(Ok(compare::Policy::ErrorBound(strict))) =
            verdict::policies(&m, &inputs, verdict::Tolerance::Strict).pop()
        else {
            panic!("Conv is judged by an error bound")
        };
        let wide = strict
            .unspecified
            .clone()
            .expect("a wider bound for float16");
        // Values of the type around 4 are 2^-8 apart: the first past the
        // strict bound, and the first past the wide one.
        let step = 1.0 / 256.0;
        let past = |bound: f64| 4.0 + step * ((bound / step as f64).floor() as f32 + 1.0);
        let (open, wrong) = (past(strict.at(0, 4.0)), past(wide.at(0, 4.0)));
        assert!(open < 4.0 + wide.at(0, 4.0) as f32, "{open} {wrong}");
        let (right, open, wrong) = (y(4.0), y(open), y(wrong));
        let s = |o, t| settle(&m, &inputs, o, t, &answer);
        let (settled, text) = s(Side::Outputs(&right), Side::Outputs(&open));
        assert_eq!(settled, Settled::Undefined, "{text}");
        assert!(text.contains("theirs: undefined by the spec"), "{text}");
        assert_eq!(
            s(Side::Outputs(&right), Side::Outputs(&wrong)).0,
            Settled::OursRight
        );
        let (settled, text) = s(Side::Outputs(&open), Side::Outputs(&right));
        assert_eq!(settled, Settled::TheirsRight, "{text}");
        assert!(
            text.contains("must be a float32 sum rounded once"),
            "{text}"
        );
        assert_eq!(
            s(Side::Outputs(&open), Side::Outputs(&open)).0,
            Settled::TheirsRight
        );
    }

    #[test]
    fn invalid_undefined_and_unavailable() {
        let m = pad_model();
        let out = [Tensor::from_vec(&[1], vec![1.0f32])];
        let answer = |status: &str| Answer {
            status: status.into(),
            why: "because".into(),
            outputs: Vec::new(),
        };
        let s = |o, t, a: &Answer| settle(&m, &[], o, t, a).0;
        let invalid = answer("invalid");
        assert_eq!(
            s(Side::Rejected, Side::Outputs(&out), &invalid),
            Settled::OursRight
        );
        assert_eq!(
            s(Side::Outputs(&out), Side::Rejected, &invalid),
            Settled::TheirsRight
        );
        assert_eq!(
            s(Side::Rejected, Side::Crashed, &invalid),
            Settled::OursRight
        );
        assert_eq!(
            s(Side::Rejected, Side::Outputs(&out), &answer("undefined")),
            Settled::Undefined
        );
        assert_eq!(
            s(Side::Rejected, Side::Outputs(&out), &answer("unavailable")),
            Settled::Unsettled
        );
    }
}
