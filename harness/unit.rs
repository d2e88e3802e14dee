//! Unit tests of the harness modules. The conformance target has no libtest,
//! so its modules' tests run here.
#![allow(dead_code)]

#[path = "compare.rs"]
mod compare;
#[path = "discover.rs"]
mod discover;
#[path = "expectations.rs"]
mod expectations;
#[path = "run_case.rs"]
mod run_case;

use onnx_conformance::backend::Ours;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harness-unit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_case(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("test_data_set_0")).unwrap();
    std::fs::copy(from.join("model.onnx"), to.join("model.onnx")).unwrap();
    for e in std::fs::read_dir(from.join("test_data_set_0")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("test_data_set_0").join(e.file_name())).unwrap();
    }
}

fn official(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/node")
        .join(name)
}

#[test]
fn zero_cases_is_an_error_naming_the_folder() {
    let root = scratch("empty");
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
    let root = scratch("names");
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
    let root = scratch("garbage");
    let dir = root.join("src/test_edge_pad");
    copy_case(&official("test_edge_pad"), &dir);
    let target = root.join("target");
    let case = discover::discover(std::slice::from_ref(&root))
        .unwrap()
        .remove(0);
    assert!(run_case::check(&case, 0, &Ours::default(), &target).is_ok());

    let good = std::fs::read(dir.join("model.onnx")).unwrap();
    std::fs::write(dir.join("model.onnx"), &good[..good.len() / 2]).unwrap();
    let e = format!(
        "{:#}",
        run_case::check(&case, 0, &Ours::default(), &target).unwrap_err()
    );
    assert!(
        e.contains("test_edge_pad/model.onnx") && e.contains("cannot decode model"),
        "{e}"
    );
    std::fs::write(dir.join("model.onnx"), &good).unwrap();

    std::fs::write(dir.join("test_data_set_0/input_0.pb"), [0xff, 0xff, 0xff]).unwrap();
    let e = format!(
        "{:#}",
        run_case::check(&case, 0, &Ours::default(), &target).unwrap_err()
    );
    assert!(
        e.contains("test_data_set_0/input_0.pb") && e.contains("cannot decode tensor"),
        "{e}"
    );
}

#[test]
fn a_wrong_expected_output_fails_with_a_report_and_artifacts() {
    let root = scratch("wrong");
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
    let e = format!(
        "{:#}",
        run_case::check(&case, 0, &Ours::default(), &target).unwrap_err()
    );
    assert!(e.contains("case src/test_wrap_pad"), "{e}");
    assert!(e.contains("data set 0"), "{e}");
    assert!(e.contains("output 0 'y'"), "{e}");
    assert!(e.contains("values differ"), "{e}");
    assert!(target
        .join("conformance/src/test_wrap_pad/output_0.npy")
        .is_file());
}
