"""Runs MODEL with onnxruntime on the given inputs and compares each output with
OUT_DIR/<name>.npy written by tbc.  Exit status 1 when any output differs
beyond rtol 1e-3 / atol 1e-5.

With --tbc-ms MS (tbc's median milliseconds per run, from `tbc run --runs N`),
it also times onnxruntime on the same inputs with the same thread count and
number of runs and prints both times and their ratio."""
import argparse
import re
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("rest", nargs="+", help="NAME=INPUT.npy ... OUT_DIR")
    ap.add_argument("--tbc-ms", type=float)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=100)
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
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        same = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-5)
        print(f"{meta.name}: shape {got.shape}, max |tbc - onnxruntime| = {err:.3g} -> {'OK' if same else 'MISMATCH'}")
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
