# The folder protocol of the harness's command backend
# (src/backend/command.rs), shared by the runtimes in this folder.
#
# The harness runs `PROGRAM FOLDER`; FOLDER holds model.onnx and
# input_0.pb .. input_{n-1}.pb (TensorProto, in the order of the graph
# inputs that are not initializers). The program answers with
# output_0.pb .. (TensorProto, the graph outputs in order) and exit status
# 0, or with error.txt (the rejection message), and may write version.txt.
# Anything the runtime raises is its refusal and goes to error.txt; only a
# death of the interpreter itself (a signal, an abort) is a crash.
import os
import sys
import traceback


def serve(version, run):
    """version(): the runtime's name and version; run(model_path, arrays):
    the outputs, in the graph's order, as numpy arrays."""
    folder = sys.argv[1]
    try:
        # Imported here so that a missing package is reported in error.txt.
        import numpy as np
        from onnx import TensorProto, numpy_helper

        with open(os.path.join(folder, "version.txt"), "w") as f:
            f.write(version() + "\n")
        arrays = []
        for k in range(len(os.listdir(folder))):
            path = os.path.join(folder, f"input_{k}.pb")
            if not os.path.exists(path):
                break
            t = TensorProto()
            with open(path, "rb") as f:
                t.ParseFromString(f.read())
            arrays.append(numpy_helper.to_array(t))
        outputs = run(os.path.join(folder, "model.onnx"), arrays)
        # Written only once every output converted, so that a refusal never
        # leaves some outputs behind.
        encoded = [numpy_helper.from_array(np.asarray(y), f"output_{k}").SerializeToString()
                   for k, y in enumerate(outputs)]
    except Exception as e:  # every exception is the runtime's refusal
        with open(os.path.join(folder, "error.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}\n")
        # The traceback helps whoever reads stderr.txt; it is not the message.
        traceback.print_exc()
        sys.exit(1)
    for k, data in enumerate(encoded):
        with open(os.path.join(folder, f"output_{k}.pb"), "wb") as f:
            f.write(data)


def feed_names(model):
    """The graph inputs that are not initializers, in order."""
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]
