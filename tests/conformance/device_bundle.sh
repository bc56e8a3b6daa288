#!/bin/bash
# device_bundle.sh BUILD_DIR TARGET OUT [CASE...]
#
# Makes a folder that runs the ONNX node suite on a device of another machine
# that has no tbc compiler (no LLVM), only a driver: every in-scope case (or
# the CASEs named) compiled here for TARGET (`cuda:sm_90`, `rocm:gfx942`,
# `opencl`) with its test data, tbc-device-suite (libtbcrt linked in) and the
# one library it needs beside libc, libprotobuf-c.  On the other machine:
#   OUT/run.sh DEVICE [JOBS]      (DEVICE as tbc doctor names it: cuda:0)
# writes OUT/results.txt, one PASS/FAIL line per case, and checks it against
# the column's expected failures (cuda.xfail, opencl.xfail) strictly, when
# every in-scope case was bundled (docs/gpu.md).
#
# The host code is compiled for x86-64-v3 (AVX2), not this CPU, so that it
# runs on the other machine's CPU.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR TARGET OUT [CASE...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
target=$2
out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
cases_dir=${TBC_ONNX_TESTS:-$here/../../../shared/onnx-tests/node}
tbc=$build/tbc
suite=$build/tests/conformance/tbc-device-suite
for f in "$tbc" "$suite" "$build/scope.txt"; do
	[ -e "$f" ] || { echo "$0: $f is missing (build first)" >&2; exit 2; }
done
if [ $# -eq 0 ]; then set -- $(cat "$build/scope.txt"); fi

rm -rf "$out"
mkdir -p "$out/cases" "$out/lib"
cp "$suite" "$out/"
cp "$here/run_device_suite.sh" "$out/run.sh"
cp "$(ldd "$suite" | awk '/libprotobuf-c/ {print $3}')" "$out/lib/"
# The column's expected failures, which run.sh checks strictly.
case $target in
cuda*) cp "$here/cuda.xfail" "$out/expected.xfail" ;;
opencl) cp "$here/opencl.xfail" "$out/expected.xfail" ;;
esac

compile_one() {
	local c=$1
	mkdir -p "$out/cases/$c"
	if "$tbc" compile "$cases_dir/$c/model.onnx" --target "$target" --cpu x86-64-v3 \
		-o "$out/cases/$c/model.so" 2>"$out/cases/$c/compile.err"; then
		rm "$out/cases/$c/compile.err"
		cp -r "$cases_dir/$c"/test_data_set_* "$out/cases/$c/"
	else
		echo "FAIL $c compile: $(head -c 300 "$out/cases/$c/compile.err" | tr '\n' ' ')" >>"$out/compile_failures.txt"
		rm -rf "$out/cases/$c"
	fi
}
export -f compile_one
export tbc out target cases_dir
printf '%s\n' "$@" | xargs -P "${JOBS:-2}" -I{} bash -c 'compile_one {}'
echo "$target" >"$out/target.txt"
n=$(ls "$out/cases" | wc -l)
echo "$out: $n cases for $target$([ -f "$out/compile_failures.txt" ] && echo ", $(wc -l <"$out/compile_failures.txt") did not compile")"
