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
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>
#include <math.h>

#include "codegen/cpu/cpu.h"
#include "codegen/llvm/llvm_emit.h"
#include "codegen/llvm/llvm_kernel.h"
#include "tbc/abi.h"

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

static void grid_report(llvm_fn *f, const kir_stmt *check) {
	(void)check;
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

/* The same target with work-groups: local buffers as globals in address
 * space 3, local_id a constant, the barrier a call to tbc.test.barrier; and
 * math without libm from llvm_soft_math.c. */
static int n_barriers, n_local_ids;

static LLVMValueRef group_local_buffer(llvm_fn *f, const kir_buffer *lb) {
	llvm_cx *c = f->c;
	LLVMTypeRef at = LLVMArrayType2(c->f32, 64);
	LLVMValueRef g = LLVMAddGlobalInAddressSpace(c->mod, at, lb->name, 3);
	LLVMSetInitializer(g, LLVMGetUndef(at));
	LLVMSetLinkage(g, LLVMInternalLinkage);
	return g;
}

static LLVMValueRef group_local_id(llvm_fn *f, int d) {
	(void)d;
	n_local_ids++;
	return LLVMConstInt(f->c->i64, 0, 0);
}

static void group_barrier(llvm_fn *f) {
	llvm_cx *c = f->c;
	n_barriers++;
	LLVMTypeRef fty = LLVMFunctionType(c->void_t, NULL, 0, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "tbc.test.barrier");
	if (!fn) fn = LLVMAddFunction(c->mod, "tbc.test.barrier", fty);
	LLVMBuildCall2(c->b, fty, fn, NULL, 0, "");
}

static const llvm_hooks group_hooks = {
	.name = "group",
	.buffer_addrspace = 1,
	.libm = false,
	.soft_math = true,
	.env_param = false,
	.parallel_loop = grid_parallel,
	.report_error = grid_report,
	.local_buffer = group_local_buffer,
	.local_id = group_local_id,
	.barrier = group_barrier,
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

/* Calls into MCJIT's code.  Clang's -fsanitize=function (UBSan, the ASan
 * build) reads a signature word before an indirect call's target, which
 * JIT-compiled code has not: at the start of its page that read faults. */
#if defined(__clang__)
#define NO_FUNCTION_SANITIZER __attribute__((no_sanitize("function")))
#else
#define NO_FUNCTION_SANITIZER
#endif
typedef double (*jit_f64)(double);
typedef double (*jit_f64_2)(double, double);
typedef void (*jit_kernel)(void *, float *, float *, int64_t);
NO_FUNCTION_SANITIZER static double call_f64(jit_f64 f, double x) { return f(x); }
NO_FUNCTION_SANITIZER static double call_f64_2(jit_f64_2 f, double x, double y) { return f(x, y); }
NO_FUNCTION_SANITIZER static void call_kernel(jit_kernel k, float *x, float *y, int64_t n) { k(NULL, x, y, n); }

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

/* kernel row_sum's shape (docs/kernel-ir.md): part[local_id] = x[...];
 * barrier; y[g] = part[0] + part[1], over grid loop g. */
static kir_kernel *grouped_kernel(fixture *f) {
	kir_kernel *k = f->k;
	int64_t size[1] = {64}, dims[1] = {64};
	kir_kernel_set_group(k, 1, size);
	kir_buffer *part = kir_local_new(k, "part", TBC_DT_F32, 1, dims);
	kir_expr *lid = kir_e_local_id(k, 0);
	kir_expr *g = kir_e_var(k, f->i);
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_store(k, part, lid, kir_e_load(k, f->x, g)));
	kir_block_add(k, &body, kir_s_barrier(k));
	kir_expr *sum = kir_e_binary(k, KIR_ADD, kir_e_load(k, part, kir_e_index(k, 0)), kir_e_load(k, part, kir_e_index(k, 1)));
	kir_block_add(k, &body, kir_s_if(k, kir_e_cmp(k, KIR_EQ, lid, kir_e_index(k, 0)), kir_s_store(k, f->y, g, sum), NULL));
	k->body = kir_s_for(k, f->i, kir_e_index(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_GRID, body.first);
	assert_non_null(k->body);
	return k;
}

static void test_grouped_kernel_takes_local_buffers_ids_and_barriers_from_its_hooks(void **state) {
	(void)state;
	fixture f = make(TBC_DT_F32, &group_hooks);
	kir_kernel *k = grouped_kernel(&f);
	if (!kir_verify(k, f.d)) print_error("%s\n", tbc_diags_get(f.d, 0)->message);
	n_barriers = n_local_ids = 0;
	LLVMValueRef fn = llvm_emit_kernel(&f.c, k, 0);
	assert_non_null(fn);
	assert_module_valid(f.c.mod);
	assert_int_equal(n_parallel, 1); /* the grid loop is the target's */
	assert_int_equal(n_barriers, 1);
	assert_true(n_local_ids >= 1);
	LLVMValueRef part = LLVMGetNamedGlobal(f.c.mod, "part");
	assert_non_null(part);
	assert_int_equal(LLVMGetPointerAddressSpace(LLVMTypeOf(part)), 3);
	assert_non_null(LLVMGetFirstUse(part)); /* the store and the loads reach it */
	done(&f);
}

static void test_grouped_kernel_is_refused_without_work_group_hooks(void **state) {
	(void)state;
	fixture f = make(TBC_DT_F32, &grid_hooks);
	kir_kernel *k = grouped_kernel(&f);
	assert_null(llvm_emit_kernel(&f.c, k, 0));
	assert_true(mentions(f.d, "has work-groups"));
	done(&f);
}

/* Every libm function kernels use, f32 and f64, defined in the module:
 * nothing is left for a libm to resolve. */
static void test_soft_math_leaves_no_libm_call(void **state) {
	(void)state;
	static const kir_unop ops[] = {KIR_EXP,  KIR_LOG,   KIR_SIN,   KIR_COS,   KIR_TAN,   KIR_ASIN,  KIR_ACOS,
				       KIR_ATAN, KIR_SINH,  KIR_COSH,  KIR_TANH,  KIR_ASINH, KIR_ACOSH, KIR_ATANH,
				       KIR_ERF,  KIR_EXPM1, KIR_LOG1P};
	static const tbc_dtype types[] = {TBC_DT_F32, TBC_DT_F64};
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof ops / sizeof *ops + 2; i++) {
			fixture f = make(types[t], &group_hooks);
			kir_kernel *k = f.k;
			kir_expr *xi = kir_e_load(k, f.x, kir_e_var(k, f.i));
			kir_expr *v = i < sizeof ops / sizeof *ops ? kir_e_unary(k, ops[i], xi)
				: kir_e_binary(k, i == sizeof ops / sizeof *ops ? KIR_POW : KIR_ATAN2, xi, xi);
			set_body(&f, kir_s_store(k, f.y, kir_e_var(k, f.i), v));
			assert_non_null(llvm_emit_kernel(&f.c, k, 0));
			assert_module_valid(f.c.mod);
			for (LLVMValueRef fn = LLVMGetFirstFunction(f.c.mod); fn; fn = LLVMGetNextFunction(fn)) {
				size_t len;
				const char *name = LLVMGetValueName2(fn, &len);
				if (LLVMIsDeclaration(fn) && strncmp(name, "llvm.", 5)) fail_msg("%s is left to libm", name);
			}
			done(&f);
		}
}

/* Distance in units in the last place between two doubles of one sign. */
static double ulps(double got, double want) {
	if (isnan(want)) return isnan(got) ? 0 : INFINITY;
	if (got == want) return 0;
	if (isinf(want) || isinf(got)) return INFINITY;
	double u = nextafter(fabs(want), INFINITY) - fabs(want);
	return fabs(got - want) / u;
}

/* The soft math functions run on this host (MCJIT) against libm over a
 * grid of f64 arguments: how many ulp they are off at most. */
static void test_soft_math_agrees_with_libm(void **state) {
	(void)state;
	static const struct {
		const char *fn;
		double (*libm)(double);
		double lo, hi, max_ulp;
	} cases[] = {
		{"exp", exp, -745, 709, 2},     {"log", log, 1e-300, 1e300, 2},    {"sin", sin, -100, 100, 2},
		{"cos", cos, -100, 100, 2},     {"tan", tan, -10, 10, 4},          {"atan", atan, -50, 50, 2},
		{"asin", asin, -1, 1, 4},       {"acos", acos, -1, 1, 4},          {"expm1", expm1, -5, 5, 4},
		{"log1p", log1p, -0.9, 100, 4}, {"sinh", sinh, -30, 30, 4},        {"cosh", cosh, -30, 30, 4},
		{"tanh", tanh, -30, 30, 4},     {"asinh", asinh, -1e5, 1e5, 4},    {"acosh", acosh, 1, 1e5, 4},
		{"atanh", atanh, -0.999, 0.999, 4}, {"erf", erf, -7, 7, 8},
	};
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tbc_diags *d = tbc_diags_create();
		llvm_cx c;
		llvm_cx_init(&c, "soft", &group_hooks, 32, d);
		LLVMTypeRef fty = LLVMFunctionType(c.f64, &c.f64, 1, 0);
		LLVMValueRef fn = LLVMAddFunction(c.mod, "f", fty);
		LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(c.ctx, fn, "entry"));
		LLVMBuildRet(c.b, llvm_soft_math(&c, cases[i].fn, LLVMGetParam(fn, 0), NULL));
		assert_module_valid(c.mod);
		LLVMModuleRef mod = c.mod;
		c.mod = LLVMModuleCreateWithNameInContext("empty", c.ctx); /* the engine owns mod */
		LLVMExecutionEngineRef ee;
		char *err = NULL;
		if (LLVMCreateExecutionEngineForModule(&ee, mod, &err)) fail_msg("MCJIT: %s", err);
		jit_f64 f = (jit_f64)(uintptr_t)LLVMGetFunctionAddress(ee, "f");
		assert_non_null(f);
		double worst = 0, at = 0;
		for (int k = 0; k <= 20000; k++) {
			double x = cases[i].lo + (cases[i].hi - cases[i].lo) * k / 20000.0;
			if (!strcmp(cases[i].fn, "log")) x = exp(log(cases[i].lo) + (log(cases[i].hi) - log(cases[i].lo)) * k / 20000.0);
			double e = ulps(call_f64(f, x), cases[i].libm(x));
			if (e > worst) worst = e, at = x;
		}
		/* special values */
		const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN};
		for (size_t s = 0; s < 5; s++) {
			double x = specials[s], w = cases[i].libm(x), g = call_f64(f, x);
			if (!(isnan(w) ? isnan(g) : g == w && signbit(g) == signbit(w)))
				fail_msg("%s(%g) = %g, libm %g", cases[i].fn, x, g, w);
		}
		if (getenv("TBC_SOFT_MATH_REPORT")) print_message("%-6s %.2f ulp at %.17g\n", cases[i].fn, worst, at);
		if (worst > cases[i].max_ulp) fail_msg("%s: %.1f ulp at %.17g", cases[i].fn, worst, at);
		LLVMDisposeExecutionEngine(ee);
		llvm_cx_dispose(&c);
		tbc_diags_destroy(d);
	}
}

/* pow and atan2 the same way, over pairs of arguments with the special
 * values among them (C's rules for zeros, infinities, NaN and negative
 * bases).  pow loses about |y ln x| 2^-53 (llvm_soft_math.c). */
static void test_soft_math_pow_and_atan2_agree_with_libm(void **state) {
	(void)state;
	static const struct {
		const char *fn;
		double (*libm)(double, double);
		double max_ulp;
	} cases[] = {{"pow", pow, 4}, {"atan2", atan2, 4}};
	const double vals[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, -1, 2, -2, 0.5, -0.5, 3, -3, 2.5, -2.5, 1e-3, 7.25, 1e3, -1e3, 0.999};
	const int n = (int)(sizeof vals / sizeof *vals);
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	for (size_t i = 0; i < 2; i++) {
		tbc_diags *d = tbc_diags_create();
		llvm_cx c;
		llvm_cx_init(&c, "soft", &group_hooks, 32, d);
		LLVMTypeRef params[2] = {c.f64, c.f64};
		LLVMValueRef fn = LLVMAddFunction(c.mod, "f", LLVMFunctionType(c.f64, params, 2, 0));
		LLVMPositionBuilderAtEnd(c.b, LLVMAppendBasicBlockInContext(c.ctx, fn, "entry"));
		LLVMBuildRet(c.b, llvm_soft_math(&c, cases[i].fn, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1)));
		assert_module_valid(c.mod);
		LLVMModuleRef mod = c.mod;
		c.mod = LLVMModuleCreateWithNameInContext("empty", c.ctx);
		LLVMExecutionEngineRef ee;
		char *err = NULL;
		if (LLVMCreateExecutionEngineForModule(&ee, mod, &err)) fail_msg("MCJIT: %s", err);
		jit_f64_2 f = (jit_f64_2)(uintptr_t)LLVMGetFunctionAddress(ee, "f");
		assert_non_null(f);
		for (int a = 0; a < n; a++)
			for (int b = 0; b < n; b++) {
				double x = vals[a], y = vals[b], w = cases[i].libm(x, y), g = call_f64_2(f, x, y);
				/* pow: the error exp(y log x) carries, |y ln x| ulp */
				double extra = i == 0 ? fabs(y * log(fabs(x))) * 2 : 0;
				double allowed = cases[i].max_ulp + (isfinite(extra) ? extra : 0);
				bool same = isnan(w) ? isnan(g) : (w == 0 || isinf(w)) ? g == w && signbit(g) == signbit(w)
									 : signbit(g) == signbit(w) && ulps(g, w) <= allowed;
				if (!same) fail_msg("%s(%g, %g) = %.17g, libm %.17g", cases[i].fn, x, y, g, w);
			}
		/* An integer base to an integer power up to 64 goes by products:
		 * exact where the result is representable (an integer Pow
		 * truncates, so 728.99999999999989 for 9^3 would be 728:
		 * test_pow_types_int32_float32 on a GPU), a reciprocal of one
		 * rounding for a negative power. */
		for (int e = -64; i == 0 && e <= 64; e++)
			for (int xb = -12; xb <= 12; xb++) {
				double w = pow(xb, e), g = call_f64_2(f, xb, e);
				bool same = e >= 0 && fabs(w) < 0x1p53 ? g == w
					    : (w == 0 || isinf(w))      ? g == w
									: fabs(w) < 0x1p-1022 || ulps(g, w) <= 2;
				if (!same) fail_msg("pow(%d, %d) = %.17g, libm %.17g", xb, e, g, w);
			}
		LLVMDisposeExecutionEngine(ee);
		llvm_cx_dispose(&c);
		tbc_diags_destroy(d);
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

/* Runs of sets emitted as vectors (llvm_kernel.c's lanes): a run whose
 * values have one shape is vector code as emitted, before any LLVM pass;
 * one whose sets read each other's variables is not, nor one whose loads
 * are neither one element nor consecutive; an if's else branch does not
 * use its then branch's vectors (LLVM's verifier would refuse the IR); and
 * every form computes what the sets one by one do, run through MCJIT on
 * rows of 8 (the CPU hooks at 32-byte vectors: 8 lanes of f32). */
enum { LANES = 8 };

static kir_expr *xat(fixture *f, int c) {
	kir_kernel *k = f->k;
	kir_expr *row = kir_e_binary(k, KIR_MUL, kir_e_var(k, f->i), kir_e_index(k, LANES));
	return kir_e_load(k, f->x, c ? kir_e_binary(k, KIR_ADD, row, kir_e_index(k, c)) : row);
}

/* v[c] = x[8i + c] * 2 if x[8i] > 0 else x[8i + c] + 1, the v first set to
 * x[8i + c] and each branch a run over them: the else branch must not use
 * the then branch's vector. */
static kir_stmt *lanes_branches(fixture *f, kir_var **v) {
	kir_kernel *k = f->k;
	kir_block body = {0}, then = {0}, els = {0};
	for (int c = 0; c < LANES; c++) {
		kir_block_add(k, &body, kir_s_set(k, v[c], xat(f, c)));
		kir_block_add(k, &then, kir_s_set(k, v[c], kir_e_binary(k, KIR_MUL, kir_e_var(k, v[c]), kir_e_float(k, TBC_DT_F32, 2.0))));
		kir_block_add(k, &els, kir_s_set(k, v[c], kir_e_binary(k, KIR_ADD, kir_e_var(k, v[c]), kir_e_float(k, TBC_DT_F32, 1.0))));
	}
	kir_expr *pos = kir_e_cmp(k, KIR_GT, xat(f, 0), kir_e_float(k, TBC_DT_F32, 0.0));
	kir_block_add(k, &body, kir_s_if(k, pos, then.first, els.first));
	return body.first;
}

/* v[c] = form(c) for c in 0..LANES, then y[8i + c] = v[c], over rows i. */
static void lanes_kernel(fixture *f, int form, kir_var **v) {
	kir_kernel *k = f->k;
	kir_block body = {0};
	if (form == 4) { /* the stores go after the branches */
		body.first = lanes_branches(f, v);
		for (body.last = body.first; body.last->next;) body.last = body.last->next;
	}
	for (int c = 0; c < LANES && form != 4; c++) {
		kir_expr *e = NULL;
		switch (form) {
		case 0: /* x[8i + c] * x[8i] + 1.5: consecutive, uniform, constant */
			e = kir_e_binary(k, KIR_ADD, kir_e_binary(k, KIR_MUL, xat(f, c), xat(f, 0)), kir_e_float(k, TBC_DT_F32, 1.5));
			break;
		case 1: /* a running sum: each set reads the one before */
			e = c ? kir_e_binary(k, KIR_ADD, kir_e_var(k, v[c - 1]), xat(f, c)) : xat(f, 0);
			break;
		case 2: /* loads neither the same nor consecutive (reversed): no run */
			e = kir_e_binary(k, KIR_MUL, xat(f, LANES - 1 - c), kir_e_float(k, TBC_DT_F32, 2.0));
			break;
		case 3: /* a condition per lane */
			e = kir_e_select(k, kir_e_cmp(k, KIR_GT, xat(f, c), kir_e_float(k, TBC_DT_F32, 0.0)), xat(f, c),
					 kir_e_binary(k, KIR_MUL, xat(f, c), kir_e_float(k, TBC_DT_F32, 0.5)));
			break;
		}
		kir_block_add(k, &body, kir_s_set(k, v[c], e));
	}
	for (int c = 0; c < LANES; c++) {
		kir_expr *row = kir_e_binary(k, KIR_MUL, kir_e_var(k, f->i), kir_e_index(k, LANES));
		kir_block_add(k, &body, kir_s_store(k, f->y, kir_e_binary(k, KIR_ADD, row, kir_e_index(k, c)), kir_e_var(k, v[c])));
	}
	kir_expr *rows = kir_e_binary(k, KIR_DIV, kir_e_size(k, 0), kir_e_index(k, LANES));
	k->body = kir_s_for(k, f->i, kir_e_index(k, 0), rows, 1, KIR_LOOP_SEQUENTIAL, body.first);
	assert_non_null(k->body);
	bool ok = kir_verify(k, f->d);
	for (size_t i = 0; !ok && i < tbc_diags_count(f->d); i++) print_error("%s\n", tbc_diags_get(f->d, i)->message);
	assert_true(ok);
}

/* fn's module, moved into an MCJIT engine (*ee, the caller disposes of
 * it; the fixture gets an empty module): fn's address. */
static uintptr_t jit_function(fixture *f, LLVMValueRef fn, LLVMExecutionEngineRef *ee) {
	char name[64];
	snprintf(name, sizeof name, "%s", LLVMGetValueName(fn));
	LLVMModuleRef mod = f->c.mod;
	f->c.mod = LLVMModuleCreateWithNameInContext("empty", f->c.ctx); /* the engine owns mod */
	char *err = NULL;
	if (LLVMCreateExecutionEngineForModule(ee, mod, &err)) fail_msg("MCJIT: %s", err);
	uintptr_t at = (uintptr_t)LLVMGetFunctionAddress(*ee, name);
	assert_true(at != 0);
	return at;
}

static bool ir_has(LLVMModuleRef m, const char *text) {
	char *ir = LLVMPrintModuleToString(m);
	bool has = strstr(ir, text) != NULL;
	LLVMDisposeMessage(ir);
	return has;
}

static void test_runs_of_sets_are_vectors_that_compute_as_the_sets(void **state) {
	(void)state;
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	enum { N = 4 * LANES };
	float x[N], y[N], want[N];
	for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 19) - 9.0f + 0.25f * (float)i;
	for (int form = 0; form < 5; form++) {
		fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
		kir_var *v[LANES];
		for (int c = 0; c < LANES; c++) v[c] = kir_var_new(f.k, "v", TBC_DT_F32);
		lanes_kernel(&f, form, v);
		LLVMValueRef fn = llvm_emit_kernel(&f.c, f.k, 0);
		assert_non_null(fn);
		assert_module_valid(f.c.mod);
		if (form == 0) {
			assert_true(ir_has(f.c.mod, "load <8 x float>"));
			assert_true(ir_has(f.c.mod, "fmul <8 x float>"));
			assert_true(ir_has(f.c.mod, "fadd <8 x float>"));
		}
		if (form == 1) assert_false(ir_has(f.c.mod, "fadd <8 x float>"));
		if (form == 2) assert_false(ir_has(f.c.mod, "fmul <8 x float>"));
		if (form == 3) assert_true(ir_has(f.c.mod, "select <8 x i1>"));
		LLVMExecutionEngineRef ee;
		jit_kernel run = (jit_kernel)jit_function(&f, fn, &ee);
		memset(y, 0, sizeof y);
		call_kernel(run, x, y, N);
		for (int r = 0; r < N / LANES; r++)
			for (int c = 0; c < LANES; c++) {
				const float *xr = x + r * LANES;
				float w;
				switch (form) {
				case 0: w = xr[c] * xr[0] + 1.5f; break;
				case 1: w = c ? want[r * LANES + c - 1] + xr[c] : xr[0]; break;
				case 2: w = xr[LANES - 1 - c] * 2.0f; break;
				case 3: w = xr[c] > 0 ? xr[c] : xr[c] * 0.5f; break;
				default: w = xr[0] > 0 ? xr[c] * 2.0f : xr[c] + 1.0f; break;
				}
				want[r * LANES + c] = w;
			}
		assert_memory_equal(y, want, sizeof y);
		LLVMDisposeExecutionEngine(ee);
		done(&f);
	}
}

/* f32 exp over its whole range, which llvm_math.c scales by 2^n in
 * integer arithmetic on the float's bits, with no subnormal operand or
 * result in any lane (Intel cores take a microcode assist for each): below
 * the normal range (x under -87.34, results subnormal or zero) as the
 * rounded integer k of k 2^-149, above it clamped to infinity's bits.  A
 * vector loop over a dense grid from -110 to 92 and the boundaries, run
 * through MCJIT, against exp in f64 rounded to f32 -- within one subnormal
 * step (2^-149) below the normal range, 1 ulp above, +inf where that is
 * infinite; exp(-inf) is +0. */
static void test_f32_exp_over_its_range(void **state) {
	(void)state;
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	/* a grid from where exp is 0 to past where it is infinite, and the
	 * edges: the subnormal range's ends, where the integer form meets the
	 * normal one (n = -126 with y on either side of 1), the largest finite
	 * result and the first infinite one */
	const float edges[] = {-INFINITY, -150.0f, -104.0f, -103.9721f, -103.27893f, -87.33655f, -87.33654f, -87.3365f,
			       -87.0f, -86.0f, -0.0f, 0.0f, 88.0f, 88.72283f, 88.72284f, 89.0f, 1000.0f, INFINITY};
	enum { GRID = 60000, EDGES = sizeof edges / sizeof *edges, N = GRID + EDGES };
	float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
	assert_non_null(x);
	assert_non_null(y);
	for (int i = 0; i < GRID; i++) x[i] = (float)(-110.0 + 202.0 * i / GRID);
	for (int i = 0; i < EDGES; i++) x[GRID + i] = edges[i];
	fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
	kir_kernel *k = f.k;
	k->body = kir_s_for(k, f.i, kir_e_index(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_VECTOR, store_unary(&f, KIR_EXP));
	assert_true(kir_verify(k, f.d));
	LLVMValueRef fn = llvm_emit_kernel(&f.c, k, 0);
	assert_non_null(fn);
	assert_module_valid(f.c.mod);
	LLVMExecutionEngineRef ee;
	jit_kernel run = (jit_kernel)jit_function(&f, fn, &ee);
	call_kernel(run, x, y, N);
	for (int i = 0; i < N; i++) {
		float w = (float)exp((double)x[i]);
		bool ok = isinf(w) ? isinf(y[i]) && y[i] > 0
			  : w < 0x1p-126f ? fabsf(y[i] - w) <= 0x1p-149f && !signbit(y[i])
					  : fabsf(y[i] - w) <= nextafterf(w, INFINITY) - w;
		if (!ok) fail_msg("exp(%.9g) = %.9g, want %.9g", (double)x[i], (double)y[i], (double)w);
	}
	LLVMDisposeExecutionEngine(ee);
	done(&f);
	free(x);
	free(y);
}

/* The grain a CPU kernel passes to host->parallel_for: CPU_PAR_GRAIN_WORK
 * over the work of one iteration (cpu_hooks.c's work_value), counting the
 * loops in an if's branches, sibling loops added, a loop over a size at run
 * time and a loop over one tile of a range by its tile.  A recording host
 * runs the chunks on the calling thread; the kernels are run through MCJIT
 * and compute what they say. */
static int64_t seen_n, seen_grain;
NO_FUNCTION_SANITIZER static void record_parallel_for(void *ctx, void (*body)(void *, int64_t, int64_t), void *closure,
						      int64_t n, int64_t grain) {
	(void)ctx;
	seen_n = n;
	seen_grain = grain;
	body(closure, 0, n);
}
typedef void (*jit_host_kernel)(const tbc_abi_host *, float *, float *, int64_t);
NO_FUNCTION_SANITIZER static void call_host_kernel(jit_host_kernel k, const tbc_abi_host *h, float *x, float *y, int64_t n) {
	k(h, x, y, n);
}

static kir_expr *ix(kir_kernel *k, int64_t v) { return kir_e_index(k, v); }
static kir_expr *add(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_ADD, a, b); }
static kir_expr *mul(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_MUL, a, b); }

/* for j in [lo, lo + len): y[base + j] = x[base + j] (or 0) */
static kir_stmt *copy_loop(kir_kernel *k, fixture *f, kir_expr *base, int64_t lo, int64_t len, bool zero) {
	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_expr *at = add(k, base, kir_e_var(k, j));
	kir_expr *v = zero ? kir_e_float(k, TBC_DT_F32, 0.0) : kir_e_load(k, f->x, at);
	return kir_s_for(k, j, ix(k, lo), ix(k, lo + len), 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, f->y, at, v));
}

/* form 0: rows of 64: if x[64i] > 0, y = x in two loops of 32, else y = 0
 *   (an iteration's work: 64);
 * form 1: 4 iterations, each a loop over n / 4 elements (n / 4, at run time);
 * form 2: iterations over tiles of 2 groups of 4 elements, t in [2i, min(2i
 *   + 2, n / 4)) (8: the tile, not the 1 the bounds say without their form). */
static void grain_kernel(fixture *f, int form) {
	kir_kernel *k = f->k;
	kir_expr *n = kir_e_size(k, 0), *i = kir_e_var(k, f->i);
	kir_stmt *body;
	kir_expr *trips;
	if (form == 0) {
		kir_expr *row = mul(k, i, ix(k, 64));
		kir_stmt *then = copy_loop(k, f, row, 0, 32, false);
		then->next = copy_loop(k, f, row, 32, 32, false);
		kir_expr *pos = kir_e_cmp(k, KIR_GT, kir_e_load(k, f->x, row), kir_e_float(k, TBC_DT_F32, 0.0));
		body = kir_s_if(k, pos, then, copy_loop(k, f, row, 0, 64, true));
		trips = kir_e_binary(k, KIR_FLOORDIV, n, ix(k, 64));
	} else if (form == 1) {
		kir_expr *quarter = kir_e_binary(k, KIR_FLOORDIV, n, ix(k, 4));
		kir_var *j = kir_var_new(k, "j", KIR_INDEX);
		kir_expr *at = add(k, mul(k, i, quarter), kir_e_var(k, j));
		body = kir_s_for(k, j, ix(k, 0), quarter, 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, f->y, at, kir_e_load(k, f->x, at)));
		trips = ix(k, 4);
	} else {
		kir_var *t = kir_var_new(k, "t", KIR_INDEX);
		kir_expr *lo = mul(k, i, ix(k, 2));
		kir_expr *hi = kir_e_binary(k, KIR_MIN, add(k, mul(k, i, ix(k, 2)), ix(k, 2)), kir_e_binary(k, KIR_FLOORDIV, n, ix(k, 4)));
		body = kir_s_for(k, t, lo, hi, 1, KIR_LOOP_SEQUENTIAL, copy_loop(k, f, mul(k, kir_e_var(k, t), ix(k, 4)), 0, 4, false));
		trips = kir_e_binary(k, KIR_FLOORDIV, n, ix(k, 8));
	}
	k->body = kir_s_for(k, f->i, ix(k, 0), trips, 1, KIR_LOOP_PARALLEL, body);
	assert_non_null(k->body);
	assert_true(kir_verify(k, f->d));
}

static void test_parallel_grain_follows_the_work_of_an_iteration(void **state) {
	(void)state;
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	enum { N = 1 << 16 };
	float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
	assert_non_null(x);
	assert_non_null(y);
	for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 19) - 9.0f;
	tbc_abi_host host = {.parallel_for = record_parallel_for};
	const struct {
		int form;
		int64_t n, want_n, want_grain;
	} cases[] = {
		{0, N, N / 64, CPU_PAR_GRAIN_WORK / 64},
		{1, 64, 4, (CPU_PAR_GRAIN_WORK + 15) / 16},
		{1, N, 4, 1},
		{2, N, N / 8, CPU_PAR_GRAIN_WORK / 8},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
		grain_kernel(&f, cases[c].form);
		LLVMValueRef fn = llvm_emit_kernel(&f.c, f.k, 0);
		assert_non_null(fn);
		assert_module_valid(f.c.mod);
		LLVMExecutionEngineRef ee;
		jit_host_kernel run = (jit_host_kernel)jit_function(&f, fn, &ee);
		int64_t n = cases[c].n;
		for (int64_t i = 0; i < n; i++) y[i] = NAN;
		seen_n = seen_grain = -1;
		call_host_kernel(run, &host, x, y, n);
		if (seen_n != cases[c].want_n || seen_grain != cases[c].want_grain)
			fail_msg("form %d, n %lld: parallel_for(n %lld, grain %lld), want (%lld, %lld)", cases[c].form, (long long)n,
				 (long long)seen_n, (long long)seen_grain, (long long)cases[c].want_n, (long long)cases[c].want_grain);
		for (int64_t i = 0; i < n; i++) {
			float want = cases[c].form == 0 && x[i / 64 * 64] <= 0 ? 0.0f : x[i];
			if (y[i] != want) fail_msg("form %d: y[%lld] = %g, want %g", cases[c].form, (long long)i, y[i], want);
		}
		LLVMDisposeExecutionEngine(ee);
		done(&f);
	}
	free(x);
	free(y);
}

/* A CPU's vector loop of at least 16 iterations known when compiling is
 * kept from LLVM's full unroll (llvm.loop.unroll.disable), so the loop
 * vectorizer sees it; a shorter one is LLVM's to unroll, and a target
 * without vectors (4 bytes: a GPU's) keeps its loops as before. */
static void test_long_constant_vector_loops_are_kept_for_the_vectorizer(void **state) {
	(void)state;
	const struct {
		int64_t width;
		int vector_bytes;
		bool kept;
	} cases[] = {{32, 32, true}, {16, 64, true}, {8, 32, false}, {32, 4, false}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
		f.c.vector_bytes = cases[c].vector_bytes;
		kir_kernel *k = f.k;
		kir_expr *row = mul(k, kir_e_var(k, f.i), ix(k, cases[c].width));
		kir_var *j = kir_var_new(k, "j", KIR_INDEX);
		kir_expr *at = add(k, row, kir_e_var(k, j));
		kir_stmt *copy = kir_s_for(k, j, ix(k, 0), ix(k, cases[c].width), 1, KIR_LOOP_VECTOR,
					   kir_s_store(k, f.y, at, kir_e_load(k, f.x, at)));
		kir_expr *rows = kir_e_binary(k, KIR_FLOORDIV, kir_e_size(k, 0), ix(k, cases[c].width));
		k->body = kir_s_for(k, f.i, ix(k, 0), rows, 1, KIR_LOOP_PARALLEL, copy);
		assert_true(kir_verify(k, f.d));
		assert_non_null(llvm_emit_kernel(&f.c, k, 0));
		assert_module_valid(f.c.mod);
		if (ir_has(f.c.mod, "llvm.loop.unroll.disable") != cases[c].kept)
			fail_msg("a vector loop of %lld at %d-byte vectors: kept %d, want %d", (long long)cases[c].width,
				 cases[c].vector_bytes, !cases[c].kept, cases[c].kept);
		done(&f);
	}
}

/* Sets of consecutive loads are packed into one vector (emit_set_run)
 * except in a loop LLVM's loop vectorizer is to widen (an innermost vector
 * loop): a vector value there stops it, and the loop ran scalar (a max
 * pool's taps over a padded plane, tried 2026-11-27).  In a sequential
 * loop the run is still packed. */
static void test_runs_of_sets_in_a_vector_loop_are_left_to_the_vectorizer(void **state) {
	(void)state;
	for (int in_loop = 0; in_loop < 2; in_loop++) {
		fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
		f.c.vector_bytes = 64;
		kir_kernel *k = f.k;
		kir_var *j = kir_var_new(k, "j", KIR_INDEX), *a = kir_var_new(k, "a", TBC_DT_F32), *b = kir_var_new(k, "b", TBC_DT_F32);
		kir_expr *row = mul(k, kir_e_var(k, f.i), ix(k, 33));
		kir_expr *at = add(k, row, kir_e_var(k, j));
		kir_block blk = {0};
		kir_block_add(k, &blk, kir_s_set(k, a, kir_e_load(k, f.x, at)));
		kir_block_add(k, &blk, kir_s_set(k, b, kir_e_load(k, f.x, add(k, at, ix(k, 1)))));
		kir_block_add(k, &blk, kir_s_store(k, f.y, at, kir_e_binary(k, KIR_MAX, kir_e_var(k, a), kir_e_var(k, b))));
		kir_stmt *body = kir_s_for(k, j, ix(k, 0), ix(k, 32), 1, in_loop ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL, blk.first);
		kir_expr *rows = kir_e_binary(k, KIR_FLOORDIV, kir_e_size(k, 0), ix(k, 33));
		k->body = kir_s_for(k, f.i, ix(k, 0), rows, 1, KIR_LOOP_PARALLEL, body);
		assert_true(kir_verify(k, f.d));
		assert_non_null(llvm_emit_kernel(&f.c, k, 0));
		assert_module_valid(f.c.mod);
		if (ir_has(f.c.mod, "load <2 x float>") == in_loop)
			fail_msg("two sets of consecutive loads in a %s loop: packed %d, want %d", in_loop ? "vector" : "sequential",
				 in_loop, !in_loop);
		done(&f);
	}
}

/* The clamp quantization writes, select(isnan(v), z, min(max(v, lo), hi))
 * (and max(min(v, hi), lo)), is emitted as compares and selects, without
 * llvm.maximum / llvm.minimum, and computes what the kernel IR says: NaN
 * is z (by the first compare where z is lo, else by a NaN test), infinities
 * clamp, and signed zeros come out as llvm.maximum's would. */
static void test_nan_clamp_is_compares_and_selects(void **state) {
	(void)state;
	LLVMLinkInMCJIT();
	assert_int_equal(LLVMInitializeNativeTarget(), 0);
	assert_int_equal(LLVMInitializeNativeAsmPrinter(), 0);
	static const struct {
		double lo, hi, z;
		bool max_outer;
	} forms[] = {{0, 255, 0, false}, {-128, 127, 0, false}, {-128, 127, -128, true}, {-32768, 32767, 5, true}};
	enum { N = 12 };
	float x[N] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3.7f, -300.0f, 300.0f, 127.0f, -128.5f, 254.5f, -NAN};
	for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++) {
		fixture f = make(TBC_DT_F32, &cpu_llvm_hooks);
		kir_kernel *k = f.k;
		kir_expr *i = kir_e_var(k, f.i), *v = kir_e_load(k, f.x, i);
		kir_expr *lo = kir_e_float(k, TBC_DT_F32, forms[fi].lo), *hi = kir_e_float(k, TBC_DT_F32, forms[fi].hi);
		kir_expr *c = forms[fi].max_outer ? kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_MIN, v, hi), lo)
						  : kir_e_binary(k, KIR_MIN, kir_e_binary(k, KIR_MAX, v, lo), hi);
		kir_expr *e = kir_e_select(k, kir_e_unary(k, KIR_ISNAN, v), kir_e_float(k, TBC_DT_F32, forms[fi].z), c);
		k->body = kir_s_for(k, f.i, ix(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, f.y, i, e));
		assert_true(kir_verify(k, f.d));
		LLVMValueRef fn = llvm_emit_kernel(&f.c, k, 0);
		assert_non_null(fn);
		assert_module_valid(f.c.mod);
		assert_false(ir_has(f.c.mod, "llvm.maximum"));
		assert_false(ir_has(f.c.mod, "llvm.minimum"));
		assert_true(ir_has(f.c.mod, "fcmp uno") == (forms[fi].z != forms[fi].lo));
		LLVMExecutionEngineRef ee;
		jit_kernel run = (jit_kernel)jit_function(&f, fn, &ee);
		float y[N], want[N];
		call_kernel(run, x, y, N);
		for (int j = 0; j < N; j++) {
			float flo = (float)forms[fi].lo, fhi = (float)forms[fi].hi;
			/* llvm.maximum / llvm.minimum: -0 below +0 */
			float m = x[j] > flo || (x[j] == flo && !signbit(x[j])) ? x[j] : flo;
			m = m < fhi || (m == fhi && signbit(m)) ? m : fhi;
			want[j] = isnan(x[j]) ? (float)forms[fi].z : m;
		}
		for (int j = 0; j < N; j++)
			if (memcmp(&y[j], &want[j], sizeof y[j]))
				fail_msg("form %zu, x = %g: got %g, want %g", fi, (double)x[j], (double)y[j], (double)want[j]);
		LLVMDisposeExecutionEngine(ee);
		done(&f);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_shaped_kernel_takes_buffers_in_its_address_space),
		cmocka_unit_test(test_gpu_shaped_kernel_reports_a_failed_check_through_its_hook),
		cmocka_unit_test(test_math_that_needs_libm_is_a_diagnostic_without_it),
		cmocka_unit_test(test_inline_f32_math_needs_no_libm),
		cmocka_unit_test(test_grouped_kernel_takes_local_buffers_ids_and_barriers_from_its_hooks),
		cmocka_unit_test(test_grouped_kernel_is_refused_without_work_group_hooks),
		cmocka_unit_test(test_soft_math_leaves_no_libm_call),
		cmocka_unit_test(test_soft_math_agrees_with_libm),
		cmocka_unit_test(test_soft_math_pow_and_atan2_agree_with_libm),
		cmocka_unit_test(test_cpu_kernel_takes_the_host_table_and_outlines_its_parallel_loop),
		cmocka_unit_test(test_runs_of_sets_are_vectors_that_compute_as_the_sets),
		cmocka_unit_test(test_f32_exp_over_its_range),
		cmocka_unit_test(test_parallel_grain_follows_the_work_of_an_iteration),
		cmocka_unit_test(test_long_constant_vector_loops_are_kept_for_the_vectorizer),
		cmocka_unit_test(test_runs_of_sets_in_a_vector_loop_are_left_to_the_vectorizer),
		cmocka_unit_test(test_nan_clamp_is_compares_and_selects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
