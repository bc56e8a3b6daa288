"""Precision lowering measured (docs/precision.md): each benchmark model
compiled at fp32 and at each lower precision, run by `tbc run` on the same
random inputs, and every float output compared with the fp32 one: the
smallest cosine similarity over the inputs, how often the argmax (over the
last axis, per row) agrees, the weights' bytes, and no inf or NaN (cosine
at least 0.999 for fp16 and bf16, 0.99 for fp8: e4m3 weights).  Then a
stress set -- LayerNormalization, Softmax, ReduceMean, ReduceSumSquare and
GELU (the Erf form) after a float16-able op, with inputs up to 1e4 in
magnitude -- must give no inf or NaN in any precision.

usage: .venv/bin/python bench/precision.py BUILD_DIR [--inputs 32] [--precisions fp16,bf16,fp8]
       [--models resnet50,transformer,bert_dynamic]
(models and one sample input each come from bench/make_models.py into BUILD_DIR/models)"""
import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

MODELS = {
    "resnet50": {"image": "resnet50.image.npy"},
    "transformer": {"x": "transformer.x.npy"},
    "bert_dynamic": {k: f"bert_dynamic.b.{k}.npy" for k in ("input_ids", "attention_mask")},
}


def compile_model(tbc, model, precision, out):
    r = subprocess.run([tbc, "compile", model, "--precision", precision, "--stats", "-o", out],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"tbc compile {model} --precision {precision} failed:\n{r.stderr}")
    m = re.search(r"weights (\d+) bytes", r.stderr)
    return int(m.group(1)) if m else 0


def run(tbc, artifact, feeds, work):
    args = [tbc, "run", artifact]
    for name, arr in feeds.items():
        path = os.path.join(work, f"in.{name}.npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    r = subprocess.run(args + ["--output-dir", out], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"tbc run {artifact} failed:\n{r.stderr}")
    return {f[:-4]: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))}


def like(sample, rng):
    """A random input shaped and typed as the sample: floats standard normal,
    integers uniform over the sample's range (token ids, masks)."""
    if sample.dtype.kind == "f":
        return rng.standard_normal(sample.shape).astype(sample.dtype)
    lo, hi = int(sample.min()), int(sample.max())
    return rng.integers(lo, hi + 1, sample.shape).astype(sample.dtype)


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    return float(a @ b / (na * nb)) if na and nb else 0.0


def measure_model(tbc, models_dir, name, precisions, n_inputs, work):
    path = os.path.join(models_dir, f"{name}.onnx")
    samples = {k: np.load(os.path.join(models_dir, f)) for k, f in MODELS[name].items()}
    arts, weights = {}, {}
    for p in ["fp32"] + precisions:
        arts[p] = os.path.join(work, f"{name}.{p}.so")
        weights[p] = compile_model(tbc, path, p, arts[p])
    rng = np.random.default_rng(2026)
    worst = {p: 1.0 for p in precisions}
    agree = {p: 0 for p in precisions}
    rows = 0
    bad = {p: 0 for p in precisions}
    for i in range(n_inputs):
        feeds = {k: like(s, rng) for k, s in samples.items()}
        ref = run(tbc, arts["fp32"], feeds, work)
        for p in precisions:
            got = run(tbc, arts[p], feeds, work)
            for out, r in ref.items():
                if r.dtype.kind != "f":
                    continue
                g = got[out]
                if not np.all(np.isfinite(g)):
                    bad[p] += 1
                worst[p] = min(worst[p], cosine(g, r))
                if r.ndim >= 1 and r.shape[-1] > 1:
                    a = np.argmax(g.reshape(-1, r.shape[-1]), -1) == np.argmax(r.reshape(-1, r.shape[-1]), -1)
                    agree[p] += int(a.sum())
                    if p == precisions[0]:
                        rows += a.size
    return [(name, p, worst[p], agree[p], rows, weights[p] / weights["fp32"] if weights["fp32"] else 0, bad[p])
            for p in precisions]


def stress_models(work):
    """One small model per op the policy keeps in float32, each after a
    MatMul (which is lowered), fed inputs up to 1e4."""
    d = 64
    rng = np.random.default_rng(7)
    w = helper.make_tensor("w", TensorProto.FLOAT, [d, d], (np.eye(d) + 0.01 * rng.standard_normal((d, d))).astype(np.float32).ravel())
    gamma = helper.make_tensor("g", TensorProto.FLOAT, [d], np.ones(d, np.float32))
    beta = helper.make_tensor("b", TensorProto.FLOAT, [d], np.zeros(d, np.float32))
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    rs2 = helper.make_tensor("rs2", TensorProto.FLOAT, [], [1 / np.sqrt(2)])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    tails = {
        "layernorm": [helper.make_node("LayerNormalization", ["h", "g", "b"], ["y"], axis=-1)],
        "softmax": [helper.make_node("Softmax", ["h"], ["y"], axis=-1)],
        "reducemean": [helper.make_node("ReduceMean", ["h", "axes"], ["y"], keepdims=1)],
        "reducesumsquare": [helper.make_node("ReduceSumSquare", ["h", "axes"], ["y"], keepdims=1)],
        "gelu": [helper.make_node("Mul", ["h", "rs2"], ["s"]), helper.make_node("Erf", ["s"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["h", "e1"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])],
    }
    paths = {}
    for name, tail in tails.items():
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])] + tail
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [w, gamma, beta, half, one, rs2, axes])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        paths[name] = os.path.join(work, f"stress_{name}.onnx")
        onnx.save(m, paths[name])
    return paths


def stress(tbc, precisions, work):
    rng = np.random.default_rng(11)
    results = []
    for name, path in stress_models(work).items():
        for p in ["fp32"] + precisions:
            # Lowered inputs and outputs only where numpy has the type (float16).
            for keep in (True, False) if p == "fp16" else (True,):
                art = os.path.join(work, f"stress_{name}.{p}.{int(keep)}.so")
                args = [tbc, "compile", path, "--precision", p, "-o", art]
                if not keep:
                    args.append("--no-keep-io-types")
                subprocess.run(args, check=True, capture_output=True)
                ok = True
                for scale in (1.0, 1e2, 1e4):
                    x = (rng.uniform(-1, 1, (8, 64)) * scale).astype(np.float32)
                    feeds = {"x": x if keep else x.astype(np.float16)}
                    out = run(tbc, art, feeds, work)["y"]
                    ok = ok and bool(np.all(np.isfinite(out.astype(np.float64))))
                results.append((name, p, keep, ok))
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--precisions", default="fp16,bf16")
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    tbc = os.path.join(a.build, "tbc")
    models_dir = os.path.join(a.build, "models")
    precisions = a.precisions.split(",")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"# precision lowering, {datetime.date.today()}, {cpu}, {a.inputs} inputs per model\n")
    print("| model | precision | min cosine | argmax agrees | weights vs fp32 | outputs with inf/NaN |")
    print("|---|---|---|---|---|---|")
    failed = False
    t0 = time.time()
    with tempfile.TemporaryDirectory() as work:
        for name in a.models.split(","):
            for (m, p, cos, agree, rows, ratio, bad) in measure_model(tbc, models_dir, name, precisions, a.inputs, work):
                print(f"| {m} | {p} | {cos:.6f} | {agree}/{rows} | {ratio:.3f}x | {bad} |", flush=True)
                failed |= cos < (0.99 if p == "fp8" else 0.999) or bad > 0
        print("\n| stress model | precision | float32 inputs/outputs | finite at 1, 1e2, 1e4 |")
        print("|---|---|---|---|")
        for (name, p, keep, ok) in stress(tbc, precisions, work):
            print(f"| {name} | {p} | {'kept' if keep else 'lowered'} | {'yes' if ok else 'NO'} |", flush=True)
            failed |= not ok
    print(f"\n({time.time() - t0:.0f} s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
