# Writes the kept differential findings as cases (backend-test layout) into
# <out>/<case>/, with expected outputs from numpy or onnx's reference
# implementation, never from our kernels. Each case is the minimal input on
# which a runtime disagrees with the spec; cases/differential/FINDINGS.md
# says which runtime, what it does and what the spec text says.
#
# `cargo xtask fetch-cases` runs it (and `--check` compares its output with
# what is committed); FINDINGS.md and known.toml are written by hand.
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def write(root, name, node, inputs, y, opset, inits=()):
    """inputs: list of (name, array); inits: list of (name, array)."""
    graph = helper.make_graph(
        [node],
        name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in inputs],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(y.dtype), list(y.shape))],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])
    model.ir_version = 10 if opset <= 21 else 11
    d = os.path.join(root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for k, (n, a) in enumerate(inputs):
        with open(os.path.join(d, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "y").SerializeToString())
    return model


def varint(n):
    """A protobuf varint; negative int64 values as their 64-bit two's complement."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(field, payload):
    """A wire-type-2 field: tag, length, payload."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def packed(field, values):
    """A repeated integer field in packed encoding (one tag, one length)."""
    return length_delimited(field, b"".join(varint(v) for v in values))


# Field numbers of onnx.proto used to re-encode messages by hand.
MODEL_GRAPH, GRAPH_NODE, GRAPH_INITIALIZER, NODE_ATTRIBUTE = 7, 1, 5, 5
TENSOR_DIMS, ATTRIBUTE_INTS = 1, 8


def with_packed(model, initializer=None, attributes=()):
    """The model's bytes with the dims of `initializer` (a name) and the ints
    of the single node's `attributes` (names) in packed encoding. onnx.proto
    is proto2 without [packed = true], so protobuf writes one tag per value;
    a protobuf parser must accept the packed form of any repeated scalar
    field all the same. A message is the concatenation of its fields, so each
    message on the path is re-encoded as its other fields (serialized by
    protobuf) followed by the re-encoded one."""
    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    del graph.node[:]
    del graph.initializer[:]
    graph_bytes = graph.SerializeToString()
    for node in model.graph.node:
        rest = onnx.NodeProto()
        rest.CopyFrom(node)
        del rest.attribute[:]
        node_bytes = rest.SerializeToString()
        for attr in node.attribute:
            if attr.name in attributes:
                a = onnx.AttributeProto()
                a.CopyFrom(attr)
                del a.ints[:]
                attr_bytes = a.SerializeToString() + packed(ATTRIBUTE_INTS, attr.ints)
            else:
                attr_bytes = attr.SerializeToString()
            node_bytes += length_delimited(NODE_ATTRIBUTE, attr_bytes)
        graph_bytes += length_delimited(GRAPH_NODE, node_bytes)
    for init in model.graph.initializer:
        if init.name == initializer:
            t = onnx.TensorProto()
            t.CopyFrom(init)
            del t.dims[:]
            init_bytes = packed(TENSOR_DIMS, init.dims) + t.SerializeToString()
        else:
            init_bytes = init.SerializeToString()
        graph_bytes += length_delimited(GRAPH_INITIALIZER, init_bytes)
    rest = onnx.ModelProto()
    rest.CopyFrom(model)
    rest.ClearField("graph")
    data = rest.SerializeToString() + length_delimited(MODEL_GRAPH, graph_bytes)
    # The same model, and really packed: protobuf reads the bytes back as
    # the original, and its own encoding of them differs (unpacked).
    back = onnx.ModelProto()
    back.ParseFromString(data)
    if back != model or back.SerializeToString() == data:
        raise SystemExit("with_packed: the re-encoded model is not the same model in packed form")
    return data


def rewrite_model(root, name, data):
    with open(os.path.join(root, name, "model.onnx"), "wb") as f:
        f.write(data)


def conv1d_float64(x, w):
    """Conv with no padding, stride or dilation, group 1, as plain loops over
    float64 products: exact for float16 inputs up to the final sum's rounding."""
    n, c, length = x.shape
    m, c_w, k = w.shape
    assert c == c_w
    y = np.zeros((n, m, length - k + 1), dtype=np.float64)
    for b in range(n):
        for o in range(m):
            for i in range(length - k + 1):
                y[b, o, i] = sum(float(x[b, ch, i + j]) * float(w[o, ch, j]) for ch in range(c) for j in range(k))
    return y


def reference_float64(node, x, w):
    """onnx's ReferenceEvaluator on the same node with float64 inputs."""
    graph = helper.make_graph(
        [node],
        "float64",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializer=[numpy_helper.from_array(w.astype(np.float64), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 11)])
    (y,) = ReferenceEvaluator(model).run(None, {"x": x.astype(np.float64)})
    return y


def float16_from_bits(bits, shape):
    return np.array(bits, dtype=np.uint16).view(np.float16).reshape(shape)


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)

    # Pad's own documentation, example 2: reflect with a pad as long as the axis.
    x = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)
    pads = np.array([0, 2, 0, 0], dtype=np.int64)
    y = np.pad(x, [(0, 0), (2, 0)], mode="reflect")
    write(root, "pad_reflect_spec_example_2", helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect"),
          [("x", x)], y, 18, inits=[("pads", pads)])

    # reflect on an axis of length 1: numpy.pad repeats the value.
    x = np.array([[1.5], [-2.0], [3.25]], dtype=np.float32)
    y = np.pad(x, [(0, 0), (2, 1)], mode="reflect")
    write(root, "pad_reflect_axis_length_1", helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect"),
          [("x", x)], y, 18, inits=[("pads", np.array([0, 2, 0, 1], dtype=np.int64))])

    # edge mode, a crop that empties the axis and no padding: an empty result.
    x = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    y = x[5:]
    write(root, "pad_edge_crop_to_empty", helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge"),
          [("x", x)], y, 18, inits=[("pads", np.array([0, -5], dtype=np.int64))])

    # Negative pads with edge mode (crop, then pad): Pad-2's attribute form.
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.pad(x[1:, :3], [(0, 2), (1, 0)], mode="edge")
    write(root, "pad2_edge_negative_pads", helper.make_node("Pad", ["x"], ["y"], mode="edge", pads=[-1, 1, 2, -1]),
          [("x", x)], y, 2)

    # float16 data in an opset-2 model (Pad-2 allows float16).
    x = np.array([[0.5, -1.0], [2.0, 4.0]], dtype=np.float16)
    y = np.pad(x, [(1, 0), (0, 1)], mode="constant", constant_values=np.float16(1.5))
    write(root, "pad2_float16", helper.make_node("Pad", ["x"], ["y"], mode="constant", pads=[1, 0, 0, 1], value=1.5),
          [("x", x)], y, 2)

    # Conv, float16, SAME_UPPER with a stride larger than the kernel: the
    # total padding max(0, (out - 1) * stride + k - in) is 0.
    x = np.array([[[0.788, -2.12, 2.52, -2.256]]], dtype=np.float16)
    w = np.array([[[3.896]]], dtype=np.float16)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[4], auto_pad="SAME_UPPER")
    m = write(root, "conv_float16_same_upper_stride_gt_kernel", node, [("x", x)], np.zeros((1, 1, 1), np.float16), 11,
              inits=[("w", w)])
    (y,) = ReferenceEvaluator(m).run(None, {"x": x})
    write(root, "conv_float16_same_upper_stride_gt_kernel", node, [("x", x)], y.astype(np.float16), 11, inits=[("w", w)])

    # The same in float32.
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    m = write(root, "conv_float_same_upper_stride_gt_kernel", node, [("x", xf)], np.zeros((1, 1, 1), np.float32), 11,
              inits=[("w", wf)])
    (y,) = ReferenceEvaluator(m).run(None, {"x": xf})
    write(root, "conv_float_same_upper_stride_gt_kernel", node, [("x", xf)], y, 11, inits=[("w", wf)])

    # Conv with dilations and SAME_LOWER (the spec defines the padding with the dilated kernel).
    x = np.arange(1, 8, dtype=np.float32).reshape(1, 1, 7)
    w = np.array([[[1.0, -1.0, 2.0]]], dtype=np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], dilations=[2], auto_pad="SAME_LOWER")
    m = write(root, "conv_same_lower_dilated", node, [("x", x)], np.zeros((1, 1, 7), np.float32), 11, inits=[("w", w)])
    (y,) = ReferenceEvaluator(m).run(None, {"x": x})
    write(root, "conv_same_lower_dilated", node, [("x", x)], y, 11, inits=[("w", w)])

    # Conv on double, which every Conv version allows.
    x = np.arange(6, dtype=np.float64).reshape(1, 1, 6) / 4
    w = np.array([[[0.5, -0.25]]], dtype=np.float64)
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    m = write(root, "conv_double", node, [("x", x)], np.zeros((1, 1, 5)), 11, inits=[("w", w)])
    (y,) = ReferenceEvaluator(m).run(None, {"x": x})
    write(root, "conv_double", node, [("x", x)], y, 11, inits=[("w", w)])

    # Negative pads on a length-1 axis: the crop empties it.
    x = np.array([7], dtype=np.int32)
    write(root, "pad_constant_crop_length_1", helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant"),
          [("x", x)], x[1:], 18, inits=[("pads", np.array([-1, 0], dtype=np.int64))])

    # float16 Conv whose sums cancel: accumulating in float16 ends several
    # ulps away from the exact sum rounded once (output [0, 1, 0]: 8 ulps).
    # The inputs are those `cargo xtask diff --against tract --seed 7` shrank
    # to, kept as float16 bit patterns; the expected output is the float64
    # sum of products (exact here: 11-bit significands, 4 terms) rounded once
    # to float16, and onnx's ReferenceEvaluator in float64 must agree.
    x = float16_from_bits([47800, 49156, 15507, 16237, 14852, 10527,
                           49392, 13369, 13763, 49375, 47792, 16912], (1, 2, 6))
    w = float16_from_bits([17078, 16953, 44384, 16269, 10920, 16497, 48513, 16712], (2, 2, 2))
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[1], dilations=[1], pads=[0, 0])
    exact = conv1d_float64(x, w)
    if not np.array_equal(exact, reference_float64(node, x, w)):
        raise SystemExit("conv_float16_accumulation: the float64 loops and onnx's ReferenceEvaluator disagree")
    write(root, "conv_float16_accumulation", node, [("x", x)], exact.astype(np.float16), 11, inits=[("w", w)])

    # CenterCropPad with an int32 target shape (Tind allows int32).
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    shape = np.array([3, 2], dtype=np.int32)
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"])
    y = np.zeros((3, 2), np.float32)
    y[0:2, :] = x[:, 1:3]
    write(root, "center_crop_pad_int32_shape", node, [("x", x), ("shape", shape)], y, 18)

    # Conv-11 SAME_LOWER on a 3x3 input with a 2x2 kernel: the total padding
    # of 1 per axis goes at the beginning (SAME_LOWER), so y[0, 0] sees only
    # x[0, 0]. numpy pads and slides the window; onnx's reference must agree.
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 1, 2, 2), dtype=np.float32)
    padded = np.pad(x, [(0, 0), (0, 0), (1, 0), (1, 0)])
    y = np.array([[[[(padded[0, 0, i:i + 2, j:j + 2] * w[0, 0]).sum() for j in range(3)]
                    for i in range(3)]]], dtype=np.float32)
    # kernel_shape is given: rten needs it to know the number of spatial axes.
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_LOWER")
    m = write(root, "conv_same_lower_2x2", node, [("x", x)], y, 11, inits=[("w", w)])
    (ref,) = ReferenceEvaluator(m).run(None, {"x": x})
    if not np.array_equal(ref, y):
        raise SystemExit("conv_same_lower_2x2: numpy and onnx's ReferenceEvaluator disagree")

    # The same Conv without auto_pad, its weight initializer's dims in packed
    # encoding (the model is otherwise what protobuf writes).
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2])
    y = np.array([[[[(x[0, 0, i:i + 2, j:j + 2] * w[0, 0]).sum() for j in range(2)]
                    for i in range(2)]]], dtype=np.float32)
    m = write(root, "packed_tensor_dims", node, [("x", x)], y, 11, inits=[("w", w)])
    (ref,) = ReferenceEvaluator(m).run(None, {"x": x})
    if not np.array_equal(ref, y):
        raise SystemExit("packed_tensor_dims: numpy and onnx's ReferenceEvaluator disagree")
    rewrite_model(root, "packed_tensor_dims", with_packed(m, initializer="w"))

    # The same Conv with its ints attributes (kernel_shape, strides, pads)
    # in packed encoding.
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 0, 0])
    m = write(root, "packed_attribute_ints", node, [("x", x)], y, 11, inits=[("w", w)])
    (ref,) = ReferenceEvaluator(m).run(None, {"x": x})
    if not np.array_equal(ref, y):
        raise SystemExit("packed_attribute_ints: numpy and onnx's ReferenceEvaluator disagree")
    rewrite_model(root, "packed_attribute_ints",
                  with_packed(m, attributes=("kernel_shape", "strides", "pads")))


if __name__ == "__main__":
    main()
