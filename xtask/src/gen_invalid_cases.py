# Generates the invalid-input suite: cases/invalid/<name>/ in the backend
# test layout (model.onnx, test_data_set_0/input_N.pb, no outputs) plus
# expected_error.toml, which names the error kind our loader or kernel must
# report, a fragment of its message, and the limits to run under.
#
# The files are written with onnx's own protobuf classes, so they test our
# decoder against an independent encoder; the broken ones are made by
# editing bytes after serialization.
#
# Arguments: <out>. Writes <out>/invalid/<case>/.
# Run by `cargo xtask fetch-cases` in its pinned virtual environment.

import os
import sys

import numpy as np

from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(sys.argv[1], "invalid")
CASES = []


def case(name, kind, message, why, limits=None, spec=None, undefined=None):
    """Registers a scenario; the decorated function returns
    (model bytes, [input bytes], {extra file: bytes}).

    Where onnx itself accepts the model (audit_invalid.py), `spec` quotes the
    text of the specification that forbids it, or `undefined` quotes the
    text that leaves it undefined (or says that the spec does not address
    it): other runtimes are then neither failed nor passed on it."""

    def register(build):
        CASES.append((name, kind, message, why, limits, spec, undefined, build))
        return build

    return register


def tensor(arr, name=""):
    return numpy_helper.from_array(np.asarray(arr), name).SerializeToString()


def model(nodes, inputs, outputs, opset=18, initializers=(), name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


# The rank each value name has in these models. onnx's checker requires a
# shape on graph inputs and outputs; dims are left unknown so that the
# shape of what a data set feeds is never the case's fault by accident.
RANKS = {"data": 2, "pads": 1, "axes": 1, "cv": 0, "y": 2, "z": 2, "X": 4, "W": 4, "B": 1, "Y": 4, "x": 2, "shape": 1, "c": 0, "o": 0}


def vi(name, elem=TensorProto.FLOAT, rank=None):
    if rank is None:
        rank = RANKS.get(name, RANKS["y"])
    return helper.make_tensor_value_info(name, elem, [None] * rank)


def pad_model(opset=18, inputs=("data", "pads"), elem=TensorProto.FLOAT, rank=2, pads_rank=1, **attrs):
    node = helper.make_node("Pad", list(inputs), ["y"], name="pad", **attrs)
    ins = [vi("data", elem, rank)]
    for n in inputs[1:]:
        if n == "pads":
            ins.append(vi(n, TensorProto.INT64, pads_rank))
        elif n == "axes":
            ins.append(vi(n, TensorProto.INT64))
        elif n:
            ins.append(vi(n, elem))
    return model([node], ins, [vi("y", elem, rank)], opset=opset).SerializeToString()


def conv_model(opset=22, elem=TensorProto.FLOAT, bias=False, rank=4, **attrs):
    names = ["X", "W"] + (["B"] if bias else [])
    node = helper.make_node("Conv", names, ["Y"], name="conv", **attrs)
    ins = [vi(n, elem, 1 if n == "B" else rank) for n in names]
    return model([node], ins, [vi("Y", elem, rank)], opset=opset).SerializeToString()


def ccp_model(**attrs):
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp", **attrs)
    ins = [vi("x"), vi("shape", TensorProto.INT64)]
    return model([node], ins, [vi("y")]).SerializeToString()


X22 = np.arange(4, dtype=np.float32).reshape(2, 2)
IMG = np.ones((1, 2, 4, 4), np.float32)
W3 = np.ones((3, 2, 3, 3), np.float32)


def pads(*v):
    return tensor(np.array(v, np.int64))


def valid_pad():
    return pad_model(), [tensor(X22), pads(1, 1, 1, 1)], {}


# ---- loaders: model files --------------------------------------------------


@case("model_truncated", "decode", "cannot decode model", "a model cut in the middle of a field")
def _():
    m, ins, _ = valid_pad()
    return m[: len(m) // 2], ins, {}


@case("model_garbage", "decode", "cannot decode model", "bytes that are not a protobuf at all")
def _():
    _, ins, _ = valid_pad()
    return bytes(range(255, 127, -1)) * 4, ins, {}


@case("model_empty_file", "decode", "it has no graph", "an empty file decodes as an empty ModelProto")
def _():
    _, ins, _ = valid_pad()
    return b"", ins, {}


@case("model_without_opset_import", "decode", "imports no opset", "without opset_import no operator version can be chosen")
def _():
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"])], [vi("data"), vi("pads", TensorProto.INT64)], [vi("y")])
    del m.opset_import[:]
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1)], {}


@case("model_nested_too_deep", "decode", "max_nesting", "graphs nested in attributes 30 deep, past the default max_nesting of 64 messages")
def _():
    leaf = helper.make_graph([], "leaf", [], [])
    inner = leaf
    for depth in range(30):
        node = helper.make_node("If", ["c"], ["o"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], f"level{depth}", [], [])
    m = model([helper.make_node("If", ["c"], ["o"], then_branch=inner, else_branch=leaf)], [vi("c", TensorProto.BOOL)], [vi("o")])
    return m.SerializeToString(), [tensor(np.array(True))], {}


@case("model_file_too_large", "limit", "max_file_bytes", "the model file is larger than the configured max_file_bytes", limits="max_file_bytes=64")
def _():
    return valid_pad()


@case("graph_too_many_nodes", "limit", "max_nodes", "a chain of 12 Pad nodes under max_nodes = 10", limits="max_nodes=10")
def _():
    nodes = []
    prev = "data"
    for i in range(12):
        nodes.append(helper.make_node("Pad", [prev, "pads"], [f"v{i}"], name=f"pad{i}"))
        prev = f"v{i}"
    m = model(nodes, [vi("data"), vi("pads", TensorProto.INT64)], [vi(prev)])
    return m.SerializeToString(), [tensor(X22), pads(0, 0, 0, 0)], {}


@case("graph_too_many_values", "limit", "max_values", "more named values than max_values allows", limits="max_values=3")
def _():
    return valid_pad()


@case("initializer_too_large", "limit", "max_tensor_bytes", "an initializer larger than max_tensor_bytes", limits="max_tensor_bytes=64")
def _():
    init = numpy_helper.from_array(np.zeros(32, np.float32), "pads_unused")
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad")], [vi("data"), vi("pads", TensorProto.INT64)], [vi("y")], initializers=[init])
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1)], {}


# ---- loaders: tensor files -------------------------------------------------


@case("input_truncated", "decode", "cannot decode tensor", "an input file cut in the middle of raw_data")
def _():
    m, ins, _ = valid_pad()
    return m, [ins[0][:-3], ins[1]], {}


@case("input_garbage", "decode", "cannot decode tensor", "an input file of bytes that are not a TensorProto")
def _():
    m, ins, _ = valid_pad()
    return m, [b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", ins[1]], {}


@case("input_huge_declared_dims", "limit", "max_tensor_bytes", "dims declare 2^60 floats but raw_data holds 4 bytes: refused before any allocation")
def _():
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[1 << 30, 1 << 30], raw_data=b"\0\0\0\0")
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


@case("input_dims_overflow", "decode", "overflows", "dims whose product does not fit 64 bits")
def _():
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 40, 1 << 40], raw_data=b"\0\0\0\0")
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


@case("input_short_raw_data", "decode", "raw_data (bytes) holds 8 values but the shape needs 16", "raw_data shorter than dims say")
def _():
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[2, 2], raw_data=b"\0" * 8)
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


@case("input_typed_field_wrong_length", "decode", "int64_data holds 3 values but the shape needs 4", "a typed field with fewer values than dims say")
def _():
    t = TensorProto(data_type=TensorProto.INT64, dims=[4], int64_data=[1, 1, 1])
    m, ins, _ = valid_pad()
    return m, [ins[0], t.SerializeToString()], {}


@case("input_negative_dim", "decode", "negative dimension", "dims may not be negative", undefined="the spec does not say what a negative entry of TensorProto.dims means (onnx.proto: 'The shape of the tensor.')")
def _():
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[-2, 2], raw_data=b"\0" * 16)
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


@case("input_segmented", "unsupported", "segmented tensors are not supported", "a tensor split into segments, which no covered case needs")
def _():
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[2, 2], raw_data=b"\0" * 16)
    t.segment.begin, t.segment.end = 0, 4
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


@case("input_is_a_folder", "io", "input_1.pb", "input_1.pb is a folder, not a file")
def _():
    m, ins, _ = valid_pad()
    # A file inside keeps the folder in git.
    return m, [ins[0]], {"test_data_set_0/input_1.pb/keep": b""}


@case("input_unknown_data_type", "decode", "unknown data_type 99", "data_type outside the TensorProto enum")
def _():
    t = TensorProto(data_type=99, dims=[2], raw_data=b"\0" * 8)
    m, ins, _ = valid_pad()
    return m, [t.SerializeToString(), ins[1]], {}


def external(location, offset=None, length=None):
    t = TensorProto(data_type=TensorProto.FLOAT, dims=[2, 2], name="data")
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t.SerializeToString()


@case("external_data_absolute_path", "external-data", "an absolute path", "external data may only be a relative path inside the case folder")
def _():
    m, ins, _ = valid_pad()
    return m, [external("/etc/passwd"), ins[1]], {}


@case("external_data_parent_dir", "external-data", "'..' leaves the folder", "'..' would read outside the case folder")
def _():
    m, ins, _ = valid_pad()
    return m, [external("../../MANIFEST.toml"), ins[1]], {}


@case("external_data_missing_file", "external-data", "cannot open it", "the named file does not exist")
def _():
    m, ins, _ = valid_pad()
    return m, [external("weights.bin"), ins[1]], {}


@case("external_data_past_end", "external-data", "past the end", "offset and length reach past the end of the data file")
def _():
    m, ins, _ = valid_pad()
    return m, [external("data.bin", offset=8, length=16), ins[1]], {"test_data_set_0/data.bin": b"\0" * 16}


@case("external_data_short", "decode", "raw_data (bytes) holds 8 values but the shape needs 16", "the external slice is shorter than the tensor's shape")
def _():
    m, ins, _ = valid_pad()
    return m, [external("data.bin", offset=0, length=8), ins[1]], {"test_data_set_0/data.bin": b"\0" * 16}


@case("external_data_bad_offset", "external-data", "'offset' is 'ten', not a non-negative integer", "external_data offsets are decimal byte counts")
def _():
    m, ins, _ = valid_pad()
    t = TensorProto()
    t.ParseFromString(external("data.bin"))
    e = t.external_data.add()
    e.key, e.value = "offset", "ten"
    return m, [t.SerializeToString(), ins[1]], {"test_data_set_0/data.bin": b"\0" * 16}


@case("input_int4_short_raw_data", "decode", "raw_data", "5 int4 values need 3 packed bytes, not 2")
def _():
    t = TensorProto(data_type=TensorProto.INT4, dims=[5], raw_data=b"\x11\x22")
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad")], [vi("data", TensorProto.INT4, 1), vi("pads", TensorProto.INT64)], [vi("y", TensorProto.INT4, 1)], opset=21)
    return m.SerializeToString(), [t.SerializeToString(), pads(1, 1)], {}


@case("input_string_not_utf8", "decode", "not valid UTF-8", "string tensors hold UTF-8 text")
def _():
    t = TensorProto(data_type=TensorProto.STRING, dims=[2], string_data=[b"ok", b"\xff\xfe"])
    return pad_model(elem=TensorProto.STRING, rank=1), [t.SerializeToString(), pads(1, 1)], {}


@case("attribute_not_utf8", "decode", "not valid UTF-8", "a STRING attribute (Pad's mode) that is not UTF-8")
def _():
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad", mode="edge")], [vi("data"), vi("pads", TensorProto.INT64)], [vi("y")])
    m.graph.node[0].attribute[0].s = b"\xffedge"
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1)], {}


@case("attribute_undefined_type", "decode", "attribute type is UNDEFINED", "an attribute must declare its type")
def _():
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad", mode="edge")], [vi("data"), vi("pads", TensorProto.INT64)], [vi("y")])
    m.graph.node[0].attribute[0].type = 0
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1)], {}


# ---- graph ---------------------------------------------------------------


@case("graph_output_never_produced", "graph", "is never produced", "the graph declares an output no node writes")
def _():
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad")], [vi("data"), vi("pads", TensorProto.INT64)], [vi("y"), vi("z")])
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1)], {}


@case("graph_unknown_operator", "no-kernel", "operator not implemented", "an operator this library does not implement")
def _():
    m = model([helper.make_node("Frobnicate", ["data"], ["y"], name="f")], [vi("data")], [vi("y")])
    return m.SerializeToString(), [tensor(X22)], {}


@case("graph_opset_before_operator", "no-kernel", "predates them", "CenterCropPad at opset 17, before it existed")
def _():
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp")
    m = model([node], [vi("x"), vi("shape", TensorProto.INT64)], [vi("y")], opset=17)
    return m.SerializeToString(), [tensor(X22), pads(1, 1)], {}


@case("graph_undefined_value", "graph", "which no initializer, graph input or earlier node provides", "a node reads a value nothing produces")
def _():
    m = model([helper.make_node("Pad", ["data", "nowhere"], ["y"], name="pad")], [vi("data")], [vi("y")])
    return m.SerializeToString(), [tensor(X22)], {}


@case("graph_input_type_mismatch", "graph", "is declared tensor(float) but was given tensor(int64)", "the data set feeds int64 to a float input", spec="onnx.proto, ValueInfoProto: 'Defines information on value, including the name, the type, and the shape of the value.' (the graph input declares tensor(float))")
def _():
    m, ins, _ = valid_pad()
    return m, [tensor(X22.astype(np.int64)), ins[1]], {}


@case("graph_missing_input", "graph", "expects 2 inputs", "the data set feeds one input of two")
def _():
    m, ins, _ = valid_pad()
    return m, [ins[0]], {}


# ---- Pad -----------------------------------------------------------------


@case("pad_pads_wrong_length", "input", "input 'pads': expected 4 values", "pads must hold 2 x rank values")
def _():
    return pad_model(), [tensor(X22), pads(1, 1, 1)], {}


@case("pad_pads_wrong_rank", "input", "input 'pads'", "pads must be a 1-D tensor")
def _():
    return pad_model(pads_rank=2), [tensor(X22), tensor(np.ones((2, 2), np.int64))], {}


@case("pad_pads_float", "type", "pads", "pads must be int64")
def _():
    m = model([helper.make_node("Pad", ["data", "pads"], ["y"], name="pad")], [vi("data"), vi("pads")], [vi("y")])
    return m.SerializeToString(), [tensor(X22), tensor(np.ones(4, np.float32))], {}


@case("pad_axes_out_of_range", "input", "axis 2 is out of range [-2, 1]", "axes must lie in [-rank, rank-1]")
def _():
    return pad_model(inputs=("data", "pads", "", "axes")), [tensor(X22), pads(1, 1), tensor(np.array([2], np.int64))], {}


@case("pad_axes_repeated", "input", "is repeated", "axes may not name an axis twice (0 and -2 are the same axis)", undefined="Pad-18, input 'axes': 'Behavior is undefined if an axis is repeated.'")
def _():
    return pad_model(inputs=("data", "pads", "", "axes")), [tensor(X22), pads(1, 1, 1, 1), tensor(np.array([0, -2], np.int64))], {}


@case("pad_wrap_before_19", "attribute", "mode", "mode 'wrap' arrived in Pad-19; Pad-18 does not know it", spec="Pad-18, attribute 'mode': 'Supported modes: `constant`(default), `reflect`, `edge`'")
def _():
    return pad_model(opset=18, mode="wrap"), [tensor(X22), pads(1, 1, 1, 1)], {}


@case("pad_unknown_mode", "attribute", "mode", "mode must be constant, reflect, edge or wrap")
def _():
    return pad_model(opset=21, mode="mirror"), [tensor(X22), pads(1, 1, 1, 1)], {}


@case("pad_reflect_empty_axis", "input", "has nothing to copy from", "reflect padding of an empty axis has no element to reflect")
def _():
    return pad_model(mode="reflect"), [tensor(np.zeros((0, 2), np.float32)), pads(1, 0, 1, 0)], {}


@case("pad_crop_past_axis", "input", "remove 5 elements but the axis holds 2", "negative pads may crop at most the whole axis")
def _():
    return pad_model(), [tensor(X22), pads(-3, 0, -2, 0)], {}


@case("pad_constant_value_type", "input", "input 'constant_value': expected the element type of data (float), got double", "constant_value must have the data's element type")
def _():
    node = helper.make_node("Pad", ["data", "pads", "cv"], ["y"], name="pad")
    m = model([node], [vi("data"), vi("pads", TensorProto.INT64), vi("cv", TensorProto.DOUBLE)], [vi("y")])
    return m.SerializeToString(), [tensor(X22), pads(1, 1, 1, 1), tensor(np.array(1.0))], {}


@case("pad_v2_int_data", "type", "element type int32 of 'data' is not allowed", "Pad-2 allows float, double and float16 only (widened in Pad-11)")
def _():
    return pad_model(opset=2, inputs=("data",), elem=TensorProto.INT32, pads=[1, 1, 1, 1]), [tensor(X22.astype(np.int32))], {}


@case("pad_wrap_at_pad_2", "attribute", "mode", "Pad-2's modes are constant, reflect and edge", spec="Pad-2, attribute 'mode': 'Three modes: constant(default), reflect, edge'")
def _():
    return pad_model(opset=2, inputs=("data",), mode="wrap", pads=[1, 1, 1, 1]), [tensor(X22)], {}


@case("pad_string_before_13", "type", "element type string of 'data' is not allowed", "Pad-11 has no string type (added in Pad-13)")
def _():
    data = np.array([["a", "b"], ["c", "d"]], dtype=object)
    return pad_model(opset=11, elem=TensorProto.STRING), [tensor(data), pads(1, 1, 1, 1)], {}


@case("pad_v1_missing_paddings", "attribute", "paddings", "Pad-1 requires its paddings attribute")
def _():
    return pad_model(opset=1, inputs=("data",)), [tensor(X22)], {}


@case("pad_huge_pads", "limit", "max_output_bytes", "pads of 2^40 per side: refused before allocating terabytes")
def _():
    return pad_model(), [tensor(X22), pads(1 << 40, 0, 1 << 40, 0)], {}


@case("pad_extreme_pads", "limit", "max_output_bytes", "pads of i64::MAX: the output length does not fit 64 bits")
def _():
    big = (1 << 63) - 1
    return pad_model(), [tensor(X22), pads(big, big, big, big)], {}


@case("pad_string_output_bytes", "limit", "max_output_bytes", "1 000 copies of a 4 KiB string exceed 1 MiB: string outputs count their text", limits="max_output_bytes=1M")
def _():
    data = np.array(["x" * 4096], dtype=object)
    return pad_model(inputs=("data", "pads"), elem=TensorProto.STRING, rank=1, mode="edge"), [tensor(data), pads(0, 999)], {}


# ---- Conv ----------------------------------------------------------------


@case("conv_channel_mismatch", "input", "X has 2 channels but W.shape[1] * group = 3 * 1 = 3", "W's channels times group must equal X's channels")
def _():
    return conv_model(), [tensor(IMG), tensor(np.ones((3, 3, 3, 3), np.float32))], {}


@case("conv_group_not_dividing", "input", "not divisible by group 2", "output channels must divide into the groups")
def _():
    return conv_model(group=2), [tensor(IMG), tensor(np.ones((3, 1, 3, 3), np.float32))], {}


@case("conv_zero_stride", "attribute", "strides", "strides must be at least 1")
def _():
    return conv_model(strides=[0, 1]), [tensor(IMG), tensor(W3)], {}


@case("conv_negative_pads", "attribute", "must not be negative", "Conv pads cannot be negative")
def _():
    return conv_model(pads=[-1, 0, 0, 0]), [tensor(IMG), tensor(W3)], {}


@case("conv_pads_with_auto_pad", "attribute", "cannot be combined with auto_pad", "explicit pads and auto_pad exclude each other", spec="Conv-22, attribute 'pads': 'This attribute cannot be used simultaneously with auto_pad attribute.'")
def _():
    return conv_model(pads=[1, 1, 1, 1], auto_pad="SAME_UPPER"), [tensor(IMG), tensor(W3)], {}


@case("conv_unknown_auto_pad", "attribute", "unknown value 'SAME'", "auto_pad is NOTSET, SAME_UPPER, SAME_LOWER or VALID", spec="Conv-22, attribute 'auto_pad': 'auto_pad must be either NOTSET, SAME_UPPER, SAME_LOWER or VALID.'")
def _():
    return conv_model(auto_pad="SAME"), [tensor(IMG), tensor(W3)], {}


@case("conv_rank_2_input", "input", "expected rank 3 or more", "X needs batch, channel and at least one spatial axis")
def _():
    return conv_model(rank=2), [tensor(np.ones((1, 2), np.float32)), tensor(np.ones((1, 2), np.float32))], {}


@case("conv_int_data", "type", "element type int32 of 'X' is not allowed", "Conv is defined for float types only")
def _():
    return conv_model(elem=TensorProto.INT32), [tensor(IMG.astype(np.int32)), tensor(W3.astype(np.int32))], {}


@case("conv_bfloat16_before_22", "type", "element type bfloat16 of 'X' is not allowed", "Conv-11 has no bfloat16 (added in Conv-22)")
def _():
    x = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32))
    w = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32))
    for t in (x, w):
        bits = np.frombuffer(t.raw_data, np.uint32) >> 16
        t.raw_data = bits.astype(np.uint16).tobytes()
        t.data_type = TensorProto.BFLOAT16
    return conv_model(opset=11, elem=TensorProto.BFLOAT16), [x.SerializeToString(), w.SerializeToString()], {}


@case("conv_bias_wrong_shape", "input", "input 'B': expected shape [3]", "B holds one value per output channel")
def _():
    return conv_model(bias=True), [tensor(IMG), tensor(W3), tensor(np.ones(2, np.float32))], {}


@case("conv_kernel_shape_contradicts_w", "attribute", "kernel_shape", "kernel_shape must match W's spatial shape")
def _():
    return conv_model(kernel_shape=[2, 2]), [tensor(IMG), tensor(W3)], {}


@case("conv_huge_group", "input", "W.shape[1] * group = 2 * 4611686018427387905", "group near 2^62: W.shape[1] * group must not wrap around")
def _():
    return conv_model(group=(1 << 62) + 1), [tensor(IMG), tensor(W3)], {}


@case("conv_work_too_large", "limit", "max_conv_macs", "the convolution needs more multiply-adds than max_conv_macs", limits="max_conv_macs=100")
def _():
    return conv_model(), [tensor(IMG), tensor(W3)], {}


@case("conv_im2col_too_large", "limit", "max_im2col_bytes", "one im2col panel exceeds max_im2col_bytes", limits="max_im2col_bytes=1K")
def _():
    return conv_model(), [tensor(IMG), tensor(W3)], {}


@case("conv_huge_pads_tiny_output", "limit", "max_output_bytes", "pads of 2^40 make an output of terabytes", limits="max_output_bytes=1M")
def _():
    return conv_model(pads=[1 << 40, 0, 0, 0]), [tensor(IMG), tensor(W3)], {}


# ---- CenterCropPad --------------------------------------------------------


@case("ccp_shape_wrong_length", "input", "input 'shape'", "shape must hold one target per axis", spec="CenterCropPad-18, attribute 'axes': 'If provided, it specifies a subset of axes that \'shape\' refer to. If not provided, all axes are assumed [0, 1, ..., r-1], where r = rank(data).'")
def _():
    return ccp_model(), [tensor(X22), pads(1, 1, 1)], {}


@case("ccp_axes_repeated", "attribute", "is repeated", "axes may not name an axis twice", undefined="CenterCropPad-18, attribute 'axes': 'Behavior is undefined if an axis is repeated.'")
def _():
    return ccp_model(axes=[1, -1]), [tensor(X22), pads(1, 1)], {}


@case("ccp_axes_out_of_range", "attribute", "out of range", "axes must lie in [-rank, rank-1]")
def _():
    return ccp_model(axes=[5]), [tensor(X22), pads(1)], {}


@case("ccp_negative_target", "input", "shape", "a target length cannot be negative", undefined="the spec does not address a negative target (CenterCropPad-18, input 'shape': '1-D tensor representing the cropping window dimensions.')")
def _():
    return ccp_model(), [tensor(X22), pads(-1, 2)], {}


@case("ccp_shape_float", "type", "shape", "shape must be int32 or int64")
def _():
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp")
    m = model([node], [vi("x"), vi("shape")], [vi("y")])
    return m.SerializeToString(), [tensor(X22), tensor(np.array([1.0, 1.0], np.float32))], {}


@case("ccp_huge_target", "limit", "max_output_bytes", "a target of 2^40 per axis", limits="max_output_bytes=1M")
def _():
    return ccp_model(), [tensor(X22), pads(1 << 40, 1 << 40)], {}


def toml_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    names = set()
    for name, kind, message, why, limits, spec, undefined, build in CASES:
        assert name not in names, name
        names.add(name)
        model_bytes, inputs, extra = build()
        d = os.path.join(OUT, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(model_bytes)
        for i, b in enumerate(inputs):
            with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(b)
        for rel, b in extra.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "wb") as f:
                f.write(b)
        lines = [
            "# Written by xtask/src/gen_invalid_cases.py; the harness checks that",
            "# this case is rejected with this kind of error and message.",
            f"kind = {toml_str(kind)}",
            f"message = {toml_str(message)}",
            f"why = {toml_str(why)}",
        ]
        if limits:
            lines.append(f"limits = {toml_str(limits)}")
        if spec:
            lines.append(f"spec = {toml_str(spec)}")
        if undefined:
            lines.append(f"undefined = {toml_str(undefined)}")
        with open(os.path.join(d, "expected_error.toml"), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(len(CASES))


main()
