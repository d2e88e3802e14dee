# The independent oracle that settles a disagreement of `cargo xtask diff`.
#
# Arguments: a file listing case folders, one per line (backend-test layout:
# model.onnx and test_data_set_0/input_K.pb). For each folder it writes
# oracle/verdict.json:
#   {"status": "ok"}          and oracle/output_K.pb: what the spec computes
#   {"status": "invalid"}     the spec (or onnx's checker with strict shape
#                             inference) rejects the model
#   {"status": "undefined"}   the spec calls the behaviour undefined or does
#                             not address it: no runtime is wrong
#   {"status": "unavailable"} the oracle cannot decide
# each with "why", citing the spec text where one applies.
#
# Values come from the numpy oracles of gen_oracle_cases.py (Conv in
# float64, rounded once to the element type), never from a runtime under
# test. Run by the xtask in its pinned case environment, once per batch.
import json
import os
import sys
import traceback

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_oracle_cases import NP, oracle_center_crop_pad, oracle_conv, oracle_pad, same_pads, tensor  # noqa: E402


class Verdict(Exception):
    def __init__(self, status, why):
        super().__init__(why)
        self.status = status
        self.why = why


def invalid(why):
    return Verdict("invalid", why)


def undefined(why):
    return Verdict("undefined", why)


PAD_MODES = {1: ("constant", "reflect", "edge"), 19: ("constant", "reflect", "edge", "wrap")}


def type_name(dtype):
    for name, np_type in NP.items():
        if np.dtype(np_type) == dtype:
            return name
    raise Verdict("unavailable", f"no ONNX type for numpy {dtype}")


def load(folder):
    model = onnx.load(os.path.join(folder, "model.onnx"))
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    feeds = [v.name for v in model.graph.input if v.name not in values]
    ds = os.path.join(folder, "test_data_set_0")
    for k, name in enumerate(feeds):
        t = onnx.TensorProto()
        with open(os.path.join(ds, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        values[name] = numpy_helper.to_array(t)
    return model, values


def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    raise invalid("the model imports no default-domain opset")


def normalise_axes(axes, rank, op):
    out = []
    for a in axes:
        if a < -rank or a >= rank:
            raise invalid(f"{op}: axis {a} is outside [-r, r-1] for rank {rank} (\"Accepted range is [-r, r-1]\")")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise undefined(f"{op}: axes {list(axes)} repeat an axis (\"Behavior is undefined if an axis is repeated\")")
    return out


def arg(node, values, k):
    if k < len(node.input) and node.input[k]:
        return values[node.input[k]]
    return None


def pad(model, node, values, version):
    a = attrs(node)
    x = values[node.input[0]]
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    allowed = PAD_MODES[19] if version >= 19 else PAD_MODES[1]
    if mode not in allowed:
        raise invalid(f"Pad-{version}: mode '{mode}' is not one of {', '.join(allowed)}")
    if version < 11:
        pads = list(a.get("paddings" if version == 1 else "pads", []))
        value = a.get("value", 0.0)
        axes = list(range(x.ndim))
    else:
        pads = [int(p) for p in arg(node, values, 1).reshape(-1)]
        cv = arg(node, values, 2)
        value = cv.reshape(()) if cv is not None and cv.size else None
        ax = arg(node, values, 3)
        axes = list(range(x.ndim)) if ax is None else [int(v) for v in ax.reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise invalid(f"Pad-{version}: {len(pads)} pads for {len(axes)} axes (\"pads should be a 1D tensor of shape [2 * num_axes]\")")
    axes = normalise_axes(axes, x.ndim, f"Pad-{version}")
    n = len(axes)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = pads[i], pads[i + n]
    for axis in range(x.ndim):
        if x.shape[axis] + begin[axis] + end[axis] < 0:
            removed = -min(begin[axis], 0) - min(end[axis], 0)
            raise invalid(f"Pad-{version}: pads remove {removed} elements of axis {axis}, which holds {x.shape[axis]}")
    for axis in range(x.ndim):
        kept = x.shape[axis] + min(begin[axis], 0) + min(end[axis], 0)
        if kept < 0:
            # "add or remove (if negative)" fixes no order: cropping first
            # removes more than the axis holds, padding first leaves
            # in + begin + end >= 0 elements.
            raise undefined(f"Pad-{version}: pads ({begin[axis]}, {end[axis]}) on axis {axis} of {x.shape[axis]}: cropping first removes more than the axis holds, padding first does not; the spec (\"add or remove (if negative)\") does not say which comes first")
        grows = begin[axis] > 0 or end[axis] > 0
        if kept == 0 and grows and mode != "constant":
            out_empty = any(
                x.shape[b] + begin[b] + end[b] == 0 for b in range(x.ndim)
            )
            if not out_empty:
                raise undefined(f"Pad-{version}: mode '{mode}' on axis {axis} with nothing left to copy; the spec does not say what {mode} padding of an empty axis is")
    if value is None:
        value = "" if x.dtype == object else np.zeros((), dtype=x.dtype)
    if mode == "constant" and x.dtype != object:
        value = np.asarray(value).astype(x.dtype)
    if any(x.shape[b] + begin[b] + end[b] == 0 for b in range(x.ndim)):
        # Nothing to copy: only the shape is defined.
        shape = tuple(max(0, x.shape[b] + begin[b] + end[b]) for b in range(x.ndim))
        return [np.zeros(shape, dtype=x.dtype)]
    return [oracle_pad(x, begin, end, mode, value)]


def conv(model, node, values, version):
    a = attrs(node)
    x, w, b = values[node.input[0]], values[node.input[1]], arg(node, values, 2)
    k = x.ndim - 2
    strides = list(a.get("strides", [1] * k))
    dilations = list(a.get("dilations", [1] * k))
    group = a.get("group", 1)
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    kernel = list(w.shape[2:])
    if "kernel_shape" in a and list(a["kernel_shape"]) != kernel:
        raise invalid(f"Conv-{version}: kernel_shape {list(a['kernel_shape'])} contradicts W's shape {kernel}")
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise invalid(f"Conv-{version}: C = {x.shape[1]}, W.shape[1] = {w.shape[1]}, M = {w.shape[0]} and group = {group} do not fit")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if "pads" in a:
            raise invalid(f"Conv-{version}: pads together with auto_pad {auto_pad}")
        pb, pe = same_pads(list(x.shape[2:]), kernel, strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pb, pe = [0] * k, [0] * k
    elif auto_pad == "NOTSET":
        pads = list(a.get("pads", [0] * (2 * k)))
        pb, pe = pads[:k], pads[k:]
    else:
        raise invalid(f"Conv-{version}: unknown auto_pad '{auto_pad}'")
    room = [x.shape[2 + i] + pb[i] + pe[i] - dilations[i] * (kernel[i] - 1) - 1 for i in range(k)]
    out_sp = [r // s + 1 for r, s in zip(room, strides)]
    over = [i for i in range(k) if room[i] < 0]
    if over:
        # The dilated kernel overruns the padded input. The spec gives no
        # output shape for it, and onnx's two readings differ: strict shape
        # inference computes trunc(room / stride) + 1 (C++ division: 1, 0 or
        # negative), the reference floor(room / stride) + 1 (0, or an
        # error when negative). They agree, on an empty axis, only where
        # room is exactly -stride.
        disputed = [i for i in over if room[i] != -strides[i]]
        if disputed:
            i = disputed[0]
            inferred = int(room[i] / strides[i]) + 1
            raise undefined(f"Conv-{version}: the kernel overruns the padded input on axis {2 + i} by {-room[i]} (stride {strides[i]}); the spec gives no output size, onnx's shape inference gives {inferred} and its reference {'an error' if out_sp[i] < 0 else out_sp[i]}")
        shape = [x.shape[0], w.shape[0]] + out_sp
        return [np.zeros(shape, dtype=x.dtype)]
    return [oracle_conv(x, w, b, strides, dilations, pb, pe, group).astype(x.dtype)]


def center_crop_pad(model, node, values, version):
    a = attrs(node)
    x = values[node.input[0]]
    targets = [int(t) for t in values[node.input[1]].reshape(-1)]
    axes = list(a.get("axes", range(x.ndim)))
    if len(targets) != len(axes):
        raise invalid(f"CenterCropPad: shape has {len(targets)} entries for {len(axes)} axes")
    axes = normalise_axes(axes, x.ndim, "CenterCropPad")
    if any(t < 0 for t in targets):
        raise undefined(f"CenterCropPad: negative target {targets}; the spec does not address negative crop dimensions")
    return [oracle_center_crop_pad(x, targets, axes)]


def declare_shapes(model, values):
    """The differential generator declares types but not shapes, which the
    checker requires: declare the inputs' shapes from their values and the
    outputs as of unknown size with the data's rank (every covered operator
    keeps the rank)."""
    rank = None
    for vi in model.graph.input:
        shape = vi.type.tensor_type.shape
        if not vi.type.tensor_type.HasField("shape") and vi.name in values:
            for d in values[vi.name].shape:
                shape.dim.add().dim_value = d
        if rank is None and vi.name in values:
            rank = values[vi.name].ndim
    for vi in model.graph.output:
        if not vi.type.tensor_type.HasField("shape") and rank is not None:
            shape = vi.type.tensor_type.shape
            for i in range(rank):
                shape.dim.add().dim_param = f"d{i}"


OPS = {"Pad": pad, "Conv": conv, "CenterCropPad": center_crop_pad}


def settle(folder):
    model, values = load(folder)
    if len(model.graph.node) != 1:
        raise Verdict("unavailable", "only single-node models are adjudicated")
    node = model.graph.node[0]
    if node.op_type not in OPS:
        raise Verdict("unavailable", f"no oracle for {node.op_type}")
    version = opset(model)
    declare_shapes(model, values)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # the checker's own exception types vary by version
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise invalid(f"onnx.checker (full_check, strict shape inference): {first}")
    return OPS[node.op_type](model, node, values, version)


def main():
    with open(sys.argv[1]) as f:
        folders = [line.strip() for line in f if line.strip()]
    for folder in folders:
        out = os.path.join(folder, "oracle")
        os.makedirs(out, exist_ok=True)
        try:
            outputs = settle(folder)
            verdict = {"status": "ok", "why": "numpy oracle"}
            for k, y in enumerate(outputs):
                with open(os.path.join(out, f"output_{k}.pb"), "wb") as f:
                    f.write(tensor(np.asarray(y), "y", type_name(np.asarray(y).dtype)).SerializeToString())
        except Verdict as v:
            verdict = {"status": v.status, "why": v.why}
        except Exception as e:
            verdict = {"status": "unavailable", "why": f"the oracle failed: {type(e).__name__}: {e}"}
            traceback.print_exc(file=sys.stderr)
        with open(os.path.join(out, "verdict.json"), "w") as f:
            json.dump(verdict, f)


if __name__ == "__main__":
    main()
