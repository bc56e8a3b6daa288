"""Side-by-side benchmark: tbc (JIT for this CPU, runtime thread pool) against
onnxruntime (CPU execution provider), same models, same inputs, same thread
count, one run.  Prints a Markdown table of median milliseconds and the ratio
tbc / onnxruntime (below 1: tbc is faster).

usage: .venv/bin/python bench/compare.py BUILD_DIR [--threads N] [--runs N] [--models a,b]
(models come from bench/make_models.py into BUILD_DIR/models)"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = [
    ("resnet50", {"image": "resnet50.image.npy"}),
    ("transformer", {"x": "transformer.x.npy"}),
    # exported with dynamic axes (docs/symbolic-shapes.md): batch 3, seq 19
    ("bert_dynamic", {k: f"bert_dynamic.b.{k}.npy" for k in ("input_ids", "attention_mask")}),
    # one decode step of batch 3 after 11 cached tokens
    ("gpt_dynamic", {k: f"gpt_dynamic.b.{k}.npy"
                     for k in ["input_ids"] + [f"past.{i}.{kv}" for i in range(4) for kv in ("key", "value")]}),
    # batch 1; the same weights as initializers and as constant subgraphs (load-time values)
    ("alexnet", {"image": "alexnet.image.npy"}),
    ("alexnet_consts", {"image": "alexnet.image.npy"}),
]


def ort_ms(path, feeds, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--models", help="comma-separated names (default: all)")
    a = ap.parse_args()
    chosen = [m for m in MODELS if not a.models or m[0] in a.models.split(",")]
    models = os.path.join(a.build, "models")
    if not all(os.path.exists(os.path.join(models, n + ".onnx")) for n, _ in chosen):
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), models], check=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    print(f"Machine: {cpu}, {os.cpu_count()} cores; {a.threads} threads each; onnxruntime {ort.__version__}; "
          f"{datetime.date.today()}\n")
    print("| model | tbc ms (median) | onnxruntime ms (median) | tbc / onnxruntime |")
    print("|---|---:|---:|---:|")
    for name, inputs in chosen:
        path = os.path.join(models, name + ".onnx")
        feeds = {k: np.load(os.path.join(models, v)) for k, v in inputs.items()}
        args = [os.path.join(a.build, "bench", "tbc-bench"), path, "--threads", str(a.threads), "--runs", str(a.runs)]
        args += [f"{k}={os.path.join(models, v)}" for k, v in inputs.items()]
        r = subprocess.run(args, capture_output=True, text=True)
        theirs = ort_ms(path, feeds, a.threads, a.runs)
        if r.returncode != 0:
            print(f"| {name} | fails: {r.stderr.strip().splitlines()[-1]} | {theirs:.2f} | - |")
            continue
        ours = float(r.stdout.split()[1])
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")


main()
