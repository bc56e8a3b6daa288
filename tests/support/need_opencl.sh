# Sourced by the shell tests that run on the OpenCL device (PoCL):
#   need_opencl TBC WORK WHAT
# returns when `TBC doctor` lists opencl:0, with POCL_CACHE_DIR set to
# WORK/pocl-cache (PoCL's kernel cache, kept between runs) unless set;
# otherwise exits: skipped with a line saying why, or failing under CI=true
# (a missing device there is a broken machine, not a skip).
need_opencl() {
	if ! "$1" doctor | grep -q '^opencl:0 '; then
		[ "${CI:-}" = true ] && { echo "CI: no OpenCL device (PoCL) for $3" >&2; exit 1; }
		echo "skipped: no OpenCL device (tbc doctor)"
		exit 0
	fi
	export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$2/pocl-cache}
	mkdir -p "$POCL_CACHE_DIR"
}
