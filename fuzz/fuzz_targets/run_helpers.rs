#![no_main]
use onnx_conformance::fuzz::{run_op, Op};

libfuzzer_sys::fuzz_target!(|data: &[u8]| run_op(Op::Helper, data));
