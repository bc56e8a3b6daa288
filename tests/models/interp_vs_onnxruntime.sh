#!/usr/bin/env bash
# Real models end to end: a ResNet-50 (224x224) and a transformer encoder block,
# run by `tbc run` on the interpreter and compiled for this CPU, each compared
# with onnxruntime; and ResNet-50 compiled at -O1.
# usage: interp_vs_onnxruntime.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
[ -f "$work/resnet50.onnx" ] && [ -f "$work/transformer.onnx" ] || "$py" "$src/bench/make_models.py" "$work" >/dev/null
"$tbc" run "$work/resnet50.onnx" --input image="$work/resnet50.image.npy" --output-dir "$work/out-resnet50" >/dev/null
"$py" "$src/examples/compare_with_onnxruntime.py" "$work/resnet50.onnx" image="$work/resnet50.image.npy" "$work/out-resnet50"
"$tbc" run "$work/transformer.onnx" --input x="$work/transformer.x.npy" --output-dir "$work/out-transformer" >/dev/null
"$py" "$src/examples/compare_with_onnxruntime.py" "$work/transformer.onnx" x="$work/transformer.x.npy" "$work/out-transformer"
# Compiled for this CPU (the whole pipeline: folding, BatchNormalization into
# the convolutions, fusion, the GEMM's laid-out weights), the same check.
"$tbc" run "$work/resnet50.onnx" --target cpu --input image="$work/resnet50.image.npy" --output-dir "$work/out-resnet50-cpu" >/dev/null
"$py" "$src/examples/compare_with_onnxruntime.py" "$work/resnet50.onnx" image="$work/resnet50.image.npy" "$work/out-resnet50-cpu"
"$tbc" run "$work/transformer.onnx" --target cpu --input x="$work/transformer.x.npy" --output-dir "$work/out-transformer-cpu" >/dev/null
"$py" "$src/examples/compare_with_onnxruntime.py" "$work/transformer.onnx" x="$work/transformer.x.npy" "$work/out-transformer-cpu"
# At -O1 (its own short LLVM pipeline, codegen/llvm/llvm_machine.c, which
# once aborted on a Winograd convolution over 7 x 7): compiled, run, the same check.
"$tbc" compile "$work/resnet50.onnx" -O1 -o "$work/resnet50-O1.so"
"$tbc" run "$work/resnet50-O1.so" --input image="$work/resnet50.image.npy" --output-dir "$work/out-resnet50-O1" >/dev/null
"$py" "$src/examples/compare_with_onnxruntime.py" "$work/resnet50.onnx" image="$work/resnet50.image.npy" "$work/out-resnet50-O1"
