#!/usr/bin/env python3
"""Matrix-vector products against the machine's memory bandwidth (issue 15).

A batch-1 fully connected layer or a decode step reads each weight once:
its time is the weights' bytes over the memory's bandwidth.  This times
MatMul(x[1, K], W[K, N]) with W a float32 constant larger than the caches,
compiled by tbc (tbc-bench) and run by onnxruntime, at 1 and 2 threads, and
the streaming bandwidth of the same machine (tbc-stream: a copy, counting
the bytes read and written, and a read), and prints GB/s of weights read
per second for each and the ratios.

usage: .venv/bin/python bench/matvec.py BUILD_DIR [--runs 30] [--shapes 4096x11008,11008x4096]
"""
import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def model(path, K, N):
    rng = np.random.default_rng(K * 7 + N)
    W = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "mv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])], [W])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)


def tbc_ms(bench, path, xfile, threads, runs):
    r = subprocess.run([bench, path, "x=" + xfile, "--threads", str(threads), "--runs", str(runs)],
                       capture_output=True, text=True)
    m = re.search(r"median_ms ([\d.]+) min_ms ([\d.]+)", r.stdout + r.stderr)
    if not m:
        sys.exit(f"tbc-bench failed: {r.stderr}")
    return float(m.group(1)), float(m.group(2))


def ort_ms(path, x, threads, runs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        s.run(None, {"x": x})
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, {"x": x})
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts)), float(min(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--shapes", default="4096x11008,11008x4096")
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench", "tbc-bench")
    stream = os.path.join(a.build, "bench", "tbc-stream")
    print(f"# {cpu_name()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')} UTC, "
          f"load {os.getloadavg()[0]:.1f}")
    bw = {}
    for t in (1, 2):
        r = subprocess.run([stream, "--threads", str(t), "--mb", "512"], capture_output=True, text=True)
        m = re.search(r"copy ([\d.]+) read ([\d.]+)", r.stdout)
        if not m:
            sys.exit(f"tbc-stream failed: {r.stderr}")
        bw[t] = (float(m.group(1)), float(m.group(2)))
        print(f"stream, {t} thread(s): copy {bw[t][0]:.1f} GB/s (read + write), read {bw[t][1]:.1f} GB/s")
    print()
    print("| K x N (MB) | threads | tbc ms (median / fastest) | tbc GB/s | onnxruntime ms | onnxruntime GB/s "
          "| tbc / copy | tbc / read |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes.split(","):
            K, N = (int(v) for v in shape.split("x"))
            path, xfile = os.path.join(tmp, f"mv_{shape}.onnx"), os.path.join(tmp, f"x_{shape}.npy")
            model(path, K, N)
            x = np.random.default_rng(1).standard_normal((1, K)).astype(np.float32)
            np.save(xfile, x)
            mb = K * N * 4 / 1e6
            for t in (1, 2):
                tm, tf = tbc_ms(bench, path, xfile, t, a.runs)
                om, of = ort_ms(path, x, t, a.runs)
                g_t, g_o = mb / tm, mb / om  # MB / ms = GB/s
                print(f"| {K} x {N} ({mb:.0f}) | {t} | {tm:.2f} / {tf:.2f} | {g_t:.1f} | {om:.2f} / {of:.2f} | {g_o:.1f} "
                      f"| {g_t / bw[t][0]:.2f} | {g_t / bw[t][1]:.2f} |")


if __name__ == "__main__":
    main()
