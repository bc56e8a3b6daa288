"""Runs MODEL with onnxruntime on the given inputs and compares each output with
OUT_DIR/<name>.npy written by tbc.  Exit status 1 when any output differs
beyond rtol 1e-3 / atol 1e-5.

Quantized models round at every QuantizeLinear, so two correct engines may
differ by a quantization step where a value lands near a rounding boundary
(onnxruntime's own optimized and unoptimized sessions do).  For them:
  --steps N   an output made by a DequantizeLinear with a constant scale s may
              differ by N * s (absolute; rtol 0), where it differs at all;
  --atol A / --rtol R   the tolerances themselves;
  --loose F   and at most the fraction F of an output's elements may differ
              beyond the default rtol 1e-3 / atol 1e-5 (default 1: no bound).

With --tbc-ms MS (tbc's median milliseconds per run, from `tbc run --runs N`),
it also times onnxruntime on the same inputs with the same thread count and
number of runs and prints both times and their ratio."""
import argparse
import re
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort


def dequantize_scale(model, output):
    """The constant scalar scale of the DequantizeLinear that makes `output`."""
    m = onnx.load(model, load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in m.graph.node if n.op_type == "Constant" and n.attribute}
    for n in m.graph.node:
        if output in n.output:
            t = inits.get(n.input[1]) or consts.get(n.input[1]) if n.op_type == "DequantizeLinear" else None
            v = onnx.numpy_helper.to_array(t) if t is not None else None
            if v is None or v.size != 1:
                sys.exit(f"{model}: output {output} is not made by a DequantizeLinear with a constant scalar "
                         f"scale (node {n.name or n.op_type}): --steps does not apply")
            return float(v.reshape(()))
    sys.exit(f"{model}: no node makes output {output}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("rest", nargs="+", help="NAME=INPUT.npy ... OUT_DIR")
    ap.add_argument("--tbc-ms", type=float)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=float, help="tolerance in quantization steps of the output's DequantizeLinear")
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--loose", type=float, default=1.0,
                    help="the most elements (a fraction) that may differ beyond rtol 1e-3 / atol 1e-5")
    a = ap.parse_args()
    *inputs, out_dir = a.rest
    feeds = {}
    for spec in inputs:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    ok = True
    for meta, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        got = np.load(f"{out_dir}/{re.sub(r'[^A-Za-z0-9._-]', '_', meta.name)}.npy")
        atol, rtol, how = a.atol, a.rtol, ""
        if a.steps is not None:
            step = dequantize_scale(a.model, meta.name)
            atol, rtol, how = a.steps * step + 1e-6, 0.0, f" (tolerance {a.steps:g} steps of {step:.4g})"
        same = got.shape == want.shape
        err, loose = 0.0, 0.0
        if same and want.size:
            err = float(np.max(np.abs(got.astype(np.float64) - want)))
            loose = float(np.mean(~np.isclose(got, want, rtol=1e-3, atol=1e-5)))
            same = np.allclose(got, want, rtol=rtol, atol=atol) and loose <= a.loose
        if a.loose < 1.0:
            how += f", {loose:.1%} beyond 1e-3 (at most {a.loose:.0%})"
        print(f"{meta.name}: shape {got.shape}, max |tbc - onnxruntime| = {err:.3g}{how} -> {'OK' if same else 'MISMATCH'}")
        ok &= same
    if a.tbc_ms is not None:
        times = []
        for _ in range(a.runs):
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        ort_ms = statistics.median(times)
        print(f"median per run over {a.runs} runs: tbc {a.tbc_ms:.3f} ms, onnxruntime {ort_ms:.3f} ms "
              f"(tbc / onnxruntime = {a.tbc_ms / ort_ms:.2f}; below 1: tbc is faster)")
    sys.exit(0 if ok else 1)


main()
