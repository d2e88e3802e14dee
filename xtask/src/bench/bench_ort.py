# Times models with onnxruntime for `cargo xtask bench`, on request, so that
# the bench can alternate between onnxruntime and our kernels and compare
# them in the same stretch of time (this machine's speed drifts).
# Argument: <json> = {"threads": N, "models": [{"path", "inputs": [[shape], ...]}]}
# First prints one line {"session_ms": [...], "version": ..., "avx512f": ...}:
# how long creating each session took, and whether CPUID shows AVX-512. Then, for each line {"model": i, "reps": R}
# read from stdin, runs model i once to warm up and R timed times, and
# prints {"samples_ms": [...]}. With "cpu": c in the request, the calling
# thread (which runs the model when intra_op_num_threads is 1) moves to CPU
# c first, where the other side's round ran. Ends at end of input.
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def avx512f_visible():
    # numpy reads CPUID as onnxruntime does: under `--hide-avx512` it must
    # see no AVX-512 either (None where this numpy does not say).
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:
        return None
    return bool(__cpu_features__.get("AVX512F", False))


def main():
    config = json.loads(sys.argv[1])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = config["threads"]
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    rng = np.random.default_rng(0)
    sessions = []
    session_ms = []
    for m in config["models"]:
        t = time.perf_counter()
        sess = ort.InferenceSession(m["path"], opts, providers=["CPUExecutionProvider"])
        session_ms.append((time.perf_counter() - t) * 1e3)
        feeds = {
            i.name: rng.standard_normal(shape).astype(np.float32)
            for i, shape in zip(sess.get_inputs(), m["inputs"])
        }
        sessions.append((sess, feeds))
    hello = {"session_ms": session_ms, "version": ort.__version__, "avx512f": avx512f_visible()}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sess, feeds = sessions[request["model"]]
        if request.get("cpu") is not None:
            os.sched_setaffinity(0, {request["cpu"]})
        # The other side's threads may still be spinning: let them stop.
        time.sleep(0.05)
        sess.run(None, feeds)
        samples = []
        for _ in range(request["reps"]):
            t = time.perf_counter()
            sess.run(None, feeds)
            samples.append((time.perf_counter() - t) * 1e3)
        print(json.dumps({"samples_ms": samples}), flush=True)


if __name__ == "__main__":
    main()
