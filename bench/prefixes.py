#!/usr/bin/env python3
"""Where in a model tbc gains or loses against onnxruntime: the model cut at
the outputs of some of its nodes, each prefix (the inputs up to a cut)
compiled by tbc and run by onnxruntime alternately, and each stage's time
(a prefix's less the one before it) compared.

A whole model's ratio hides where the time goes, and one-node models
flatter or penalize either engine: onnxruntime's layout transforms (NCHWc
reorders around a lone convolution) and tbc's fusions happen only in a
graph.  A prefix keeps the model's own neighbours, so its stages compare
what the model runs.

--cuts: node output names, or `add:3,7,13,16` (after the 3rd, 7th, ... Add,
past a Relu that consumes it: a ResNet's stages end there).  Each prefix is
timed alternately ROUNDS times; the least of each engine's fastest runs is
kept (the 2-core VM's speed drifts between runs; docs/performance.md).

usage: .venv/bin/python bench/prefixes.py BUILD_DIR MODEL.onnx --input NAME=X.npy [--input ...]
           --cuts add:3,7,13,16 | --cuts name,name [--threads 1] [--rounds 4] [--runs 8]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ort_ms, ort_session  # noqa: E402


def cut_names(model, spec):
    """The node outputs that --cuts names."""
    if not spec.startswith("add:"):
        return spec.split(",")
    nodes = model.graph.node
    adds = [i for i, n in enumerate(nodes) if n.op_type == "Add"]
    names = []
    for k in (int(x) for x in spec[4:].split(",")):
        if not 1 <= k <= len(adds):
            sys.exit(f"prefixes.py: the model has {len(adds)} Add nodes, not {k}")
        i = adds[k - 1]
        out = nodes[i].output[0]
        for n in nodes[i + 1:]:
            if n.op_type == "Relu" and n.input[0] == out:
                out = n.output[0]
                break
        names.append(out)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--input", action="append", required=True, help="NAME=X.npy, one per model input")
    ap.add_argument("--cuts", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=8)
    a = ap.parse_args()
    tbc = os.path.join(a.build, "tbc")
    bench = os.path.join(a.build, "bench", "tbc-bench")
    model = onnx.load(a.model)
    feeds = {}
    for spec in a.input:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    cuts = cut_names(model, a.cuts)
    tmp = tempfile.mkdtemp(prefix="tbc-prefixes-")
    prefixes = []
    for i, out in enumerate(cuts):
        path = os.path.join(tmp, f"prefix{i}.onnx")
        utils.extract_model(a.model, path, list(feeds), [out])
        subprocess.run([tbc, "compile", path, "-o", path + ".so"], check=True)
        prefixes.append(path)
    sessions = [ort_session(path, a.threads) for path in prefixes]
    # a prefix may not read every model input
    session_feeds = [{x.name: feeds[x.name] for x in sess.get_inputs()} for sess in sessions]
    best = [[float("inf"), float("inf")] for _ in prefixes]  # tbc, onnxruntime
    for _ in range(a.rounds):
        for i, path in enumerate(prefixes):
            out = subprocess.run([bench, path + ".so", *a.input, "--threads", str(a.threads), "--runs", str(a.runs)],
                                 capture_output=True, text=True, check=True).stdout
            best[i][0] = min(best[i][0], float(out.split("min_ms")[1].split()[0]))
            best[i][1] = min(best[i][1], ort_ms(sessions[i], session_feeds[i], a.runs)[1])
    print(f"{os.path.basename(a.model)}, {a.threads} thread(s), the least of {a.rounds} rounds of {a.runs} runs")
    print("| up to | tbc ms | onnxruntime ms | ratio | stage: tbc ms | onnxruntime ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    pt = po = 0.0
    for i, out in enumerate(cuts):
        t, o = best[i]
        st, so_ = t - pt, o - po
        ratio = f"{st / so_:.2f}" if so_ > 0 else "-"
        print(f"| {out} | {t:.2f} | {o:.2f} | {t / o:.2f} | {st:.2f} | {so_:.2f} | {ratio} |")
        pt, po = t, o


if __name__ == "__main__":
    main()
