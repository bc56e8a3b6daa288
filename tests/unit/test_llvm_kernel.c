/* The LLVM code shared by the LLVM targets (codegen/llvm/llvm_kernel.h):
 * a kernel's function follows the target's hooks.  A target shaped like a
 * GPU's (no host pointer, buffers in address space 1, no libm) gets
 * kernels without the host parameter, its own parallel loops and error
 * reports, and a diagnostic for math that would call libm; the CPU's hooks
 * give the host table first and an outlined parallel body.  What the
 * kernels compute is checked through the CPU target by test_codegen*. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>

#include "codegen/cpu/cpu.h"
#include "codegen/llvm/llvm_kernel.h"

/* ---- A GPU-shaped target ---------------------------------------------------
 * Its parallel loop runs the iterations in one loop, standing in for a grid
 * (a real one reads its work-item id); a failed check stores 1 to the
 * status word. */
static int n_parallel, n_reports;

static void grid_parallel(llvm_fn *f, const kir_stmt *s) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	n_parallel++;
	LLVMValueRef lo = llvm_expr(f, s->lo), hi = llvm_expr(f, s->hi);
	if (!lo || !hi) return;
	LLVMValueRef slot = f->vars[s->var->id];
	LLVMBuildStore(b, lo, slot);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "grid");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "item");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "grid_done");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, c->i64, slot, ""), hi, ""), body, exit);
	LLVMPositionBuilderAtEnd(b, body);
	f->parallel_mapped = true;
	llvm_stmts(f, s->body);
	f->parallel_mapped = false;
	LLVMValueRef step = LLVMConstInt(c->i64, (unsigned long long)s->step, 0);
	LLVMBuildStore(b, LLVMBuildAdd(b, LLVMBuildLoad2(b, c->i64, slot, ""), step, ""), slot);
	llvm_mark_loop(f, LLVMBuildBr(b, head), !llvm_has_loop(s->body));
	LLVMPositionBuilderAtEnd(b, exit);
}

static void grid_report(llvm_fn *f, const char *message) {
	(void)message;
	n_reports++;
	LLVMBuildStore(f->c->b, LLVMConstInt(f->c->i32, 1, 0), f->status);
}

static const llvm_hooks grid_hooks = {
	.name = "grid",
	.buffer_addrspace = 1,
	.libm = false,
	.env_param = false,
	.parallel_loop = grid_parallel,
	.report_error = grid_report,
};

/* ---- Kernels -------------------------------------------------------------- */
typedef struct fixture {
	tbc_arena *arena;
	tbc_diags *d;
	kir_kernel *k;
	kir_buffer *x, *y;
	kir_var *i;
	llvm_cx c;
} fixture;

/* y[i] = op(x[i]) over $n, the loop parallel: x and y of type t. */
static fixture make(tbc_dtype t, const llvm_hooks *hooks) {
	fixture f = {.arena = tbc_arena_create(), .d = tbc_diags_create()};
	f.k = kir_kernel_new(f.arena, "k");
	kir_expr *n = kir_e_size(f.k, kir_size_param(f.k, "n"));
	f.x = kir_buffer_new(f.k, "x", t, KIR_BUF_INPUT, 1, &n);
	f.y = kir_buffer_new(f.k, "y", t, KIR_BUF_OUTPUT, 1, &n);
	f.i = kir_var_new(f.k, "i", KIR_INDEX);
	llvm_cx_init(&f.c, "test", hooks, 32, f.d);
	n_parallel = n_reports = 0;
	return f;
}

static void set_body(fixture *f, kir_stmt *body) {
	kir_kernel *k = f->k;
	k->body = kir_s_for(k, f->i, kir_e_index(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_PARALLEL, body);
	assert_non_null(k->body);
	assert_true(kir_verify(k, f->d));
}

static kir_stmt *store_unary(fixture *f, kir_unop op) {
	kir_kernel *k = f->k;
	kir_expr *i = kir_e_var(k, f->i);
	return kir_s_store(k, f->y, i, kir_e_unary(k, op, kir_e_load(k, f->x, i)));
}

static void done(fixture *f) {
	llvm_cx_dispose(&f->c);
	tbc_diags_destroy(f->d);
	tbc_arena_destroy(f->arena);
}

static bool mentions(const tbc_diags *d, const char *text) {
	for (size_t i = 0; i < tbc_diags_count(d); i++)
		if (strstr(tbc_diags_get(d, i)->message, text)) return true;
	return false;
}

static void assert_module_valid(LLVMModuleRef m) {
	char *err = NULL;
	bool bad = LLVMVerifyModule(m, LLVMReturnStatusAction, &err);
	if (bad) print_error("%s\n", err);
	LLVMDisposeMessage(err);
	assert_false(bad);
}

static void test_gpu_shaped_kernel_takes_buffers_in_its_address_space(void **state) {
	(void)state;
	fixture f = make(TBC_DT_F32, &grid_hooks);
	set_body(&f, store_unary(&f, KIR_NEG));
	LLVMValueRef fn = llvm_emit_kernel(&f.c, f.k, 0);
	assert_non_null(fn);
	assert_module_valid(f.c.mod);
	/* (ptr addrspace(1) x, ptr addrspace(1) y, i64 n): no host pointer */
	assert_int_equal(LLVMCountParams(fn), 3);
	assert_true(LLVMTypeOf(LLVMGetParam(fn, 0)) == LLVMPointerTypeInContext(f.c.ctx, 1));
	assert_true(LLVMTypeOf(LLVMGetParam(fn, 1)) == LLVMPointerTypeInContext(f.c.ctx, 1));
	assert_true(LLVMTypeOf(LLVMGetParam(fn, 2)) == f.c.i64);
	assert_int_equal(n_parallel, 1);
	assert_int_equal(LLVMGetLinkage(fn), LLVMInternalLinkage);
	size_t len;
	assert_string_equal(LLVMGetValueName2(fn, &len), "tbc.k0.k");
	done(&f);
}

static void test_gpu_shaped_kernel_reports_a_failed_check_through_its_hook(void **state) {
	(void)state;
	fixture f = make(TBC_DT_I32, &grid_hooks);
	kir_kernel *k = f.k;
	kir_expr *xi = kir_e_load(k, f.x, kir_e_var(k, f.i));
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_error(k, kir_e_cmp(k, KIR_EQ, xi, kir_e_int(k, TBC_DT_I32, 0)), "x is zero"));
	kir_block_add(k, &body, kir_s_store(k, f.y, kir_e_var(k, f.i), xi));
	set_body(&f, body.first);
	LLVMValueRef fn = llvm_emit_kernel(&f.c, k, 3);
	assert_non_null(fn);
	assert_module_valid(f.c.mod);
	/* x, y, n and the status word, in the buffers' address space */
	assert_int_equal(LLVMCountParams(fn), 4);
	assert_true(LLVMTypeOf(LLVMGetParam(fn, 3)) == LLVMPointerTypeInContext(f.c.ctx, 1));
	assert_int_equal(n_reports, 1);
	char *ir = LLVMPrintModuleToString(f.c.mod);
	assert_non_null(strstr(ir, "branch_weights"));
	assert_null(strstr(ir, "tbc.fail")); /* the CPU's report, not this target's */
	LLVMDisposeMessage(ir);
	done(&f);
}

static void test_math_that_needs_libm_is_a_diagnostic_without_it(void **state) {
	(void)state;
	static const struct {
		tbc_dtype t;
		kir_unop op;
		const char *function;
	} cases[] = {
		{TBC_DT_F64, KIR_EXP, "exp needs libm"}, /* llvm.exp.f64 lowers to exp() */
		{TBC_DT_F32, KIR_SIN, "sin needs libm"},
		{TBC_DT_F32, KIR_TAN, "tan needs libm"},
		{TBC_DT_F64, KIR_ERF, "erf needs libm"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		fixture f = make(cases[i].t, &grid_hooks);
		set_body(&f, store_unary(&f, cases[i].op));
		assert_null(llvm_emit_kernel(&f.c, f.k, 0));
		assert_int_equal(tbc_diags_first_code(f.d), TBC_ERR_UNSUPPORTED);
		assert_true(mentions(f.d, cases[i].function));
		assert_true(mentions(f.d, "grid backend: "));
		done(&f);
	}
}

static void test_inline_f32_math_needs_no_libm(void **state) {
	(void)state;
	static const kir_unop ops[] = {KIR_EXP, KIR_LOG, KIR_TANH, KIR_ERF, KIR_SQRT, KIR_FLOOR};
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		fixture f = make(TBC_DT_F32, &grid_hooks);
		set_body(&f, store_unary(&f, ops[i]));
		assert_non_null(llvm_emit_kernel(&f.c, f.k, 0));
		assert_module_valid(f.c.mod);
		done(&f);
	}
}

static void test_cpu_kernel_takes_the_host_table_and_outlines_its_parallel_loop(void **state) {
	(void)state;
	fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
	set_body(&f, store_unary(&f, KIR_EXP));
	LLVMValueRef fn = llvm_emit_kernel(&f.c, f.k, 2);
	assert_non_null(fn);
	assert_module_valid(f.c.mod);
	/* (ptr host, ptr x, ptr y, i64 n) */
	assert_int_equal(LLVMCountParams(fn), 4);
	assert_true(LLVMTypeOf(LLVMGetParam(fn, 1)) == f.c.ptr);
	assert_non_null(LLVMGetNamedFunction(f.c.mod, "tbc.k2.k.par0"));
	assert_non_null(LLVMGetNamedFunction(f.c.mod, "tbc.expf"));
	done(&f);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_shaped_kernel_takes_buffers_in_its_address_space),
		cmocka_unit_test(test_gpu_shaped_kernel_reports_a_failed_check_through_its_hook),
		cmocka_unit_test(test_math_that_needs_libm_is_a_diagnostic_without_it),
		cmocka_unit_test(test_inline_f32_math_needs_no_libm),
		cmocka_unit_test(test_cpu_kernel_takes_the_host_table_and_outlines_its_parallel_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
