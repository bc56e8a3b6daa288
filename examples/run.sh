#!/usr/bin/env bash
# The main job: installs what is missing, builds tbc, then imports the example
# model, prints its IR summary, runs it and checks the result against
# onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release tbc_cli

model=examples/models/tiny_cnn.onnx
out=build/release/example-out
echo "== tbc inspect $model (summary)"
build/release/tbc inspect "$model" | sed -n '/^Summary/,$p'
echo "== tbc run $model"
build/release/tbc run "$model" --input image=examples/models/tiny_cnn.image.npy --output-dir "$out"
.venv/bin/python examples/compare_with_onnxruntime.py "$model" image=examples/models/tiny_cnn.image.npy "$out"
