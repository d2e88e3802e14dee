# Generates ONNX backend test cases for the covered operators from the pinned
# onnx package, into the backend-test layout:
#   <out>/node/<case>/model.onnx, test_data_set_0/{input,output}_N.pb
#   <out>/pytorch-converted/<case>/..., <out>/pytorch-operator/<case>/...
#
# Run by `cargo xtask fetch-cases` inside its own virtual environment.
# Arguments: <out> <json config>, where the config holds
#   {"node_filters": [...], "pytorch_filters": [...], "seed": N, "ops": [...]}
#
# Reproducibility: importing one of onnx's node case modules runs every
# export function of its classes once. We throw those results away and run
# each export function again ourselves, after seeding numpy's global random
# state with the configured seed, so the data depends only on the pinned
# package versions and the seed, not on import order or on onnx's own seeding.

import fnmatch
import importlib
import inspect
import json
import os
import shutil
import sys

import numpy as np

import onnx
from onnx import numpy_helper

CASE_MODULES = {
    "Pad": "pad",
    "Conv": "conv",
    "CenterCropPad": "center_crop_pad",
}


def matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def write_case(root, name, model, data_sets):
    case_dir = os.path.join(root, name)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (inputs, outputs) in enumerate(data_sets):
        ds = os.path.join(case_dir, f"test_data_set_{i}")
        os.makedirs(ds)
        for kind, values, infos in (
            ("input", inputs, model.graph.input),
            ("output", outputs, model.graph.output),
        ):
            for j, value in enumerate(values):
                if isinstance(value, onnx.TensorProto):
                    proto = value
                else:
                    proto = numpy_helper.from_array(np.asarray(value), infos[j].name)
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(proto.SerializeToString())


def node_cases(out, ops, patterns, seed):
    import onnx.backend.test.case.node as node_pkg

    written = []
    for op in ops:
        module = importlib.import_module(
            "onnx.backend.test.case.node." + CASE_MODULES[op]
        )
        exports = []
        for _, cls in sorted(inspect.getmembers(module, inspect.isclass)):
            if cls.__module__ != module.__name__:
                continue
            for attr in sorted(vars(cls)):
                if attr.startswith("export"):
                    exports.append(getattr(cls, attr))
        for export in exports:
            node_pkg._NodeTestCases.clear()
            node_pkg._existing_names.clear()
            np.random.seed(seed)
            export()
            for case in node_pkg._NodeTestCases:
                if not matches(case.name, patterns):
                    continue
                write_case(os.path.join(out, "node"), case.name, case.model, case.data_sets)
                written.append("node/" + case.name)
    return written


def pytorch_cases(out, ops, patterns):
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    written = []
    for kind in ("pytorch-converted", "pytorch-operator"):
        src_root = os.path.join(data, kind)
        if not os.path.isdir(src_root):
            continue
        for name in sorted(os.listdir(src_root)):
            if not matches(name, patterns):
                continue
            src = os.path.join(src_root, name)
            model = onnx.load(os.path.join(src, "model.onnx"))
            used = {n.op_type for n in model.graph.node}
            # Only graphs built from the covered operators: a ConvTranspose
            # model matches test_Conv* by name but tests another operator.
            if not used or not used <= set(ops):
                continue
            shutil.copytree(src, os.path.join(out, kind, name))
            written.append(kind + "/" + name)
    return written


def main():
    out = sys.argv[1]
    config = json.loads(sys.argv[2])
    ops = config["ops"]
    written = node_cases(out, ops, config["node_filters"], config["seed"])
    written += pytorch_cases(out, ops, config["pytorch_filters"])
    json.dump(
        {"onnx_version": onnx.__version__, "numpy_version": np.__version__, "cases": written},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
