#!/usr/bin/env python3
"""Whole training steps compiled by tbc against a numpy reference.

A small MLP (Gemm, Relu, MatMul + Add, Tanh) is compiled with
`tbc compile --train` for every loss (cross-entropy, mse, output:NAME) and
optimizer (sgd, momentum, adamw); `tbc train` runs several steps on one batch
and saves the trained weights.  numpy runs the same steps in float64 (its own
forward and backward, written out by hand); each step's loss and every final
weight must agree.  Then the bad inputs: each must fail with a message naming
what is wrong and write no artifact.

usage: train_vs_numpy.py TBC WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TBC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
N, D, H, C = 8, 5, 16, 3
W = {
    "w1": rng.standard_normal((D, H)) * 0.5,
    "b1": rng.standard_normal(H) * 0.1,
    "w2": rng.standard_normal((H, C)) * 0.5,
    "b2": rng.standard_normal(C) * 0.1,
}
x = rng.standard_normal((N, D)).astype(np.float32)
label = rng.integers(0, C, N).astype(np.int64)
target = rng.standard_normal((N, C)).astype(np.float32)
STEPS = 5


def mlp_model(path, scalar_loss=False, extra=None, label_input=None):
    """x -> Gemm(w1, b1) -> Relu -> MatMul(w2) + b2 -> Tanh -> logits."""
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in W.items()]
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "b2"], ["a"], name="bias2"),
        helper.make_node("Tanh", ["a"], ["logits"], name="tanh"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, C])]
    if scalar_loss:  # the model computes its own loss: mean(logits^2)
        nodes += [helper.make_node("Mul", ["logits", "logits"], ["sq"]),
                  helper.make_node("ReduceMean", ["sq"], ["my_loss"], keepdims=0)]
        outputs.append(helper.make_tensor_value_info("my_loss", TensorProto.FLOAT, []))
    if extra:
        nodes, outputs = extra(nodes, outputs)
    if label_input is not None:
        inputs.append(label_input)
    g = helper.make_graph(nodes, "mlp", inputs, outputs, inits)
    # IR 10: what onnxruntime reads (an exported model is run there)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)


# ---- numpy reference, float64 ----
def forward_backward(p, loss_kind):
    xx = x.astype(np.float64)
    h = xx @ p["w1"] + p["b1"]
    r = np.maximum(h, 0)
    a = r @ p["w2"] + p["b2"]
    y = np.tanh(a)
    if loss_kind == "cross-entropy":
        z = y - y.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -logp[np.arange(N), label].mean()
        dy = (np.exp(logp) - np.eye(C)[label]) / N
    elif loss_kind == "mse":
        e = y - target
        loss = (e * e).mean()
        dy = 2 * e / e.size
    else:  # output:my_loss = mean(y^2)
        loss = (y * y).mean()
        dy = 2 * y / y.size
    da = dy * (1 - y * y)
    g = {"w2": r.T @ da, "b2": da.sum(0)}
    dr = da @ p["w2"].T
    dh = dr * (h > 0)
    g["w1"] = xx.T @ dh
    g["b1"] = dh.sum(0)
    return loss, g


def reference(loss_kind, opt, hp, trainable, params=None, fb=None):
    p = {k: v.astype(np.float32).astype(np.float64) for k, v in (params or W).items()}
    fb = fb or forward_backward
    slots = {k: [np.zeros_like(v), np.zeros_like(v)] for k, v in p.items()}
    losses = []
    for t in range(1, STEPS + 1):
        loss, g = fb(p, loss_kind)
        losses.append(loss)
        for k in trainable:
            if opt == "sgd":
                p[k] = p[k] - hp["lr"] * g[k]
            elif opt == "momentum":
                v = slots[k][0] = hp["momentum"] * slots[k][0] + g[k]
                p[k] = p[k] - hp["lr"] * v
            else:
                m = slots[k][0] = hp["beta1"] * slots[k][0] + (1 - hp["beta1"]) * g[k]
                v = slots[k][1] = hp["beta2"] * slots[k][1] + (1 - hp["beta2"]) * g[k] * g[k]
                mhat = m / (1 - hp["beta1"] ** t)
                vhat = v / (1 - hp["beta2"] ** t)
                p[k] = p[k] - hp["lr"] * (mhat / (np.sqrt(vhat) + hp["eps"]) + hp["weight_decay"] * p[k])
    return losses, p


def run(args, **kw):
    return subprocess.run([TBC] + args, capture_output=True, text=True, **kw)


failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


np.save(os.path.join(WORK, "x.npy"), x)
np.save(os.path.join(WORK, "label.npy"), label)
np.save(os.path.join(WORK, "target.npy"), target)
mlp_model(os.path.join(WORK, "mlp.onnx"))
mlp_model(os.path.join(WORK, "mlp_loss.onnx"), scalar_loss=True)

hp = {"lr": 0.1, "momentum": 0.8, "beta1": 0.9, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.05}
cases = []
for loss_kind, spec, model, feeds in [
    ("cross-entropy", "cross-entropy:logits:label", "mlp.onnx", ["label"]),
    ("mse", "mse:logits:target", "mlp.onnx", ["target"]),
    ("output", "output:my_loss", "mlp_loss.onnx", []),
]:
    for opt in ["sgd", "momentum", "adamw"]:
        cases.append((loss_kind, spec, model, feeds, opt, "all"))
cases.append(("cross-entropy", "cross-entropy:logits:label", "mlp.onnx", ["label"], "adamw", "w2,b1"))

for loss_kind, spec, model, feeds, opt, trainable in cases:
    name = f"{loss_kind}-{opt}-{trainable.replace(',', '_')}"
    so = os.path.join(WORK, name + ".so")
    args = ["compile", os.path.join(WORK, model), "--train", "--loss", spec, "--optimizer", opt,
            "--lr", str(hp["lr"]), "--momentum", str(hp["momentum"]), "--beta1", str(hp["beta1"]),
            "--beta2", str(hp["beta2"]), "--eps", str(hp["eps"]), "--weight-decay", str(hp["weight_decay"]),
            "--trainable", trainable, "-o", so]
    r = run(args)
    if r.returncode != 0:
        check(False, f"{name}: compile failed: {r.stderr}")
        continue
    out = os.path.join(WORK, name + ".weights")
    targs = ["train", so, "--input", "x=" + os.path.join(WORK, "x.npy"), "--steps", str(STEPS), "--save", out]
    for f in feeds:
        targs += ["--input", f"{f}={os.path.join(WORK, f + '.npy')}"]
    r = run(targs)
    if r.returncode != 0:
        check(False, f"{name}: train failed: {r.stderr}")
        continue
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]
    train_set = list(W) if trainable == "all" else trainable.split(",")
    want_losses, want_p = reference(loss_kind, opt, hp, train_set)
    check(len(got) == STEPS and np.allclose(got, want_losses, rtol=1e-4, atol=1e-6),
          f"{name}: losses {got} vs numpy {want_losses}")
    for k in W:
        path = os.path.join(out, k + ".npy")
        if k not in train_set:
            check(not os.path.exists(path), f"{name}: frozen {k} was saved")
            continue
        if not os.path.exists(path):
            check(False, f"{name}: {k} was not saved")
            continue
        w = np.load(path)
        check(w.dtype == np.float32 and w.shape == W[k].shape, f"{name}: {k} is {w.dtype}{w.shape}")
        check(np.allclose(w, want_p[k], rtol=1e-4, atol=1e-5),
              f"{name}: {k} differs from numpy by {np.abs(w - want_p[k]).max()}")
    print(f"{name}: losses {got[0]:.6f} -> {got[-1]:.6f} (numpy {want_losses[-1]:.6f})")


# ---- a CNN: Conv, BatchNormalization with the batch's statistics, MaxPool, Relu,
# GlobalAveragePool, Gemm; cross-entropy ----
CW = {
    # no conv bias: before BatchNormalization its gradient is 0, and AdamW
    # turns rounding noise in a zero gradient into steps of lr either way
    "cw": rng.standard_normal((4, 3, 3, 3)) * 0.3,
    "bn_s": 1 + rng.standard_normal(4) * 0.1, "bn_b": rng.standard_normal(4) * 0.1,
    "fc": rng.standard_normal((C, 4)) * 0.3, "fcb": rng.standard_normal(C) * 0.1,
}
cx = rng.standard_normal((N, 3, 6, 6)).astype(np.float32)


def cnn_model(path):
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in CW.items()]
    inits += [numpy_helper.from_array(np.zeros(4, np.float32), "bn_mean"),
              numpy_helper.from_array(np.ones(4, np.float32), "bn_var")]
    nodes = [
        helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_mean", "bn_var"], ["n"], training_mode=1,
                         epsilon=1e-5, name="bn"),
        helper.make_node("MaxPool", ["n"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Relu", ["mp"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["gp"], name="gap"),
        helper.make_node("Flatten", ["gp"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1, name="fc"),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, 3, 6, 6])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, C])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)


def cnn_forward_backward(p, loss_kind):
    xx = cx.astype(np.float64)
    n_, c_, h_, w_ = xx.shape
    xp = np.pad(xx, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h_, j:j + w_] for i in range(3) for j in range(3)], axis=2)  # N,C,9,H,W
    cols = cols.transpose(0, 3, 4, 1, 2).reshape(n_, h_, w_, c_ * 9)
    conv = (cols @ p["cw"].reshape(4, -1).T).transpose(0, 3, 1, 2)  # N,4,H,W
    ax = (0, 2, 3)
    mu, var = conv.mean(ax, keepdims=True), conv.var(ax, keepdims=True)
    BATCH_STATS.append((mu.ravel(), var.ravel()))
    rstd = 1 / np.sqrt(var + 1e-5)
    xhat = (conv - mu) * rstd
    bn = xhat * p["bn_s"][:, None, None] + p["bn_b"][:, None, None]
    win = bn.reshape(n_, 4, 3, 2, 3, 2)
    mp = win.max(axis=(3, 5))
    r = np.maximum(mp, 0)
    gp = r.mean(axis=(2, 3))
    logits = gp @ p["fc"].T + p["fcb"]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(N), label].mean()
    dl = (np.exp(logp) - np.eye(C)[label]) / N
    g = {"fc": dl.T @ gp, "fcb": dl.sum(0)}
    dr = np.repeat(np.repeat((dl @ p["fc"])[:, :, None, None] / 9, 3, 2), 3, 3)
    dmp = dr * (mp > 0)
    mask = win == mp[:, :, :, None, :, None]  # no ties in random data
    dbn = (mask * dmp[:, :, :, None, :, None]).reshape(bn.shape)
    g["bn_s"], g["bn_b"] = (dbn * xhat).sum(ax), dbn.sum(ax)
    gs = dbn * p["bn_s"][:, None, None]
    dconv = rstd * (gs - gs.mean(ax, keepdims=True) - xhat * (gs * xhat).mean(ax, keepdims=True))
    dc = dconv.transpose(0, 2, 3, 1)  # N,H,W,4
    g["cw"] = np.einsum("nhwk,nhwm->mk", cols, dc).reshape(p["cw"].shape)
    return loss, g


BATCH_STATS = []  # each step's batch mean and variance, for the running statistics
cnn_model(os.path.join(WORK, "cnn.onnx"))
np.save(os.path.join(WORK, "cx.npy"), cx)
for opt in ["sgd", "adamw"]:
    so = os.path.join(WORK, f"cnn-{opt}.so")
    out = os.path.join(WORK, f"cnn-{opt}.weights")
    r = run(["compile", os.path.join(WORK, "cnn.onnx"), "--train", "--loss", "cross-entropy:logits:label",
             "--optimizer", opt, "--lr", str(hp["lr"]), "--beta1", str(hp["beta1"]), "--beta2", str(hp["beta2"]),
             "--eps", str(hp["eps"]), "--weight-decay", str(hp["weight_decay"]), "-o", so])
    check(r.returncode == 0, f"cnn-{opt}: compile failed: {r.stderr}")
    r = run(["train", so, "--input", "x=" + os.path.join(WORK, "cx.npy"), "--input",
             "label=" + os.path.join(WORK, "label.npy"), "--steps", str(STEPS), "--save", out])
    check(r.returncode == 0, f"cnn-{opt}: train failed: {r.stderr}")
    if r.returncode:
        continue
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]
    BATCH_STATS.clear()
    want_losses, want_p = reference("cross-entropy", opt, hp, list(CW), CW, cnn_forward_backward)
    running = [np.zeros(4), np.ones(4)]  # the initializers, updated with momentum 0.9 (ONNX's default)
    for stats in BATCH_STATS:
        running = [0.9 * r_ + 0.1 * b_ for r_, b_ in zip(running, stats)]
    check(len(got) == STEPS and np.allclose(got, want_losses, rtol=1e-4, atol=1e-6),
          f"cnn-{opt}: losses {got} vs numpy {want_losses}")
    for k in CW:
        w = np.load(os.path.join(out, k + ".npy"))
        check(np.allclose(w, want_p[k], rtol=1e-4, atol=1e-5),
              f"cnn-{opt}: {k} differs from numpy by {np.abs(w - want_p[k]).max()}")
    for k, want in zip(("bn_mean", "bn_var"), running):  # carried by the step, not trained
        got_r = np.load(os.path.join(out, k + ".npy"))
        check(np.allclose(got_r, want, rtol=1e-4, atol=1e-6), f"cnn-{opt}: running {k} {got_r} vs numpy {want}")
    print(f"cnn-{opt}: losses {got[0]:.6f} -> {got[-1]:.6f} (numpy {want_losses[-1]:.6f})")


# ---- --export: the model with its trained weights; --device: the steps on OpenCL ----
def forward(p):
    h = np.maximum(x.astype(np.float64) @ p["w1"] + p["b1"], 0)  # as forward_backward
    return np.tanh(h @ p["w2"] + p["b2"])


spec, opt, trainable = "cross-entropy:logits:label", "adamw", "w2,b1"
so = os.path.join(WORK, "cross-entropy-adamw-w2_b1.so")
exported = os.path.join(WORK, "exported.onnx")
base = ["train", so, "--input", "x=" + os.path.join(WORK, "x.npy"), "--input",
        "label=" + os.path.join(WORK, "label.npy"), "--steps", str(STEPS)]
r = run(base + ["--export", exported, "--model", os.path.join(WORK, "mlp.onnx")])
check(r.returncode == 0, f"export: {r.stderr}")
if r.returncode == 0:
    _, want_p = reference("cross-entropy", opt, hp, trainable.split(","))
    src, got_m = onnx.load(os.path.join(WORK, "mlp.onnx")), onnx.load(exported)
    onnx.checker.check_model(got_m)
    check(src.graph.node == got_m.graph.node and src.opset_import == got_m.opset_import, "export: the graph changed")
    inits = {t.name: numpy_helper.to_array(t) for t in got_m.graph.initializer}
    for k in W:
        if k in want_p and k in trainable.split(","):
            check(np.allclose(inits[k], want_p[k], rtol=1e-4, atol=1e-5), f"export: {k} is not the trained weight")
        else:
            check(np.array_equal(inits[k], W[k].astype(np.float32)), f"export: frozen {k} changed")
    import onnxruntime as ort
    logits = ort.InferenceSession(exported, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = {k: (want_p[k] if k in trainable.split(",") else W[k]) for k in W}
    check(np.allclose(logits, forward(p), rtol=1e-4, atol=1e-5), "export: onnxruntime's logits of the exported model")
    print(f"export: {exported} runs in onnxruntime with the trained weights")
for args, want in [(["--export", exported], "needs --model"),
                   (["--export", exported, "--model", os.path.join(WORK, "sin.onnx.missing")], "sin.onnx.missing"),
                   (["--export", exported, "--model", os.path.join(WORK, "x.npy")], "x.npy")]:
    r = run(base + args)
    check(r.returncode in (1, 2) and want in r.stderr and "Sanitizer" not in r.stderr,
          f"train {args}: exit {r.returncode}, stderr {r.stderr!r} lacks {want!r}")
# The steps on an OpenCL device (PoCL here; in CI it must be there): the
# state stays on the device, and the losses and weights are numpy's.
ocl_so = os.path.join(WORK, "ocl_step.so")
r = run(["compile", os.path.join(WORK, "mlp.onnx"), "--train", "--loss", spec, "--optimizer", opt, "--lr",
         str(hp["lr"]), "--beta1", str(hp["beta1"]), "--beta2", str(hp["beta2"]), "--eps", str(hp["eps"]),
         "--weight-decay", str(hp["weight_decay"]), "--trainable", trainable, "--target", "cpu,opencl",
         "-o", ocl_so])
check(r.returncode == 0, f"compile for opencl: {r.stderr}")
r = run(["train", ocl_so] + base[2:] + ["--device", "opencl:0", "--save", os.path.join(WORK, "ocl.weights")])
if r.returncode != 0 and "no OpenCL" in r.stderr and os.environ.get("CI") != "true":
    print("skipped: --device opencl:0: no OpenCL device here:", r.stderr.strip())
else:
    check(r.returncode == 0, f"train --device opencl:0: {r.stderr}")
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]
    want_losses, want_p = reference("cross-entropy", opt, hp, trainable.split(","))
    check(len(got) == STEPS and np.allclose(got, want_losses, rtol=1e-4, atol=1e-6),
          f"opencl: losses {got} vs numpy {want_losses}")
    for k in trainable.split(","):
        w = np.load(os.path.join(WORK, "ocl.weights", k + ".npy"))
        check(np.allclose(w, want_p[k], rtol=1e-4, atol=1e-5), f"opencl: {k} differs from numpy")
    print(f"opencl:0: losses {got[0]:.6f} -> {got[-1]:.6f} (numpy {want_losses[-1]:.6f})")


# ---- bad input: a clear error naming it, no artifact ----
def sin_on_path(nodes, outputs):  # between fc1 and the Relu: on the weights' way to the loss
    nodes.insert(1, helper.make_node("Atan", ["h"], ["sh"], name="the_atan"))
    nodes[2].input[0] = "sh"
    return nodes, outputs


def int_output(nodes, outputs):
    nodes = nodes + [helper.make_node("ArgMax", ["logits"], ["cls"], axis=1, keepdims=0)]
    return nodes, outputs + [helper.make_tensor_value_info("cls", TensorProto.INT64, [N])]


mlp_model(os.path.join(WORK, "sin.onnx"), extra=sin_on_path)
mlp_model(os.path.join(WORK, "argmax.onnx"), extra=int_output)
mlp_model(os.path.join(WORK, "float_label.onnx"),
          label_input=helper.make_tensor_value_info("label", TensorProto.FLOAT, [N]))
mlp_model(os.path.join(WORK, "short_label.onnx"),
          label_input=helper.make_tensor_value_info("label", TensorProto.INT64, [N - 1]))
bad = [
    ("sin.onnx", ["--loss", "cross-entropy:logits:label"], "no gradient rule for Atan", "the_atan"),
    ("argmax.onnx", ["--loss", "cross-entropy:cls:label"], "float output", "cls"),
    ("mlp.onnx", ["--loss", "output:logits"], "scalar loss", "logits"),
    ("mlp.onnx", ["--loss", "mse:nothing:label"], "no output of this name", "nothing"),
    ("float_label.onnx", ["--loss", "cross-entropy:logits:label"], "the label is f32[8]", "i64[8]"),
    ("short_label.onnx", ["--loss", "cross-entropy:logits:label"], "the label is i64[7]", "i64[8]"),
    ("mlp.onnx", ["--loss", "cross-entropy:logits:label", "--trainable", "w1,nope"], "names no initializer", "nope"),
    ("mlp.onnx", ["--loss", "softmax:logits"], "--loss 'softmax:logits'", "cross-entropy:OUTPUT:LABEL"),
]
for model, args, want, name in bad:
    so = os.path.join(WORK, "bad.so")
    if os.path.exists(so):
        os.remove(so)
    r = run(["compile", os.path.join(WORK, model), "--train"] + args + ["-o", so])
    check(r.returncode in (1, 2) and want in r.stderr and name in r.stderr and "Sanitizer" not in r.stderr,
          f"{model} {args}: exit {r.returncode}, stderr {r.stderr!r} lacks {want!r} or {name!r}")
    check(not os.path.exists(so), f"{model} {args}: an artifact was written")

if failures:
    print(f"{failures} failure(s)")
    sys.exit(1)
print("all training steps agree with numpy")
