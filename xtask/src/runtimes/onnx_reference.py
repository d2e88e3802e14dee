# onnx's reference implementation (onnx.reference.ReferenceEvaluator) as a
# runtime for the harness's command backend:
#
#   ONNX_BACKEND=command:"target/xtask/cases-venv/bin/python xtask/src/runtimes/onnx_reference.py" \
#       cargo test --test conformance
#
# The protocol is in protocol.py. Inputs are fed by position to the graph
# inputs that are not initializers.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protocol import feed_names, serve  # noqa: E402


def version():
    import onnx

    return f"onnx {onnx.__version__} (onnx.reference.ReferenceEvaluator)"


def run(model_path, arrays):
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(model_path)
    feeds = dict(zip(feed_names(model), arrays))
    return ReferenceEvaluator(model).run(None, feeds)


if __name__ == "__main__":
    serve(version, run)
