#![no_main]
use onnx_conformance::fuzz::decode_tensor;

libfuzzer_sys::fuzz_target!(|data: &[u8]| decode_tensor(data));
