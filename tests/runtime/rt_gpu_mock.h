/* The tests of libtbcrt's cuda and hip devices against the fake drivers of
 * tests/gpu_mock/ (test_runtime_cuda.c and test_runtime_hip.c each define
 * RT_GPU_CONFIG, what differs between the two as an rt_gpu initializer,
 * then include this file once).
 *
 * With the mock on LD_LIBRARY_PATH (ctest's unit.test_runtime_cuda): the
 * registry's entries, buffers and views, programs and their build errors,
 * launch geometry and argument bytes, error statuses, a model's device
 * table run through device_session.  Without it (unit.*_no_driver): the
 * device is unavailable and says why.  Each part that cannot run in this
 * setting is skipped with a line saying why. */
#ifndef RT_GPU_MOCK_H
#define RT_GPU_MOCK_H

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device_table.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"
#include "tests/unit/support/files.h"

typedef struct rt_gpu {
	const char *kind;        /* "cuda": the registry's name for a missing driver */
	const char *library;     /* what libtbcrt dlopens */
	const char *mock;        /* the mock's prefix for its controls: "mock_cuda_" */
	const char *device_name; /* the mock's device 0 */
	const char *features;    /* what info.features holds for it */
	const char *version;     /* in info.version */
	const char *extension;   /* of a program's name: "ptx" */
	const char *target;      /* build options naming the mock's GPU */
	int32_t table_kind;      /* TBC_ABI_DEVICE_* */
	const char *alloc_call, *launch_call, *sync_call, *init_call;
	const char *oom_name, *not_found_name, *resources_name, *launch_failed_name;
	const char *load_error; /* in the status of a module the driver refuses */
	uint32_t max_block_z;
} rt_gpu;

static const rt_gpu RT_GPU = RT_GPU_CONFIG;

/* ---- The mock's controls ---- */
static struct {
	void *dl;
	const char *(*log)(void);
	void (*reset)(void);
	void (*inject)(const char *call, int code);
	void (*set)(const char *what, long value);
	int (*live)(const char *what);
	int (*context_depth)(void); /* CUDA only */
} mock;

static void *mock_symbol(const char *name) {
	char full[64];
	snprintf(full, sizeof full, "%s%s", RT_GPU.mock, name);
	return mock.dl ? dlsym(mock.dl, full) : NULL;
}

/* Opens the driver library as libtbcrt will (the same one, since the test
 * holds it open), and finds the mock's controls; false when it is absent
 * or is a real driver. */
static bool mock_load(void) {
	if (mock.log) return true;
	if (!mock.dl) mock.dl = dlopen(RT_GPU.library, RTLD_NOW | RTLD_LOCAL);
	*(void **)&mock.log = mock_symbol("log");
	*(void **)&mock.reset = mock_symbol("reset");
	*(void **)&mock.inject = mock_symbol("fail");
	*(void **)&mock.set = mock_symbol("set");
	*(void **)&mock.live = mock_symbol("live");
	*(void **)&mock.context_depth = mock_symbol("context_depth");
	return mock.log && mock.reset && mock.inject && mock.set && mock.live;
}

/* A context on the mock (reset, then configured by the caller before the
 * registry is built), or the test is skipped saying why. */
static tbcrt_context *mock_context(void) {
	if (!mock_load()) {
		printf("skipped: no mock %s on LD_LIBRARY_PATH (%s): run by ctest as unit.test_runtime_%s, which sets it; "
		       "this run checks a machine without the driver\n",
		       RT_GPU.library, mock.dl ? "a real driver is there instead" : "none found", RT_GPU.kind);
		skip();
	}
	mock.reset();
	return rt_context(1);
}

static tbcrt__device *mock_device(tbcrt_context *ctx, const char *name) {
	tbcrt__device *d = NULL;
	RT_OK(tbcrt__device_get(ctx, name, &d));
	return d;
}

/* The log contains text (after mark, an earlier length of it). */
#define LOGGED(mark, text)                                                                              \
	do {                                                                                            \
		if (!strstr(mock.log() + (mark), (text)))                                               \
			fail_msg("expected \"%s\" in the mock's log after byte %zu:\n%s", (text), (size_t)(mark), \
				 mock.log() + (mark));                                                  \
	} while (0)

/* The calling thread is left as it was (no context pushed). */
static void thread_restored(void) {
	if (mock.context_depth) assert_int_equal(mock.context_depth(), 0);
}

static const char kernels_text[] =
	"// mock module: PTX-style entries the mock reads\n"
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry saxpy(.param .u64 x, .param .u64 y, .param .f32 a, .param .s64 n)\n{\n\tret;\n}\n"
	".visible .entry group_sum(.param .u64 x, .param .u64 out)\n.maxntid 128, 1, 1\n{\n"
	"\t.shared .align 4 .b8 tmp[512];\n\tret;\n}\n"
	".visible .entry big_shared(.param .u64 x)\n{\n\t.shared .align 4 .b8 tile[200000];\n\tret;\n}\n";

static tbcrt__program_desc binary(const char *name, const char *text, const char *options) {
	return (tbcrt__program_desc){TBCRT__PROGRAM_BINARY, name, text, strlen(text), options};
}

static const char *program_name(const char *base) {
	static char name[64];
	snprintf(name, sizeof name, "%s.%s", base, RT_GPU.extension);
	return name;
}

/* ---- Enumeration ---- */
static void each_device_is_an_entry_with_its_name_capability_and_memory(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	mock.set("devices", 2);
	uint32_t n = 0, index = 0;
	RT_OK(tbcrt_device_count(ctx, &n));
	char name[32];
	for (int i = 0; i < 2; i++) {
		snprintf(name, sizeof name, "%s:%d", RT_GPU.kind, i);
		RT_OK(tbcrt_device_find(ctx, name, &index));
		tbcrt_device_info info;
		RT_OK(tbcrt_device_info_get(ctx, index, &info));
		printf("%s: %s, %s, %s, %u compute units\n", info.name, info.device_name, info.features, info.version,
		       info.compute_units);
		assert_true(info.available);
		assert_int_equal(info.kind, strcmp(RT_GPU.kind, "cuda") ? TBCRT_DEVICE_HIP : TBCRT_DEVICE_CUDA);
		assert_int_equal(info.device_name[strlen(info.device_name) - 1], '0' + i);
		assert_string_equal(info.features, RT_GPU.features);
		assert_non_null(strstr(info.version, RT_GPU.version));
		assert_true(info.compute_units > 0);
		assert_int_equal(info.global_memory_bytes, 1ull << 30);
		assert_int_equal(info.max_work_group_size, 1024);
		assert_true(info.local_memory_bytes >= 48 * 1024);
	}
	RT_ERR(tbcrt_device_find(ctx, RT_GPU.kind, &index), TBCRT_ERR_INVALID_ARGUMENT, "no device");
	snprintf(name, sizeof name, "%s:1", RT_GPU.kind);
	(void)mock_device(ctx, name); /* opened: a stream and, for CUDA, the primary context */
	assert_int_equal(mock.live("streams"), 1);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("streams"), 0);
	assert_int_equal(mock.live("contexts"), 0);
}

static void a_driver_without_devices_or_failing_to_start_is_unavailable_saying_why(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	mock.set("devices", 0);
	uint32_t index;
	tbcrt_device_info info;
	RT_OK(tbcrt_device_find(ctx, RT_GPU.kind, &index));
	RT_OK(tbcrt_device_info_get(ctx, index, &info));
	assert_false(info.available);
	assert_non_null(strstr(info.unavailable_reason, "finds no device"));
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = NULL;
	RT_ERR(tbcrt__device_get(ctx, name, &d), TBCRT_ERR_DEVICE_UNAVAILABLE, "finds no device");
	tbcrt_context_destroy(ctx);

	ctx = mock_context();
	mock.inject(RT_GPU.init_call, 3);
	RT_OK(tbcrt_device_find(ctx, RT_GPU.kind, &index));
	RT_OK(tbcrt_device_info_get(ctx, index, &info));
	assert_false(info.available);
	printf("%s\n", info.unavailable_reason);
	assert_non_null(strstr(info.unavailable_reason, RT_GPU.init_call));
	assert_non_null(strstr(info.unavailable_reason, "failed"));
	tbcrt_context_destroy(ctx);
}

/* ---- Buffers ---- */
static void buffers_and_views_round_trip_through_device_memory(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = mock_device(ctx, name);
	enum { N = 4096 };
	static unsigned char in[N], out[N], seven[256];
	for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7 + 3);
	memset(seven, 7, sizeof seven);
	tbcrt__buffer *a, *v, *b;
	RT_OK(tbcrt__buffer_alloc(d, N, &a));
	thread_restored();
	RT_OK(tbcrt__buffer_write(a, 0, in, N));
	RT_OK(tbcrt__buffer_read(a, 0, out, N));
	assert_memory_equal(in, out, N);
	LOGGED(0, "alloc a1 4096\nhtod a1+0 4096\nsync\ndtoh a1+0 4096\nsync\n");
	RT_OK(tbcrt__buffer_view(a, 64, 256, &v));
	RT_OK(tbcrt__buffer_write(v, 0, seven, sizeof seven));
	LOGGED(0, "htod a1+64 256");
	RT_OK(tbcrt__buffer_read(a, 0, out, N));
	for (int i = 0; i < N; i++) assert_int_equal(out[i], i >= 64 && i < 320 ? 7 : in[i]);
	RT_OK(tbcrt__buffer_alloc(d, 512, &b));
	RT_OK(tbcrt__buffer_copy(b, 100, v, 16, 200));
	LOGGED(0, "dtod a2+100 <- a1+80 200");
	RT_OK(tbcrt__buffer_read(b, 100, out, 200));
	for (int i = 0; i < 200; i++) assert_int_equal(out[i], 7);
	RT_OK(tbcrt__buffer_read(v, 200, out, 56)); /* a read at an offset inside a view */
	LOGGED(0, "dtoh a1+264 56");
	thread_restored();
	tbcrt__buffer_free(v);
	assert_int_equal(mock.live("allocations"), 2); /* a view frees nothing */
	tbcrt__buffer_free(a);
	tbcrt__buffer_free(b);
	LOGGED(0, "free a1\nfree a2");
	assert_int_equal(mock.live("allocations"), 0);
	tbcrt_context_destroy(ctx);
	LOGGED(0, "stream destroy");
}

/* The runtime is called from any thread: each call sets the thread up
 * (CUDA: the context pushed and popped; HIP: the device set), which the
 * mocks insist on. */
typedef struct thread_job {
	tbcrt__device *d;
	tbcrt__buffer *b;
	tbcrt_status s;
	int depth;
} thread_job;

static void *other_thread(void *arg) {
	thread_job *j = arg;
	static const char hello[] = "from another thread";
	char back[sizeof hello];
	j->s = tbcrt__buffer_write(j->b, 8, hello, sizeof hello);
	if (j->s.code == TBCRT_OK) j->s = tbcrt__buffer_read(j->b, 8, back, sizeof back);
	if (j->s.code == TBCRT_OK && memcmp(back, hello, sizeof hello))
		j->s = tbcrt__err(TBCRT_ERR_DEVICE, "read back something else");
	tbcrt__buffer *own = NULL;
	if (j->s.code == TBCRT_OK) j->s = tbcrt__buffer_alloc(j->d, 64, &own);
	tbcrt__buffer_free(own);
	j->depth = mock.context_depth ? mock.context_depth() : 0;
	return NULL;
}

static void a_device_opened_on_one_thread_is_used_from_another(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	thread_job j = {.d = mock_device(ctx, name)};
	RT_OK(tbcrt__buffer_alloc(j.d, 64, &j.b));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, other_thread, &j), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	RT_OK(j.s);
	assert_int_equal(j.depth, 0);
	tbcrt__buffer_free(j.b);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("allocations"), 0);
}

/* ---- Programs ---- */
static void programs_load_and_a_failed_build_carries_the_drivers_log(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = mock_device(ctx, name);
	tbcrt__program_desc desc = binary(program_name("kernels"), kernels_text, RT_GPU.target);
	tbcrt__program *p = NULL;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *saxpy, *sum;
	RT_OK(tbcrt__kernel_create(p, "saxpy", &saxpy));
	RT_OK(tbcrt__kernel_create(p, "group_sum", &sum));
	assert_int_equal(saxpy->max_group_size, 1024);
	assert_int_equal(sum->max_group_size, 128); /* the kernel's .maxntid */
	tbcrt__kernel *missing = NULL;
	char want[128];
	snprintf(want, sizeof want, "kernel 'missing' of program '%s'", program_name("kernels"));
	RT_ERR(tbcrt__kernel_create(p, "missing", &missing), TBCRT_ERR_DEVICE, want);
	RT_ERR(tbcrt__kernel_create(p, "missing", &missing), TBCRT_ERR_DEVICE, RT_GPU.not_found_name);
	assert_null(missing);
	thread_restored();

	static const char broken[] = ".version 8.0\n.target sm_80\nMOCK_JIT_ERROR\n";
	tbcrt__program_desc bad = binary(program_name("broken"), broken, RT_GPU.target);
	tbcrt__program *q = (tbcrt__program *)1;
	tbcrt_status s = tbcrt__program_load(d, &bad, &q);
	printf("%s\n", s.message);
	assert_int_equal(s.code, TBCRT_ERR_BUILD_FAILED);
	assert_null(q);
	assert_non_null(strstr(s.message, program_name("broken")));
	assert_non_null(strstr(s.message, RT_GPU.load_error));
	thread_restored();

	if (!strcmp(RT_GPU.kind, "cuda")) {
		/* The PTX's target against the device's compute capability (9.0). */
		tbcrt__program_desc newer = binary("newer.ptx", kernels_text, "sm_100");
		RT_ERR(tbcrt__program_load(d, &newer, &q), TBCRT_ERR_UNSUPPORTED_TARGET,
		       "program 'newer.ptx' is PTX for sm_100, which Mock H100 0 (compute capability 9.0) cannot run");
		tbcrt__program_desc other = binary("other.ptx", kernels_text, "sm_80a");
		RT_ERR(tbcrt__program_load(d, &other, &q), TBCRT_ERR_UNSUPPORTED_TARGET, "PTX for sm_80a");
		tbcrt__program *exact = NULL;
		tbcrt__program_desc same = binary("same.ptx", kernels_text, "sm_90a");
		RT_OK(tbcrt__program_load(d, &same, &exact));
		tbcrt__program_release(exact);
		static const char too_new[] = ".version 9.9\nMOCK_PTX_TOO_NEW\n";
		tbcrt__program_desc driver = binary("too_new.ptx", too_new, "sm_80");
		RT_ERR(tbcrt__program_load(d, &driver, &q), TBCRT_ERR_UNSUPPORTED_TARGET,
		       "program 'too_new.ptx' is PTX of a newer version than cuda:0 (CUDA driver 12.4) compiles; update the driver");
	} else {
		static const char other_gpu[] = "MOCK_OTHER_GPU\n";
		tbcrt__program_desc other = binary("other.hsaco", other_gpu, "gfx90a");
		RT_ERR(tbcrt__program_load(d, &other, &q), TBCRT_ERR_UNSUPPORTED_TARGET,
		       "program 'other.hsaco' (for gfx90a) does not run on this GPU: hipModuleLoadData failed: hipErrorNoBinaryForGpu");
	}
	tbcrt__program_desc source = {TBCRT__PROGRAM_SOURCE, "k.cl", kernels_text, strlen(kernels_text), NULL};
	RT_ERR(tbcrt__program_load(d, &source, &q), TBCRT_ERR_UNSUPPORTED_TARGET, "OpenCL C source");
	tbcrt__kernel_destroy(saxpy);
	tbcrt__kernel_destroy(sum);
	tbcrt__program_release(p);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("modules"), 0);
}

/* ---- Launches ---- */
static void launches_map_work_items_to_blocks_and_pass_the_arguments_in_order(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = mock_device(ctx, name);
	tbcrt__program_desc desc = binary(program_name("kernels"), kernels_text, RT_GPU.target);
	tbcrt__program *p = NULL;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *saxpy, *sum;
	RT_OK(tbcrt__kernel_create(p, "saxpy", &saxpy));
	RT_OK(tbcrt__kernel_create(p, "group_sum", &sum));
	tbcrt__buffer *x, *y, *z;
	tbcrt__arena *arena;
	RT_OK(tbcrt__buffer_alloc(d, 4096, &x));        /* a1 */
	RT_OK(tbcrt__arena_create(d, 8192, &arena));   /* a2 */
	RT_OK(tbcrt__arena_alloc(arena, 1000, &y));    /* a2+0 */
	RT_OK(tbcrt__arena_alloc(arena, 100, &z));     /* a2+1024: views at the device's alignment */
	float a = 2;
	int64_t n = 1000;
	tbcrt__arg args[] = {{TBCRT__ARG_BUFFER, x, NULL, 0}, {TBCRT__ARG_BUFFER, z, NULL, 0},
			     {TBCRT__ARG_SCALAR, NULL, &a, sizeof a}, {TBCRT__ARG_SCALAR, NULL, &n, sizeof n},
			     {TBCRT__ARG_LOCAL, NULL, NULL, 100}};
	/* A grid-stride launch: the device chooses blocks of 256, the grid covers the items. */
	tbcrt__launch_desc l = {.dims = 1, .global = {1000}, .n_args = 4, .args = args};
	RT_OK(tbcrt__launch(saxpy, &l));
	LOGGED(0, "launch saxpy grid=4,1,1 block=256,1,1 shared=0 args=a1+0,a2+1024,4:1073741824,8:1000");
	/* Groups of 8, as asked. */
	l.local[0] = 8;
	RT_OK(tbcrt__launch(saxpy, &l));
	LOGGED(0, "launch saxpy grid=125,1,1 block=8,1,1 shared=0");
	/* Two dims in 8 x 8 groups with local memory: dynamic shared bytes, rounded to 16. */
	l = (tbcrt__launch_desc){.dims = 2, .global = {40, 24}, .local = {8, 8}, .n_args = 5, .args = args};
	RT_OK(tbcrt__launch(saxpy, &l));
	LOGGED(0, "launch saxpy grid=5,3,1 block=8,8,1 shared=112 args=a1+0,a2+1024,4:1073741824,8:1000");
	/* The kernel allows 128 threads: the device's choice respects it. */
	tbcrt__arg sum_args[] = {{TBCRT__ARG_BUFFER, y, NULL, 0}, {TBCRT__ARG_BUFFER, x, NULL, 0}};
	tbcrt__launch_desc ls = {.dims = 1, .global = {1000}, .n_args = 2, .args = sum_args};
	RT_OK(tbcrt__launch(sum, &ls));
	LOGGED(0, "launch group_sum grid=8,1,1 block=128,1,1 shared=0 args=a2+0,a1+0");
	/* More items than the grid may have blocks: the kernels stride, the grid is capped. */
	ls.global[0] = 1ull << 42;
	RT_OK(tbcrt__launch(sum, &ls));
	LOGGED(0, "launch group_sum grid=2147483647,1,1 block=128,1,1");
	/* Past the default 48 KiB of dynamic shared memory. */
	args[4].bytes = 60000;
	l = (tbcrt__launch_desc){.dims = 1, .global = {64}, .local = {64}, .n_args = 5, .args = args};
	RT_OK(tbcrt__launch(saxpy, &l));
	LOGGED(0, "launch saxpy grid=1,1,1 block=64,1,1 shared=60000");
	RT_OK(tbcrt__device_synchronize(d));
	thread_restored();
	tbcrt__buffer_free(y);
	tbcrt__buffer_free(z);
	tbcrt__buffer_free(x);
	tbcrt__arena_destroy(arena);
	tbcrt__kernel_destroy(saxpy);
	tbcrt__kernel_destroy(sum);
	tbcrt__program_release(p);
	tbcrt_context_destroy(ctx);
}

static void errors_are_statuses_naming_the_call_the_kernel_and_the_limit(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	mock.set("memory", 1 << 20);
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = mock_device(ctx, name);
	tbcrt__buffer *a = NULL, *b = NULL;
	/* Out of memory: the driver's refusal, injected or real. */
	mock.inject(RT_GPU.alloc_call, 2);
	RT_ERR(tbcrt__buffer_alloc(d, 4096, &a), TBCRT_ERR_NO_MEMORY, RT_GPU.oom_name);
	RT_OK(tbcrt__buffer_alloc(d, 600000, &a));
	RT_ERR(tbcrt__buffer_alloc(d, 600000, &b), TBCRT_ERR_NO_MEMORY, "a buffer of 600000 bytes");
	assert_null(b);
	RT_ERR(tbcrt__buffer_alloc(d, 2 << 20, &b), TBCRT_ERR_NO_MEMORY, "largest allocation");

	tbcrt__program_desc desc = binary(program_name("kernels"), kernels_text, RT_GPU.target);
	tbcrt__program *p = NULL;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *saxpy, *sum, *big;
	RT_OK(tbcrt__kernel_create(p, "saxpy", &saxpy));
	RT_OK(tbcrt__kernel_create(p, "group_sum", &sum));
	RT_OK(tbcrt__kernel_create(p, "big_shared", &big));
	float f = 1;
	int64_t n = 10;
	tbcrt__arg args[] = {{TBCRT__ARG_BUFFER, a, NULL, 0}, {TBCRT__ARG_BUFFER, a, NULL, 0},
			     {TBCRT__ARG_SCALAR, NULL, &f, sizeof f}, {TBCRT__ARG_SCALAR, NULL, &n, sizeof n},
			     {TBCRT__ARG_LOCAL, NULL, NULL, 40000}};
	tbcrt__launch_desc l = {.dims = 1, .global = {10}, .n_args = 4, .args = args};
	/* A launch the driver refuses names the kernel and the driver's error. */
	mock.inject(RT_GPU.launch_call, 701);
	char want[128];
	snprintf(want, sizeof want, "kernel 'saxpy' of program '%s'", program_name("kernels"));
	RT_ERR(tbcrt__launch(saxpy, &l), TBCRT_ERR_DEVICE, want);
	mock.inject(RT_GPU.launch_call, 701);
	RT_ERR(tbcrt__launch(saxpy, &l), TBCRT_ERR_DEVICE, RT_GPU.resources_name);
	/* A failure the device reports later names the last kernel launched. */
	RT_OK(tbcrt__launch(saxpy, &l));
	mock.inject(RT_GPU.sync_call, 719);
	tbcrt_status s = tbcrt__device_synchronize(d);
	printf("%s\n", s.message);
	assert_int_equal(s.code, TBCRT_ERR_DEVICE);
	assert_non_null(strstr(s.message, RT_GPU.launch_failed_name));
	assert_non_null(strstr(s.message, "after kernel 'saxpy'"));
	RT_OK(tbcrt__device_synchronize(d));
	/* A block past the kernel's limit, or past the device's in a dim. */
	tbcrt__arg sum_args[] = {{TBCRT__ARG_BUFFER, a, NULL, 0}, {TBCRT__ARG_BUFFER, a, NULL, 0}};
	tbcrt__launch_desc ls = {.dims = 1, .global = {256}, .local = {256}, .n_args = 2, .args = sum_args};
	RT_ERR(tbcrt__launch(sum, &ls), TBCRT_ERR_LIMIT, "kernel 'group_sum': a work-group of 256 items exceeds the kernel's limit of 128");
	if (RT_GPU.max_block_z < 1024) {
		ls = (tbcrt__launch_desc){.dims = 3, .global = {1, 1, 128}, .local = {1, 1, 128}, .n_args = 2, .args = sum_args};
		RT_ERR(tbcrt__launch(saxpy, &ls), TBCRT_ERR_LIMIT, "exceeds the device's block limit of 64 there");
	}
	/* Shared memory past the device's limit per block. */
	tbcrt__arg big_args[] = {{TBCRT__ARG_BUFFER, a, NULL, 0}, {TBCRT__ARG_LOCAL, NULL, NULL, 40000}};
	tbcrt__launch_desc lb = {.dims = 1, .global = {64}, .local = {64}, .n_args = 2, .args = big_args};
	RT_ERR(tbcrt__launch(big, &lb), TBCRT_ERR_LIMIT, "kernel 'big_shared' needs 240000 bytes of shared memory (200000 static, 40000 dynamic)");
	thread_restored();
	tbcrt__kernel_destroy(saxpy);
	tbcrt__kernel_destroy(sum);
	tbcrt__kernel_destroy(big);
	tbcrt__program_release(p);
	tbcrt__buffer_free(a);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("allocations"), 0);
}

/* ---- Timing ---- */
static void events_time_the_work_between_them_on_the_devices_clock(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = mock_device(ctx, name);
	tbcrt__program_desc desc = binary(program_name("kernels"), kernels_text, RT_GPU.target);
	tbcrt__program *p = NULL;
	RT_OK(tbcrt__program_load(d, &desc, &p));
	tbcrt__kernel *saxpy;
	RT_OK(tbcrt__kernel_create(p, "saxpy", &saxpy));
	tbcrt__buffer *x;
	RT_OK(tbcrt__buffer_alloc(d, 64, &x));
	float a = 1;
	int64_t n = 16;
	tbcrt__arg args[] = {{TBCRT__ARG_BUFFER, x, NULL, 0}, {TBCRT__ARG_BUFFER, x, NULL, 0},
			     {TBCRT__ARG_SCALAR, NULL, &a, sizeof a}, {TBCRT__ARG_SCALAR, NULL, &n, sizeof n}};
	tbcrt__launch_desc l = {.dims = 1, .global = {16}, .n_args = 4, .args = args};
	tbcrt__event *start, *end;
	RT_OK(tbcrt__event_record(d, &start));
	for (int i = 0; i < 4; i++) RT_OK(tbcrt__launch(saxpy, &l));
	RT_OK(tbcrt__event_record(d, &end));
	double ms = -1;
	RT_OK(tbcrt__event_elapsed(start, end, &ms));
	assert_true(ms == 1.0); /* the mock's device: 0.25 ms a launch */
	/* An error the device reports while waiting names the last kernel. */
	mock.inject(strcmp(RT_GPU.kind, "cuda") ? "hipEventSynchronize" : "cuEventSynchronize", 719);
	RT_ERR(tbcrt__event_elapsed(start, end, &ms), TBCRT_ERR_DEVICE, "after kernel 'saxpy'");
	thread_restored();
	tbcrt__event_free(start);
	tbcrt__event_free(end);
	assert_int_equal(mock.live("events"), 0);
	/* The CPU has no events. */
	tbcrt__device *cpu = mock_device(ctx, "cpu");
	RT_ERR(tbcrt__event_record(cpu, &start), TBCRT_ERR_UNSUPPORTED_TARGET, "does not time its work");
	assert_null(start);
	tbcrt__buffer_free(x);
	tbcrt__kernel_destroy(saxpy);
	tbcrt__program_release(p);
	tbcrt_context_destroy(ctx);
}

/* ---- A model's device table through device_session ---- */
static const char *dense_path(void) {
	static char path[512];
	const char *src = getenv("TBC_SOURCE_DIR");
	snprintf(path, sizeof path, "%s/tests/runtime/dense_relu.onnx", src ? src : ".");
	return path;
}

static size_t put_string(int64_t *w, size_t at, const char *s, size_t n) {
	w[at++] = (int64_t)n;
	memset(&w[at], 0, (n + 7) / 8 * 8);
	memcpy(&w[at], s, n);
	return at + (n + 7) / 8;
}

/* dense_relu compiled for OpenCL, its table turned into one of RT_GPU's
 * kind: the same buffers and launches, the source replaced by a module
 * the mock reads, with one entry per kernel taking its arguments. */
static void a_models_table_runs_its_copies_and_launches_in_order(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	tbc_module *m = load_onnx(dense_path());
	const char *so = tmp_path("dense_gpu_mock.so");
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_OPENCL;
	compile_to(m, &o, so);
	tbc_module_destroy(m);
	void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(dl);
	void *sym = dlsym(dl, "tbc_model_descriptor");
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn);
	const tbc_abi_model *good = fn();
	tbcrt_model *ocl = NULL;
	RT_OK(tbcrt_model_from_descriptor(ctx, good, NULL, &ocl));
	const tbcrt__dtable *t = ocl->dtables[0];
	char *text = calloc(1, 65536);
	assert_non_null(text);
	size_t at = (size_t)snprintf(text, 65536, "// the mock's module for dense_relu\n");
	for (uint32_t k = 0; k < t->n_kernels; k++) {
		const tbcrt__dkernel *dk = &t->kernels[k];
		at += (size_t)snprintf(text + at, 65536 - at, ".visible .entry %s(", dk->name);
		uint32_t n = dk->n_buffers + dk->n_sizes + (dk->n_messages ? 1 : 0);
		for (uint32_t i = 0; i < n; i++)
			at += (size_t)snprintf(text + at, 65536 - at, "%s.param .%s p%u", i ? ", " : "",
					       i < dk->n_buffers || i >= dk->n_buffers + dk->n_sizes ? "u64" : "s64", i);
		at += (size_t)snprintf(text + at, 65536 - at, ")\n{\n\tret;\n}\n");
	}
	/* The table again, its kind, source and options replaced. */
	const int64_t *w = good->device_code;
	size_t words = (size_t)good->device_code_size / 8, opt_at = 4 + ((size_t)w[3] + 7) / 8;
	size_t rest = opt_at + 1 + ((size_t)w[opt_at] + 7) / 8;
	int64_t *nw = calloc(words + at / 8 + 64, 8);
	assert_non_null(nw);
	nw[0] = w[0], nw[1] = w[1], nw[2] = RT_GPU.table_kind;
	size_t k = put_string(nw, 3, text, at);
	k = put_string(nw, k, RT_GPU.target, strlen(RT_GPU.target));
	memcpy(&nw[k], &w[rest], (words - rest) * 8);
	tbc_abi_model desc = *good;
	desc.device_code = nw;
	desc.device_code_size = (k + words - rest) * 8;
	tbcrt_model *gpu = NULL;
	RT_OK(tbcrt_model_from_descriptor(ctx, &desc, NULL, &gpu));

	/* The OpenCL table asked to run here: a clear refusal. */
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	uint32_t index;
	RT_OK(tbcrt_device_find(ctx, name, &index));
	tbcrt_session_options so_opts;
	tbcrt_session_options_init(&so_opts);
	so_opts.device = index;
	tbcrt_session *s = NULL;
	char want[160];
	snprintf(want, sizeof want, "holds no code for %s (%s", name, RT_GPU.kind);
	RT_ERR(tbcrt_session_create_with(ocl, &so_opts, &s), TBCRT_ERR_UNSUPPORTED_TARGET, want);

	/* The converted one: chosen automatically (it holds no CPU code). */
	size_t mark = strlen(mock.log());
	RT_OK(tbcrt_session_create(gpu, &s));
	uint32_t got = 99;
	RT_OK(tbcrt_session_device(s, &got));
	assert_int_equal(got, index);
	char weights[64];
	snprintf(weights, sizeof weights, " %llu\nsync\n", (unsigned long long)good->weights_size);
	LOGGED(mark, "load ");
	LOGGED(mark, weights); /* the weights uploaded once */
	int64_t dims[2] = {5, 64};
	static float x[5 * 64];
	for (int i = 0; i < 5 * 64; i++) x[i] = (float)i;
	RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, x, sizeof x));
	mark = strlen(mock.log());
	RT_OK(tbcrt_session_run(s));
	thread_restored();
	const char *log = mock.log() + mark;
	printf("%s", log);
	/* The input written first, the kernels in the table's order, the output read last. */
	const char *input = strstr(log, "htod"), *prev = input;
	assert_non_null(input);
	for (uint32_t l = 0; l < t->n_launches; l++) {
		if (t->launches[l].ctl != TBC_ABI_CTL_KERNEL) continue;
		char launch[160];
		snprintf(launch, sizeof launch, "launch %s ", t->kernels[t->launches[l].kernel].name);
		const char *here = strstr(prev, launch);
		if (!here) fail_msg("expected \"%s\" after the launches before it in:\n%s", launch, log);
		prev = here + 1;
	}
	const char *output = strstr(prev, "dtoh");
	assert_non_null(output);
	assert_non_null(strstr(output, "sync"));
	tbcrt_tensor y;
	RT_OK(tbcrt_session_output(s, 0, &y));
	assert_int_equal(y.dims[0], 5);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(gpu);
	tbcrt_model_destroy(ocl);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("allocations"), 0);
	assert_int_equal(mock.live("modules"), 0);
	free(text);
	free(nw);
	dlclose(dl);
}

/* ---- Cubins: machine code the device runs, else the PTX ---- */
/* Table w (a compiled table of version 3, good's) made a PTX table for
 * target holding text and, when bin is not NULL, the cubin bin. */
static int64_t *ptx_table(const tbc_abi_model *good, const char *text, const char *target, const char *bin,
			  size_t *out_bytes) {
	const int64_t *w = good->device_code;
	size_t words = (size_t)good->device_code_size / 8, opt_at = 4 + ((size_t)w[3] + 7) / 8;
	size_t rest = opt_at + 1 + ((size_t)w[opt_at] + 7) / 8;
	assert_int_equal(w[1], 3);
	assert_int_equal(w[words - 1], 0); /* the table's binary: none */
	size_t tl = strlen(text), bl = bin ? strlen(bin) : 0;
	int64_t *nw = calloc(words + tl / 8 + bl / 8 + 64, 8);
	assert_non_null(nw);
	nw[0] = w[0], nw[1] = w[1], nw[2] = TBC_ABI_DEVICE_PTX;
	size_t k = put_string(nw, 3, text, tl);
	k = put_string(nw, k, target, strlen(target));
	memcpy(&nw[k], &w[rest], (words - 1 - rest) * 8);
	k += words - 1 - rest;
	k = put_string(nw, k, bin ? bin : "", bl);
	*out_bytes = k * 8;
	return nw;
}

/* A device of compute capability major.minor, a model of the n tables,
 * its session on cuda:0: what the device loaded (the mock's log line
 * and the session's device_code), or the refusal. */
static tbcrt_status cubin_case(const tbc_abi_model *good, int64_t **tables, const size_t *bytes, int n, int major,
			       int minor, const char *want_load, const char *want_code) {
	mock.reset();
	mock.set("major", major);
	mock.set("minor", minor);
	tbcrt_context *ctx = rt_context(1);
	size_t head = (size_t)(2 + 2 * n) * 8, total = head;
	for (int i = 0; i < n; i++) total += bytes[i];
	int64_t *dir = calloc(1, total);
	assert_non_null(dir);
	dir[0] = (int64_t)TBC_ABI_DEVICES_MAGIC;
	dir[1] = n;
	for (int i = 0, at = (int)head; i < n; at += (int)bytes[i], i++) {
		dir[2 + 2 * i] = at, dir[3 + 2 * i] = (int64_t)bytes[i];
		memcpy((char *)dir + at, tables[i], bytes[i]);
	}
	tbc_abi_model desc = *good;
	desc.device_code = n == 1 ? (const void *)tables[0] : dir;
	desc.device_code_size = n == 1 ? bytes[0] : total;
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_from_descriptor(ctx, &desc, NULL, &model));
	tbcrt_session_options so;
	tbcrt_session_options_init(&so);
	RT_OK(tbcrt_device_find(ctx, "cuda:0", &so.device));
	tbcrt_session *s = NULL;
	tbcrt_status st = tbcrt_session_create_with(model, &so, &s);
	printf("cc %d.%d: %s", major, minor, st.code == TBCRT_OK ? "" : st.message);
	if (st.code == TBCRT_OK) {
		tbcrt_session_stats stats;
		RT_OK(tbcrt_session_get_stats(s, &stats));
		printf("%s\n", stats.device_code);
		assert_string_equal(stats.device_code, want_code);
		LOGGED(0, want_load);
		if (strncmp(want_load, "load cubin", 10)) assert_null(strstr(mock.log(), "load cubin"));
		int64_t dims[2] = {5, 64};
		static float x[5 * 64];
		RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, x, sizeof x));
		RT_OK(tbcrt_session_run(s));
		LOGGED(0, "launch tbc_");
	} else {
		printf("\n");
	}
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("modules"), 0);
	free(dir);
	return st;
}

static void a_cubin_loads_on_the_gpus_it_runs_on_and_the_ptx_elsewhere(void **state) {
	(void)state;
	if (RT_GPU.table_kind != TBC_ABI_DEVICE_PTX) {
		printf("skipped: cubins are CUDA's (test_runtime_cuda checks them)\n");
		skip();
	}
	tbcrt_context *ctx = mock_context();
	tbc_module *m = load_onnx(dense_path());
	const char *so = tmp_path("dense_cubin_mock.so");
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_OPENCL;
	compile_to(m, &o, so);
	tbc_module_destroy(m);
	void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(dl);
	void *sym = dlsym(dl, "tbc_model_descriptor");
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn);
	const tbc_abi_model *good = fn();
	tbcrt_model *ocl = NULL;
	RT_OK(tbcrt_model_from_descriptor(ctx, good, NULL, &ocl));
	const tbcrt__dtable *t = ocl->dtables[0];
	char *text = calloc(1, 65536), *cubin80 = calloc(1, 65600), *cubin90 = calloc(1, 65600);
	assert_true(text && cubin80 && cubin90);
	size_t at = (size_t)snprintf(text, 65536, "// the mock's module for dense_relu\n");
	for (uint32_t k = 0; k < t->n_kernels; k++) {
		const tbcrt__dkernel *dk = &t->kernels[k];
		at += (size_t)snprintf(text + at, 65536 - at, ".visible .entry %s(", dk->name);
		uint32_t n = dk->n_buffers + dk->n_sizes + (dk->n_messages ? 1 : 0);
		for (uint32_t i = 0; i < n; i++)
			at += (size_t)snprintf(text + at, 65536 - at, "%s.param .%s p%u", i ? ", " : "",
					       i < dk->n_buffers || i >= dk->n_buffers + dk->n_sizes ? "u64" : "s64", i);
		at += (size_t)snprintf(text + at, 65536 - at, ")\n{\n\tret;\n}\n");
	}
	snprintf(cubin80, 65600, "\177ELF MOCK_CUBIN sm_80\n%s", text);
	snprintf(cubin90, 65600, "\177ELF MOCK_CUBIN sm_90\n%s", text);
	int64_t *tables[2];
	size_t bytes[2];

	/* sm_80 PTX with its cubin: the cubin on 8.0 and 8.6 (same major,
	 * minor at least 0), the PTX JIT-compiled on 9.0, 7.5 refused. */
	tables[0] = ptx_table(good, text, "sm_80", cubin80, &bytes[0]);
	RT_OK(cubin_case(good, tables, bytes, 1, 8, 0, "load cubin MOCK_CUBIN sm_80", "cuda:sm_80 cubin"));
	RT_OK(cubin_case(good, tables, bytes, 1, 8, 6, "load cubin MOCK_CUBIN sm_80", "cuda:sm_80 cubin"));
	RT_OK(cubin_case(good, tables, bytes, 1, 9, 0, "load ", "cuda:sm_80 PTX (JIT; the cubin is for another GPU)"));
	tbcrt_status st = cubin_case(good, tables, bytes, 1, 7, 5, NULL, NULL);
	assert_int_equal(st.code, TBCRT_ERR_UNSUPPORTED_TARGET);
	assert_non_null(strstr(st.message, "holds no code for cuda:0"));
	/* tbc inspect's figure. */
	{
		tbcrt_context *c2 = rt_context(1);
		tbc_abi_model desc = *good;
		desc.device_code = tables[0];
		desc.device_code_size = bytes[0];
		tbcrt_model *mm = NULL;
		RT_OK(tbcrt_model_from_descriptor(c2, &desc, NULL, &mm));
		tbcrt_device_code_info dc;
		RT_OK(tbcrt_model_device_code(mm, 0, &dc));
		assert_int_equal(dc.cubin_bytes, strlen(cubin80));
		assert_int_equal(dc.code_bytes, strlen(text));
		tbcrt_model_destroy(mm);
		tbcrt_context_destroy(c2);
	}

	/* sm_80 and sm_90, each with its cubin: 9.0 gets sm_90's, 8.6 sm_80's. */
	tables[1] = ptx_table(good, text, "sm_90", cubin90, &bytes[1]);
	RT_OK(cubin_case(good, tables, bytes, 2, 9, 0, "load cubin MOCK_CUBIN sm_90", "cuda:sm_90 cubin"));
	RT_OK(cubin_case(good, tables, bytes, 2, 8, 6, "load cubin MOCK_CUBIN sm_80", "cuda:sm_80 cubin"));
	free(tables[1]);
	/* sm_90a's cubin runs on 9.0 only. */
	tables[1] = ptx_table(good, text, "sm_90a", cubin90, &bytes[1]);
	RT_OK(cubin_case(good, tables, bytes, 2, 9, 0, "load cubin MOCK_CUBIN sm_90", "cuda:sm_90a cubin"));
	free(tables[1]);
	free(tables[0]);

	/* A cubin the driver refuses (one older than the ptxas that made it):
	 * the PTX, JIT-compiled. */
	char *refused = calloc(1, 65600);
	assert_non_null(refused);
	snprintf(refused, 65600, "\177ELF MOCK_CUBIN sm_80 MOCK_OTHER_GPU\n%s", text);
	tables[0] = ptx_table(good, text, "sm_80", refused, &bytes[0]);
	RT_OK(cubin_case(good, tables, bytes, 1, 8, 0, "load ", "cuda:sm_80 PTX (JIT; the driver refused the cubin)"));
	free(tables[0]);
	free(refused);

	/* PTX alone (tbc compile --no-cubin, or no ptxas): JIT everywhere. */
	tables[0] = ptx_table(good, text, "sm_80", NULL, &bytes[0]);
	RT_OK(cubin_case(good, tables, bytes, 1, 8, 0, "load ", "cuda:sm_80 PTX (JIT)"));
	/* A table of version 2 (before cubins) has no binary word: still loads. */
	tables[0][1] = 2;
	bytes[0] -= 8;
	RT_OK(cubin_case(good, tables, bytes, 1, 8, 0, "load ", "cuda:sm_80 PTX (JIT)"));
	free(tables[0]);
	/* A cubin that is no ELF object, or on a table of another kind: refused at load. */
	{
		tbcrt_context *c2 = rt_context(1);
		tables[0] = ptx_table(good, text, "sm_80", "MOCK not an ELF object, but long enough to be one: 64 bytes and more", &bytes[0]);
		tbc_abi_model desc = *good;
		desc.device_code = tables[0];
		desc.device_code_size = bytes[0];
		tbcrt_model *mm = NULL;
		RT_ERR(tbcrt_model_from_descriptor(c2, &desc, NULL, &mm), TBCRT_ERR_INVALID_ARTIFACT, "is not an ELF object");
		tables[0][2] = TBC_ABI_DEVICE_AMDGPU_ELF;
		RT_ERR(tbcrt_model_from_descriptor(c2, &desc, NULL, &mm), TBCRT_ERR_INVALID_ARTIFACT, "holds a binary");
		free(tables[0]);
		tbcrt_context_destroy(c2);
	}
	tbcrt_model_destroy(ocl);
	tbcrt_context_destroy(ctx);
	free(text);
	free(cubin80);
	free(cubin90);
	dlclose(dl);
}

/* One artifact compiled for the CPU, OpenCL and GPUs of both kinds: a
 * session without a choice runs on the GPU (docs/runtime.md, "Choosing a
 * device"), with the table of the newest architecture the device runs. */
static void an_artifact_for_every_target_runs_on_the_gpu_with_its_table(void **state) {
	(void)state;
	tbcrt_context *ctx = mock_context();
	tbc_module *m = load_onnx(dense_path());
	const char *so = tmp_path("dense_every_target.so");
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_CPU | TBC_TARGETS_OPENCL;
	o.gpu_targets = "cuda:sm_75,cuda:sm_80,rocm:gfx90a";
	compile_to(m, &o, so);
	tbc_module_destroy(m);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(ctx, so, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_true(info.cpu_code && info.opencl_code);
	assert_string_equal(info.device_targets, "opencl,cuda:sm_75,cuda:sm_80,rocm:gfx90a");
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	uint32_t index;
	RT_OK(tbcrt_device_find(ctx, name, &index));
	size_t mark = strlen(mock.log());
	tbcrt_session *s = NULL;
	tbcrt_status st;
	uint32_t got = 99;
	if (RT_GPU.table_kind == TBC_ABI_DEVICE_PTX) {
		/* Without a choice: the mock H100 (sm_90), with sm_80's PTX, the
		 * newest it runs. */
		RT_OK(tbcrt_session_create(model, &s));
		RT_OK(tbcrt_session_device(s, &got));
		assert_int_equal(got, index);
		const char *log = mock.log() + mark;
		assert_non_null(strstr(log, "load "));
		/* With ptxas here the sm_80 table holds a real cubin, which a 9.0
		 * device does not run: the PTX is JIT-compiled. */
		tbcrt_session_stats stats;
		RT_OK(tbcrt_session_get_stats(s, &stats));
		printf("cuda:0 (cc 9.0) loaded %s\n", stats.device_code);
		assert_non_null(strstr(stats.device_code, "cuda:sm_80 PTX (JIT"));
		int64_t dims[2] = {5, 64};
		static float x[5 * 64];
		RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, x, sizeof x));
		RT_OK(tbcrt_session_run(s));
		assert_non_null(strstr(mock.log() + mark, "launch tbc_k0_"));
		/* Profiled: each launch between two events, on the mock's clock
		 * of 0.25 ms per launch. */
		tbcrt_session_profile p;
		RT_ERR(tbcrt_session_get_profile(s, &p), TBCRT_ERR_INVALID_ARGUMENT, "not been profiled");
		RT_OK(tbcrt_session_set_profiling(s, true));
		RT_OK(tbcrt_session_run(s));
		RT_OK(tbcrt_session_run(s));
		RT_OK(tbcrt_session_get_profile(s, &p));
		assert_int_equal(p.runs, 2);
		assert_true(p.n_kernels >= 1);
		uint64_t launches = 0;
		double ms = 0;
		for (uint32_t k = 0; k < p.n_kernels; k++) {
			tbcrt_kernel_profile kp;
			RT_OK(tbcrt_session_kernel_profile(s, k, &kp));
			assert_non_null(strstr(kp.name, "tbc_k"));
			assert_int_equal(kp.launches % 2, 0);
			launches += kp.launches;
			ms += kp.ms;
		}
		tbcrt_kernel_profile kp;
		RT_ERR(tbcrt_session_kernel_profile(s, p.n_kernels, &kp), TBCRT_ERR_INVALID_ARGUMENT, "kernels");
		assert_true(launches >= 2);
		assert_true(fabs(ms - 0.25 * (double)launches) < 1e-6);
		assert_true(p.device_ms >= ms - 1e-6);
		RT_OK(tbcrt_session_set_profiling(s, false));
		RT_OK(tbcrt_session_run(s));
		RT_OK(tbcrt_session_get_profile(s, &p));
		assert_int_equal(p.runs, 2);
		assert_int_equal(mock.live("events"), 0);
		/* The CPU has no device clock. */
		tbcrt_session *cpu = NULL;
		tbcrt_session_options cpu_opts;
		tbcrt_session_options_init(&cpu_opts);
		RT_OK(tbcrt_device_find(ctx, "cpu", &cpu_opts.device));
		RT_OK(tbcrt_session_create_with(model, &cpu_opts, &cpu));
		RT_ERR(tbcrt_session_set_profiling(cpu, true), TBCRT_ERR_UNSUPPORTED_TARGET, "CPU");
		tbcrt_session_destroy(cpu);
	} else {
		/* Both mocks are on the library path, so without a choice the CUDA
		 * GPU would come first (and this test does not own that mock);
		 * asked for the HIP device, the session gets the code object (the
		 * mock reads PTX-style text, not code objects: its refusal is a
		 * clear status naming the program). */
		tbcrt_session_options so_opts;
		tbcrt_session_options_init(&so_opts);
		so_opts.device = index;
		st = tbcrt_session_create_with(model, &so_opts, &s);
		printf("hip:0 with the rocm:gfx90a table: %s\n", st.code == TBCRT_OK ? "loaded" : st.message);
		if (st.code == TBCRT_OK) {
			RT_OK(tbcrt_session_device(s, &got));
			assert_int_equal(got, index);
		} else {
			assert_non_null(strstr(st.message, ".hsaco"));
		}
	}
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	assert_int_equal(mock.live("allocations"), 0);
	assert_int_equal(mock.live("modules"), 0);
}

/* ---- No driver ---- */
static void without_the_driver_the_device_is_unavailable_saying_why(void **state) {
	(void)state;
	void *dl = dlopen(RT_GPU.library, RTLD_NOW | RTLD_LOCAL);
	if (dl) {
		bool is_mock = dlsym(dl, "mock_cuda_log") || dlsym(dl, "mock_hip_log");
		dlclose(dl);
		printf("skipped: %s is on this machine (%s); unit.test_runtime_%s_no_driver runs without it\n", RT_GPU.library,
		       is_mock ? "the mock, through LD_LIBRARY_PATH" : "a real driver", RT_GPU.kind);
		skip();
	}
	tbcrt_context *ctx = rt_context(1);
	uint32_t index;
	RT_OK(tbcrt_device_find(ctx, RT_GPU.kind, &index));
	tbcrt_device_info info;
	RT_OK(tbcrt_device_info_get(ctx, index, &info));
	assert_false(info.available);
	printf("%s: %s\n", info.name, info.unavailable_reason);
	assert_non_null(strstr(info.unavailable_reason, RT_GPU.library));
	char name[32];
	snprintf(name, sizeof name, "%s:0", RT_GPU.kind);
	tbcrt__device *d = NULL;
	RT_ERR(tbcrt__device_get(ctx, name, &d), TBCRT_ERR_DEVICE_UNAVAILABLE, RT_GPU.library);
	tbcrt_context_destroy(ctx);
}

static int close_mock(void **state) {
	(void)state;
	if (mock.reset) mock.reset();
	if (mock.dl) dlclose(mock.dl);
	return 0;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_device_is_an_entry_with_its_name_capability_and_memory),
		cmocka_unit_test(a_driver_without_devices_or_failing_to_start_is_unavailable_saying_why),
		cmocka_unit_test(buffers_and_views_round_trip_through_device_memory),
		cmocka_unit_test(a_device_opened_on_one_thread_is_used_from_another),
		cmocka_unit_test(programs_load_and_a_failed_build_carries_the_drivers_log),
		cmocka_unit_test(launches_map_work_items_to_blocks_and_pass_the_arguments_in_order),
		cmocka_unit_test(errors_are_statuses_naming_the_call_the_kernel_and_the_limit),
		cmocka_unit_test(events_time_the_work_between_them_on_the_devices_clock),
		cmocka_unit_test(a_models_table_runs_its_copies_and_launches_in_order),
		cmocka_unit_test(a_cubin_loads_on_the_gpus_it_runs_on_and_the_ptx_elsewhere),
		cmocka_unit_test(an_artifact_for_every_target_runs_on_the_gpu_with_its_table),
		cmocka_unit_test(without_the_driver_the_device_is_unavailable_saying_why),
	};
	return cmocka_run_group_tests(tests, NULL, close_mock);
}

#endif
