#!/usr/bin/env bash
# OpenCL C for devices without cl_khr_fp64 (docs/opencl.md, "Devices
# without fp64"): every printed program is checked by clang-19 as OpenCL C
# 1.2 with the extension switched off, which rejects any use of double.
# Models without float64 tensors (fp32, and fp16/bf16/float8 values, which
# the preamble decodes in float there) must pass; a model that computes
# float64 must fail with the #error that names its kernel.  The float path's
# values are checked bit for bit against the evaluator on PoCL by
# unit.test_opencl_c (built with -DTBC_NO_FP64), and whole models run there
# against onnxruntime by models.opencl_vs_onnxruntime.
# usage: opencl_without_fp64.sh TBC CLANG NODE_CASES MODELS_DIR EXAMPLES_DIR WORK_DIR
set -euo pipefail
tbc=$1 clang=$2 cases=$3 models=$4 examples=$5 work=$6
mkdir -p "$work"

# compile NAME MODEL [ARGS...]: MODEL as OpenCL C in $work/NAME.cl
compile() {
	local name=$1 model=$2
	shift 2
	"$tbc" compile "$model" --target opencl "$@" -o "$work/$name.cl"
}
# check NAME [EXT...]: clang's verdict on $work/NAME.cl without fp64
check() {
	"$clang" -x cl -cl-std=CL1.2 --target=spir64 -fsyntax-only -Xclang -cl-ext=-cl_khr_fp64 \
		-Wno-unused-value "$work/$1.cl" >"$work/$1.log" 2>&1
}

fail=0
expect_ok() {
	if check "$1"; then
		echo "ok: $1 builds without fp64"
	else
		echo "FAIL: $1 needs fp64:"
		head -20 "$work/$1.log"
		fail=1
	fi
}

compile transformer "$models/transformer.onnx"
compile transformer_fp16 "$models/transformer.onnx" --precision fp16
compile transformer_bf16 "$models/transformer.onnx" --precision bf16
compile bert_dynamic "$models/bert_dynamic.onnx"
compile gpt_dynamic "$models/gpt_dynamic.onnx"
compile tiny_cnn "$examples/tiny_cnn.onnx"
for t in FLOAT16 BFLOAT16 FLOAT8E4M3FN FLOAT8E4M3FNUZ FLOAT8E5M2 FLOAT8E5M2FNUZ FLOAT4E2M1 INT4; do
	compile "cast_$t" "$cases/test_cast_FLOAT_to_$t/model.onnx"
	compile "cast_back_$t" "$cases/test_cast_${t}_to_FLOAT/model.onnx"
done
for f in "$work"/*.cl; do
	n=$(basename "$f" .cl)
	[ "$n" = cast_DOUBLE ] || expect_ok "$n"
done

# A float64 model: refused by name without fp64, accepted with it.
compile cast_DOUBLE "$cases/test_cast_FLOAT_to_DOUBLE/model.onnx"
if check cast_DOUBLE; then
	echo "FAIL: a float64 kernel built without fp64"
	fail=1
elif grep -q 'error: "kernel tbc_.* computes float64, and this OpenCL device has no cl_khr_fp64"' "$work/cast_DOUBLE.log"; then
	echo "ok: the float64 kernel is refused by name: $(grep -o 'kernel tbc_[A-Za-z0-9_]*' "$work/cast_DOUBLE.log" | head -1)"
else
	echo "FAIL: the float64 kernel failed without its message:"
	head -20 "$work/cast_DOUBLE.log"
	fail=1
fi
if "$clang" -x cl -cl-std=CL1.2 --target=spir64 -fsyntax-only "$work/cast_DOUBLE.cl" >"$work/cast_DOUBLE.fp64.log" 2>&1; then
	echo "ok: the float64 kernel builds with fp64"
else
	echo "FAIL: the float64 kernel does not build with fp64:"
	head -20 "$work/cast_DOUBLE.fp64.log"
	fail=1
fi
exit $fail
