# Audits the invalid-input suite against onnx itself: for every case folder
# under <root>/invalid/ it records what onnx's checker (full_check), its
# strict shape inference (check_type, strict_mode) and its ReferenceEvaluator
# (on the data set's inputs, where onnx can load them) say about the case,
# and writes <root>/invalid/ONNX_AUDIT.toml.
#
# The harness reads that file: a case onnx accepts on all three counts is
# not invalid ONNX, so its expected_error.toml must quote the spec text that
# forbids it (`spec`), or say the behaviour is undefined (`undefined`), or be
# about this suite's own limits.
#
# Arguments: <root>. Run by `cargo xtask fetch-cases` after
# gen_invalid_cases.py, in the pinned virtual environment, so that
# `fetch-cases --check` covers the audit too.

import os
import sys
import tomllib
import warnings

import onnx
from onnx import numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

ROOT = os.path.join(sys.argv[1], "invalid")
# The reference's own arithmetic on absurd attributes (a group near 2^62)
# warns about overflow; the error it then raises is what the audit records.
warnings.simplefilter("ignore", RuntimeWarning)
# Messages can be long (whole protobufs); the first line says enough.
MAX_MESSAGE = 240


def short(e, case_dir):
    text = f"{type(e).__name__}: {e}".replace(case_dir, "<case>")
    line = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def about_limits(expected):
    return expected.get("kind") == "limit" or "limits" in expected


def load_model(case_dir):
    # Parsed from bytes: the model's own external data, if any, is not
    # followed here; the inputs' is, by onnx's loader and its path rules.
    with open(os.path.join(case_dir, "model.onnx"), "rb") as f:
        m = onnx.ModelProto()
        m.ParseFromString(f.read())
    return m


def load_inputs(case_dir):
    ds = os.path.join(case_dir, "test_data_set_0")
    names = sorted(
        (n for n in os.listdir(ds) if n.startswith("input_") and n.endswith(".pb")),
        key=lambda n: int(n[len("input_") : -len(".pb")]),
    )
    arrays = []
    for n in names:
        path = os.path.join(ds, n)
        if not os.path.isfile(path):
            raise IsADirectoryError(f"{n} is not a regular file")
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        arrays.append(numpy_helper.to_array(t, base_dir=ds))
    return arrays


def with_input_shapes(m, inputs):
    """A copy of the model whose graph inputs declare the data set's shapes,
    so that strict inference checks the node against what is fed."""
    bound = onnx.ModelProto()
    bound.CopyFrom(m)
    init = {i.name for i in bound.graph.initializer}
    feeds = [i for i in bound.graph.input if i.name not in init]
    for vi, arr in zip(feeds, inputs):
        if not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        del shape.dim[:]
        for n in arr.shape:
            shape.dim.add().dim_value = n
    return bound


def audit(case_dir, expected):
    entry = {}
    try:
        m = load_model(case_dir)
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        entry["checker"] = "not run: the model does not parse: " + short(e, case_dir)
        entry["shape_inference"] = "not run: the model does not parse"
        entry["reference"] = "not run: the model does not parse"
        entry["onnx_accepts"] = False
        return entry
    try:
        inputs, load_error = load_inputs(case_dir), None
    except Exception as e:  # noqa: BLE001
        inputs, load_error = None, "not run: onnx cannot load the inputs: " + short(e, case_dir)
    ok = True
    try:
        onnx.checker.check_model(m, full_check=True)
        entry["checker"] = "ok"
    except Exception as e:  # noqa: BLE001
        entry["checker"] = short(e, case_dir)
        ok = False
    try:
        inferred = m if inputs is None else with_input_shapes(m, inputs)
        shape_inference.infer_shapes(inferred, check_type=True, strict_mode=True)
        entry["shape_inference"] = "ok" if inputs is None else "ok (with the data set's input shapes)"
    except Exception as e:  # noqa: BLE001
        entry["shape_inference"] = short(e, case_dir)
        ok = False
    if about_limits(expected):
        entry["reference"] = "not run: the case is about this suite's resource limits"
        entry["onnx_accepts"] = ok
        return entry
    if load_error is not None:
        entry["reference"] = load_error
        entry["onnx_accepts"] = False
        return entry
    try:
        init = {i.name for i in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in init]
        outs = ReferenceEvaluator(m).run(None, dict(zip(names, inputs)))
        shapes = ", ".join(str(list(o.shape)) for o in outs)
        entry["reference"] = f"ok: output shapes {shapes}"
    except Exception as e:  # noqa: BLE001
        entry["reference"] = short(e, case_dir)
        ok = False
    entry["onnx_accepts"] = ok
    return entry


def toml_str(s):
    out = []
    for ch in s:
        if ch in "\\\"":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def main():
    lines = [
        "# Written by xtask/src/audit_invalid.py: what onnx says about each",
        "# invalid case (checker with full_check, strict shape inference, the",
        "# ReferenceEvaluator on the inputs). A case onnx accepts must quote the",
        "# spec text that forbids it (`spec`) or be marked `undefined`.",
    ]
    cases = sorted(
        d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "expected_error.toml"))
    )
    for name in cases:
        d = os.path.join(ROOT, name)
        with open(os.path.join(d, "expected_error.toml"), "rb") as f:
            expected = tomllib.load(f)
        entry = audit(d, expected)
        lines.append("")
        lines.append(f"[{name}]")
        for key in ("checker", "shape_inference", "reference"):
            lines.append(f"{key} = {toml_str(entry[key])}")
        lines.append(f"onnx_accepts = {'true' if entry['onnx_accepts'] else 'false'}")
    with open(os.path.join(ROOT, "ONNX_AUDIT.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(len(cases))


main()
