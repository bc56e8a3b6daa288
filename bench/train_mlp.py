"""Training-step speed: an MLP (784-256-10, batch 64, cross-entropy, AdamW)
compiled with `tbc compile --train` and run by `tbc train` (500 steps, the
process time of a 1-step run subtracted), beside the same AdamW step written
in numpy float32 (its own forward and backward).  numpy is a yardstick, not
a training framework: onnxruntime-training does not install here.

usage: .venv/bin/python bench/train_mlp.py WORK_DIR TBC"""
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W, tbc = sys.argv[1], sys.argv[2]
os.makedirs(W, exist_ok=True)
rng = np.random.default_rng(0)
N, D, H, C = 64, 784, 256, 10
w1 = (rng.standard_normal((D, H)) * 0.05).astype(np.float32); b1 = np.zeros(H, np.float32)
w2 = (rng.standard_normal((H, C)) * 0.05).astype(np.float32); b2 = np.zeros(C, np.float32)
g = helper.make_graph([helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                       helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"])], "mlp",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, C])],
                      [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{W}/mlp.onnx")
x = rng.standard_normal((N, D)).astype(np.float32); y = rng.integers(0, C, N).astype(np.int64)
np.save(f"{W}/x.npy", x); np.save(f"{W}/y.npy", y)
subprocess.run([tbc, "compile", f"{W}/mlp.onnx", "--train", "--loss", "cross-entropy:logits:label", "--optimizer", "adamw", "--lr", "1e-3", "-o", f"{W}/step.so"], check=True)
for steps in (1, 501):
    t0 = time.perf_counter()
    r = subprocess.run([tbc, "train", f"{W}/step.so", "--input", f"x={W}/x.npy", "--input", f"label={W}/y.npy", "--steps", str(steps)], check=True, capture_output=True, text=True)
    t = time.perf_counter() - t0
    if steps == 1: t1 = t
    else: print("tbc: %.3f ms/step (500 steps, process time minus a 1-step run); loss %s -> %s" % ((t - t1) / 500 * 1e3, r.stdout.split()[3], r.stdout.split()[-1]))
# numpy float32 AdamW step for comparison
p = [w1.copy(), b1.copy(), w2.copy(), b2.copy()]; m = [np.zeros_like(a) for a in p]; v = [np.zeros_like(a) for a in p]
def step(t):
    h = x @ p[0] + p[1]; r = np.maximum(h, 0); z = r @ p[2] + p[3]
    z = z - z.max(1, keepdims=True); e = np.exp(z); s = e / e.sum(1, keepdims=True)
    dz = s.copy(); dz[np.arange(N), y] -= 1; dz /= N
    g = [None, None, r.T @ dz, dz.sum(0)]; dh = (dz @ p[2].T) * (h > 0); g[0] = x.T @ dh; g[1] = dh.sum(0)
    for i in range(4):
        m[i] = 0.9 * m[i] + 0.1 * g[i]; v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i]
        p[i] -= 1e-3 * (m[i] / (1 - 0.9 ** t) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8) + 0.01 * p[i])
t0 = time.perf_counter()
for t in range(1, 501): step(t)
print("numpy (float32, %d threads available): %.3f ms/step" % (os.cpu_count(), (time.perf_counter() - t0) / 500 * 1e3))
