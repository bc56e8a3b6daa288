/* The device interface (runtime/device.h): enumeration through the public
 * API, buffers, copies and arenas on every device ("cpu", and "opencl:0"
 * when there is one), and the CPU device's kernels.  The OpenCL device's
 * kernels and builds are in test_runtime_device_opencl.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/runtime/rt_device.h"

/* ---- Enumeration ---- */
static void devices_list_the_cpu_first_then_opencl_cuda_and_hip(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(3);
	uint32_t n = 0;
	RT_OK(tbcrt_device_count(ctx, &n));
	assert_true(n >= 4); /* cpu, opencl (a device or why not), cuda, hip */
	tbcrt_device_info info;
	RT_OK(tbcrt_device_info_get(ctx, 0, &info));
	assert_string_equal(info.name, "cpu");
	assert_int_equal(info.kind, TBCRT_DEVICE_CPU);
	assert_true(info.available);
	assert_int_equal(info.compute_units, 3);
	assert_true(info.device_name[0] && info.global_memory_bytes && info.max_alloc_bytes);
#if defined(__x86_64__)
	assert_non_null(strstr(info.features, "+sse2"));
#endif
	bool kinds[4] = {false};
	for (uint32_t i = 0; i < n; i++) {
		RT_OK(tbcrt_device_info_get(ctx, i, &info));
		assert_true(info.kind <= TBCRT_DEVICE_HIP);
		kinds[info.kind] = true;
		assert_true(info.name[0]);
		if (info.available) assert_true(info.device_name[0]);
		else assert_true(info.unavailable_reason[0]);
		uint32_t found = 99;
		RT_OK(tbcrt_device_find(ctx, info.name, &found));
		assert_int_equal(found, i);
		printf("%s: %s%s\n", info.name, info.available ? info.device_name : "unavailable: ",
		       info.available ? "" : info.unavailable_reason);
	}
	for (int k = 0; k < 4; k++) assert_true(kinds[k]);
	tbcrt_context_destroy(ctx);
}

static void an_unknown_device_or_index_is_an_error_and_clears_the_output(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(1);
	uint32_t n = 0, index = 7;
	RT_OK(tbcrt_device_count(ctx, &n));
	RT_ERR(tbcrt_device_find(ctx, "opencl:999", &index), TBCRT_ERR_INVALID_ARGUMENT, "no device 'opencl:999'");
	assert_int_equal(index, 0);
	tbcrt_device_info info;
	memset(&info, 'x', sizeof info);
	RT_ERR(tbcrt_device_info_get(ctx, n, &info), TBCRT_ERR_INVALID_ARGUMENT, "out of range");
	assert_int_equal(info.name[0], 0);
	RT_ERR(tbcrt_device_count(NULL, &n), TBCRT_ERR_INVALID_ARGUMENT, "NULL");
	assert_int_equal(n, 0);
	RT_ERR(tbcrt_device_count(ctx, NULL), TBCRT_ERR_INVALID_ARGUMENT, "NULL");
	RT_ERR(tbcrt_device_find(ctx, NULL, &index), TBCRT_ERR_INVALID_ARGUMENT, "NULL");
	tbcrt__device *d = NULL;
	RT_ERR(tbcrt__device_get(ctx, "tpu:0", &d), TBCRT_ERR_DEVICE_UNAVAILABLE, "no device 'tpu:0'");
	assert_null(d);
	assert_string_equal(tbcrt_device_kind_name(TBCRT_DEVICE_OPENCL), "opencl");
	assert_string_equal(tbcrt_device_kind_name((tbcrt_device_kind)42), "unknown");
	assert_string_equal(tbcrt_code_name(TBCRT_ERR_BUILD_FAILED), "program build failed");
	tbcrt_context_destroy(ctx);
}

/* Without the driver (this machine has none), cuda and hip are entries that
 * say why; asking for the device is a status, not a crash. */
static void a_missing_driver_is_an_unavailable_device_with_the_reason(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(1);
	const char *names[] = {"cuda", "hip"}, *libs[] = {"libcuda.so.1", "libamdhip64.so"};
	for (int i = 0; i < 2; i++) {
		uint32_t index;
		char numbered[16];
		snprintf(numbered, sizeof numbered, "%s:0", names[i]);
		if (tbcrt_device_find(ctx, numbered, &index).code == TBCRT_OK) {
			printf("skipped: %s has a driver here (%s is a device)\n", names[i], numbered);
			continue;
		}
		RT_OK(tbcrt_device_find(ctx, names[i], &index));
		tbcrt_device_info info;
		RT_OK(tbcrt_device_info_get(ctx, index, &info));
		assert_false(info.available);
		assert_non_null(strstr(info.unavailable_reason, libs[i]));
		tbcrt__device *d = NULL;
		RT_ERR(tbcrt__device_get(ctx, names[i], &d), TBCRT_ERR_DEVICE_UNAVAILABLE, "is unavailable");
		/* "cuda:0": an artifact for a device this machine lacks */
		RT_ERR(tbcrt__device_get(ctx, numbered, &d), TBCRT_ERR_DEVICE_UNAVAILABLE, libs[i]);
		assert_null(d);
	}
	tbcrt_context_destroy(ctx);
}

/* The drivers are dlopened: libtbcrt.so needs nothing beyond libc, libm,
 * pthread and dl, so it loads where OpenCL, CUDA and HIP are missing. */
static void libtbcrt_links_no_driver(void **state) {
	(void)state;
	const char *bin = getenv("TBC_BINARY_DIR");
	char cmd[4096], line[512];
	snprintf(cmd, sizeof cmd, "readelf -d '%s/runtime/libtbcrt.so' 2>/dev/null", bin ? bin : "build");
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int needed = 0;
	while (fgets(line, sizeof line, p)) {
		const char *lib = strstr(line, "Shared library: [");
		if (!lib) continue;
		lib += strlen("Shared library: [");
		needed++;
		static const char *const allowed[] = {"libc.so", "libm.so", "libpthread.so", "libdl.so", "ld-linux"};
		bool ok = false;
		for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++) ok |= !strncmp(lib, allowed[i], strlen(allowed[i]));
		if (!ok) fail_msg("libtbcrt.so needs %s", lib);
	}
	if (pclose(p) != 0 || !needed) {
		printf("skipped: readelf -d on libtbcrt.so gave nothing (no readelf, or no shared library built)\n");
		skip();
	}
}

/* ---- Memory, on each device (state: its name) ---- */
static void buffers_round_trip_and_copy_on_the_device(void **state) {
	tbcrt_context *ctx = rt_context(2);
	tbcrt__device *d = rt_device_or_skip(ctx, *state);
	tbcrt__buffer *a, *b;
	RT_OK(tbcrt__buffer_alloc(d, 1000, &a));
	RT_OK(tbcrt__buffer_alloc(d, 1000, &b));
	unsigned char in[1000], out[1000];
	for (int i = 0; i < 1000; i++) in[i] = (unsigned char)(i * 7 + 3);
	RT_OK(tbcrt__buffer_write(a, 0, in, sizeof in));
	RT_OK(tbcrt__buffer_copy(b, 100, a, 0, 900));
	RT_OK(tbcrt__buffer_write(b, 0, in + 900, 100));
	RT_OK(tbcrt__device_synchronize(d));
	RT_OK(tbcrt__buffer_read(b, 0, out, sizeof out));
	assert_memory_equal(out, in + 900, 100);
	assert_memory_equal(out + 100, in, 900);
	RT_OK(tbcrt__buffer_read(a, 500, out, 0)); /* nothing, anywhere inside */
	tbcrt__buffer_free(a);
	tbcrt__buffer_free(b);
	tbcrt_context_destroy(ctx);
}

static void ranges_outside_a_buffer_are_refused(void **state) {
	tbcrt_context *ctx = rt_context(1);
	tbcrt__device *d = rt_device_or_skip(ctx, *state);
	tbcrt__buffer *a;
	RT_OK(tbcrt__buffer_alloc(d, 1000, &a));
	char bytes[64] = {0};
	RT_ERR(tbcrt__buffer_write(a, 990, bytes, 20), TBCRT_ERR_INVALID_ARGUMENT, "outside the buffer of 1000 bytes");
	RT_ERR(tbcrt__buffer_read(a, 1001, bytes, 0), TBCRT_ERR_INVALID_ARGUMENT, "outside");
	RT_ERR(tbcrt__buffer_read(a, UINT64_MAX, bytes, 2), TBCRT_ERR_INVALID_ARGUMENT, "outside");
	RT_ERR(tbcrt__buffer_read(a, 8, bytes, UINT64_MAX), TBCRT_ERR_INVALID_ARGUMENT, "outside");
	RT_ERR(tbcrt__buffer_copy(a, 0, a, 10, 64), TBCRT_ERR_INVALID_ARGUMENT, "overlap");
	RT_ERR(tbcrt__buffer_copy(a, 990, a, 0, 64), TBCRT_ERR_INVALID_ARGUMENT, "destination");
	tbcrt__buffer_free(a);
	tbcrt_context_destroy(ctx);
}

static void an_allocation_past_the_device_limit_is_a_status(void **state) {
	tbcrt_context *ctx = rt_context(1);
	tbcrt__device *d = rt_device_or_skip(ctx, *state);
	tbcrt__buffer *a = (tbcrt__buffer *)1;
	RT_ERR(tbcrt__buffer_alloc(d, d->info.max_alloc_bytes + 1, &a), TBCRT_ERR_NO_MEMORY, "largest allocation");
	assert_null(a);
	RT_ERR(tbcrt__buffer_alloc(d, UINT64_MAX, &a), TBCRT_ERR_NO_MEMORY, (const char *)*state);
	tbcrt__arena *arena = (tbcrt__arena *)1;
	RT_ERR(tbcrt__arena_create(d, UINT64_MAX / 2, &arena), TBCRT_ERR_NO_MEMORY, "largest allocation");
	assert_null(arena);
	RT_OK(tbcrt__buffer_alloc(d, 0, &a)); /* an empty tensor's buffer */
	assert_int_equal(a->bytes, 0);
	tbcrt__buffer_free(a);
	tbcrt_context_destroy(ctx);
}

static void an_arena_hands_out_aligned_views_while_they_fit(void **state) {
	tbcrt_context *ctx = rt_context(1);
	tbcrt__device *d = rt_device_or_skip(ctx, *state);
	tbcrt__arena *arena;
	RT_OK(tbcrt__arena_create(d, 1 << 16, &arena));
	tbcrt__buffer *v1, *v2, *big;
	RT_OK(tbcrt__arena_alloc(arena, 100, &v1));
	RT_OK(tbcrt__arena_alloc(arena, 200, &v2));
	RT_OK(tbcrt__arena_alloc(arena, 1 << 17, &big)); /* does not fit: a buffer of its own */
	assert_non_null(v1->parent);
	assert_ptr_equal(v1->parent, v2->parent);
	assert_null(big->parent);
	assert_int_equal(v1->offset, 0);
	assert_true(v2->offset >= 100 && v2->offset % d->align_bytes == 0);
	int32_t in[20], out[20];
	for (int i = 0; i < 20; i++) in[i] = i * i - 7;
	RT_OK(tbcrt__buffer_write(v2, 0, in, sizeof in));
	RT_OK(tbcrt__buffer_copy(v1, 0, v2, 0, sizeof in));
	RT_OK(tbcrt__buffer_copy(big, 4, v1, 0, sizeof in));
	RT_OK(tbcrt__device_synchronize(d));
	RT_OK(tbcrt__buffer_read(v1->parent, v2->offset, out, sizeof out)); /* the view is the arena's bytes */
	assert_memory_equal(out, in, sizeof in);
	RT_OK(tbcrt__buffer_read(big, 4, out, sizeof out));
	assert_memory_equal(out, in, sizeof in);
	RT_ERR(tbcrt__buffer_write(v1, 64, in, sizeof in), TBCRT_ERR_INVALID_ARGUMENT, "outside the buffer of 100");
	tbcrt__buffer_free(v1);
	tbcrt__buffer_free(v2);
	tbcrt__buffer_free(big);
	tbcrt__arena_reset(arena);
	RT_OK(tbcrt__arena_alloc(arena, 1 << 16, &v1)); /* all of it again */
	assert_int_equal(v1->offset, 0);
	tbcrt__buffer_free(v1);
	tbcrt__arena_destroy(arena);
	tbcrt_context_destroy(ctx);
}

/* ---- The CPU device's kernels: one call per work-group ---- */
static void saxpy_cpu(const tbcrt__cpu_group *g, void *const *args) {
	float a = *(const float *)args[0];
	const float *x = args[1];
	float *y = args[2];
	uint64_t base = g->group_id[0] * g->local_size[0];
	for (uint64_t i = base; i < base + g->local_size[0]; i++) y[i] = a * x[i] + y[i];
}

/* Each group sums its items through local memory, halving with a
 * "barrier" (the end of each loop) between steps. */
static void group_sum_cpu(const tbcrt__cpu_group *g, void *const *args) {
	const float *x = args[0];
	float *out = args[1], *tmp = args[2];
	uint64_t n = g->local_size[0], base = g->group_id[0] * n;
	for (uint64_t l = 0; l < n; l++) tmp[l] = x[base + l];
	for (uint64_t s = n / 2; s > 0; s /= 2)
		for (uint64_t l = 0; l < s; l++) tmp[l] += tmp[l + s];
	out[g->group_id[0]] = tmp[0];
}

static const tbcrt__host_kernel cpu_kernels[] = {{"saxpy", saxpy_cpu}, {"group_sum", group_sum_cpu}};

static tbcrt__program_desc cpu_program(const char *options) {
	return (tbcrt__program_desc){TBCRT__PROGRAM_HOST, "cpu_kernels", cpu_kernels, sizeof cpu_kernels, options};
}

static void cpu_kernels_run_on_the_thread_pool(void **state) {
	(void)state;
	for (uint32_t threads = 1; threads <= 4; threads += 3) {
		tbcrt_context *ctx = rt_context(threads);
		tbcrt__device *d = rt_device_or_skip(ctx, "cpu");
		tbcrt__program_desc desc = cpu_program(NULL);
		tbcrt__program *p;
		RT_OK(tbcrt__program_load(d, &desc, &p));
		tbcrt__kernel *saxpy, *sum;
		RT_OK(tbcrt__kernel_create(p, "saxpy", &saxpy));
		RT_OK(tbcrt__kernel_create(p, "group_sum", &sum));
		rt_check_saxpy_and_group_sum(d, saxpy, sum);
		tbcrt__kernel_destroy(saxpy);
		tbcrt__kernel_destroy(sum);
		tbcrt__program_release(p);
		tbcrt_context_destroy(ctx);
	}
}

static void the_cpu_program_cache_builds_each_program_once(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(1);
	tbcrt__device *d = rt_device_or_skip(ctx, "cpu");
	tbcrt__program_desc desc = cpu_program(NULL), other = cpu_program("-O3");
	tbcrt__program *p1, *p2, *p3;
	RT_OK(tbcrt__program_load(d, &desc, &p1));
	RT_OK(tbcrt__program_load(d, &desc, &p2));
	assert_ptr_equal(p1, p2);
	assert_int_equal(tbcrt__device_builds(d), 1);
	RT_OK(tbcrt__program_load(d, &other, &p3));
	assert_ptr_not_equal(p1, p3);
	assert_int_equal(tbcrt__device_builds(d), 2);
	tbcrt__program_release(p1);
	tbcrt__program_release(p2);
	tbcrt__program_release(p3);
	RT_OK(tbcrt__program_load(d, &desc, &p1)); /* still cached after every user let go */
	assert_int_equal(tbcrt__device_builds(d), 2);
	tbcrt__program_release(p1);
	tbcrt_context_destroy(ctx);
}

static void cpu_programs_and_launches_that_cannot_run_are_statuses(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(1);
	tbcrt__device *d = rt_device_or_skip(ctx, "cpu");
	static const char src[] = "__kernel void k(__global float *x) { x[0] = 1; }";
	tbcrt__program_desc cl = {TBCRT__PROGRAM_SOURCE, "k.cl", src, sizeof src - 1, NULL};
	tbcrt__program *p = (tbcrt__program *)1;
	RT_ERR(tbcrt__program_load(d, &cl, &p), TBCRT_ERR_UNSUPPORTED_TARGET, "program 'k.cl' is OpenCL C source");
	assert_null(p);
	tbcrt__program_desc torn = cpu_program(NULL);
	torn.size -= 1;
	RT_ERR(tbcrt__program_load(d, &torn, &p), TBCRT_ERR_INVALID_ARTIFACT, "not a table of host kernels");
	tbcrt__program_desc desc = cpu_program(NULL);
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *k = (tbcrt__kernel *)1;
	RT_ERR(tbcrt__kernel_create(p, "nosuch", &k), TBCRT_ERR_INVALID_ARGUMENT, "has no kernel 'nosuch'");
	assert_null(k);
	RT_OK(tbcrt__kernel_create(p, "saxpy", &k));
	tbcrt__buffer *b;
	RT_OK(tbcrt__buffer_alloc(d, 4096, &b));
	float a = 1;
	tbcrt__arg args[] = {{TBCRT__ARG_SCALAR, NULL, &a, sizeof a}, {TBCRT__ARG_BUFFER, b, NULL, 0},
			     {TBCRT__ARG_BUFFER, b, NULL, 0}};
	tbcrt__launch_desc l = {.dims = 1, .global = {1000}, .local = {64}, .n_args = 3, .args = args};
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_INVALID_ARGUMENT, "not a multiple of the local size 64");
	l.local[0] = 0, l.dims = 4;
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_INVALID_ARGUMENT, "4 dims");
	l.dims = 1, l.global[0] = 8192, l.local[0] = 8192;
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_LIMIT, "exceeds the kernel's limit");
	l.local[0] = 0;
	args[1].buffer = NULL;
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_INVALID_ARGUMENT, "argument 1");
	args[1] = (tbcrt__arg){TBCRT__ARG_LOCAL, NULL, NULL, (size_t)d->info.local_memory_bytes + 1};
	RT_ERR(tbcrt__launch(k, &l), TBCRT_ERR_INVALID_ARGUMENT, "local memory");
	l.global[0] = 0; /* no work: nothing runs, nothing is checked past the shape */
	args[1] = (tbcrt__arg){TBCRT__ARG_BUFFER, b, NULL, 0};
	RT_OK(tbcrt__launch(k, &l));
	tbcrt__buffer_free(b);
	tbcrt__kernel_destroy(k);
	tbcrt__program_release(p);
	tbcrt_context_destroy(ctx);
}

int main(void) {
	tbc_pocl_setup();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(devices_list_the_cpu_first_then_opencl_cuda_and_hip),
		cmocka_unit_test(an_unknown_device_or_index_is_an_error_and_clears_the_output),
		cmocka_unit_test(a_missing_driver_is_an_unavailable_device_with_the_reason),
		cmocka_unit_test(libtbcrt_links_no_driver),
		cmocka_unit_test_prestate(buffers_round_trip_and_copy_on_the_device, "cpu"),
		cmocka_unit_test_prestate(buffers_round_trip_and_copy_on_the_device, "opencl:0"),
		cmocka_unit_test_prestate(ranges_outside_a_buffer_are_refused, "cpu"),
		cmocka_unit_test_prestate(ranges_outside_a_buffer_are_refused, "opencl:0"),
		cmocka_unit_test_prestate(an_allocation_past_the_device_limit_is_a_status, "cpu"),
		cmocka_unit_test_prestate(an_allocation_past_the_device_limit_is_a_status, "opencl:0"),
		cmocka_unit_test_prestate(an_arena_hands_out_aligned_views_while_they_fit, "cpu"),
		cmocka_unit_test_prestate(an_arena_hands_out_aligned_views_while_they_fit, "opencl:0"),
		cmocka_unit_test(cpu_kernels_run_on_the_thread_pool),
		cmocka_unit_test(the_cpu_program_cache_builds_each_program_once),
		cmocka_unit_test(cpu_programs_and_launches_that_cannot_run_are_statuses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
