"""Runs MODEL with onnxruntime on the given inputs and compares each output with
OUT_DIR/<name>.npy written by tbc.  Exit status 1 when any output differs
beyond rtol 1e-3 / atol 1e-5."""
import re
import sys

import numpy as np
import onnxruntime as ort


def main():
    model, *inputs, out_dir = sys.argv[1:]
    feeds = {}
    for spec in inputs:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    ok = True
    for meta, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        got = np.load(f"{out_dir}/{re.sub(r'[^A-Za-z0-9._-]', '_', meta.name)}.npy")
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        same = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-5)
        print(f"{meta.name}: shape {got.shape}, max |tbc - onnxruntime| = {err:.3g} -> {'OK' if same else 'MISMATCH'}")
        ok &= same
    sys.exit(0 if ok else 1)


main()
