# onnxruntime through its Python API (CPU provider) as a runtime for the
# harness's command backend:
#
#   ONNX_BACKEND=command:"target/xtask/cases-venv/bin/python xtask/src/runtimes/onnxruntime_python.py" \
#       cargo test --test conformance
#
# The interpreter is the cases environment's (onnx, numpy, ml_dtypes, to read
# and write TensorProto files); onnxruntime comes from the environment
# `cargo xtask ort-path` installs (target/xtask/ort-venv, the same pinned
# wheel the `onnxruntime` backend loads), or from ORT_SITE_PACKAGES. Both
# environments pin the same numpy and protobuf. The session is set up as
# the `onnxruntime` backend sets up its own: one intra-op thread, only
# fatal log messages.
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from protocol import serve  # noqa: E402


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        site = os.environ.get("ORT_SITE_PACKAGES")
        if not site:
            root = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
            found = glob.glob(os.path.join(root, "target", "xtask", "ort-venv", "lib", "python*", "site-packages"))
            if not found:
                raise ImportError("no onnxruntime: run `cargo xtask ort-path` or set ORT_SITE_PACKAGES")
            site = found[0]
        sys.path.append(site)
        import onnxruntime
    return onnxruntime


def version():
    return f"onnxruntime {import_onnxruntime().__version__} (Python API, CPUExecutionProvider)"


def as_value(ort, a):
    """An input array as an OrtValue."""
    import ml_dtypes
    import numpy as np
    from onnx import TensorProto

    # onnx reads string tensors as bytes objects; onnxruntime takes str.
    if a.dtype == object:
        a = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in a.flat],
                     dtype=object).reshape(a.shape)
    # numpy has no bfloat16 of its own (onnx reads it as ml_dtypes'), and
    # onnxruntime's numpy bridge refuses it: handed over as its bits, with
    # the element type said, as the `onnxruntime` backend hands it over.
    if a.dtype == ml_dtypes.bfloat16:
        bits = np.ascontiguousarray(a).view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a))


def as_array(value):
    """An output OrtValue as a numpy array."""
    import ctypes

    import ml_dtypes
    import numpy as np

    if value.data_type() == "tensor(bfloat16)":
        # No numpy type for it on onnxruntime's side: its bits, read from
        # the value's buffer (data_ptr, tensor_size_in_bytes).
        raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
        return np.frombuffer(raw, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(value.shape())
    return value.numpy()


def run(model_path, arrays):
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: as_value(ort, a) for i, a in zip(session.get_inputs(), arrays)}
    return [as_array(v) for v in session.run_with_ort_values(None, feeds)]


if __name__ == "__main__":
    serve(version, run)
