#!/usr/bin/env bash
# The main job: installs what is missing, builds tbc as a user would (Release),
# compiles the example model to a native artifact, runs it with the runtime,
# checks it against onnxruntime and prints how long a run took beside
# onnxruntime's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release --quiet tbc_cli

tbc=build/release/tbc
model=examples/models/tiny_cnn.onnx
image=examples/models/tiny_cnn.image.npy
out=build/release/example-out
threads=2 runs=200
mkdir -p "$out"
echo "== tbc inspect $model (summary)"
"$tbc" inspect "$model" | sed -n '/^inputs:/,$p'
echo "== tbc compile $model -o $out/tiny_cnn.so"
"$tbc" compile "$model" -o "$out/tiny_cnn.so"
echo "== tbc run $out/tiny_cnn.so (libtbcrt, $threads threads, $runs timed runs)"
"$tbc" run "$out/tiny_cnn.so" --input image="$image" --output-dir "$out" --threads "$threads" --runs "$runs" |
  tee "$out/run.txt"
tbc_ms=$(sed -n 's/^time: median \([0-9.]*\) ms.*/\1/p' "$out/run.txt")
echo "== against onnxruntime (same input, $threads threads)"
.venv/bin/python examples/compare_with_onnxruntime.py "$model" image="$image" "$out" \
  --tbc-ms "$tbc_ms" --threads "$threads" --runs "$runs"
