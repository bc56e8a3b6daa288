#!/usr/bin/env bash
# `tbc check --bisect` on a model of a few hundred nodes: the GPT-2-style
# decoder step of bench/make_models.py (313 nodes, symbolic batch, seq and
# past_seq).  The interpreter and the compiled cpu target agree on random
# inputs, and bisect names nothing; with the TEST-ONLY --test-perturb making
# one GELU node (tanh_263, node 154) wrong on the cpu target, the check fails
# and bisect names exactly that node.
# usage: check_bisect.sh TBC PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
tbc=$1 py=$2 src=$3 work=$4
mkdir -p "$work"
[ -f "$work/gpt_dynamic.onnx" ] || "$py" "$src/bench/make_models.py" "$work" >/dev/null
dims=(--dim batch=2 --dim seq=3 --dim past_seq=5)

"$tbc" check "$work/gpt_dynamic.onnx" "${dims[@]}" --bisect >"$work/agree.txt" || {
	cat "$work/agree.txt"
	echo "FAIL: interp and cpu should agree on gpt_dynamic"
	exit 1
}
cat "$work/agree.txt"
grep -q '^result: the targets agree$' "$work/agree.txt"
! grep -q 'first diverging node' "$work/agree.txt"

start=$(date +%s)
rc=0
"$tbc" check "$work/gpt_dynamic.onnx" "${dims[@]}" --bisect --test-perturb tanh_263 >"$work/perturbed.txt" || rc=$?
cat "$work/perturbed.txt"
echo "perturbed check and bisect: $(($(date +%s) - start)) s"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
grep -q "^first diverging node: 'tanh_263' (Tanh), node 154 of 313 in execution order$" "$work/perturbed.txt"
[ "$(grep -c 'first diverging node' "$work/perturbed.txt")" -eq 1 ]
echo "ok"
