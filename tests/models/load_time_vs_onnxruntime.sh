#!/usr/bin/env bash
# AlexNet whose weights come from constant subgraphs too large to fold
# (bench/make_models.py alexnet_consts; docs/load-time.md): compiled, its
# load-time values must show in `tbc inspect`, and its output must match
# onnxruntime's and the reference interpreter's.
# usage: load_time_vs_onnxruntime.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
[ -f "$work/alexnet_consts.onnx" ] || "$py" "$src/bench/make_models.py" "$work" alexnet_consts >/dev/null
"$tbc" compile "$work/alexnet_consts.onnx" -o "$work/alexnet_consts.so"
"$tbc" inspect "$work/alexnet_consts.so" >"$work/alexnet_consts.txt"
grep -q 'load-time values: [0-9]* bytes' "$work/alexnet_consts.txt"
for target in so interp; do
	out="$work/out-$target"
	rm -rf "$out"
	if [ "$target" = so ]; then
		"$tbc" run "$work/alexnet_consts.so" --input "image=$work/alexnet.image.npy" --output-dir "$out" >/dev/null
	else
		"$tbc" run "$work/alexnet_consts.onnx" --target interp --input "image=$work/alexnet.image.npy" \
			--output-dir "$out" >/dev/null
	fi
	echo "alexnet_consts ($target):"
	"$py" "$src/examples/compare_with_onnxruntime.py" "$work/alexnet_consts.onnx" "image=$work/alexnet.image.npy" "$out"
done
