#!/usr/bin/env python3
"""tbc against onnxruntime on the CPU of another machine that has no tbc compiler
(the GPU machine's host: 16 quiet cores, where this 2-core VM drifts).

Here, `make` compiles bench models for this CPU (the runtime refuses an artifact whose
features the other CPU lacks, with a message) and writes one folder to carry:
    OUT/m/LABEL/model.so, OUT/m/LABEL/test_data_set_0/{input,output}_I.pb   (a suite case)
    OUT/m/LABEL.onnx                  (the same model, for onnxruntime)
    OUT/suite/tbc-device-suite, OUT/suite/lib/libprotobuf-c.so.1, OUT/remote_cpu.py
The weights are rounded to 16 levels (tests/conformance/coarse_weights.py) so that the
folder compresses (ResNet-50 with 6 others: 55 MB as .tar.xz); times do not depend on them.
Models sharing a file share one artifact (a link).

There, `run` times each case with tbc-device-suite --device cpu --threads T --runs N and
its .onnx with onnxruntime (intra-op threads T) alternately, and prints the least of
the rounds' medians and their ratio as a Markdown table (numpy, onnx, onnxruntime).

usage: .venv/bin/python bench/remote_cpu.py make BUILD_DIR OUT [LABEL...]
       python3 OUT/remote_cpu.py run OUT [--threads 1,2] [--rounds 3] [--runs 20]
(models from bench/make_models.py and bench/zoo.py in BUILD_DIR/models; labels as
bench/compare.py names them; default: ResNet-50, MobileNetV2, ShuffleNet, the
transformer, BERT at seq 128, the GPT prefill and decode step)"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = ["resnet50", "mobilenet_v2", "shufflenet_v2", "transformer", "bert128", "gpt_prefill", "gpt_decode"]


def write_tensors(folder, kind, names, arrays):
    for i, (n, v) in enumerate(zip(names, arrays)):
        with open(os.path.join(folder, f"{kind}_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(v), n).SerializeToString())


def make(a):
    import onnxruntime as ort
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "conformance"))
    from compare import MODELS  # noqa: E402
    from coarse_weights import coarse_weights  # noqa: E402
    models = os.path.join(a.build, "models")
    table = {label: (name, inputs) for label, name, inputs, _ in MODELS}
    os.makedirs(os.path.join(a.out, "m"), exist_ok=True)
    done = {}  # model file -> the label whose artifact and .onnx others link to
    for label in a.labels or DEFAULT:
        if label not in table:
            sys.exit(f"remote_cpu.py: no model {label} (bench/compare.py's labels: {', '.join(table)})")
        name, inputs = table[label]
        case = os.path.join(a.out, "m", label)
        data = os.path.join(case, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        path = os.path.join(a.out, "m", label + ".onnx")
        if name in done:
            for f, to in ((path, done[name] + ".onnx"), (os.path.join(case, "model.so"), f"../{done[name]}/model.so")):
                if os.path.lexists(f):
                    os.remove(f)
                os.symlink(to, f)
        else:
            coarse_weights(os.path.join(models, name + ".onnx"), path, 16)
            subprocess.run([os.path.join(a.build, "tbc"), "compile", path, "-o", os.path.join(case, "model.so")], check=True)
            done[name] = label
        feeds = {k: np.load(os.path.join(models, v)) for k, v in inputs.items()}
        graph = onnx.load(path, load_external_data=False).graph
        inits = {i.name for i in graph.initializer}
        order = [i.name for i in graph.input if i.name not in inits]
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        write_tensors(data, "input", order, [feeds[n] for n in order])
        write_tensors(data, "output", [o.name for o in sess.get_outputs()], sess.run(None, feeds))
        print(f"{case}: {len(order)} inputs", flush=True)
    suite = os.path.join(a.build, "tests", "conformance", "tbc-device-suite")
    os.makedirs(os.path.join(a.out, "suite", "lib"), exist_ok=True)
    shutil.copy(suite, os.path.join(a.out, "suite"))
    lib = re.search(r"libprotobuf-c\S* => (\S+)", subprocess.run(["ldd", suite], capture_output=True, text=True).stdout)
    shutil.copy(lib.group(1), os.path.join(a.out, "suite", "lib"))
    shutil.copy(os.path.abspath(__file__), a.out)


def run(a):
    import onnxruntime as ort
    suite = os.path.join(a.dir, "suite", "tbc-device-suite")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(a.dir, "suite", "lib"))
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; nproc"],
                         capture_output=True, text=True).stdout.split("\n")
    print(f"{cpu[0].strip()}, {cpu[1]} CPUs; onnxruntime {ort.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| model | threads | tbc ms | onnxruntime ms | tbc / onnxruntime |\n|---|---:|---:|---:|---:|", flush=True)
    for case in sorted(d for d in glob.glob(os.path.join(a.dir, "m", "*")) if os.path.isdir(d)):
        label, path = os.path.basename(case), case + ".onnx"
        graph = onnx.load(path, load_external_data=False).graph
        inits = {i.name for i in graph.initializer}
        feeds = {}
        for i, n in enumerate(i.name for i in graph.input if i.name not in inits):
            t = onnx.TensorProto()
            with open(os.path.join(case, "test_data_set_0", f"input_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            feeds[n] = numpy_helper.to_array(t)
        for threads in (int(t) for t in a.threads.split(",")):
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            for _ in range(3):
                sess.run(None, feeds)
            tbc, peer = [], []
            for _ in range(a.rounds):
                p = subprocess.run([suite, "--device", "cpu", "--threads", str(threads), "--runs", str(a.runs),
                                    "--rtol", "1e-2", "--atol", "1e-3", case], capture_output=True, text=True, env=env)
                m = re.search(r"^PASS .* median ([0-9.]+)", p.stdout, re.M)
                if not m:
                    print(f"| {label} | {threads} | failed: {(p.stdout + p.stderr).strip()[-200:]} | | |", flush=True)
                    break
                tbc.append(float(m.group(1)))
                times = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    sess.run(None, feeds)
                    times.append((time.perf_counter() - t0) * 1e3)
                peer.append(statistics.median(times))
            if tbc:
                print(f"| {label} | {threads} | {min(tbc):.3f} | {min(peer):.3f} | {min(tbc) / min(peer):.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("make")
    m.add_argument("build")
    m.add_argument("out")
    m.add_argument("labels", nargs="*")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--threads", default="1,2")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    make(a) if a.mode == "make" else run(a)


if __name__ == "__main__":
    main()
