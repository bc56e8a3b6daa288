"""The memory-budget curve of docs/memory.md: for each training model of
bench/make_train_models.py, compile the step without a budget and with each
budget (a share of memory planning's arena without one), read the figures of
--stats-json, time `tbc train` (the process time of 1+K steps minus that of 1
step, over K), and check that the trained weights are bit-identical to the
unconstrained step's.  Ends with the smallest reachable budget the compiler
reports for a budget of 1 byte.

usage: .venv/bin/python bench/remat_curve.py TBC MODELS_DIR WORK_DIR [K] [-O0]
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

TBC, MODELS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
K = int(sys.argv[4]) if len(sys.argv) > 4 else 10
os.makedirs(WORK, exist_ok=True)
MODELS_RUN = [
    ("resnet_train", "cross-entropy:logits:label", ["x", "label"], ["-O2"]),
    ("transformer_train", "mse:y:t", ["x", "t"], ["-O2"]),
    ("encoder4_train", "mse:y:t", ["x", "t"], ["-O2"]),
]
ONLY = os.environ.get("REMAT_CURVE_ONLY")  # one model's name: measure that one alone
if ONLY:
    MODELS_RUN = [r for r in MODELS_RUN if r[0] == ONLY]
BUDGETS = [None, "80%", "65%", "55%", "50%", "45%"]


def compile_step(name, loss, opt, budget, tag):
    out, js = f"{WORK}/{name}.{tag}.so", f"{WORK}/{name}.{tag}.json"
    cmd = [TBC, "compile", f"{MODELS}/{name}.onnx", "--train", "--loss", loss, "--optimizer", "adamw", "--lr", "1e-3",
           "-o", out, "--stats-json", js] + opt + (["--memory-budget", budget] if budget else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    with open(js) as f:
        return out, json.load(f)


def train(so, name, inputs, steps, save=None):
    cmd = [TBC, "train", so, "--steps", str(steps)]
    for i in inputs:
        cmd += ["--input", f"{i}={MODELS}/{name}.{i}.npy"]
    if save:
        cmd += ["--save", save]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


for name, loss, inputs, opt in MODELS_RUN:
    base = None
    print(f"## {name} ({' '.join(opt)})")
    print("| budget | planned arena (bytes) | % of unconstrained | whole arena with scratch | FLOPs | extra FLOPs | ms/step | bits |")
    print("|---|---|---|---|---|---|---|---|")
    for b in BUDGETS:
        tag = (b or "none").replace("%", "pct")
        so, st = compile_step(name, loss, opt, b, tag)
        if so is None:
            print(f"| {b} | not reached: {st} |")
            continue
        t1 = train(so, name, inputs, 1, save=f"{WORK}/{name}.{tag}.w")
        tk = train(so, name, inputs, 1 + K)
        ms = (tk - t1) / K * 1e3
        if base is None:
            base = st
        same = all(np.array_equal(np.load(f"{WORK}/{name}.none.w/{f}"), np.load(f"{WORK}/{name}.{tag}.w/{f}"))
                   for f in os.listdir(f"{WORK}/{name}.none.w"))
        fl0 = st["flops"] - st["recompute_flops"]
        print(f"| {b or 'none'} | {st['plan_bytes']} | {100.0 * st['plan_bytes'] / base['plan_bytes']:.1f}% | "
              f"{st['arena_bytes']} | {st['flops']:.4g} | {100.0 * st['recompute_flops'] / fl0:.1f}% | {ms:.1f} | "
              f"{'identical' if same else 'DIFFERENT'} |")
    _, err = compile_step(name, loss, opt, "1", "min")
    m = re.search(r"reaches (\d+) bytes \(([\d.]+)%\).*less than (\d+) bytes", err if isinstance(err, str) else "")
    print(f"\nsmallest reachable: {err if not m else m.group(1) + ' bytes (' + m.group(2) + '% of unconstrained); op lower bound ' + m.group(3)}")
    print(f"lower bound (arena_lower_bound_bytes): {base['arena_lower_bound_bytes']}; live peak {base['live_peak_bytes']}\n")
    sys.stdout.flush()
