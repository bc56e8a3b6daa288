"""The plain MatMulInteger case of issue 15: A (u8, 128 x K, a graph input with
a u8 zero point) times a constant B (s8, K x N, zero point 0), as
onnxruntime's quantize_dynamic writes a linear layer, timed by tbc-bench
and onnxruntime side by side (medians and fastest of N runs).

usage: .venv/bin/python bench/int8_matmul.py BUILD_DIR [--threads 1,2] [--runs 50] [--shape 128x768x3072]"""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def make(path, m, k, n):
    rng = np.random.default_rng(15)
    b = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    g = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"], ["y"])],
        "int8_matmul",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
        [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(131, np.uint8), "a_zp"),
         numpy_helper.from_array(np.array(0, np.int8), "b_zp")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    a = rng.integers(0, 256, size=(m, k), dtype=np.uint8)
    np.save(path[:-5] + ".a.npy", a)
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--shape", default="128x768x3072")
    o = ap.parse_args()
    m, k, n = (int(x) for x in o.shape.split("x"))
    path = os.path.join(o.build, "models", f"int8_matmul_{m}x{k}x{n}.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    a = make(path, m, k, n)
    for t in (int(x) for x in o.threads.split(",")):
        r = subprocess.run([os.path.join(o.build, "bench", "tbc-bench"), path, "--threads", str(t), "--runs",
                            str(o.runs), "a=" + path[:-5] + ".a.npy"], capture_output=True, text=True, check=True)
        f = r.stdout.split()
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            s.run(None, {"a": a})
        ts = []
        for _ in range(o.runs):
            t0 = time.perf_counter()
            s.run(None, {"a": a})
            ts.append((time.perf_counter() - t0) * 1e3)
        print(f"MatMulInteger {m}x{k}x{n}, {t} thread(s): tbc median {float(f[1]):.3f} fastest {float(f[3]):.3f} ms; "
              f"onnxruntime median {statistics.median(ts):.3f} fastest {min(ts):.3f} ms; "
              f"ratio of medians {float(f[1]) / statistics.median(ts):.2f}")


main()
