#!/usr/bin/env bash
# Issue 15's benchmark set (bench/compare.py's models) compiled for this CPU
# at -O2 and compared with onnxruntime on compare.py's inputs: AlexNet,
# MobileNetV2, ShuffleNetV2, DenseNet-121, Inception-v2, the BERT encoder at
# seq 128 and its int8 form (quantize_dynamic), the GPT decoder's 128-token
# prefill and a decode step, and the QDQ ResNet-50 (quantize_static) with and
# without --qdq-fusion.  ResNet-50 and the transformer block are
# interp_vs_onnxruntime's, alexnet_consts load_time_vs_onnxruntime's.
#
# The quantized models are compared at a quantization step's tolerance:
# onnxruntime's optimized and unoptimized sessions differ by as much.
# - resnet50_qdq: its logits come from a DequantizeLinear; every one within 2
#   of its steps, and at most 40% differ at all (20-25% do: a sum that lands
#   near a rounding boundary flips a step; a wrong kernel moves them all).
# - bert_int8: DynamicQuantizeLinear picks each scale from the data, so float
#   rounding anywhere moves every value a little; within 0.1 of values up to
#   4 (onnxruntime's two sessions: 0.043 apart; tbc: 0.042 from the optimized).
# usage: zoo_vs_onnxruntime.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
if [ ! -f "$work/resnet50_qdq.onnx" ] || [ ! -f "$work/gpt_decode.input_ids.npy" ]; then
	"$py" "$src/bench/make_models.py" "$work" >/dev/null
	"$py" "$src/bench/zoo.py" "$work" >/dev/null 2>&1
fi
gpt="input_ids"
for i in 0 1 2 3; do gpt="$gpt past.$i.key past.$i.value"; done

# check LABEL MODEL 'COMPILE FLAGS' 'INPUT NAMES' INPUT_TAG [COMPARE FLAGS]:
# inputs NAME=WORK/INPUT_TAG.NAME.npy
check() {
	local label=$1 model=$2 flags=$3 names=$4 tag=$5
	shift 5
	local so="$work/$label.so" out="$work/out-$label" feeds=() args=()
	# shellcheck disable=SC2086
	"$tbc" compile "$work/$model.onnx" $flags -o "$so"
	for n in $names; do
		feeds+=("$n=$work/$tag.$n.npy")
		args+=(--input "$n=$work/$tag.$n.npy")
	done
	rm -rf "$out"
	"$tbc" run "$so" "${args[@]}" --output-dir "$out" >/dev/null
	echo "$label:"
	"$py" "$src/examples/compare_with_onnxruntime.py" "$work/$model.onnx" "${feeds[@]}" "$out" "$@"
}

check alexnet alexnet "" image alexnet
for m in mobilenet_v2 shufflenet_v2 densenet121 inception_v2; do
	check "$m" "$m" "" image zoo
done
check bert128 bert_dynamic "" "input_ids attention_mask" bert128
check bert_int8 bert_int8 "" "input_ids attention_mask" bert128 --atol 0.1
check gpt_prefill gpt_dynamic "" "$gpt" gpt_prefill
check gpt_decode gpt_dynamic "" "$gpt" gpt_decode
check resnet50_qdq resnet50_qdq "" image zoo --steps 2 --loose 0.4
check resnet50_qdq_fused resnet50_qdq --qdq-fusion image zoo --steps 2 --loose 0.4
