#![no_main]
use onnx_conformance::fuzz::load_and_run_model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| load_and_run_model(data));
