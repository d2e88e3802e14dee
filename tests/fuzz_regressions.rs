//! Replays the fuzz targets' seed corpus and every input a fuzzer once
//! crashed on (`fuzz/seeds/<target>/`, `fuzz/regressions/<target>/`)
//! through the same bodies the targets run. Tests build with overflow
//! checks, so a regression in checked arithmetic fails here too.

use onnx_conformance::fuzz::{self, Op};
use std::path::Path;

fn replay(target: &str, body: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    let mut failures = Vec::new();
    for folder in ["seeds", "regressions"] {
        let dir = root.join(folder).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for path in files {
            let data = std::fs::read(&path).unwrap();
            count += 1;
            if let Err(panic) = std::panic::catch_unwind(|| body(&data)) {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: {what}", path.display()));
            }
        }
    }
    assert!(count > 0, "no seed or regression inputs for {target}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn decode_tensor() {
    replay("decode_tensor", fuzz::decode_tensor);
}

#[test]
fn load_model() {
    replay("load_model", fuzz::load_and_run_model);
}

#[test]
fn run_pad() {
    replay("run_pad", |d| fuzz::run_op(Op::Pad, d));
}

#[test]
fn run_conv() {
    replay("run_conv", |d| fuzz::run_op(Op::Conv, d));
}

#[test]
fn run_center_crop_pad() {
    replay("run_center_crop_pad", |d| {
        fuzz::run_op(Op::CenterCropPad, d)
    });
}

#[test]
fn run_helpers() {
    replay("run_helpers", |d| fuzz::run_op(Op::Helper, d));
}
