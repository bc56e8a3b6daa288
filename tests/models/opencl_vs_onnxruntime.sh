#!/usr/bin/env bash
# Models compiled for OpenCL (docs/opencl.md) and run by libtbcrt on the
# first OpenCL device (PoCL here and in CI), compared with onnxruntime: the
# transformer block, and the dynamic-axes encoder and KV-cache decoder at
# every shape models.dynamic_vs_onnxruntime runs on the CPU, each compiled
# once for cpu,opencl.  A decode step past the causal table must fail on
# OpenCL too.  ResNet-50 runs when TBC_OPENCL_RESNET=1: PoCL takes minutes
# to compile its kernels on a cold cache, too long for every CI run.
# usage: opencl_vs_onnxruntime.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
. "$src/tests/support/need_opencl.sh"
need_opencl "$tbc" "$work" "the OpenCL model tests"
[ -f "$work/transformer.onnx" ] && [ -f "$work/bert_dynamic.onnx" ] || "$py" "$src/bench/make_models.py" "$work" >/dev/null

# run MODEL TAG NAME=FILE...: compile once (cpu,opencl), run on OpenCL, compare.
check() {
	local model=$1 tag=$2
	shift 2
	local args=()
	for kv in "$@"; do args+=(--input "$kv"); done
	[ -f "$work/$model.ocl.so" ] || "$tbc" compile "$work/$model.onnx" --target cpu,opencl -o "$work/$model.ocl.so"
	local out="$work/out-ocl-$model-$tag"
	rm -rf "$out"
	"$tbc" run "$work/$model.ocl.so" --target opencl "${args[@]}" --output-dir "$out" >/dev/null
	echo "$model at $tag on OpenCL:"
	"$py" "$src/examples/compare_with_onnxruntime.py" "$work/$model.onnx" "$@" "$out"
}

# NAME=FILE words of model $1 at shape tag $2 (files MODEL.TAG.INPUT.npy).
inputs() {
	for f in "$work/$1.$2".*.npy; do
		local name=${f#"$work/$1.$2."}
		echo "${name%.npy}=$f"
	done
}

rm -f "$work"/*.ocl.so
check transformer x x="$work/transformer.x.npy"
# The same artifacts on a device without cl_khr_fp64: PoCL told to take the
# preamble's float path, where the sums kept in double elsewhere are float
# (docs/opencl.md, "Devices without fp64").
TBCRT_OPENCL_BUILD_OPTIONS=-DTBC_NO_FP64 check transformer x-without-fp64 x="$work/transformer.x.npy"
for model in bert_dynamic gpt_dynamic; do
	for tag in a b c; do
		compgen -G "$work/$model.$tag.*.npy" >/dev/null || continue
		# shellcheck disable=SC2046
		check "$model" "$tag" $(inputs "$model" "$tag")
	done
done
# shellcheck disable=SC2046
TBCRT_OPENCL_BUILD_OPTIONS=-DTBC_NO_FP64 check bert_dynamic a-without-fp64 $(inputs bert_dynamic a)
# past_seq + seq = 130 rows of a 128-row causal table: the run must stop
# with the check's message.
"$py" - "$work" <<'PY'
import sys
import numpy as np
w = sys.argv[1]
np.save(f"{w}/gpt_dynamic.long.input_ids.npy", np.ones((1, 1), np.int64))
for i in range(4):
    for kv in ("key", "value"):
        np.save(f"{w}/gpt_dynamic.long.past.{i}.{kv}.npy", np.zeros((1, 4, 129, 64), np.float32))
PY
if true; then
	args=()
	for kv in $(inputs gpt_dynamic long); do args+=(--input "$kv"); done
	if "$tbc" run "$work/gpt_dynamic.ocl.so" --target opencl "${args[@]}" --output-dir "$work/out-ocl-long" 2>"$work/ocl-long.err"; then
		echo "a cache longer than the causal table ran on OpenCL" >&2
		exit 1
	fi
	grep -q "failed in kernel" "$work/ocl-long.err"
	echo "gpt_dynamic past the causal table on OpenCL: $(head -c 300 "$work/ocl-long.err")"
fi
if [ "${TBC_OPENCL_RESNET:-0}" = 1 ]; then
	check resnet50 image image="$work/resnet50.image.npy"
fi
