//! Unit tests of the harness modules. The conformance target has no libtest,
//! so its modules' tests run here.
#![allow(dead_code)]

#[path = "cli.rs"]
mod cli;
#[path = "discover.rs"]
mod discover;
#[path = "expectations.rs"]
mod expectations;
#[path = "invalid.rs"]
mod invalid;
#[path = "reading.rs"]
mod reading;
#[path = "record.rs"]
mod record;
#[path = "run_case.rs"]
mod run_case;
#[path = "timeout.rs"]
mod timeout;
#[path = "variants.rs"]
mod variants;
#[path = "verdict_tests.rs"]
mod verdict_tests;

use onnx_conformance::backend::Ours;
use onnx_conformance::Limits;
use std::path::{Path, PathBuf};

/// A fresh folder in the system's temporary folder, and its path. The folder
/// and everything in it are removed when the `TempDir` is dropped, so bind
/// it to a named variable (`_dir`, not `_`, which drops it at once) for as
/// long as the path is used.
fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("harness-unit-{name}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

fn copy_case(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("test_data_set_0")).unwrap();
    std::fs::copy(from.join("model.onnx"), to.join("model.onnx")).unwrap();
    for e in std::fs::read_dir(from.join("test_data_set_0")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("test_data_set_0").join(e.file_name())).unwrap();
    }
}

fn check(case: &discover::Case, target: &Path) -> Result<(), String> {
    match run_case::check_verdict(case, 0, &Ours::default(), target, Limits::default()).failure {
        None => Ok(()),
        Some(m) => Err(m),
    }
}

fn official(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/node")
        .join(name)
}

#[test]
fn zero_cases_is_an_error_naming_the_folder() {
    let (_dir, root) = scratch("empty");
    let e = discover::discover(std::slice::from_ref(&root))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&root.display().to_string()) && e.contains("no cases found"),
        "{e}"
    );
    let e = discover::discover(&[root.join("missing")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
}

#[test]
fn cases_are_named_by_source_and_folder() {
    let (_dir, root) = scratch("names");
    copy_case(&official("test_edge_pad"), &root.join("mine/test_edge_pad"));
    copy_case(&official("test_wrap_pad"), &root.join("test_wrap_pad"));
    let cases = discover::discover(std::slice::from_ref(&root)).unwrap();
    let ids: Vec<String> = cases.iter().map(|c| c.id()).collect();
    let base = root.file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(
        ids,
        vec![
            format!("{base}/test_wrap_pad"),
            "mine/test_edge_pad".to_string()
        ]
    );
}

#[test]
fn garbage_model_and_tensor_files_name_the_case() {
    let (_dir, root) = scratch("garbage");
    let dir = root.join("src/test_edge_pad");
    copy_case(&official("test_edge_pad"), &dir);
    let target = root.join("target");
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    assert!(check(&case, &target).is_ok());

    let good = std::fs::read(dir.join("model.onnx")).unwrap();
    std::fs::write(dir.join("model.onnx"), &good[..good.len() / 2]).unwrap();
    let e = format!("{:#}", check(&case, &target).unwrap_err());
    assert!(
        e.contains("test_edge_pad/model.onnx") && e.contains("cannot decode model"),
        "{e}"
    );
    std::fs::write(dir.join("model.onnx"), &good).unwrap();

    std::fs::write(dir.join("test_data_set_0/input_0.pb"), [0xff, 0xff, 0xff]).unwrap();
    let e = format!("{:#}", check(&case, &target).unwrap_err());
    assert!(
        e.contains("test_data_set_0/input_0.pb") && e.contains("cannot decode tensor"),
        "{e}"
    );
}

/// Invalid input made elsewhere has no expected_error.toml: run as
/// ordinary cases, every one of the invalid suite's folders must fail with
/// an error (a panic would abort this test), and so must odd layouts.
#[test]
fn foreign_invalid_cases_fail_with_errors_not_crashes() {
    let (_dir, root) = scratch("foreign");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/invalid");
    let mut copied = 0;
    for e in std::fs::read_dir(&from).unwrap() {
        let src = e.unwrap().path();
        if !src.is_dir() {
            continue; // ONNX_AUDIT.toml
        }
        let dest = root.join("elsewhere").join(src.file_name().unwrap());
        for f in walkdir::WalkDir::new(&src) {
            let f = f.unwrap();
            let rel = f.path().strip_prefix(&src).unwrap();
            if f.file_type().is_dir() {
                std::fs::create_dir_all(dest.join(rel)).unwrap();
            } else if f.file_name() != "expected_error.toml" {
                std::fs::copy(f.path(), dest.join(rel)).unwrap();
            }
        }
        copied += 1;
    }
    assert!(copied >= 30, "only {copied} invalid cases");
    let odd = root.join("elsewhere/zz_odd_layout");
    copy_case(&official("test_edge_pad"), &odd);
    std::fs::create_dir_all(odd.join("test_data_set_x")).unwrap();
    let cases = discover::discover(std::slice::from_ref(&root)).unwrap();
    assert_eq!(cases.len(), copied + 1);
    let target = root.join("target");
    for case in &cases {
        if let Some(problem) = &case.layout_error {
            assert!(problem.contains("has no number"), "{problem}");
            continue;
        }
        assert!(case.expected_error.is_none());
        let e = check(case, &target).expect_err(&case.id());
        assert!(e.contains(&case.name), "{e}");
    }
}

#[test]
fn a_wrong_expected_output_fails_with_a_report_and_artifacts() {
    let (_dir, root) = scratch("wrong");
    let dir = root.join("src/test_wrap_pad");
    copy_case(&official("test_wrap_pad"), &dir);
    // Swap in another case's output: same dtype family, different shape.
    std::fs::copy(
        official("test_edge_pad").join("test_data_set_0/output_0.pb"),
        dir.join("test_data_set_0/output_0.pb"),
    )
    .unwrap();
    let target = root.join("target");
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    let e = format!("{:#}", check(&case, &target).unwrap_err());
    assert!(e.contains("case src/test_wrap_pad"), "{e}");
    assert!(e.contains("data set 0"), "{e}");
    assert!(e.contains("output 0 'y'"), "{e}");
    assert!(e.contains("values differ"), "{e}");
    assert!(target
        .join("conformance/src/test_wrap_pad/output_0.npy")
        .is_file());
}

fn oracle(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/oracle")
        .join(name)
}

fn prepared(name: &str) -> run_case::Prepared {
    prepared_from(&official(name))
}

fn prepared_from(dir: &Path) -> run_case::Prepared {
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    // Tests that prepare the same case in parallel still get a folder each:
    // tempfile makes every name unique.
    let (_dir, root) = scratch(&format!("variant-{name}"));
    copy_case(dir, &root.join("node").join(&name));
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    run_case::prepare(&case, 0, Limits::default()).unwrap()
}

#[test]
fn pad_cases_rewrite_to_attribute_form_and_back() {
    let p = prepared("test_edge_pad");
    let v2 = variants::at_version(&p, 25, 2).unwrap_err();
    assert_eq!(
        v2,
        "Pad-2 allows double, float and float16 only (widened in Pad-11)"
    );
    let v11 = variants::at_version(&p, 25, 11).unwrap();
    assert_eq!(v11.model.opset(""), Some(11));
    let out = onnx_conformance::graph::run(&v11.model, &v11.inputs, Default::default()).unwrap();
    assert_eq!(out[0], p.outputs[0].1);

    let c = prepared("test_constant_pad");
    let v2 = variants::at_version(&c, 25, 2).unwrap();
    let node = &v2.model.graph.nodes[0];
    assert_eq!(node.inputs.len(), 1);
    assert!(node.attribute("pads").is_some() && node.attribute("value").is_some());
    let out = onnx_conformance::graph::run(&v2.model, &v2.inputs, Default::default()).unwrap();
    assert_eq!(out[0], c.outputs[0].1);
}

#[test]
fn inexpressible_versions_cite_the_change() {
    let w = prepared("test_wrap_pad");
    assert_eq!(
        variants::at_version(&w, 25, 18).unwrap_err(),
        "Pad-18 has no mode 'wrap' (added in Pad-19)"
    );
}

/// Pad-18's `axes` become full-rank pads before Pad-18. Each rewritten
/// model runs through ours and is judged by the case file's own expected
/// output (onnx's generator or the numpy oracle), not by the expansion.
#[test]
fn pad_axes_expand_to_full_rank_pads_at_older_versions() {
    let cases = [
        (official("test_constant_pad_axes"), &[1, 2, 11, 13, 18][..]),
        (
            official("test_constant_pad_negative_axes"),
            &[1, 2, 11, 13][..],
        ),
        // int32 data: Pad-1/2 allow floats only.
        (
            oracle("test_pad18_int32_reflect_axes_no_value"),
            &[11, 13][..],
        ),
    ];
    for (dir, versions) in cases {
        let p = prepared_from(&dir);
        let (_, from) = variants::single_node(&p.model).unwrap();
        for &to in versions {
            let what = format!("{} at Pad-{to}", dir.display());
            let v = variants::at_version(&p, from, to).unwrap_or_else(|e| panic!("{what}: {e}"));
            let node = &v.model.graph.nodes[0];
            assert_eq!(
                node.inputs.len() == 4,
                to >= 18,
                "{what}: {:?}",
                node.inputs
            );
            let out = onnx_conformance::graph::run(&v.model, &v.inputs, Default::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(out[0], p.outputs[0].1, "{what}");
        }
    }
}

#[test]
fn repeated_or_out_of_range_axes_stay_inexpressible() {
    let mut a = prepared("test_constant_pad_axes");
    // -3 is axis 1 of the rank-4 data, named twice.
    a.inputs[3] = onnx_conformance::Tensor::from_vec(&[2], vec![1i64, -3]);
    let e = variants::at_version(&a, 25, 13).unwrap_err();
    assert!(
        e.starts_with("Pad-13 has no input 'axes' (added in Pad-18)")
            && e.contains("name axis 1 twice")
            && e.contains("Behavior is undefined"),
        "{e}"
    );
    assert!(variants::at_version(&a, 25, 18).is_ok());
    for bad in [4i64, -5] {
        let e = variants::full_rank_pads(&[1, 2], &[bad], 4, 2).unwrap_err();
        assert!(
            e.contains(&format!("axis {bad} is out of range for rank 4")),
            "{e}"
        );
    }
    let e = variants::full_rank_pads(&[1, 2, 3], &[0], 4, 11).unwrap_err();
    assert!(e.contains("3 pads for 1 axes"), "{e}");
}

fn later_reading_of(dir: &Path) -> Option<String> {
    let model =
        onnx_conformance::proto::load_model_file(&dir.join("model.onnx"), Limits::default())
            .unwrap();
    let (node, version) = variants::single_node(&model).unwrap();
    reading::later_reading(node, version)
}

/// Conv-1 SAME_* with a stride above 1 and Pad-1 with negative paddings are
/// judged by Conv-11's and Pad-2's texts: labelled, whether the case is
/// written at the old version or rewritten to it.
#[test]
fn later_readings_are_labelled() {
    for name in [
        "test_conv1_float_same_upper",
        "test_conv1_double_same_lower_1d",
    ] {
        let r = later_reading_of(&oracle(name)).unwrap_or_else(|| panic!("{name}"));
        assert!(r.contains("ceil(input_shape[i] / strides[i])"), "{r}");
    }
    let r = later_reading_of(&oracle("test_pad1_float_edge_negative")).unwrap();
    assert!(r.contains("add or remove (if negative)"), "{r}");
    for name in [
        "test_conv1_float_basic",
        "test_conv1_float_valid",
        "test_conv11_float_same_upper",
        "test_pad1_float_edge_basic",
        "test_pad2_float_edge_negative",
    ] {
        assert_eq!(later_reading_of(&oracle(name)), None, "{name}");
    }

    let variant_reading = |name: &str, to: i64| {
        let p = prepared_from(&oracle(name));
        let (_, from) = variants::single_node(&p.model).unwrap();
        let v = variants::at_version(&p, from, to).unwrap();
        let (node, version) = variants::single_node(&v.model).unwrap();
        reading::later_reading(node, version)
    };
    assert!(variant_reading("test_conv11_float_same_lower", 1).is_some());
    assert!(variant_reading("test_conv11_float_same_lower", 22).is_none());
    assert!(variant_reading("test_pad11_float_reflect_negative", 1).is_some());
    assert!(variant_reading("test_pad11_float_reflect_negative", 2).is_none());
    assert!(variant_reading("test_pad11_float_reflect_negative", 1)
        .is_some_and(|r| reading::label("x@Pad-1".into(), Some(&r)) == "x@Pad-1~later-reading"));
}

/// Found by running fuzzed folders with ONNX_CASES: a data set with fewer
/// inputs than the model's graph inputs made variant building index past
/// the end, at discovery, which stopped the whole run.
#[test]
fn variants_of_a_data_set_missing_inputs_are_an_error() {
    let mut p = prepared("test_basic_conv_with_padding");
    let (_, from) = variants::single_node(&p.model).unwrap();
    p.inputs.truncate(1);
    let e = variants::at_version(&p, from, 1).unwrap_err();
    assert!(e.contains("no value for graph input"), "{e}");
}

/// The invalid-input checker fails a trial when the input is accepted, when
/// the error differs in kind or message, and when its file is malformed.
#[test]
fn invalid_trials_fail_unless_rejected_as_expected() {
    let (_dir, root) = scratch("invalid-check");
    let dir = root.join("invalid/edge_pad");
    copy_case(&official("test_edge_pad"), &dir);
    let verdict = |toml: &str| {
        std::fs::write(dir.join("expected_error.toml"), toml).unwrap();
        let case = discover::discover(std::slice::from_ref(&root))
            .unwrap()
            .remove(0);
        assert!(case.expected_error.is_some());
        invalid::check(&case, &Ours::default(), Limits::default()).failure
    };
    let accepted = verdict("kind = \"attribute\"\nmessage = \"mode\"\nwhy = \"w\"\n").unwrap();
    assert!(
        accepted.contains("ours accepted it and produced 1 outputs"),
        "{accepted}"
    );
    // Under a tiny output limit the same case is rejected as a limit.
    let limit = "kind = \"limit\"\nmessage = \"max_output_bytes = 8\"\nwhy = \"w\"\nlimits = \"max_output_bytes=8\"\n";
    assert_eq!(verdict(limit), None);
    let wrong_kind = verdict(&limit.replace("\"limit\"", "\"input\"")).unwrap();
    assert!(wrong_kind.contains("got a 'limit' error"), "{wrong_kind}");
    let wrong_text = verdict(&limit.replace("= 8\"\nwhy", "= 9\"\nwhy")).unwrap();
    assert!(
        wrong_text.contains("expected a 'limit' error containing"),
        "{wrong_text}"
    );
    let unknown = verdict("kind = \"oops\"\nmessage = \"m\"\nwhy = \"w\"\n").unwrap();
    assert!(unknown.contains("unknown kind 'oops'"), "{unknown}");
    let extra =
        verdict("kind = \"limit\"\nmessage = \"m\"\nwhy = \"w\"\nreason = \"r\"\n").unwrap();
    assert!(extra.contains("unknown field"), "{extra}");
    let bad_limits =
        verdict("kind = \"limit\"\nmessage = \"m\"\nwhy = \"w\"\nlimits = \"max_bogus=1\"\n")
            .unwrap();
    assert!(
        bad_limits.contains("unknown limit 'max_bogus'"),
        "{bad_limits}"
    );
}

fn invalid_case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/invalid")
        .join(name)
}

/// A case onnx accepts (per `ONNX_AUDIT.toml`) fails unless it quotes the
/// spec text that forbids it or is marked undefined; an audit that misses
/// the case fails it too.
#[test]
fn cases_onnx_accepts_need_a_spec_quote() {
    let (_dir, root) = scratch("invalid-audit");
    let dir = root.join("invalid/axes_twice");
    copy_case(&invalid_case("pad_axes_repeated"), &dir);
    let audit = |accepts: bool| {
        format!("[axes_twice]\nchecker = \"ok\"\nshape_inference = \"ok\"\nreference = \"ok: output shapes [4, 2]\"\nonnx_accepts = {accepts}\n")
    };
    let verdict = |toml: &str, audit: &str| {
        std::fs::write(dir.join("expected_error.toml"), toml).unwrap();
        std::fs::write(root.join("invalid/ONNX_AUDIT.toml"), audit).unwrap();
        let case = discover::discover(std::slice::from_ref(&root))
            .unwrap()
            .remove(0);
        invalid::check(&case, &Ours::default(), Limits::default()).failure
    };
    let bare = "kind = \"input\"\nmessage = \"is repeated\"\nwhy = \"w\"\n";
    let unquoted = verdict(bare, &audit(true)).unwrap();
    assert!(
        unquoted.contains("onnx accepts this case") && unquoted.contains("spec = "),
        "{unquoted}"
    );
    assert_eq!(verdict(bare, &audit(false)), None);
    assert_eq!(
        verdict(&format!("{bare}spec = \"s\"\n"), &audit(true)),
        None
    );
    assert_eq!(
        verdict(&format!("{bare}undefined = \"u\"\n"), &audit(true)),
        None
    );
    let both = verdict(
        &format!("{bare}spec = \"s\"\nundefined = \"u\"\n"),
        &audit(true),
    )
    .unwrap();
    assert!(both.contains("not both"), "{both}");
    let stale = verdict(bare, &audit(true).replace("[axes_twice]", "[other]")).unwrap();
    assert!(stale.contains("has no entry for axes_twice"), "{stale}");
}

/// A runtime that answers every run the same way.
struct Fake(&'static str);

impl onnx_conformance::backend::Backend for Fake {
    fn name(&self) -> &str {
        "fake"
    }

    fn version(&self) -> String {
        "fake 0".into()
    }

    fn run(
        &self,
        _: &onnx_conformance::Model,
        _: &[u8],
        _: &[onnx_conformance::Tensor],
    ) -> Result<Vec<onnx_conformance::Tensor>, onnx_conformance::backend::RunError> {
        use onnx_conformance::backend::RunError;
        match self.0 {
            "died" => Err(RunError::Crashed("killed by signal 11".into())),
            "hung" => Err(RunError::TimedOut("still running after 60s".into())),
            _ => Err("fake rejects parsed models".into()),
        }
    }

    fn check_input(&self, _: &onnx_conformance::Tensor) -> Result<(), String> {
        match self.0 {
            "picky" => Err("no such type here".into()),
            _ => Ok(()),
        }
    }

    fn run_files(
        &self,
        _: &Path,
        inputs: &[onnx_conformance::Tensor],
    ) -> onnx_conformance::backend::RawRun {
        use onnx_conformance::backend::RawRun;
        match self.0 {
            "reject" => RawRun::Rejected("no".into()),
            "accept" => RawRun::Ran(inputs.to_vec()),
            "cannot" => RawRun::CannotRun("no way".into()),
            "died" => RawRun::Crashed("killed by signal 11".into()),
            "hung" => RawRun::TimedOut("still running after 60s".into()),
            _ => panic!("fake crashed"),
        }
    }
}

/// A runtime process that dies is judged like a panic, and one stopped at
/// its time limit as a timeout, both for a valid case and for an invalid
/// one (whose model file reaches the runtime's own loader).
#[test]
fn crashes_and_timeouts_of_runtime_processes_are_judged_apart() {
    let p = prepared("test_constant_pad");
    let (_tmp, dir) = scratch("crash-timeout");
    let died = run_case::run_prepared("case x", &p, &Fake("died"), &dir);
    assert_eq!(died.kind, Some(run_case::FailureKind::Panic));
    assert!(died
        .failure
        .unwrap()
        .contains("fake crashed: killed by signal 11"));
    let hung = run_case::run_prepared("case x", &p, &Fake("hung"), &dir);
    assert_eq!(hung.kind, Some(run_case::FailureKind::Timeout));
    assert!(hung
        .failure
        .unwrap()
        .contains("fake timed out: still running after 60s"));

    let (_tmp, root) = scratch("invalid-crash");
    let case_dir = root.join("invalid/model_garbage");
    copy_case(&invalid_case("model_garbage"), &case_dir);
    std::fs::copy(
        invalid_case("model_garbage").join("expected_error.toml"),
        case_dir.join("expected_error.toml"),
    )
    .unwrap();
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    let died = invalid::check(&case, &Fake("died"), Limits::default());
    assert_eq!(died.kind, Some(run_case::FailureKind::Panic));
    assert!(died.failure.unwrap().contains("fake crashed"));
    let hung = invalid::check(&case, &Fake("hung"), Limits::default());
    assert_eq!(hung.kind, Some(run_case::FailureKind::Timeout));
    assert!(hung.failure.unwrap().contains("fake timed out"));
}

/// When our loader rejects the model, another runtime gets the file anyway:
/// it passes only by rejecting it; running it, crashing or being unable to
/// take it is never a pass. Input files our loader cannot decode cannot be
/// handed over at all.
#[test]
fn other_runtimes_get_the_files_our_loader_rejects() {
    let (_dir, root) = scratch("invalid-raw");
    let dir = root.join("invalid/model_garbage");
    copy_case(&invalid_case("model_garbage"), &dir);
    std::fs::copy(
        invalid_case("model_garbage").join("expected_error.toml"),
        dir.join("expected_error.toml"),
    )
    .unwrap();
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    let run = |how| invalid::check(&case, &Fake(how), Limits::default()).failure;
    assert_eq!(run("reject"), None);
    let accepted = run("accept").unwrap();
    assert!(accepted.contains("fake accepted it"), "{accepted}");
    let crashed = run("panic").unwrap();
    assert!(crashed.contains("fake panicked: fake crashed"), "{crashed}");
    let cannot = run("cannot").unwrap();
    assert!(cannot.contains("cannot be run by fake: no way"), "{cannot}");
    assert_eq!(
        invalid::cannot_run(&case, &Fake("reject"), Limits::default()),
        None
    );
    // An input of a type the runtime's API lacks cannot be given to it.
    let picky = invalid::cannot_run(&case, &Fake("picky"), Limits::default()).unwrap();
    assert!(
        picky.contains("input_0.pb cannot be given to fake: no such type here"),
        "{picky}"
    );
    let seen = invalid::run_other(&case, &Fake("picky"), Limits::default());
    assert!(matches!(seen, invalid::Seen::CannotRun(_)));
    // A backend without a loader of its own cannot be given the file.
    let seen = invalid::run_other(&case, &Ours::default(), Limits::default());
    assert!(matches!(seen, invalid::Seen::CannotRun(_)));

    let dir = root.join("invalid/input_garbage");
    copy_case(&invalid_case("input_garbage"), &dir);
    let inputs = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .into_iter()
        .find(|c| c.name == "input_garbage")
        .unwrap();
    let why = invalid::cannot_run(&inputs, &Fake("reject"), Limits::default()).unwrap();
    assert!(
        why.contains("fake takes decoded tensors") && why.contains("input_0.pb"),
        "{why}"
    );
}

#[test]
fn trials_lead_to_their_case_without_a_walk() {
    let (_dir, root) = scratch("locate");
    copy_case(&official("test_edge_pad"), &root.join("mine/test_edge_pad"));
    copy_case(&official("test_wrap_pad"), &root.join("test_wrap_pad"));
    let roots = [root.clone()];
    let base = root.file_name().unwrap().to_string_lossy().to_string();
    let ids = |names: &[&str]| {
        discover::locate(
            &roots,
            &names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
        .map(|cases| cases.iter().map(|c| c.id()).collect::<Vec<_>>())
    };
    // Every suffix a trial name can carry leads to the same case as the
    // walk names it.
    let wrap = format!("{base}/test_wrap_pad");
    assert_eq!(
        ids(&[
            "mine/test_edge_pad#1@Pad-2~later-reading",
            "mine/test_edge_pad@Pad-19",
            &wrap
        ]),
        Some(vec![wrap.clone(), "mine/test_edge_pad".into()])
    );
    assert_eq!(
        ids(&["mine/test_edge_pad"]).unwrap(),
        discover::discover(&roots)
            .unwrap()
            .iter()
            .filter(|c| c.id() == "mine/test_edge_pad")
            .map(|c| c.id())
            .collect::<Vec<_>>()
    );
    // Names that lead nowhere (or outside the root) fall back to the walk.
    assert_eq!(ids(&["mine/test_missing"]), None);
    assert_eq!(ids(&["expectations/no-stale-entries"]), None);
    assert_eq!(ids(&["../mine/test_edge_pad"]), None);
    assert_eq!(ids(&["no_source"]), None);
}

/// A trial that does not finish within its limit is reported as such
/// instead of holding up the run; without a limit it simply runs.
#[test]
fn a_trial_over_its_time_limit_times_out() {
    use std::time::Duration;
    let slow = || {
        std::thread::sleep(Duration::from_secs(5));
        1
    };
    assert_eq!(
        timeout::run_within(Some(Duration::from_millis(50)), slow),
        None
    );
    assert_eq!(
        timeout::run_within(Some(Duration::from_secs(5)), || 2),
        Some(2)
    );
    assert_eq!(timeout::run_within(None, || 3), Some(3));
    assert_eq!(timeout::parse("0.5").unwrap(), Duration::from_millis(500));
    assert!(timeout::parse("0").is_err());
    assert!(timeout::parse("soon").is_err());
}
