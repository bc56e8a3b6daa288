#!/usr/bin/env bash
# Transformers exported with dynamic axes (bench/make_models.py): a BERT-style
# encoder [batch, seq] and a GPT-2-style decoder step with a KV cache
# [batch, heads, past_seq, head_dim].  Each is compiled ONCE; the one artifact
# runs at several shapes (two encoder shapes; two decode steps and a prefill
# with an empty cache) and every output is compared with onnxruntime.  The
# inferred symbolic dims must show in `tbc inspect`, and a run whose sizes
# break what the model was compiled for (a cache longer than the causal
# table) must fail, not return garbage.
# usage: dynamic_vs_onnxruntime.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
[ -f "$work/bert_dynamic.onnx" ] && [ -f "$work/gpt_dynamic.onnx" ] || "$py" "$src/bench/make_models.py" "$work" >/dev/null

# Inputs of model $1 at shape tag $2 as NAME=FILE words (files NAME.TAG.INPUT.npy).
inputs() {
	for f in "$work/$1.$2".*.npy; do
		local name=${f#"$work/$1.$2."}
		echo "${name%.npy}=$f"
	done
}

"$tbc" inspect "$work/bert_dynamic.onnx" >"$work/bert_dynamic.ir"
"$tbc" inspect "$work/gpt_dynamic.onnx" >"$work/gpt_dynamic.ir"
grep -q 'last_hidden_state: f32\[batch,seq,256\]' "$work/bert_dynamic.ir"
grep -q 'present.0.key: f32\[batch,4,past_seq + seq,64\]' "$work/gpt_dynamic.ir"

for model in bert_dynamic gpt_dynamic; do
	"$tbc" compile "$work/$model.onnx" -o "$work/$model.so"
	for tag in a b c; do
		compgen -G "$work/$model.$tag.*.npy" >/dev/null || continue
		args=()
		for kv in $(inputs "$model" "$tag"); do args+=(--input "$kv"); done
		out="$work/out-$model-$tag"
		rm -rf "$out"
		"$tbc" run "$work/$model.so" "${args[@]}" --output-dir "$out" >/dev/null
		echo "$model at shape $tag:"
		# shellcheck disable=SC2046
		"$py" "$src/examples/compare_with_onnxruntime.py" "$work/$model.onnx" $(inputs "$model" "$tag") "$out"
	done
done

# past_seq + seq = 130 rows of a 128-row causal table: onnxruntime's slice
# would clamp and then fail to broadcast; the compiled model must stop (its
# position-embedding Gather refuses position 129 of 128, before any broadcast).
"$py" - "$work" <<'PY'
import sys
import numpy as np
w = sys.argv[1]
np.save(f"{w}/gpt_dynamic.long.input_ids.npy", np.ones((1, 1), np.int64))
for i in range(4):
    for kv in ("key", "value"):
        np.save(f"{w}/gpt_dynamic.long.past.{i}.{kv}.npy", np.zeros((1, 4, 129, 64), np.float32))
PY
args=()
for kv in $(inputs gpt_dynamic long); do args+=(--input "$kv"); done
if "$tbc" run "$work/gpt_dynamic.so" "${args[@]}" --output-dir "$work/out-gpt_dynamic-long" 2>"$work/long.err"; then
	echo "a cache longer than the causal table ran" >&2
	exit 1
fi
grep -qE "an index is out of range|differs from" "$work/long.err"
echo "gpt_dynamic with a cache past the causal table: refused ($(cat "$work/long.err"))"
