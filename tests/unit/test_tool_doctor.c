/* `tbc doctor`: runs, exits 0, and reports the CPU, the OpenCL devices (the
 * PoCL device here and in CI), the CUDA and HIP drivers and the targets; a
 * missing OpenCL loader is a line of the report, not a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/unit/support/command.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The command's output; *out_status its exit status. */
static char *run_doctor(const char *env, int *out_status) { return test_tbc(env, "doctor", false, out_status); }

#define HAS(out, text)                                                                          \
	do {                                                                                    \
		if (!strstr((out), (text))) fail_msg("expected \"%s\" in:\n%s", (text), (out)); \
	} while (0)

static void doctor_reports_the_cpu_opencl_cuda_hip_and_the_targets(void **state) {
	(void)state;
	int status;
	char *out = run_doctor("", &status);
	printf("%s", out);
	assert_int_equal(status, 0);
	HAS(out, "\ncpu ");
#if defined(__x86_64__)
	HAS(out, "features tbc uses: +");
	HAS(out, "+sse2");
#endif
	HAS(out, "\ncuda ");
	HAS(out, "\nhip ");
	HAS(out, "targets this tbc compiles for:");
	HAS(out, "cpu        x86_64, aarch64");
	HAS(out, "opencl     OpenCL C 1.2: artifacts");
	HAS(out, "cuda       PTX 8.0 (LLVM NVPTX)");
	HAS(out, "cubins in artifacts: "); /* "yes, ptxas at ..." or "none (PTX only): no .../ptxas" */
	HAS(out, "rocm       code objects v5 (LLVM AMDGPU)");
	HAS(out, "linked by ld.lld-19: found"); /* lld-19 is one of the project's dependencies */
	const char *ci = getenv("CI");
	if (strstr(out, "\nopencl:0 ")) {
		HAS(out, "compute units");
		HAS(out, "fp64");
		if (ci && !strcmp(ci, "true")) HAS(out, "Portable Computing Language"); /* CI runs PoCL */
	} else if (ci && !strcmp(ci, "true")) {
		fail_msg("CI=true, but tbc doctor lists no OpenCL device");
	} else {
		HAS(out, "\nopencl     unavailable: ");
		printf("skipped: the OpenCL device checks (no OpenCL platform here)\n");
	}
	free(out);
}

static void without_an_opencl_loader_doctor_says_so_and_exits_0(void **state) {
	(void)state;
	int status;
	char *out = run_doctor("TBCRT_OPENCL_LIBRARY=libtbc-no-such-opencl.so.1", &status);
	assert_int_equal(status, 0);
	HAS(out, "opencl     unavailable: no OpenCL ICD loader (libtbc-no-such-opencl.so.1");
	HAS(out, "\ncpu ");
	free(out);
}

/* With the fake drivers of tests/gpu_mock/ on the path, each GPU is a line. */
static void with_a_gpu_driver_doctor_lists_its_devices(void **state) {
	(void)state;
	const char *bin = getenv("TBC_BINARY_DIR");
	char env[4200];
	snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s/tests/gpu_mock'", bin ? bin : "build");
	int status;
	char *out = run_doctor(env, &status);
	printf("%s", out);
	assert_int_equal(status, 0);
	HAS(out, "\ncuda:0     Mock H100 0\n");
	HAS(out, "CUDA driver 12.4");
	HAS(out, "compute capability: sm_90");
	HAS(out, "\nhip:0      Mock MI300X 0\n");
	HAS(out, "compute capability: cc 9.4");
	free(out);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(doctor_reports_the_cpu_opencl_cuda_hip_and_the_targets),
		cmocka_unit_test(without_an_opencl_loader_doctor_says_so_and_exits_0),
		cmocka_unit_test(with_a_gpu_driver_doctor_lists_its_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
