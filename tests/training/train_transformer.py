"""A transformer encoder trained for a few hundred steps (issue 14): two
pre-norm blocks (bench/make_train_models.py's encoder_stack: d 32, 4 heads,
FFN 64, 8 tokens) compiled as one AdamW step with an mse loss, on a tiny
synthetic task that needs attention: each token's target is the mean of its
sequence's tokens.  300 `tbc train` steps on a batch of 32 sequences must
bring the loss under 1% of where it started; the trained model, written by
`tbc train --export` and run by onnxruntime on 32 sequences it never saw,
must do at least 4x better than the untrained one there (it learned the
task, not only the batch).

usage: train_transformer.py TBC WORK_DIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import make_train_models as mtm  # noqa: E402

if len(sys.argv) != 3:
    sys.exit(__doc__)
TBC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
SEQ, D, BATCH, STEPS = 8, 32, 32, 300
mtm.N = BATCH
model = os.path.join(WORK, "encoder.onnx")
mtm.encoder_stack(model, layers=2, d=D, heads=4, ffn=64, seq=SEQ)
m = onnx.load(model)
m.ir_version = 10  # what onnxruntime reads
onnx.save(m, model)
rng = np.random.default_rng(3)


def batch(n):
    x = rng.standard_normal((n, SEQ, D)).astype(np.float32)
    return x, np.ascontiguousarray(np.broadcast_to(x.mean(axis=1, keepdims=True), x.shape), dtype=np.float32)


x, t = batch(BATCH)
held_x, held_t = batch(BATCH)
np.save(os.path.join(WORK, "x.npy"), x)
np.save(os.path.join(WORK, "t.npy"), t)
step, trained = os.path.join(WORK, "encoder_step.so"), os.path.join(WORK, "trained.onnx")
subprocess.run([TBC, "compile", model, "--train", "--loss", "mse:y:t", "--optimizer", "adamw", "--lr", "3e-3",
                "--weight-decay", "0", "-o", step], check=True)
r = subprocess.run([TBC, "train", step, "--input", "x=" + os.path.join(WORK, "x.npy"), "--input",
                    "t=" + os.path.join(WORK, "t.npy"), "--steps", str(STEPS), "--export", trained, "--model", model],
                   check=True, capture_output=True, text=True)
losses = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]
held = {}
for name, path in (("untrained", model), ("trained", trained)):
    y = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": held_x})[0]
    held[name] = float(((y - held_t) ** 2).mean())
print(f"loss {losses[0]:.4f} -> {losses[99]:.4f} (step 100) -> {losses[-1]:.5f} (step {len(losses)}); "
      f"unseen sequences: {held['untrained']:.4f} -> {held['trained']:.4f}")
ok = len(losses) == STEPS and all(np.isfinite(losses)) and losses[-1] < 0.01 * losses[0]
ok = ok and held["trained"] < held["untrained"] / 4
if not ok:
    print("FAIL: the encoder did not learn the task")
    sys.exit(1)
print("the encoder learned the task")
