# Writes <out>/schemas/<Op>.json for the covered operators, every version,
# from the pinned onnx package's onnx.defs. Run by `cargo xtask fetch-cases`.
# Arguments: <out> <json list of op names>.
import json
import os
import sys

import onnx
import onnx.defs
from onnx import helper


def default_of(attr):
    d = attr.default_value
    if d is None or d.type == 0:
        return None
    v = helper.get_attribute_value(d)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    if isinstance(v, float):
        return float(v)
    return v


def params(items):
    return [
        {
            "name": p.name,
            "type_str": p.type_str,
            "option": p.option.name,
            "description": p.description,
        }
        for p in items
    ]


def version_record(s):
    return {
        "since_version": s.since_version,
        "doc": s.doc or "",
        "min_input": s.min_input,
        "max_input": s.max_input,
        "min_output": s.min_output,
        "max_output": s.max_output,
        "attributes": [
            {
                "name": a.name,
                "type": a.type.name,
                "required": bool(a.required),
                "default": default_of(a),
                "description": a.description,
            }
            for a in sorted(s.attributes.values(), key=lambda a: a.name)
        ],
        "inputs": params(s.inputs),
        "outputs": params(s.outputs),
        "type_constraints": [
            {
                "name": t.type_param_str,
                "allowed": sorted(t.allowed_type_strs),
                "description": t.description,
            }
            for t in s.type_constraints
        ],
    }


def main():
    out = os.path.join(sys.argv[1], "schemas")
    os.makedirs(out)
    for op in json.loads(sys.argv[2]):
        schemas = sorted(
            (s for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == ""),
            key=lambda s: s.since_version,
        )
        record = {
            "name": op,
            "domain": "ai.onnx",
            "onnx_version": onnx.__version__,
            "versions": [version_record(s) for s in schemas],
        }
        with open(os.path.join(out, op + ".json"), "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
