# The folder protocol of the harness's command backend
# (src/backend/command.rs), shared by the runtimes in this folder.
#
# One-shot: the harness runs `PROGRAM FOLDER`; FOLDER holds model.onnx and
# input_0.pb .. input_{n-1}.pb (TensorProto, in the order of the graph
# inputs that are not initializers). The program answers with
# output_0.pb .. (TensorProto, the graph outputs in order) and exit status
# 0, or with error.txt (the rejection message) and exit status 1, and may
# write version.txt.
#
# Serve mode (ONNX_COMMAND_SERVE=1): the harness runs `PROGRAM --serve`
# once and sends one folder path per line on standard input; the program
# answers in the folder as above and then prints `done` on standard output.
# The interpreter and the runtime are imported once, not once per run.
#
# Anything the runtime raises is its refusal and goes to error.txt; only a
# death of the interpreter itself (a signal, an abort) is a crash.
import os
import sys


def answer(folder, version, run):
    """Answers one folder; True when the runtime ran, False when it refused."""
    try:
        # Imported here so that a missing package is reported in error.txt.
        import numpy as np
        from onnx import TensorProto, numpy_helper

        with open(os.path.join(folder, "version.txt"), "w") as f:
            f.write(version() + "\n")
        arrays = []
        k = 0
        while os.path.exists(os.path.join(folder, f"input_{k}.pb")):
            t = TensorProto()
            with open(os.path.join(folder, f"input_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            arrays.append(numpy_helper.to_array(t))
            k += 1
        outputs = run(os.path.join(folder, "model.onnx"), arrays)
        # Written only once every output converted, so that a refusal never
        # leaves some outputs behind.
        encoded = []
        for k, y in enumerate(outputs):
            y = np.asarray(y)
            try:
                encoded.append(numpy_helper.from_array(y, f"output_{k}").SerializeToString())
            except Exception as e:
                # The runtime returned something no tensor holds (a string
                # tensor with numbers in it): said as such, not as a refusal
                # of the model.
                raise RuntimeError(f"output {k} ({y.dtype}, shape {list(y.shape)}) is not a tensor "
                                   f"a TensorProto can hold: {type(e).__name__}: {e}") from e
    except Exception as e:  # every exception is the runtime's refusal
        with open(os.path.join(folder, "error.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}\n")
        return False
    for k, data in enumerate(encoded):
        with open(os.path.join(folder, f"output_{k}.pb"), "wb") as f:
            f.write(data)
    return True


def serve(version, run):
    """version(): the runtime's name and version; run(model_path, arrays):
    the outputs, in the graph's order, as numpy arrays."""
    if sys.argv[1:] == ["--serve"]:
        # Standard output carries `done` lines only: whatever the runtime
        # prints, from Python or from native code, goes to standard error.
        sys.stdout.flush()
        protocol_out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        for line in sys.stdin:
            answer(line.rstrip("\n"), version, run)
            protocol_out.write("done\n")
            protocol_out.flush()
        return
    if not answer(sys.argv[1], version, run):
        sys.exit(1)


def feed_names(model):
    """The graph inputs that are not initializers, in order."""
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]
