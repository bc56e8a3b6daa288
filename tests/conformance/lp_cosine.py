"""Accuracy of lowered models on a device: lp_cosine.py [--min-cosine C] CASE_DIR...

Each CASE_DIR/test_data_set_K holds onnxruntime's float32 outputs
(output_I.pb) and the outputs a device run recorded (output_I.npy, written
by `tbc-device-suite --record`).  Prints, per case and output, the smallest
cosine similarity over the sets, how many rows (the last axis) have the
same argmax, and how many values are inf or NaN: issue 13's measures
(docs/precision.md), for a device instead of this CPU.  With --min-cosine,
the exit status is 1 when an output's smallest cosine is below C (the
issue's goals: 0.999 for fp16 and bf16, 0.99 for fp8)."""
import glob
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper


def pb(path):
    t = TensorProto()
    t.ParseFromString(open(path, "rb").read())
    return numpy_helper.to_array(t)


def main():
    args, floor, below = sys.argv[1:], None, 0
    if args[:1] == ["--min-cosine"]:
        floor, args = float(args[1]), args[2:]
    for case in args:
        sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
        stats = {}
        for d in sets:
            for ref_path in sorted(glob.glob(os.path.join(d, "output_*.pb"))):
                got_path = ref_path[:-3] + ".npy"
                if not os.path.exists(got_path):
                    print(f"{case}: no recorded {os.path.basename(got_path)} in {os.path.basename(d)}")
                    continue
                ref = pb(ref_path).astype(np.float64)
                got = np.load(got_path).astype(np.float64)
                if ref.shape != got.shape:
                    print(f"{case}: {ref_path} shape {ref.shape}, recorded {got.shape}")
                    continue
                s = stats.setdefault(os.path.basename(ref_path)[:-3], [1.0, 0, 0, 0])
                bad = int(np.count_nonzero(~np.isfinite(got)))
                r, g = ref.ravel(), np.nan_to_num(got.ravel())
                den = np.linalg.norm(r) * np.linalg.norm(g)
                cos = float(r @ g / den) if den else float(np.array_equal(r, g))
                s[0] = min(s[0], cos)
                if ref.ndim:
                    rows_r = ref.reshape(-1, ref.shape[-1]).argmax(-1)
                    rows_g = got.reshape(-1, got.shape[-1]).argmax(-1)
                    s[1] += int((rows_r == rows_g).sum())
                    s[2] += rows_r.size
                s[3] += bad
        for out, (cos, same, rows, bad) in stats.items():
            low = floor is not None and (cos < floor or bad)
            below += low
            print(f"cosine: {os.path.basename(case)} {out}: min cosine {cos:.6f} over {len(sets)} sets, "
                  f"argmax {same}/{rows} rows, {bad} inf/NaN{f' (BELOW {floor})' if low else ''}")
    return 1 if below else 0


sys.exit(main())
