"""Side-by-side benchmark: tbc (JIT for this CPU, runtime thread pool) against
onnxruntime (CPU execution provider), same models, same inputs, same thread
count, one run.  Prints a Markdown table of median milliseconds and the ratio
tbc / onnxruntime (below 1: tbc is faster) for each thread count, and the
geometric mean of the ratios over the ImageNet CNNs.

usage: .venv/bin/python bench/compare.py BUILD_DIR [--threads 1,2] [--runs N] [--rounds R] [--models a,b]
           [--precision fp32,fp16,bf16,fp8 (one or several)] [--qdq-fusion off,on (one or both)]
           [--opt 2 | 1,2 (tbc's -O levels, a row each)]
(models come from bench/make_models.py and bench/zoo.py into BUILD_DIR/models)

--precision: tbc computes the model lowered to that precision (docs/precision.md),
onnxruntime the float32 model as it is: what a user switching to a lowered
model gains over the peer they would otherwise run.  Several (--precision fp32,bf16)
give a row per model and precision, one after the other, in one run.

--qdq-fusion on: tbc compiles with --qdq-fusion (a QDQ model's DequantizeLinear -> Conv ->
QuantizeLinear as QLinearConv, onnxruntime's own rewrite; docs/lower-quant.md); off,on gives
a row each, one after the other.  onnxruntime runs as always (its optimizer fuses QDQ).

--rounds R: tbc and onnxruntime are timed alternately R times per cell, and the cell shows
the least of the medians: on a machine whose speed drifts (the 2-core VM's two-thread slow
phases, docs/performance.md) a single pair of runs can land in different phases."""
import argparse
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
GPT = ["input_ids"] + [f"past.{i}.{kv}" for i in range(4) for kv in ("key", "value")]
# (label, model file, {input: .npy file}, an ImageNet CNN)
MODELS = [
    ("resnet50", "resnet50", {"image": "resnet50.image.npy"}, True),
    # batch 1; the same weights as initializers and as constant subgraphs (load-time values)
    ("alexnet", "alexnet", {"image": "alexnet.image.npy"}, True),
    ("alexnet_consts", "alexnet_consts", {"image": "alexnet.image.npy"}, False),
    ("densenet121", "densenet121", {"image": "zoo.image.npy"}, True),
    ("inception_v2", "inception_v2", {"image": "zoo.image.npy"}, True),
    ("mobilenet_v2", "mobilenet_v2", {"image": "zoo.image.npy"}, True),
    ("shufflenet_v2", "shufflenet_v2", {"image": "zoo.image.npy"}, True),
    ("resnet50_qdq", "resnet50_qdq", {"image": "zoo.image.npy"}, False),
    ("transformer", "transformer", {"x": "transformer.x.npy"}, False),
    # exported with dynamic axes (docs/symbolic-shapes.md): batch 1, seq 128; and batch 3, seq 19
    ("bert128", "bert_dynamic", {k: f"bert128.{k}.npy" for k in ("input_ids", "attention_mask")}, False),
    ("bert_int8", "bert_int8", {k: f"bert128.{k}.npy" for k in ("input_ids", "attention_mask")}, False),
    ("bert_dynamic", "bert_dynamic", {k: f"bert_dynamic.b.{k}.npy" for k in ("input_ids", "attention_mask")}, False),
    # GPT-2-style decoder: a 128-token prefill, a decode step after 127 tokens,
    # and a decode step of batch 3 after 11
    ("gpt_prefill", "gpt_dynamic", {k: f"gpt_prefill.{k}.npy" for k in GPT}, False),
    ("gpt_decode", "gpt_dynamic", {k: f"gpt_decode.{k}.npy" for k in GPT}, False),
    ("gpt_dynamic", "gpt_dynamic", {k: f"gpt_dynamic.b.{k}.npy" for k in GPT}, False),
]
ZOO = {"densenet121", "inception_v2", "mobilenet_v2", "shufflenet_v2", "resnet50_qdq", "bert_int8"}


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_ms(sess, feeds, runs):
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--threads", default=str(os.cpu_count()), help="comma-separated thread counts")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--models", help="comma-separated labels (default: all)")
    ap.add_argument("--fastest", action="store_true", help="cells show median / fastest milliseconds")
    ap.add_argument("--precision", default="fp32", help="fp32, fp16, bf16, fp8 or a comma-separated list of them")
    ap.add_argument("--qdq-fusion", default="off", help="off, on, or off,on: tbc with --qdq-fusion")
    ap.add_argument("--opt", default="2", help="tbc's optimization level, or several (1,2): a row each")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time tbc and onnxruntime alternately this many times; each cell is the least "
                         "of the rounds' medians (and fastest runs)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds: at least 1")
    levels = a.opt.split(",")
    if any(l not in ("0", "1", "2", "3") for l in levels):
        ap.error(f"--opt {a.opt}: each of 0, 1, 2, 3")
    fusions = a.qdq_fusion.split(",")
    if any(f not in ("off", "on") for f in fusions):
        ap.error(f"--qdq-fusion {a.qdq_fusion}: each of off, on")
    precisions = a.precision.split(",")
    if any(p not in ("fp32", "fp16", "bf16", "fp8") for p in precisions):
        ap.error(f"--precision {a.precision}: each of fp32, fp16, bf16, fp8")
    chosen = [m for m in MODELS if not a.models or m[0] in a.models.split(",")]
    models = os.path.join(a.build, "models")
    files = [os.path.join(models, m[1] + ".onnx") for m in chosen]
    if not all(os.path.exists(f) for f in files if os.path.basename(f)[:-5] not in ZOO) or \
            not os.path.exists(os.path.join(models, "bert_dynamic.onnx")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), models], check=True)
    if not all(os.path.exists(f) for f in files) or not os.path.exists(os.path.join(models, "zoo.image.npy")):
        subprocess.run([sys.executable, os.path.join(HERE, "zoo.py"), models], check=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
                       "amx_tile") if f in flags]
    print(f"Machine: {cpu} ({' '.join(isa)}), {os.cpu_count()} cores; onnxruntime {ort.__version__}; "
          f"{datetime.date.today()}; {a.runs} runs each, medians"
          + (f" (the least of {a.rounds} alternating rounds)" if a.rounds > 1 else "")
          + (f"; tbc with --precision {a.precision}, onnxruntime float32" if precisions != ["fp32"] else "") + "\n")
    threads = [int(t) for t in a.threads.split(",")]
    print("| model | " + " | ".join(f"tbc ms ({t}t) | onnxruntime ms ({t}t) | ratio ({t}t)" for t in threads) + " |")
    print("|---|" + "---:|---:|---:|" * len(threads))
    cnn_ratios = {t: [] for t in threads}
    for (label, model, inputs, cnn), prec, fusion, level in [(m, p, f, o) for m in chosen for p in precisions
                                                              for f in fusions for o in levels]:
        path = os.path.join(models, model + ".onnx")
        feeds = {k: np.load(os.path.join(models, v)) for k, v in inputs.items()}
        cnn = cnn and len(precisions) == 1 and len(fusions) == 1 and len(levels) == 1
        cells = []
        for t in threads:
            args = [os.path.join(a.build, "bench", "tbc-bench"), path, "--threads", str(t), "--runs", str(a.runs)]
            args += [f"{k}={os.path.join(models, v)}" for k, v in inputs.items()]
            args += ["--precision", prec, "-O", level] + (["--qdq-fusion"] if fusion == "on" else [])
            # Alternating rounds: a slow phase of the machine hits both engines alike, and
            # the least median is each one's undisturbed speed.
            sess = ort_session(path, t)
            ours = our_min = theirs = their_min = math.inf
            failed = None
            for _ in range(a.rounds):
                r = subprocess.run(args, capture_output=True, text=True)
                med, fast = ort_ms(sess, feeds, a.runs)
                theirs, their_min = min(theirs, med), min(their_min, fast)
                if r.returncode != 0:
                    failed = (r.stderr.strip().splitlines() or ["no message"])[-1]
                    break
                ours, our_min = min(ours, float(r.stdout.split()[1])), min(our_min, float(r.stdout.split()[3]))
            del sess
            theirs_cell = f"{theirs:.2f}" + (f" / {their_min:.2f}" if a.fastest else "")
            if failed:
                cells.append(f"fails: {failed} | {theirs_cell} | -")
                continue
            if cnn:
                cnn_ratios[t].append(ours / theirs)
            ours_cell = f"{ours:.2f}" + (f" / {our_min:.2f}" if a.fastest else "")
            cells.append(f"{ours_cell} | {theirs_cell} | {ours / theirs:.2f}")
        name = label if len(precisions) == 1 else f"{label} ({prec})"
        name += " (--qdq-fusion)" if fusion == "on" else ""
        name += f" (-O{level})" if len(levels) > 1 else ""
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    for t in threads:
        r = cnn_ratios[t]
        if r:
            print(f"\nImageNet CNNs, {t} thread(s): geometric mean of tbc / onnxruntime = "
                  f"{math.exp(sum(map(math.log, r)) / len(r)):.2f} over {len(r)}")


if __name__ == "__main__":
    main()
