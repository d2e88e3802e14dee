//! Runs cases through one backend for `cargo xtask diff`, in its own process
//! so that a runtime crash ends only this process.
//!
//! Usage: `runtime_worker <backend>`; then one case folder per line on
//! standard input. For each, the worker runs `model.onnx` on
//! `test_data_set_0/input_*.pb`, writes `actual/output_K.pb`, and prints one
//! line: `ok` or `err <message>`.

use onnx_conformance::backend::by_name;
use onnx_conformance::proto;
use std::io::{BufRead, Write};
use std::path::Path;

fn run_case(backend: &dyn onnx_conformance::backend::Backend, dir: &Path) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| format!("reading model: {e}"))?;
    let model = proto::load_model(&bytes).map_err(|e| e.to_string())?;
    let ds = dir.join("test_data_set_0");
    let mut inputs = Vec::new();
    for k in 0.. {
        let p = ds.join(format!("input_{k}.pb"));
        if !p.exists() {
            break;
        }
        let b = std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?;
        inputs.push(proto::load_tensor(&b).map_err(|e| e.to_string())?.1);
    }
    let outputs = backend
        .run(&model, &bytes, &inputs)
        .map_err(|e| e.to_string())?;
    let out = dir.join("actual");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    for (k, t) in outputs.iter().enumerate() {
        let b = proto::save_tensor("", t).map_err(|e| e.to_string())?;
        std::fs::write(out.join(format!("output_{k}.pb")), b).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "ours".into());
    let backend = match by_name(&name) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("runtime_worker: {e}");
            std::process::exit(2);
        }
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let reply = match run_case(backend.as_ref(), Path::new(line.trim())) {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("err {}", e.replace('\n', " | ")),
        };
        if writeln!(stdout, "{reply}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}
