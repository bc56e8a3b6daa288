#!/bin/bash
# gpu_bundle.sh BUILD_DIR OUT.tar.xz [ARCH] — everything a GPU machine without
# tbc's compiler runs (tests/conformance/gpu_run.sh there), in one archive:
#   suite/      every in-scope node case for cuda:ARCH (device_bundle.sh), with
#               tbc-device-suite and the library it needs
#   models/     the bench models for cuda:sm_80,ARCH with cubins; the
#               transformer and BERT for ARCH with --no-cubin (_ptx: the
#               driver's JIT, for first loads; PTX=0 leaves them out); with
#               RESNET=1 fp32 ResNet-50
#   models_lp/  the transformer (LP_MODELS) with --precision fp16, bf16, fp8
# Weights are rounded to 16 levels (64 for models_lp) so that the archive, which
# must travel in 64 MiB, compresses (coarse_weights.py).
#   train/      two training steps, five steps each against this CPU
#   kernels/    single kernels against cuBLAS and the copy bandwidth (and
#               kernels_NAME/, the same compiled with a setting: KERNELS_BEFORE)
# ARCH defaults to sm_90 (H100, H200).  Takes about 20 minutes on 2 cores.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR OUT.tar.xz [ARCH]" >&2; exit 2; }
build=$(cd "$1" && pwd)
archive=$(realpath -m "$2")
arch=${3:-sm_90}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-$here/../../.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# SUITE=DIR: a suite device_bundle.sh made before, for the same tree
if [ -n "${SUITE:-}" ]; then cp -r "$SUITE" "$work/suite"; else "$here/device_bundle.sh" "$build" "cuda:$arch" "$work/suite"; fi
models() { "$py" "$here/device_models.py" "$build" "$@"; }
models "cuda:sm_80,cuda:$arch" "$work/models" --suffix _w16 --weight-levels 16
[ "${PTX:-1}" = 0 ] || models "cuda:$arch" "$work/models" transformer bert_dynamic --suffix _ptx_w16 \
	--weight-levels 16 --compile-args=--no-cubin
[ -z "${RESNET:-}" ] || models "cuda:$arch" "$work/models" resnet50 --suffix _w16 --weight-levels 16
# LP_MODELS="MODEL:LEVELS ..." (default transformer:64) are lowered, each with LP_SETS data
# sets (default 1; tests/conformance/lp_cosine.py measures their accuracy there)
for p in fp16 bf16 fp8; do
	for spec in ${LP_MODELS:-transformer:64}; do
		models "cuda:$arch" "$work/models_lp" "${spec%%:*}" --suffix "_${p}_w${spec#*:}" \
			--weight-levels "${spec#*:}" --sets "${LP_SETS:-1}" --compile-args "--precision $p"
	done
	# LP_BEFORE="NAME=VAR=VALUE ...": the same compiled with that setting, as *_NAME
	# (TBC_GEMM_MMA=0: the scalar GEMM instead of the tensor cores)
	for spec in ${LP_BEFORE:-}; do
		[ "$p" = fp8 ] || env "${spec#*=}" "$py" "$here/device_models.py" "$build" "cuda:$arch" "$work/models_lp" \
			transformer --suffix "_${p}_w64_${spec%%=*}" --weight-levels 64 --compile-args "--precision $p"
	done
done
WEIGHT_LEVELS=16 "$here/device_training.sh" "$build" "cuda:$arch" "$work/train"
"$py" "$here/device_kernels.py" compile "$build" "cuda:$arch" "$work/kernels"
# KERNELS_BEFORE="NAME=VAR=VALUE ...": the kernels again, compiled with that
# setting, as kernels_NAME (TBC_GPU_INTERLEAVE=1: one load in flight, as before)
for spec in ${KERNELS_BEFORE:-}; do
	env "${spec#*=}" "$py" "$here/device_kernels.py" compile "$build" "cuda:$arch" "$work/kernels_${spec%%=*}"
done
git -C "$here" rev-parse --short HEAD >"$work/commit.txt" 2>/dev/null || true
tar -C "$work" -cf - . | xz -T2 -6 >"$archive"
echo "$archive: $(du -h "$archive" | cut -f1)"
