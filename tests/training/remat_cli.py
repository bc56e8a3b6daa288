#!/usr/bin/env python3
"""tbc compile --memory-budget and --stats-json from the command line
(docs/memory.md).

An MLP training step compiled without a budget and with one: --stats-json
holds the figures (arena, lower bound, weights, FLOPs, recomputed FLOPs,
passes), the budgeted plan fits its budget and is smaller, and `tbc train`
gives bit-identical weights and losses.  Then the bad inputs: a malformed
budget and a budget out of reach fail with a message naming --memory-budget
(the latter with the smallest arena reached) and write nothing.

usage: remat_cli.py TBC WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TBC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(3)
N, D, H, C = 32, 48, 64, 5
W = {"w1": rng.standard_normal((D, H)) * 0.2, "b1": np.zeros(H), "w2": rng.standard_normal((H, H)) * 0.2,
     "w3": rng.standard_normal((H, C)) * 0.2}
nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Sigmoid", ["h"], ["s"]),
         helper.make_node("MatMul", ["s", "w2"], ["m"]), helper.make_node("Tanh", ["m"], ["t"]),
         helper.make_node("Add", ["t", "s"], ["u"]), helper.make_node("MatMul", ["u", "w3"], ["logits"])]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, C])],
                      [numpy_helper.from_array(v.astype(np.float32), k) for k, v in W.items()])
MODEL = f"{WORK}/mlp.onnx"
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), MODEL)
np.save(f"{WORK}/x.npy", rng.standard_normal((N, D)).astype(np.float32))
np.save(f"{WORK}/label.npy", rng.integers(0, C, N).astype(np.int64))
STEP = ["--train", "--loss", "cross-entropy:logits:label", "--optimizer", "momentum", "--lr", "0.1"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def compile_(tag, *extra):
    out, js = f"{WORK}/{tag}.so", f"{WORK}/{tag}.json"
    for p in (out, js):
        if os.path.exists(p):
            os.remove(p)
    r = subprocess.run([TBC, "compile", MODEL, *STEP, "-o", out, "--stats-json", js, *extra],
                       capture_output=True, text=True)
    return r, out, js


def train(so, save):
    r = subprocess.run([TBC, "train", so, "--input", f"x={WORK}/x.npy", "--input", f"label={WORK}/label.npy",
                        "--steps", "3", "--save", save], capture_output=True, text=True, check=True)
    return r.stdout


r, so0, js0 = compile_("free")
check(r.returncode == 0, f"compile without a budget: {r.stderr}")
st0 = json.load(open(js0))
for key in ("arena_bytes", "arena_lower_bound_bytes", "weights_bytes", "flops", "recompute_flops", "passes"):
    check(key in st0, f"--stats-json has {key}")
check(st0["recompute_flops"] == 0 and st0["flops"] > 2 * N * D * H, "flops without a budget")
check(0 < st0["arena_lower_bound_bytes"] <= st0["live_peak_bytes"] <= st0["plan_bytes"] <= st0["arena_bytes"],
      "lower bound <= live peak <= planned arena <= arena")
check(any(p["name"] == "memplan" and p["ms"] >= 0 for p in st0["passes"]), "passes with their milliseconds")

# The smallest arena a budget out of reach reports is itself reachable.
r, _, _ = compile_("probe", "--memory-budget", "1")
m = re.search(r"reaches (\d+) bytes", r.stderr)
check(r.returncode == 1 and m is not None, f"a budget of 1 byte reports the smallest arena: {r.stderr}")
smallest = int(m.group(1)) if m else st0["plan_bytes"]
check(smallest < st0["plan_bytes"], "recomputation makes this step's arena smaller")
for budget in ("95%", str(smallest)):
    limit = 0.95 * st0["plan_bytes"] if budget.endswith("%") else smallest
    r, so1, js1 = compile_("budget", "--memory-budget", budget)
    check(r.returncode == 0, f"compile with --memory-budget {budget}: {r.stderr}")
    if r.returncode:
        continue
    st1 = json.load(open(js1))
    check(0 < st1["plan_bytes"] <= st1["memory_budget_bytes"] <= limit,
          f"{budget}: planned arena {st1['plan_bytes']} within the budget {st1['memory_budget_bytes']}")
    # 95% is met by moving ops alone (no FLOPs); the smallest arena needs recomputation.
    check(any(p["name"] == "remat" for p in st1["passes"]), f"{budget}: remat ran")
    check(st1["recompute_flops"] > 0 or budget.endswith("%"), f"{budget}: recomputed")
    l0, l1 = train(so0, f"{WORK}/w_free"), train(so1, f"{WORK}/w_budget")
    check(l0 == l1, f"{budget}: the same losses ({l0!r} vs {l1!r})")
    for f in sorted(os.listdir(f"{WORK}/w_free")):
        a, b = np.load(f"{WORK}/w_free/{f}"), np.load(f"{WORK}/w_budget/{f}")
        check(a.tobytes() == b.tobytes(), f"{budget}: weight {f} bit-identical")

# Bad input: nothing written, the option named.
for bad in ("abc", "0%", "150%", "-5", "12X", "50%%", "", "1e30"):
    r, so, js = compile_("bad", "--memory-budget", bad)
    check(r.returncode == 2 and "--memory-budget" in r.stderr, f"malformed budget {bad!r}: {r.returncode} {r.stderr}")
    check(not os.path.exists(so) and not os.path.exists(js), f"malformed budget {bad!r} writes nothing")
r, so, js = compile_("bad", "--memory-budget", "1")
check(r.returncode == 1 and "--memory-budget" in r.stderr and "at the smallest" in r.stderr and "%" in r.stderr,
      f"a budget out of reach: {r.stderr}")
check(not os.path.exists(so) and not os.path.exists(js), "a budget out of reach writes nothing")
r = subprocess.run([TBC, "compile", MODEL, "-o", f"{WORK}/x.so", "--memory-budget"], capture_output=True, text=True)
check(r.returncode == 2, "--memory-budget without a value")

if failures:
    sys.exit(f"{len(failures)} failures")
print("ok")
