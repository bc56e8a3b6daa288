#!/bin/bash
# device_training.sh BUILD_DIR TARGET OUT — training steps for tbc-device-suite.
#
# bench/make_train_models.py's ResNet-style CNN (AdamW, cross-entropy),
# transformer block (momentum SGD, mse) and MLP with Dropout in training mode
# (SGD, mse: new masks each step, the same on the device), each compiled for cpu and TARGET as
# one training step, with STEPS data sets (a new batch each) that run in order
# on one session: set K is step K + 1.  The expected outputs (each step's
# loss and the model's outputs) are this machine's CPU running the same
# artifact (tbc-device-suite --record), so the device is checked against the
# CPU step by step (docs/gpu.md, "Running on a GPU"):
#   tbc-device-suite --device cuda:0 --rtol 1e-3 --atol 1e-4 OUT/*
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR TARGET OUT" >&2; exit 2; }
build=$(cd "$1" && pwd)
target=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-$here/../../.venv/bin/python}
steps=${STEPS:-5}
models=$out/.models
mkdir -p "$models"
"$py" "$here/../../bench/make_train_models.py" "$models" >/dev/null
# WEIGHT_LEVELS=L: the initial weights rounded to L levels, so that the
# artifacts compress (coarse_weights.py; for the GPU machine's transfer)
if [ -n "${WEIGHT_LEVELS:-}" ]; then
	for m in resnet_train transformer_train dropout_train; do
		"$py" "$here/coarse_weights.py" "$models/$m.onnx" "$models/$m.onnx" "$WEIGHT_LEVELS"
	done
fi
one() { # NAME LABEL_INPUT COMPILE_ARGS...
	local name=$1 label=$2
	shift 2
	local case=$out/${name}_step
	mkdir -p "$case"
	"$build/tbc" compile "$models/$name.onnx" --train "$@" --target "cpu,$target" --cpu x86-64-v3 -o "$case/model.so"
	"$py" - "$models" "$name" "$label" "$case" "$steps" "${WEIGHT_LEVELS:-}" <<'PY'
import os, sys
import numpy as np
models, name, label, case, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
coarse = bool(sys.argv[6])  # float batches on a grid of 1/8 too, to compress
x = np.load(os.path.join(models, f"{name}.x.npy"))
y = np.load(os.path.join(models, f"{name}.{label}.npy"))
rng = np.random.default_rng(5)
for k in range(steps):
    d = os.path.join(case, f"test_data_set_{k}")
    os.makedirs(d, exist_ok=True)
    # step 1 on the saved batch, then new batches of the same kind
    xk = x if k == 0 else rng.standard_normal(x.shape).astype(x.dtype)
    yk = y if k == 0 else (rng.integers(0, 10, y.shape).astype(y.dtype) if y.dtype.kind == "i"
                           else rng.standard_normal(y.shape).astype(y.dtype))
    if coarse:
        xk = (np.round(xk * 8) / 8).astype(xk.dtype)
        yk = (np.round(yk * 8) / 8).astype(yk.dtype) if yk.dtype.kind == "f" else yk
    np.save(os.path.join(d, "input_0.npy"), xk)
    np.save(os.path.join(d, "input_1.npy"), yk)
PY
	"$build/tests/conformance/tbc-device-suite" --device cpu --record "$case" | grep -v "^device"
}
# MODELS: which of them (default all three)
for m in ${MODELS:-resnet_train transformer_train dropout_train}; do
	case $m in
	# without split-K (TBC_GEMM_SPLITK=1): it sums a convolution's products in another order than
	# the CPU, and AdamW, dividing each gradient element by its own scale, turns a rounding-level
	# difference of a near-zero gradient into a step of lr (docs/gpu.md, runs 12 and 14)
	resnet_train) TBC_GEMM_SPLITK=1 one resnet_train label --loss cross-entropy:logits:label --optimizer adamw --lr 1e-3 ;;
	transformer_train) one transformer_train t --loss mse:y:t --optimizer momentum --lr 1e-2 ;;
	dropout_train) one dropout_train t --loss mse:y:t --optimizer sgd --lr 1e-2 ;;
	*) echo "$0: no training model '$m'" >&2; exit 2 ;;
	esac
done
rm -rf "$models"
echo "$out: training steps for $target, $steps steps each"
