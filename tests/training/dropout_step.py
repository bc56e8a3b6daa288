#!/usr/bin/env python3
"""Training steps through Dropout in training mode, against numpy.

An MLP with two Dropout nodes (training_mode true, as torch.onnx exports a
model in training mode: one with a seed attribute, one without) is compiled
with `tbc compile --train`; `tbc train` runs several steps on one batch.
Each step draws new masks: Dropout's mask is numpy's
RandomState(seed).uniform(0, 1, shape) >= ratio (ONNX's reference), and the
training step adds its seed offset, step * 1000003 (step 0, 1, ...), to the
seed; a Dropout without a seed attribute gets its position among the
Dropouts (docs/training.md).  numpy runs the same steps in float64 with
those masks; every step's loss and the final weights must agree, on the CPU
and on an OpenCL device.  A reference that kept the first step's masks must
not agree (the masks do change).

usage: dropout_step.py TBC WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TBC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(11)
N, D, H, C = 8, 6, 32, 4
W = {"w1": rng.standard_normal((D, H)) * 0.5, "b1": rng.standard_normal(H) * 0.1,
     "w2": rng.standard_normal((H, C)) * 0.5, "b2": rng.standard_normal(C) * 0.1}
x = rng.standard_normal((N, D)).astype(np.float32)
target = rng.standard_normal((N, C)).astype(np.float32)
STEPS, LR, R1, R2, SEED = 5, 0.1, 0.3, 0.5, 5

inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in W.items()]
inits += [numpy_helper.from_array(np.array(R1, np.float32), "r1"), numpy_helper.from_array(np.array(R2, np.float32), "r2"),
          numpy_helper.from_array(np.array(True), "training")]
nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Dropout", ["r", "r1", "training"], ["d"], name="drop1", seed=SEED),
         helper.make_node("MatMul", ["d", "w2"], ["m"], name="fc2"),
         helper.make_node("Add", ["m", "b2"], ["a"], name="bias2"),
         helper.make_node("Dropout", ["a", "r2", "training"], ["logits"], name="drop2")]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, C])], inits)
model = os.path.join(WORK, "mlp_dropout.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), model)
np.save(os.path.join(WORK, "x.npy"), x)
np.save(os.path.join(WORK, "target.npy"), target)


def mask(seed, shape, ratio):
    """ONNX's reference Dropout: the mask and the scale (rounded to float32, the ratio's type)."""
    keep = np.random.RandomState(seed % 2**32).uniform(0, 1, shape) >= np.float32(ratio)
    scale = float(np.float32(1.0 / float(np.float32(1.0 - float(np.float32(ratio))))))
    return keep * scale


def reference(fixed_masks=False):
    p = {k: v.astype(np.float32).astype(np.float64) for k, v in W.items()}
    xx = x.astype(np.float64)
    losses = []
    for t in range(STEPS):
        off = 0 if fixed_masks else t * 1000003
        # drop1: its seed attribute; drop2 has none: its position among the Dropouts, 1
        m1, m2 = mask(SEED + off, (N, H), R1), mask(1 + off, (N, C), R2)
        h = xx @ p["w1"] + p["b1"]
        r = np.maximum(h, 0)
        d = r * m1
        a = d @ p["w2"] + p["b2"]
        y = a * m2
        e = y - target
        losses.append((e * e).mean())
        dy = 2 * e / e.size
        da = dy * m2
        gr = {"w2": d.T @ da, "b2": da.sum(0)}
        dh = (da @ p["w2"].T) * m1 * (h > 0)
        gr["w1"], gr["b1"] = xx.T @ dh, dh.sum(0)
        for k in p:
            p[k] = p[k] - LR * gr[k]
    return losses, p


failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(args):
    return subprocess.run([TBC] + args, capture_output=True, text=True)


want_losses, want_p = reference()
fixed_losses, _ = reference(fixed_masks=True)
check(not np.allclose(want_losses[1:], fixed_losses[1:], rtol=1e-3), "the reference's masks do not change")
so = os.path.join(WORK, "step.so")
r = run(["compile", model, "--train", "--loss", "mse:logits:target", "--optimizer", "sgd", "--lr", str(LR),
         "--target", "cpu,opencl", "-o", so])
check(r.returncode == 0, f"compile: {r.stderr}")
for device in ["cpu", "opencl:0"]:
    out = os.path.join(WORK, device.replace(":", "") + ".weights")
    r = run(["train", so, "--input", "x=" + os.path.join(WORK, "x.npy"), "--input",
             "target=" + os.path.join(WORK, "target.npy"), "--steps", str(STEPS), "--device", device, "--save", out])
    if device != "cpu" and r.returncode != 0 and "no OpenCL" in r.stderr and os.environ.get("CI") != "true":
        print("skipped: --device opencl:0: no OpenCL device here:", r.stderr.strip())
        continue
    if r.returncode != 0:
        check(False, f"{device}: train failed: {r.stderr}")
        continue
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]
    check(len(got) == STEPS and np.allclose(got, want_losses, rtol=1e-4, atol=1e-6),
          f"{device}: losses {got} vs numpy {want_losses}")
    for k in W:
        w = np.load(os.path.join(out, k + ".npy"))
        check(np.allclose(w, want_p[k], rtol=1e-4, atol=1e-5), f"{device}: {k} differs from numpy by "
              f"{np.abs(w - want_p[k]).max()}")
    print(f"{device}: losses {' '.join(f'{v:.6f}' for v in got)} (numpy {' '.join(f'{v:.6f}' for v in want_losses)})")

if failures:
    sys.exit(f"{failures} check(s) failed")
print("ok")
