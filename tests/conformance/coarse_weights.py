"""Rounds a model's float weights to a few levels, so that its artifact
compresses: what travels to a GPU machine is limited (64 MiB), and random
float32 weights do not compress at all.  Each float initializer of rank >= 1
becomes a multiple of max|w| / (levels // 2): 256 levels keep about a byte of
each weight's information, 16 half a byte.  The model is unchanged otherwise
(float32, the same ops and shapes), and its expected outputs are computed
with the rounded weights, so the check is as strict as before.

usage (as a program): coarse_weights.py IN.onnx OUT.onnx LEVELS"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def coarse_weights(src, dst, levels):
    m = onnx.load(src)
    half = max(levels // 2, 1)
    for t in m.graph.initializer:
        w = numpy_helper.to_array(t)
        if w.dtype != np.float32 or w.ndim == 0 or not w.size:
            continue
        step = float(np.abs(w).max()) / half or 1.0
        t.CopyFrom(numpy_helper.from_array((np.round(w / step) * step).astype(np.float32), t.name))
    onnx.save(m, dst)
    return dst


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    coarse_weights(sys.argv[1], sys.argv[2], int(sys.argv[3]))
