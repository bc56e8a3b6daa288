/* The OpenCL device (runtime/opencl/) on whatever platform the ICD loader
 * finds -- PoCL here and in CI: hand-written OpenCL C built, launched and
 * compared; build failures with their log; the program cache; launches
 * that cannot run.  Skipped, saying why, when there is no OpenCL platform,
 * except under CI=true, where that fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/runtime/rt_device.h"

static const char saxpy_src[] = "__kernel void saxpy(float a, __global const float *x, __global float *y) {\n"
				"	size_t i = get_global_id(0);\n"
				"	y[i] = a * x[i] + y[i];\n"
				"}\n";

/* Each work-group sums its items in local memory, halving between barriers. */
static const char group_sum_src[] =
	"__kernel void group_sum(__global const float *x, __global float *out, __local float *tmp) {\n"
	"	size_t l = get_local_id(0), n = get_local_size(0);\n"
	"	tmp[l] = x[get_global_id(0)];\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	for (size_t s = n / 2; s > 0; s /= 2) {\n"
	"		if (l < s) tmp[l] += tmp[l + s];\n"
	"		barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	}\n"
	"	if (l == 0) out[get_group_id(0)] = tmp[0];\n"
	"}\n"
	/* A 2-D kernel with a fixed local array: the transpose of a tile. */
	"__kernel void transpose(__global const int *in, __global int *out, uint rows, uint cols) {\n"
	"	__local int tile[8][9];\n"
	"	size_t c = get_global_id(0), r = get_global_id(1);\n"
	"	tile[get_local_id(1)][get_local_id(0)] = in[r * cols + c];\n"
	"	barrier(CLK_LOCAL_MEM_FENCE);\n"
	"	out[c * rows + r] = tile[get_local_id(1)][get_local_id(0)];\n"
	"}\n";

static tbcrt__program_desc source(const char *name, const char *text, const char *options) {
	return (tbcrt__program_desc){TBCRT__PROGRAM_SOURCE, name, text, strlen(text), options};
}

typedef struct {
	tbcrt_context *ctx;
	tbcrt__device *d;
} fixture;

static int setup(void **state) {
	static fixture f;
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = 2;
	tbcrt_status s = tbcrt_context_create(&o, &f.ctx);
	if (s.code != TBCRT_OK) return -1;
	f.d = NULL;
	*state = &f;
	return 0;
}

static int teardown(void **state) {
	fixture *f = *state;
	if (f->d) tbcrt_context_destroy(f->ctx); /* rt_device_or_skip destroyed it otherwise */
	return 0;
}

static tbcrt__device *opencl(void **state) {
	fixture *f = *state;
	f->d = rt_device_or_skip(f->ctx, "opencl:0");
	return f->d;
}

static void saxpy_and_a_local_memory_reduction_match_the_host(void **state) {
	tbcrt__device *d = opencl(state);
	tbcrt__program_desc a_desc = source("saxpy.cl", saxpy_src, NULL), s_desc = source("group_sum.cl", group_sum_src, NULL);
	tbcrt__program *pa, *ps;
	RT_OK(tbcrt__program_load(d, &a_desc, &pa));
	RT_OK(tbcrt__program_load(d, &s_desc, &ps));
	tbcrt__kernel *saxpy, *sum;
	RT_OK(tbcrt__kernel_create(pa, "saxpy", &saxpy));
	RT_OK(tbcrt__kernel_create(ps, "group_sum", &sum));
	rt_check_saxpy_and_group_sum(d, saxpy, sum);
	tbcrt__kernel_destroy(saxpy);
	tbcrt__kernel_destroy(sum);
	tbcrt__program_release(pa);
	tbcrt__program_release(ps);
}

static void a_two_dimensional_launch_transposes_through_a_local_tile(void **state) {
	tbcrt__device *d = opencl(state);
	tbcrt__program_desc desc = source("group_sum.cl", group_sum_src, NULL);
	tbcrt__program *p;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *k;
	RT_OK(tbcrt__kernel_create(p, "transpose", &k));
	enum { ROWS = 24, COLS = 40 };
	int32_t in[ROWS * COLS], out[ROWS * COLS];
	for (int i = 0; i < ROWS * COLS; i++) in[i] = i * 3 - 100;
	tbcrt__arena *arena;
	RT_OK(tbcrt__arena_create(d, 2 * sizeof in + 4096, &arena));
	tbcrt__buffer *bi, *bo;
	RT_OK(tbcrt__arena_alloc(arena, sizeof in, &bi)); /* kernels see views of the arena as buffers */
	RT_OK(tbcrt__arena_alloc(arena, sizeof out, &bo));
	assert_non_null(bo->parent);
	RT_OK(tbcrt__buffer_write(bi, 0, in, sizeof in));
	uint32_t rows = ROWS, cols = COLS;
	tbcrt__arg args[] = {{TBCRT__ARG_BUFFER, bi, NULL, 0}, {TBCRT__ARG_BUFFER, bo, NULL, 0},
			     {TBCRT__ARG_SCALAR, NULL, &rows, sizeof rows}, {TBCRT__ARG_SCALAR, NULL, &cols, sizeof cols}};
	tbcrt__launch_desc l = {.dims = 2, .global = {COLS, ROWS}, .local = {8, 8}, .n_args = 4, .args = args};
	RT_OK(tbcrt__launch(k, &l));
	RT_OK(tbcrt__buffer_read(bo, 0, out, sizeof out));
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < COLS; c++) assert_int_equal(out[c * ROWS + r], in[r * COLS + c]);
	tbcrt__buffer_free(bi);
	tbcrt__buffer_free(bo);
	tbcrt__arena_destroy(arena);
	tbcrt__kernel_destroy(k);
	tbcrt__program_release(p);
}

static void a_syntax_error_is_a_status_with_the_build_log_and_the_program_name(void **state) {
	tbcrt__device *d = opencl(state);
	static const char broken[] = "__kernel void broken(__global float *x) {\n"
				     "	x[0] = undeclared_name + 1;\n"
				     "}\n";
	tbcrt__program_desc desc = source("broken_kernel.cl", broken, NULL);
	tbcrt__program *p = (tbcrt__program *)1;
	tbcrt_status s = tbcrt__program_load(d, &desc, &p);
	printf("%s\n", s.message);
	assert_int_equal(s.code, TBCRT_ERR_BUILD_FAILED);
	assert_null(p);
	assert_non_null(strstr(s.message, "opencl:0: program 'broken_kernel.cl' failed to build (CL_BUILD_PROGRAM_FAILURE)"));
	assert_non_null(strstr(s.message, "undeclared_name")); /* from the compiler's log */
	assert_int_equal(tbcrt__device_builds(d), 0);
	/* A failed build is not cached: the next load tries again. */
	RT_ERR(tbcrt__program_load(d, &desc, &p), TBCRT_ERR_BUILD_FAILED, "undeclared_name");
	tbcrt__program_desc bad_options = source("saxpy.cl", saxpy_src, "-cl-no-such-option");
	RT_ERR(tbcrt__program_load(d, &bad_options, &p), TBCRT_ERR_BUILD_FAILED, "CL_INVALID_BUILD_OPTIONS");
	static const unsigned char garbage[] = "not a device binary at all";
	tbcrt__program_desc bin = {TBCRT__PROGRAM_BINARY, "garbage.bin", garbage, sizeof garbage, NULL};
	tbcrt_status b = tbcrt__program_load(d, &bin, &p);
	printf("%s\n", b.message);
	assert_int_not_equal(b.code, TBCRT_OK);
	assert_non_null(strstr(b.message, "garbage.bin"));
}

static void loading_a_program_twice_builds_it_once(void **state) {
	tbcrt__device *d = opencl(state);
	uint64_t before = tbcrt__device_builds(d);
	tbcrt__program_desc desc = source("saxpy.cl", saxpy_src, NULL);
	tbcrt__program *p1, *p2, *p3, *p4;
	RT_OK(tbcrt__program_load(d, &desc, &p1));
	char copy[sizeof saxpy_src];
	memcpy(copy, saxpy_src, sizeof copy); /* the same bytes elsewhere: the same program */
	tbcrt__program_desc same = source("another name", copy, "");
	RT_OK(tbcrt__program_load(d, &same, &p2));
	assert_ptr_equal(p1, p2);
	assert_int_equal(tbcrt__device_builds(d), before + 1);
	tbcrt__program_desc optimized = source("saxpy.cl", saxpy_src, "-cl-fast-relaxed-math");
	RT_OK(tbcrt__program_load(d, &optimized, &p3));
	assert_ptr_not_equal(p1, p3);
	copy[sizeof copy - 2] = ' '; /* one byte differs */
	RT_OK(tbcrt__program_load(d, &same, &p4));
	assert_ptr_not_equal(p1, p4);
	assert_int_equal(tbcrt__device_builds(d), before + 3);
	tbcrt__program_release(p1);
	tbcrt__program_release(p2);
	tbcrt__program_release(p3);
	tbcrt__program_release(p4);
}

static void launches_that_cannot_run_are_statuses_naming_the_kernel(void **state) {
	tbcrt__device *d = opencl(state);
	tbcrt__program_desc desc = source("saxpy.cl", saxpy_src, NULL);
	tbcrt__program *p;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *k = (tbcrt__kernel *)1;
	RT_ERR(tbcrt__kernel_create(p, "saxpi", &k), TBCRT_ERR_DEVICE, "kernel 'saxpi' of program 'saxpy.cl'");
	assert_null(k);
	RT_ERR(tbcrt__kernel_create(p, "saxpi", &k), TBCRT_ERR_DEVICE, "CL_INVALID_KERNEL_NAME");
	RT_OK(tbcrt__kernel_create(p, "saxpy", &k));
	tbcrt__buffer *b;
	RT_OK(tbcrt__buffer_alloc(d, 4096, &b));
	double wide = 2; /* the kernel takes a float */
	tbcrt__arg args[] = {{TBCRT__ARG_SCALAR, NULL, &wide, sizeof wide}, {TBCRT__ARG_BUFFER, b, NULL, 0},
			     {TBCRT__ARG_BUFFER, b, NULL, 0}};
	tbcrt__launch_desc l = {.dims = 1, .global = {1024}, .n_args = 3, .args = args};
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_DEVICE, "kernel 'saxpy' of program 'saxpy.cl': argument 0");
	args[0].bytes = sizeof(float);
	l.local[0] = 1000;
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_INVALID_ARGUMENT, "not a multiple of the local size 1000");
	l.global[0] = 1ull << 20, l.local[0] = 1ull << 20;
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_LIMIT, "exceeds the kernel's limit");
	static const tbcrt__host_kernel none[1];
	tbcrt__program_desc host = {TBCRT__PROGRAM_HOST, "host_code", none, sizeof none, NULL};
	tbcrt__program *hp;
	RT_ERR(tbcrt__program_load(d, &host, &hp), TBCRT_ERR_UNSUPPORTED_TARGET, "program 'host_code' is host code");
	tbcrt__buffer_free(b);
	tbcrt__kernel_destroy(k);
	tbcrt__program_release(p);
}

int main(void) {
	tbc_pocl_setup();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(saxpy_and_a_local_memory_reduction_match_the_host, setup, teardown),
		cmocka_unit_test_setup_teardown(a_two_dimensional_launch_transposes_through_a_local_tile, setup, teardown),
		cmocka_unit_test_setup_teardown(a_syntax_error_is_a_status_with_the_build_log_and_the_program_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(loading_a_program_twice_builds_it_once, setup, teardown),
		cmocka_unit_test_setup_teardown(launches_that_cannot_run_are_statuses_naming_the_kernel, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
