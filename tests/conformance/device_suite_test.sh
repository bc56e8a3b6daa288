#!/bin/bash
# The GPU machine's path, run here on the OpenCL device (PoCL): a few node
# cases bundled by device_bundle.sh for opencl, run by the bundle's run.sh
# with tbc-device-suite; one case given a wrong expected output must be
# the one FAIL, found again when run alone, and fail the run as a case
# opencl.xfail does not list.
# usage: device_suite_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../support/need_opencl.sh"
need_opencl "$build/tbc" "$work" "the device suite test"
cases="test_add test_softmax_axis_0 test_nonzero_example test_gemm_default_scalar_bias test_reshape_negative_dim"
"$here/device_bundle.sh" "$build" opencl "$work/bundle" $cases
# A wrong expected output: test_sub's difference where test_add's sum is due.
cp -r "$work/bundle/cases/test_add" "$work/bundle/cases/test_add_wrong"
cp "${TBC_ONNX_TESTS:-$here/../../../shared/onnx-tests/node}/test_sub/test_data_set_0/output_0.pb" \
	"$work/bundle/cases/test_add_wrong/test_data_set_0/output_0.pb"
# Unlisted in the column's expected failures (opencl.xfail): the run fails, naming it.
rc=0
"$work/bundle/run.sh" opencl:0 2 >"$work/run.out" || rc=$?
cat "$work/run.out"
[ "$rc" = 1 ] || { echo "run.sh exited $rc, not 1" >&2; exit 1; }
grep -q '^failed, not in expected.xfail: test_add_wrong$' "$work/run.out" || { echo "no line naming test_add_wrong" >&2; exit 1; }
r=$work/bundle/results.txt
cat "$r"
[ "$(grep -c '^PASS ' "$r")" = 5 ] || { echo "expected 5 passes" >&2; exit 1; }
grep -q '^FAIL test_add_wrong sum\[0\]: ' "$r" || { echo "expected test_add_wrong to fail on sum[0]" >&2; exit 1; }
[ "$(wc -l <"$r")" = 6 ] || { echo "expected 6 results" >&2; exit 1; }
echo "device suite: 5 passed, the wrong case failed"
