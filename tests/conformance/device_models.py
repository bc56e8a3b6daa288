"""Bench models for tbc-device-suite (tests/conformance/device_bundle.sh does
the node suite): each model of bench/compare.py compiled for TARGET, its
inputs as input_I.pb and onnxruntime's outputs (CPU, fp32) as output_I.pb in
OUT/<model>/test_data_set_0, so that a machine with a device and no compiler
checks and times them:
    tbc-device-suite --device cuda:0 --runs 20 --atol 1e-4 OUT/*

usage: .venv/bin/python tests/conformance/device_models.py BUILD_DIR TARGET OUT [MODEL...]
           [--suffix S --compile-args "ARGS"]
(models come from bench/make_models.py into BUILD_DIR/models; ResNet-50's
100 MB of weights are left out unless named; `resnet50 --suffix _fp16
--compile-args "--precision fp16"` makes OUT/resnet50_fp16, half of them).

--weight-levels L rounds the model's float weights to L levels first
(coarse_weights.py), so that the artifact compresses to fit the GPU
machine's 64 MiB transfer; the expected outputs are onnxruntime's with the
same weights.  Name such a case by a suffix (_w16).

--sets N writes N data sets: set 0 the bench inputs, sets 1.. random ones
like them (floats with their mean and spread in 256 levels, integers within
their range, masks kept), for accuracy over many inputs (lp_cosine.py)."""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coarse_weights import coarse_weights  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {
    "transformer": {"x": "transformer.x.npy"},
    # exported with dynamic axes: batch 3, seq 19
    "bert_dynamic": {k: f"bert_dynamic.b.{k}.npy" for k in ("input_ids", "attention_mask")},
    # one decode step of batch 3 after 11 cached tokens
    "gpt_dynamic": {k: f"gpt_dynamic.b.{k}.npy"
                    for k in ["input_ids"] + [f"past.{i}.{kv}" for i in range(4) for kv in ("key", "value")]},
    "resnet50": {"image": "resnet50.image.npy"},
}


def like(v, name, rng):
    """A random input of v's shape and dtype with v's statistics."""
    if "mask" in name:
        return v
    if np.issubdtype(v.dtype, np.integer):
        return rng.integers(v.min(), v.max() + 1, size=v.shape).astype(v.dtype)
    # 256 levels within four standard deviations, as 8-bit images and
    # activations are: the archive carrying many sets compresses
    z = np.clip(np.round(rng.standard_normal(v.shape) * 32), -128, 127) / 32
    return (z * v.std() + v.mean()).astype(v.dtype)


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("build")
    ap.add_argument("target")
    ap.add_argument("out")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--suffix", default="")
    ap.add_argument("--compile-args", default="")
    ap.add_argument("--weight-levels", type=int, default=0)
    ap.add_argument("--sets", type=int, default=1)
    a = ap.parse_args()
    build, target, out = a.build, a.target, a.out
    names = a.models or [m for m in MODELS if m != "resnet50"]
    models = os.path.join(build, "models")
    if not all(os.path.exists(os.path.join(models, n + ".onnx")) for n in names):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "make_models.py"), models],
                       check=True)
    for name in names:
        path = os.path.join(models, name + ".onnx")
        feeds = {k: np.load(os.path.join(models, v)) for k, v in MODELS[name].items()}
        case = os.path.join(out, name + a.suffix)
        os.makedirs(case, exist_ok=True)
        if a.weight_levels:
            path = coarse_weights(path, os.path.join(out, f".{name}{a.suffix}.onnx"), a.weight_levels)
        subprocess.run([os.path.join(build, "tbc"), "compile", path, "--target", target, "--cpu", "x86-64-v3",
                        "-o", os.path.join(case, "model.so")] + a.compile_args.split(), check=True)
        graph = onnx.load(path, load_external_data=False).graph
        inits = {i.name for i in graph.initializer}
        order = [i.name for i in graph.input if i.name not in inits]
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(2026)
        for s in range(a.sets):
            data = os.path.join(case, f"test_data_set_{s}")
            os.makedirs(data, exist_ok=True)
            if s:
                feeds = {n: like(v, n, rng) for n, v in feeds.items()}
            for i, n in enumerate(order):
                t = numpy_helper.from_array(feeds[n], n)
                open(os.path.join(data, f"input_{i}.pb"), "wb").write(t.SerializeToString())
            outs = sess.run(None, feeds)
            for i, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
                t = numpy_helper.from_array(np.asarray(v), o.name)
                open(os.path.join(data, f"output_{i}.pb"), "wb").write(t.SerializeToString())
        if a.weight_levels:
            os.remove(path)
        print(f"{case}: {len(order)} inputs, {len(outs)} outputs")


main()
