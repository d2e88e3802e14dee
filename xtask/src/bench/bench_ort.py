# Times models with onnxruntime for `cargo xtask bench`.
# Arguments: <json> = {"threads": N, "reps": R, "models": [{"path", "inputs": [[shape], ...]}]}
# Prints {"times_ms": [...], "session_ms": [...], "version": ...}: the median of
# R runs after a warm-up, and how long creating each session took.
import json
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    config = json.loads(sys.argv[1])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = config["threads"]
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    rng = np.random.default_rng(0)
    times = []
    sessions = []
    for m in config["models"]:
        t = time.perf_counter()
        sess = ort.InferenceSession(m["path"], opts, providers=["CPUExecutionProvider"])
        sessions.append((time.perf_counter() - t) * 1e3)
        feeds = {
            i.name: rng.standard_normal(shape).astype(np.float32)
            for i, shape in zip(sess.get_inputs(), m["inputs"])
        }
        sess.run(None, feeds)
        samples = []
        for _ in range(config["reps"]):
            t = time.perf_counter()
            sess.run(None, feeds)
            samples.append(time.perf_counter() - t)
        samples.sort()
        times.append(samples[len(samples) // 2] * 1e3)
    print(json.dumps({"times_ms": times, "session_ms": sessions, "version": ort.__version__}))


if __name__ == "__main__":
    main()
