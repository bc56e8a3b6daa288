/* The GPUs' grid-stride loop (codegen/llvm/llvm_gpu.c with llvm_unroll.c),
 * run on this host: the real GPU hooks over an arch whose work-item id and
 * global size are two host globals, the kernel's body compiled by MCJIT and
 * called once per work-item.  Whatever the number of elements and of
 * work-items, every element is computed exactly once -- the unrolled trips
 * (four iterations, their loads first) and the loop for the rest together --
 * including in place (x and y the same memory), where an element computed
 * twice would show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>

#include "codegen/device/device_program.h"
#include "codegen/llvm/llvm_emit.h"
#include "codegen/llvm/llvm_gpu.h"

/* ---- An arch of this host: one group of global-size items ------------------ */
static LLVMValueRef load_global(llvm_cx *c, const char *name) {
	return LLVMBuildLoad2(c->b, c->i32, LLVMGetNamedGlobal(c->mod, name), "");
}
static LLVMValueRef host_item_id(llvm_cx *c, int d) { return d ? LLVMConstInt(c->i32, 0, 0) : load_global(c, "test.gid"); }
static LLVMValueRef host_zero(llvm_cx *c, int d) { (void)d; return LLVMConstInt(c->i32, 0, 0); }
static LLVMValueRef host_one(llvm_cx *c, int d) { (void)d; return LLVMConstInt(c->i32, 1, 0); }
static LLVMValueRef host_global_size(llvm_cx *c, int d) { (void)d; return load_global(c, "test.gsize"); }
static void host_barrier(llvm_cx *c) { (void)c; }

static bool host_prepare(llvm_cx *c) {
	const char *names[] = {"test.gid", "test.gsize"};
	for (int i = 0; i < 2; i++) {
		LLVMValueRef g = LLVMAddGlobal(c->mod, c->i32, names[i]);
		LLVMSetInitializer(g, LLVMConstInt(c->i32, 0, 0));
	}
	return true;
}

static void host_mark(llvm_cx *c, LLVMValueRef fn, const tbc_dev_kernel *k) { (void)c, (void)fn, (void)k; }

static const llvm_gpu_arch host_arch = {
	.name = "host-grid",
	.triple = "",
	.global_as = 0,
	.local_as = 0,
	.kernel_cc = LLVMCCallConv,
	.item_id = host_item_id,
	.group_id = host_zero,
	.group_size = host_one,
	.n_groups = host_one,
	.global_size = host_global_size,
	.barrier = host_barrier,
	.prepare_module = host_prepare,
	.mark_kernel = host_mark,
};

/* ---- The kernel -------------------------------------------------------------
 * for i = lo .. n step `step` parallel { t = x[i] * 2; if (t < 0) y[i] = -t else y[i] = t + 1 }:
 * a scalar set per iteration, an if, a store whose value loads. */
typedef void (*body_fn)(float *x, float *y, int64_t n);

static float expect_of(float x) {
	float t = x * 2;
	return t < 0 ? -t : t + 1;
}

static kir_kernel *kernel(tbc_arena *arena, int64_t lo, int64_t step) {
	kir_kernel *k = kir_kernel_new(arena, "twice");
	kir_expr *n = kir_e_size(k, kir_size_param(k, "n"));
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_F32, KIR_BUF_INPUT, 1, &n);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, &n);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX), *t = kir_var_new(k, "t", TBC_DT_F32);
	kir_expr *iv = kir_e_var(k, i), *tv = kir_e_var(k, t);
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_set(k, t, kir_e_binary(k, KIR_MUL, kir_e_load(k, x, iv), kir_e_float(k, TBC_DT_F32, 2))));
	kir_block_add(k, &body,
		      kir_s_if(k, kir_e_cmp(k, KIR_LT, tv, kir_e_float(k, TBC_DT_F32, 0)),
			       kir_s_store(k, y, iv, kir_e_unary(k, KIR_NEG, tv)),
			       kir_s_store(k, y, iv, kir_e_binary(k, KIR_ADD, tv, kir_e_float(k, TBC_DT_F32, 1)))));
	k->body = kir_s_for(k, i, kir_e_index(k, lo), kir_e_size(k, 0), step, KIR_LOOP_PARALLEL, body.first);
	assert_non_null(k->body);
	assert_true(kir_verify(k, NULL));
	return k;
}

typedef struct compiled {
	LLVMExecutionEngineRef ee;
	llvm_cx c;
	body_fn fn;
	int32_t *gid, *gsize;
	bool interleaved; /* the module holds the unrolled trips */
} compiled;

static compiled compile(const kir_kernel *k, tbc_diags *d, tbc_dev_plan *plan) {
	compiled r = {0};
	assert_true(tbc_dev_plan_make(k, plan, d));
	assert_int_equal(plan->shape, TBC_DEV_GRID);
	llvm_hooks hooks = llvm_gpu_hooks(&host_arch);
	static llvm_hooks kept; /* the context keeps a pointer to them */
	kept = hooks;
	llvm_gpu_state st = {&host_arch, plan};
	llvm_cx_init(&r.c, "grid", &kept, 4, d);
	r.c.target = &st;
	assert_true(host_prepare(&r.c));
	LLVMValueRef body = llvm_emit_kernel(&r.c, k, 0);
	assert_non_null(body);
	r.c.target = NULL;
	LLVMSetLinkage(body, LLVMExternalLinkage);
	char *err = NULL;
	if (LLVMVerifyModule(r.c.mod, LLVMReturnStatusAction, &err)) fail_msg("%s", err);
	LLVMDisposeMessage(err);
	char *text = LLVMPrintModuleToString(r.c.mod);
	r.interleaved = strstr(text, "iterations:") != NULL;
	LLVMDisposeMessage(text);
	LLVMModuleRef mod = r.c.mod;
	r.c.mod = LLVMModuleCreateWithNameInContext("empty", r.c.ctx); /* the engine owns mod */
	if (LLVMCreateExecutionEngineForModule(&r.ee, mod, &err)) fail_msg("MCJIT: %s", err);
	r.fn = (body_fn)(uintptr_t)LLVMGetFunctionAddress(r.ee, "tbc.k0.twice");
	r.gid = (int32_t *)(uintptr_t)LLVMGetGlobalValueAddress(r.ee, "test.gid");
	r.gsize = (int32_t *)(uintptr_t)LLVMGetGlobalValueAddress(r.ee, "test.gsize");
	assert_non_null(r.fn);
	assert_non_null(r.gid);
	assert_non_null(r.gsize);
	return r;
}

static void dispose(compiled *r) {
	LLVMDisposeExecutionEngine(r->ee);
	llvm_cx_dispose(&r->c);
}

/* Runs the kernel with items work-items, one after another (their
 * iterations are independent, so any order is a device's). */
static void run(compiled *r, float *x, float *y, int64_t n, int items) {
	*r->gsize = items;
	for (int g = 0; g < items; g++) {
		*r->gid = g;
		r->fn(x, y, n);
	}
}

static float value_at(int64_t i) { return (float)((i * 37) % 23) - 11.5f; }

static void check_every_length_and_launch(int64_t lo, int64_t step) {
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	tbc_arena *arena = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	tbc_dev_plan plan;
	compiled r = compile(kernel(arena, lo, step), d, &plan);
	assert_true(r.interleaved);
	static const int items[] = {1, 2, 3, 7, 16};
	for (size_t g = 0; g < sizeof items / sizeof *items; g++)
		for (int64_t n = 0; n <= 4 * 16 * step + 9; n++) {
			float *x = malloc((size_t)(n + 1) * sizeof *x), *y = malloc((size_t)(n + 1) * sizeof *y);
			assert_non_null(x);
			assert_non_null(y);
			for (int64_t i = 0; i < n; i++) x[i] = value_at(i), y[i] = 1000;
			run(&r, x, y, n, items[g]);
			for (int64_t i = 0; i < n; i++) {
				bool visited = i >= lo && (i - lo) % step == 0;
				float want = visited ? expect_of(value_at(i)) : 1000;
				if (y[i] != want) fail_msg("n %lld, %d items: y[%lld] = %g, not %g", (long long)n, items[g], (long long)i, y[i], want);
			}
			/* in place: each element once, or it would be computed from its own result */
			run(&r, x, x, n, items[g]);
			for (int64_t i = 0; i < n; i++) {
				bool visited = i >= lo && (i - lo) % step == 0;
				float want = visited ? expect_of(value_at(i)) : value_at(i);
				if (x[i] != want) fail_msg("in place, n %lld, %d items: x[%lld] = %g, not %g", (long long)n, items[g], (long long)i, x[i], want);
			}
			free(x);
			free(y);
		}
	dispose(&r);
	tbc_dev_plan_free(&plan);
	tbc_diags_destroy(d);
	tbc_arena_destroy(arena);
}

static void test_grid_stride_loop_computes_each_element_once_for_every_length(void **state) {
	(void)state;
	check_every_length_and_launch(0, 1);
}

static void test_grid_stride_loop_with_a_start_and_a_step(void **state) {
	(void)state;
	check_every_length_and_launch(3, 2);
}

/* A body with a loop is not unrolled: one iteration per trip, as before. */
static void test_a_body_with_a_loop_is_not_interleaved(void **state) {
	(void)state;
	tbc_arena *arena = tbc_arena_create();
	kir_kernel *k = kir_kernel_new(arena, "rows");
	kir_expr *n = kir_e_size(k, kir_size_param(k, "n"));
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, &n);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_stmt *inner = kir_s_for(k, j, kir_e_index(k, 0), kir_e_index(k, 4), 1, KIR_LOOP_SEQUENTIAL,
				    kir_s_store(k, y, kir_e_var(k, i), kir_e_float(k, TBC_DT_F32, 1)));
	assert_false(llvm_can_interleave(inner));
	assert_true(llvm_can_interleave(inner->body));
	(void)y;
	tbc_arena_destroy(arena);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grid_stride_loop_computes_each_element_once_for_every_length),
		cmocka_unit_test(test_grid_stride_loop_with_a_start_and_a_step),
		cmocka_unit_test(test_a_body_with_a_loop_is_not_interleaved),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
