/* Kernel IR: the builder folds index math, the printer writes the text form
 * of docs/kernel-ir.md, the verifier refuses each broken rule, and the
 * evaluator computes the defined results of kir_sem.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kir/kir.h"
#include "codegen/target_desc.h"

typedef struct fixture {
	tbc_arena *arena;
	kir_kernel *k;
	kir_buffer *x, *y;
	tbc_diags *d;
} fixture;

/* kernel with x: f32[n] input and y: f32[n] output, n static or $n. */
static fixture make(int64_t n, bool symbolic) {
	fixture f = {.arena = tbc_arena_create(), .d = tbc_diags_create()};
	f.k = kir_kernel_new(f.arena, "k");
	kir_expr *dim = symbolic ? kir_e_size(f.k, kir_size_param(f.k, "n")) : kir_e_index(f.k, n);
	f.x = kir_buffer_new(f.k, "x", TBC_DT_F32, KIR_BUF_INPUT, 1, &dim);
	f.y = kir_buffer_new(f.k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, &dim);
	return f;
}
static void done(fixture *f) {
	tbc_diags_destroy(f->d);
	tbc_arena_destroy(f->arena);
}
static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) fprintf(stderr, "%s\n", tbc_diags_get(d, i)->message);
}
static bool verifies(const kir_kernel *k, tbc_diags *d) {
	bool ok = kir_verify(k, d);
	if (!ok) print_diags(d);
	return ok;
}
static bool mentions(const tbc_diags *d, const char *text) {
	for (size_t i = 0; i < tbc_diags_count(d); i++)
		if (strstr(tbc_diags_get(d, i)->message, text)) return true;
	return false;
}

static void test_index_math_folds(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_kernel *k = f.k;
	int64_t v;
	assert_true(kir_e_const_index(kir_e_add(k, kir_e_index(k, 2), kir_e_mul(k, kir_e_index(k, 3), kir_e_index(k, 4))), &v));
	assert_int_equal(v, 14);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *e = kir_e_add(k, kir_e_mul(k, kir_e_var(k, i), kir_e_index(k, 1)), kir_e_index(k, 0));
	assert_int_equal(e->kind, KIR_E_VAR);
	assert_true(kir_e_const_index(kir_e_binary(k, KIR_FLOORDIV, kir_e_index(k, -7), kir_e_index(k, 2)), &v));
	assert_int_equal(v, -4);
	assert_true(kir_e_const_index(kir_e_binary(k, KIR_FLOORMOD, kir_e_index(k, -7), kir_e_index(k, 2)), &v));
	assert_int_equal(v, 1);
	done(&f);
}

static void test_var_names_are_made_unique(void **state) {
	(void)state;
	fixture f = make(4, false);
	assert_string_equal(kir_var_new(f.k, "i", KIR_INDEX)->name, "i");
	assert_string_equal(kir_var_new(f.k, "i", KIR_INDEX)->name, "i.1");
	assert_string_equal(kir_var_new(f.k, "ij", KIR_INDEX)->name, "ij");
	done(&f);
}

/* y[i] = exp(x[i]) over $n, printed and evaluated. */
static void test_print_and_eval_exp(void **state) {
	(void)state;
	fixture f = make(0, true);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *iv = kir_e_var(k, i);
	kir_stmt *st = kir_s_store(k, f.y, iv, kir_e_unary(k, KIR_EXP, kir_e_load(k, f.x, iv)));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_PARALLEL, st);
	assert_true(kir_verify(k, f.d));
	char *text = kir_print(k);
	assert_string_equal(text, "kernel k($n) {\n"
				  "  input x: f32[$n]\n"
				  "  output y: f32[$n]\n"
				  "  for %i = 0 .. $n parallel {\n"
				  "    y[%i] = exp(x[%i])\n"
				  "  }\n"
				  "}\n");
	free(text);
	float x[3] = {0, 1, -1}, y[3] = {0};
	void *bufs[2] = {x, y};
	int64_t n = 3;
	assert_true(kir_eval(k, bufs, &n, f.d));
	assert_true(y[0] == 1.0f);
	assert_float_equal(y[1], 2.7182817f, 1e-6);
	assert_float_equal(y[2], 0.36787945f, 1e-7);
	done(&f);
}

/* A reduction: a sequential loop updating a local inside the nest. */
static void test_eval_sum_with_local(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = kir_kernel_new(a, "sum");
	kir_expr *dims[2] = {kir_e_index(k, 2), kir_e_index(k, 3)}, *one = kir_e_index(k, 2);
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_I32, KIR_BUF_INPUT, 2, dims);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_I32, KIR_BUF_OUTPUT, 1, &one);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX), *acc = kir_var_new(k, "acc", TBC_DT_I32);
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_set(k, acc, kir_e_int(k, TBC_DT_I32, 0)));
	kir_expr *idx = kir_e_add(k, kir_e_mul(k, kir_e_var(k, i), kir_e_index(k, 3)), kir_e_var(k, j));
	kir_stmt *upd = kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, kir_e_var(k, acc), kir_e_load(k, x, idx)));
	kir_block_add(k, &body, kir_s_for(k, j, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_SEQUENTIAL, upd));
	kir_block_add(k, &body, kir_s_store(k, y, kir_e_var(k, i), kir_e_var(k, acc)));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 2), 1, KIR_LOOP_PARALLEL, body.first);
	assert_true(kir_verify(k, d));
	int32_t xs[6] = {1, 2, 3, 4, 5, 2147483647}, ys[2];
	void *bufs[2] = {xs, ys};
	assert_true(kir_eval(k, bufs, NULL, d));
	assert_int_equal(ys[0], 6);
	assert_int_equal(ys[1], (int32_t)(4 + 5 + 2147483647u)); /* wraps at 32 bits */
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

static void test_defined_integer_edge_cases(void **state) {
	(void)state;
	fixture f = make(1, false);
	kir_kernel *k = f.k;
	kir_expr *cases[][2] = {
		{kir_e_binary(k, KIR_DIV, kir_e_int(k, TBC_DT_I8, 7), kir_e_int(k, TBC_DT_I8, 0)), kir_e_int(k, TBC_DT_I8, 0)},
		{kir_e_binary(k, KIR_DIV, kir_e_int(k, TBC_DT_I8, -128), kir_e_int(k, TBC_DT_I8, -1)), kir_e_int(k, TBC_DT_I8, -128)},
		{kir_e_binary(k, KIR_REM, kir_e_int(k, TBC_DT_I32, -7), kir_e_int(k, TBC_DT_I32, 2)), kir_e_int(k, TBC_DT_I32, -1)},
		{kir_e_binary(k, KIR_SHL, kir_e_int(k, TBC_DT_U8, 1), kir_e_int(k, TBC_DT_U8, 9)), kir_e_int(k, TBC_DT_U8, 0)},
		{kir_e_binary(k, KIR_SHR, kir_e_int(k, TBC_DT_I16, -8), kir_e_int(k, TBC_DT_I16, 40)), kir_e_int(k, TBC_DT_I16, -1)},
		{kir_e_binary(k, KIR_POW, kir_e_int(k, TBC_DT_I64, 3), kir_e_int(k, TBC_DT_I64, 4)), kir_e_int(k, TBC_DT_I64, 81)},
		{kir_e_cast(k, TBC_DT_U8, kir_e_float(k, TBC_DT_F32, 300.7)), kir_e_int(k, TBC_DT_U8, 44)},
		{kir_e_cast(k, TBC_DT_I32, kir_e_float(k, TBC_DT_F64, NAN)), kir_e_int(k, TBC_DT_I32, 0)},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		kir_kernel *t = kir_kernel_new(f.arena, "case");
		kir_expr *one = kir_e_index(t, 1);
		kir_buffer *out = kir_buffer_new(t, "out", TBC_DT_BOOL, KIR_BUF_OUTPUT, 1, &one);
		t->body = kir_s_store(t, out, kir_e_index(t, 0), kir_e_cmp(t, KIR_EQ, cases[c][0], cases[c][1]));
		assert_true(kir_verify(t, f.d));
		uint8_t r = 0;
		void *bufs[1] = {&r};
		assert_true(kir_eval(t, bufs, NULL, f.d));
		if (!r) fprintf(stderr, "case %zu\n", c);
		assert_int_equal(r, 1);
	}
	done(&f);
}

static void test_float_max_propagates_nan(void **state) {
	(void)state;
	fixture f = make(2, false);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *iv = kir_e_var(k, i);
	kir_stmt *st = kir_s_store(k, f.y, iv, kir_e_binary(k, KIR_MAX, kir_e_load(k, f.x, iv), kir_e_float(k, TBC_DT_F32, 1)));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 2), 1, KIR_LOOP_VECTOR, st);
	float x[2] = {NAN, 5}, y[2];
	void *bufs[2] = {x, y};
	assert_true(kir_eval(k, bufs, NULL, f.d));
	assert_true(isnan(y[0]));
	assert_true(y[1] == 5);
	done(&f);
}

/* ---- The verifier, one rule each ---------------------------------------------*/
static void test_verify_store_out_of_bounds(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_var *i = kir_var_new(f.k, "i", KIR_INDEX);
	kir_stmt *st = kir_s_store(f.k, f.y, kir_e_add(f.k, kir_e_var(f.k, i), kir_e_index(f.k, 1)), kir_e_float(f.k, TBC_DT_F32, 0));
	f.k->body = kir_s_for(f.k, i, kir_e_index(f.k, 0), kir_e_index(f.k, 4), 1, KIR_LOOP_SEQUENTIAL, st);
	assert_false(kir_verify(f.k, f.d));
	assert_true(mentions(f.d, "outside the buffer's 4 elements"));
	done(&f);
}

/* A local set again (a counter starting at -1, bumped before each store)
 * may hold any value afterwards: its first value proves nothing. */
static void test_verify_counter_set_twice(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_var *i = kir_var_new(f.k, "i", KIR_INDEX), *c = kir_var_new(f.k, "c", KIR_INDEX);
	kir_block body = {0};
	kir_block_add(f.k, &body, kir_s_set(f.k, c, kir_e_add(f.k, kir_e_var(f.k, c), kir_e_index(f.k, 1))));
	kir_block_add(f.k, &body, kir_s_store(f.k, f.y, kir_e_var(f.k, c), kir_e_float(f.k, TBC_DT_F32, 1)));
	kir_block top = {0};
	kir_block_add(f.k, &top, kir_s_set(f.k, c, kir_e_index(f.k, -1)));
	kir_block_add(f.k, &top, kir_s_for(f.k, i, kir_e_index(f.k, 0), kir_e_index(f.k, 4), 1, KIR_LOOP_SEQUENTIAL, body.first));
	f.k->body = top.first;
	if (!kir_verify(f.k, f.d)) print_message("%s\n", tbc_diags_get(f.d, 0)->message);
	assert_true(kir_verify(f.k, f.d));
	float x[4] = {0}, y[4] = {0};
	void *bufs[2] = {x, y};
	assert_true(kir_eval(f.k, bufs, NULL, f.d));
	for (int k = 0; k < 4; k++) assert_true(y[k] == 1.0f);
	done(&f);
}

static void test_verify_store_to_input(void **state) {
	(void)state;
	fixture f = make(4, false);
	f.k->body = kir_s_store(f.k, f.x, kir_e_index(f.k, 0), kir_e_float(f.k, TBC_DT_F32, 0));
	assert_false(kir_verify(f.k, f.d));
	assert_true(mentions(f.d, "read only"));
	done(&f);
}

static void test_verify_type_mismatch(void **state) {
	(void)state;
	fixture f = make(4, false);
	f.k->body = kir_s_store(f.k, f.y, kir_e_index(f.k, 0),
				kir_e_binary(f.k, KIR_ADD, kir_e_float(f.k, TBC_DT_F32, 1), kir_e_float(f.k, TBC_DT_F64, 1)));
	assert_false(kir_verify(f.k, f.d));
	assert_true(mentions(f.d, "add of f32 and f64"));
	done(&f);
}

static void test_verify_parallel_loop_sets_outer_local(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX), *acc = kir_var_new(k, "acc", TBC_DT_F32);
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_set(k, acc, kir_e_float(k, TBC_DT_F32, 0)));
	kir_stmt *upd = kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, kir_e_var(k, acc), kir_e_load(k, f.x, kir_e_var(k, i))));
	kir_block_add(k, &b, kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 4), 1, KIR_LOOP_PARALLEL, upd));
	k->body = b.first;
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "set inside it"));
	done(&f);
}

static void test_verify_use_outside_scope_and_narrow_math(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	k->body = kir_s_store(k, f.y, kir_e_var(k, i), kir_e_float(k, TBC_DT_F32, 0));
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "%i is used where it is not defined"));
	fixture g = make(4, false);
	g.k->body = kir_s_store(g.k, g.y, kir_e_index(g.k, 0),
				kir_e_cast(g.k, TBC_DT_F32, kir_e_unary(g.k, KIR_EXP, kir_e_float(g.k, TBC_DT_F16, 1))));
	assert_false(kir_verify(g.k, g.d));
	assert_true(mentions(g.d, "narrow floats"));
	done(&f);
	done(&g);
}

static void test_eval_checks_bounds_at_run_time(void **state) {
	(void)state;
	fixture f = make(0, true);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_stmt *st = kir_s_store(k, f.y, kir_e_var(k, i), kir_e_float(k, TBC_DT_F32, 1));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 5), 1, KIR_LOOP_SEQUENTIAL, st);
	assert_true(kir_verify(k, f.d)); /* $n is unknown here */
	float x[3], y[3];
	void *bufs[2] = {x, y};
	int64_t n = 3;
	assert_false(kir_eval(k, bufs, &n, f.d));
	assert_true(mentions(f.d, "store of y at 3, outside its 3 elements"));
	done(&f);
}

/* error "message" if cond: prints, verifies (a bool condition), and fails
 * the evaluation with the message when the condition holds. */
static void test_error_statement(void **state) {
	(void)state;
	fixture f = make(3, false);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *x = kir_e_load(k, f.x, kir_e_var(k, i));
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_error(k, kir_e_cmp(k, KIR_LT, x, kir_e_float(k, TBC_DT_F32, 0)), "negative input"));
	kir_block_add(k, &b, kir_s_store(k, f.y, kir_e_var(k, i), kir_e_unary(k, KIR_SQRT, x)));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_PARALLEL, b.first);
	assert_true(kir_verify(k, f.d));
	assert_true(kir_kernel_can_fail(k));
	char *text = kir_print(k);
	assert_non_null(strstr(text, "    error \"negative input\" if lt(x[%i], 0.0:f32)\n    y[%i] = sqrt(x[%i])\n"));
	free(text);
	float x1[3] = {4, 9, 16}, y[3];
	void *bufs[2] = {x1, y};
	assert_true(kir_eval(k, bufs, NULL, f.d));
	assert_true(y[2] == 4.0f);
	float x2[3] = {4, -9, 16};
	bufs[0] = x2;
	assert_false(kir_eval(k, bufs, NULL, f.d));
	assert_true(mentions(f.d, "negative input"));
	done(&f);

	f = make(3, false);
	k = f.k;
	k->body = kir_s_error(k, kir_e_float(k, TBC_DT_F32, 1), "not a condition");
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "the condition of error"));
	done(&f);
}

/* A cast to float8 without saturation prints as such and is refused for
 * other targets. */
static void test_cast_without_saturation(void **state) {
	(void)state;
	fixture f = make(3, false);
	kir_kernel *k = f.k;
	kir_expr *d = kir_e_index(k, 3);
	kir_buffer *z = kir_buffer_new(k, "z", TBC_DT_F8E4M3FN, KIR_BUF_OUTPUT, 1, &d);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *x = kir_e_load(k, f.x, kir_e_var(k, i));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_PARALLEL,
			    kir_s_store(k, z, kir_e_var(k, i), kir_e_cast_nosat(k, TBC_DT_F8E4M3FN, x)));
	assert_true(kir_verify(k, f.d));
	char *text = kir_print(k);
	assert_non_null(strstr(text, "z[%i] = f8e4m3fn.nosat(x[%i])"));
	free(text);
	float x1[3] = {1, 1000, -1000};
	uint8_t out[3], y[3];
	void *bufs[3] = {x1, y, out};
	assert_true(kir_eval(k, bufs, NULL, f.d));
	assert_int_equal(out[0], 0x38);
	assert_int_equal(out[1], 0x7f); /* NaN: e4m3fn has no infinity */
	assert_int_equal(out[2], 0xff);
	done(&f);

	f = make(3, false);
	k = f.k;
	i = kir_var_new(k, "i", KIR_INDEX);
	x = kir_e_load(k, f.x, kir_e_var(k, i));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_PARALLEL,
			    kir_s_store(k, f.y, kir_e_var(k, i), kir_e_cast_nosat(k, TBC_DT_F32, kir_e_cast(k, TBC_DT_F64, x))));
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "without saturation to f32"));
	done(&f);
}


/* An f16 -> f32 cast whose NaN may carry any payload: the value of the cast
 * otherwise, marked in the text, and only from a narrow float. */
static void test_cast_with_any_nan(void **state) {
	(void)state;
	fixture f = make(3, false);
	kir_kernel *k = f.k;
	kir_expr *d = kir_e_index(k, 3);
	kir_buffer *h = kir_buffer_new(k, "h", TBC_DT_F16, KIR_BUF_INPUT, 1, &d);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *hv = kir_e_load(k, h, kir_e_var(k, i));
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_PARALLEL,
			    kir_s_store(k, f.y, kir_e_var(k, i), kir_e_cast_any_nan(k, TBC_DT_F32, hv)));
	assert_true(verifies(k, f.d));
	char *text = kir_print(k);
	assert_non_null(strstr(text, "y[%i] = f32.anynan(h[%i])"));
	free(text);
	uint16_t hx[3] = {0x3c00, 0xc500, 0x7bff}; /* 1, -5, 65504 */
	float x[3], y[3];
	void *bufs[3] = {x, y, hx};
	assert_true(kir_eval(k, bufs, NULL, f.d));
	assert_true(y[0] == 1.0f && y[1] == -5.0f && y[2] == 65504.0f);
	/* From a type that is not a narrow float it is a plain cast. */
	assert_int_equal(kir_e_cast_any_nan(k, TBC_DT_F64, kir_e_load(k, f.x, kir_e_index(k, 0)))->op, 0);
	done(&f);

	f = make(3, false);
	k = f.k;
	i = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *cast = kir_e_cast(k, TBC_DT_F32, kir_e_cast(k, TBC_DT_F64, kir_e_load(k, f.x, kir_e_var(k, i))));
	cast->op = KIR_CAST_ANY_NAN; /* from f64: refused */
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 3), 1, KIR_LOOP_PARALLEL,
			    kir_s_store(k, f.y, kir_e_var(k, i), cast));
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "a cast with any NaN from f64 to f32"));
	done(&f);
}

/* ---- The parallel form: work-groups, local buffers, barriers ---------------- */

/* y[r] = sum of row r of x (R x C), one work-group of wg items per row: each
 * item sums a strided part of the row, then a tree in local memory.  With
 * racy the tree has no barriers; with divergent its barriers sit inside the
 * `if` only some items take. */
static kir_kernel *row_sum(tbc_arena *a, int64_t R, int64_t C, int64_t wg, bool racy, bool divergent) {
	kir_kernel *k = kir_kernel_new(a, "row_sum");
	kir_kernel_set_group(k, 1, &wg);
	kir_expr *xd[2] = {kir_e_index(k, R), kir_e_index(k, C)}, *yd = kir_e_index(k, R);
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_F32, KIR_BUF_INPUT, 2, xd);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, &yd);
	kir_buffer *part = kir_local_new(k, "part", TBC_DT_F32, 1, &wg);
	kir_var *row = kir_var_new(k, "row", KIR_INDEX), *c = kir_var_new(k, "c", KIR_INDEX);
	kir_var *acc = kir_var_new(k, "acc", TBC_DT_F32);
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_set(k, acc, kir_e_float(k, TBC_DT_F32, 0)));
	kir_expr *xi = kir_e_add(k, kir_e_mul(k, kir_e_var(k, row), kir_e_index(k, C)), kir_e_var(k, c));
	kir_block_add(k, &b, kir_s_for(k, c, kir_e_local_id(k, 0), kir_e_index(k, C), wg, KIR_LOOP_SEQUENTIAL,
				       kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, kir_e_var(k, acc), kir_e_load(k, x, xi)))));
	kir_block_add(k, &b, kir_s_store(k, part, kir_e_local_id(k, 0), kir_e_var(k, acc)));
	kir_block_add(k, &b, kir_s_barrier(k));
	for (int64_t st = wg / 2; st >= 1; st /= 2) {
		kir_expr *me = kir_e_local_id(k, 0), *other = kir_e_add(k, kir_e_local_id(k, 0), kir_e_index(k, st));
		kir_stmt *upd = kir_s_store(k, part, me, kir_e_binary(k, KIR_ADD, kir_e_load(k, part, me), kir_e_load(k, part, other)));
		if (divergent) upd->next = kir_s_barrier(k);
		kir_block_add(k, &b, kir_s_if(k, kir_e_cmp(k, KIR_LT, kir_e_local_id(k, 0), kir_e_index(k, st)), upd, NULL));
		if (!racy && !divergent) kir_block_add(k, &b, kir_s_barrier(k));
	}
	kir_block_add(k, &b, kir_s_if(k, kir_e_cmp(k, KIR_EQ, kir_e_local_id(k, 0), kir_e_index(k, 0)),
				      kir_s_store(k, y, kir_e_var(k, row), kir_e_load(k, part, kir_e_index(k, 0))), NULL));
	k->body = kir_s_for(k, row, kir_e_index(k, 0), kir_e_index(k, R), 1, KIR_LOOP_GRID, b.first);
	return k;
}

static void test_group_tree_sum_prints_verifies_and_runs(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = row_sum(a, 3, 100, 8, false, false);
	assert_true(verifies(k, d));
	char *text = kir_print(k);
	assert_non_null(strstr(text, "kernel row_sum() group(8) {"));
	assert_non_null(strstr(text, "  local part: f32[8]\n"));
	assert_non_null(strstr(text, "for %row = 0 .. 3 grid {"));
	assert_non_null(strstr(text, "for %c = local_id(0) .. 100 step 8 sequential {"));
	assert_non_null(strstr(text, "    barrier\n"));
	free(text);
	float x[300], y[3] = {0};
	for (int i = 0; i < 300; i++) x[i] = (float)(i % 7) - 2.5f;
	void *bufs[2] = {x, y};
	assert_true(kir_eval(k, bufs, NULL, d));
	for (int r = 0; r < 3; r++) {
		double want = 0;
		for (int i = 0; i < 100; i++) want += x[r * 100 + i];
		assert_float_equal(y[r], want, 1e-3);
	}
	tbc_target_desc cpu = tbc_target_desc_cpu_default(), dev = tbc_target_desc_opencl_default();
	assert_false(kir_fits_target(k, &cpu, d));
	assert_true(kir_fits_target(k, &dev, d));
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* Without barriers the tree's items read what others store: the evaluator
 * reports the race rather than picking one order. */
static void test_group_race_is_reported(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = row_sum(a, 2, 16, 4, true, false);
	assert_true(verifies(k, d));
	float x[32] = {0}, y[2];
	void *bufs[2] = {x, y};
	assert_false(kir_eval(k, bufs, NULL, d));
	assert_true(mentions(d, "race on part["));
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* A barrier only some items reach (inside `if local_id < s`) is refused. */
static void test_verify_barrier_in_divergent_code(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = row_sum(a, 2, 16, 4, false, true);
	assert_false(kir_verify(k, d));
	assert_true(mentions(d, "barrier where the work-items of a group may not all reach it"));
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* How a device runs a kernel (kir_kernel_launch_shape): a grouped kernel as
 * work-groups, a body that is one parallel loop as a grid of work-items,
 * anything else (sequential code, two parallel loops) on one work-item. */
static void test_launch_shape(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	assert_int_equal(kir_kernel_launch_shape(row_sum(a, 2, 16, 4, false, false)), KIR_LAUNCH_GROUPS);
	kir_kernel *k = kir_kernel_new(a, "copy");
	kir_expr *n4[1] = {kir_e_index(k, 4)};
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_F32, KIR_BUF_INPUT, 1, n4);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, n4);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_stmt *first = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 4), 1, KIR_LOOP_PARALLEL,
				    kir_s_store(k, y, kir_e_var(k, i), kir_e_load(k, x, kir_e_var(k, i))));
	k->body = first;
	assert_int_equal(kir_kernel_launch_shape(k), KIR_LAUNCH_GRID);
	assert_ptr_equal(kir_kernel_grid_loop(k), first);
	/* a second parallel loop after it: one work-item */
	first->next = kir_s_for(k, j, kir_e_index(k, 0), kir_e_index(k, 4), 1, KIR_LOOP_PARALLEL,
				kir_s_store(k, y, kir_e_var(k, j), kir_e_float(k, TBC_DT_F32, 1)));
	assert_int_equal(kir_kernel_launch_shape(k), KIR_LAUNCH_SINGLE);
	assert_null(kir_kernel_grid_loop(k));
	/* sequential code alone */
	first->next = NULL;
	first->loop = KIR_LOOP_SEQUENTIAL;
	assert_int_equal(kir_kernel_launch_shape(k), KIR_LAUNCH_SINGLE);
	tbc_arena_destroy(a);
}

/* kir_eval_with reverse_parallel runs independent loops backwards: a
 * "parallel" loop whose iterations all store one element (a race on a
 * device) gives another result than in order; a sequential one does not. */
static void test_eval_reversed_parallel_loops(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = kir_kernel_new(a, "last_wins");
	kir_expr *one[1] = {kir_e_index(k, 1)};
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_I64, KIR_BUF_OUTPUT, 1, one);
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 5), 1, KIR_LOOP_PARALLEL,
			    kir_s_store(k, y, kir_e_index(k, 0), kir_e_cast(k, TBC_DT_I64, kir_e_var(k, i))));
	int64_t out = -1;
	void *bufs[1] = {&out};
	kir_eval_options back = {.reverse_parallel = true};
	assert_true(kir_eval(k, bufs, NULL, d));
	assert_int_equal(out, 4);
	assert_true(kir_eval_with(k, bufs, NULL, &back, d));
	assert_int_equal(out, 0);
	k->body->loop = KIR_LOOP_SEQUENTIAL;
	assert_true(kir_eval_with(k, bufs, NULL, &back, d));
	assert_int_equal(out, 4);
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* local_id, local buffers and barriers belong to grouped kernels. */
static void test_verify_group_constructs_need_a_group(void **state) {
	(void)state;
	fixture f = make(4, false);
	kir_kernel *k = f.k;
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_stmt *st = kir_s_store(k, f.y, kir_e_var(k, i), kir_e_cast(k, TBC_DT_F32, kir_e_cast(k, TBC_DT_I32, kir_e_local_id(k, 0))));
	st->next = kir_s_barrier(k);
	k->body = kir_s_for(k, i, kir_e_index(k, 0), kir_e_index(k, 4), 1, KIR_LOOP_GRID, st);
	assert_false(kir_verify(k, f.d));
	assert_true(mentions(f.d, "local_id outside a work-group"));
	assert_true(mentions(f.d, "barrier outside a work-group"));
	assert_true(mentions(f.d, "not in the kernel's grid nest"));
	done(&f);
}

/* ---- The warp matrix multiply-accumulate (kir_mma) ---------------------------- */

/* y (16 x 8, f32) = x (16 x 16) times w (16 x 8), f16, by one mma of a group
 * of `items` items (one warp when 32): both staged in local memory, each
 * item storing its four sums where the fragment layout puts them (rows g,
 * g + 8, columns 2t, 2t + 1).  uneven: the warp's items disagree on where
 * a is. */
static kir_kernel *mma_kernel(tbc_arena *ar, int64_t items, bool contract, bool uneven) {
	kir_kernel *k = kir_kernel_new(ar, "mma16");
	k->contract = contract;
	kir_kernel_set_group(k, 1, &items);
	kir_expr *xd[2] = {kir_e_index(k, 16), kir_e_index(k, 16)}, *wd[2] = {kir_e_index(k, 16), kir_e_index(k, 8)};
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_F16, KIR_BUF_INPUT, 2, xd);
	kir_buffer *w = kir_buffer_new(k, "w", TBC_DT_F16, KIR_BUF_INPUT, 2, wd);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 2, wd);
	kir_buffer *xs = kir_local_new(k, "xs", TBC_DT_F16, 2, (int64_t[]){24, 16});
	kir_buffer *ws = kir_local_new(k, "ws", TBC_DT_F16, 2, (int64_t[]){16, 8});
	kir_var *g0 = kir_var_new(k, "g0", KIR_INDEX), *e = kir_var_new(k, "e", KIR_INDEX);
	kir_block b = {0};
	kir_expr *lid = kir_e_local_id(k, 0);
	kir_block_add(k, &b, kir_s_for(k, e, lid, kir_e_index(k, 256), items, KIR_LOOP_SEQUENTIAL,
				       kir_s_store(k, xs, kir_e_var(k, e), kir_e_load(k, x, kir_e_var(k, e)))));
	kir_var *e2 = kir_var_new(k, "e", KIR_INDEX);
	kir_block_add(k, &b, kir_s_for(k, e2, lid, kir_e_index(k, 128), items, KIR_LOOP_SEQUENTIAL,
				       kir_s_store(k, ws, kir_e_var(k, e2), kir_e_load(k, w, kir_e_var(k, e2)))));
	kir_block_add(k, &b, kir_s_barrier(k));
	kir_var *acc[4];
	for (int i = 0; i < 4; i++) {
		acc[i] = kir_var_new(k, "acc", TBC_DT_F32);
		kir_block_add(k, &b, kir_s_set(k, acc[i], kir_e_float(k, TBC_DT_F32, 0.5)));
	}
	kir_expr *a_at = uneven ? kir_e_select(k, kir_e_cmp(k, KIR_LT, lid, kir_e_index(k, 16)), kir_e_index(k, 0), kir_e_index(k, 8))
				: kir_e_index(k, 0);
	kir_mma m = {.mi = 1, .ni = 1, .a = xs, .b = ws, .a_at = a_at, .b_at = kir_e_index(k, 0), .lda = 16, .ldb = 8, .acc = acc};
	kir_block_add(k, &b, kir_s_mma(k, &m));
	kir_expr *lane = kir_e_binary(k, KIR_FLOORMOD, lid, kir_e_index(k, 32));
	kir_expr *g = kir_e_binary(k, KIR_FLOORDIV, lane, kir_e_index(k, 4));
	kir_expr *t = kir_e_mul(k, kir_e_binary(k, KIR_FLOORMOD, lane, kir_e_index(k, 4)), kir_e_index(k, 2));
	kir_block st = {0};
	for (int i = 0; i < 4; i++) {
		kir_expr *row = kir_e_add(k, g, kir_e_index(k, 8 * (i / 2))), *col = kir_e_add(k, t, kir_e_index(k, i % 2));
		kir_block_add(k, &st, kir_s_store(k, y, kir_e_add(k, kir_e_mul(k, row, kir_e_index(k, 8)), col), kir_e_var(k, acc[i])));
	}
	kir_block_add(k, &b, kir_s_if(k, kir_e_cmp(k, KIR_LT, lid, kir_e_index(k, 32)), st.first, NULL));
	k->body = kir_s_for(k, g0, kir_e_index(k, 0), kir_e_index(k, 1), 1, KIR_LOOP_GRID, b.first);
	return k;
}

static void test_mma_fragment_layout_prints_verifies_and_runs(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	for (int64_t items = 32; items <= 64; items += 32) { /* one warp, two doing the same */
		kir_kernel *k = mma_kernel(a, items, true, false);
		assert_true(verifies(k, d));
		char *text = kir_print(k);
		assert_non_null(strstr(text, "mma.m16n8k16 [1 x 1] (%acc, %acc.1, %acc.2, %acc.3) += xs[0; 16] * ws[0; 8]\n"));
		free(text);
		uint16_t x[256], w[128];
		float y[128];
		for (int i = 0; i < 256; i++) x[i] = (uint16_t)tbc_f32_to_f16((float)((i * 7) % 11) - 5.0f);
		for (int i = 0; i < 128; i++) w[i] = (uint16_t)tbc_f32_to_f16((float)((i * 5) % 9) * 0.25f - 1.0f);
		void *bufs[3] = {x, w, y};
		if (!kir_eval(k, bufs, NULL, d)) print_diags(d);
		assert_true(tbc_diags_count(d) == 0);
		for (int r = 0; r < 16; r++)
			for (int c = 0; c < 8; c++) {
				double want = 0.5;
				for (int q = 0; q < 16; q++) want += (double)tbc_f16_to_f32(x[r * 16 + q]) * tbc_f16_to_f32(w[q * 8 + c]);
				assert_float_equal(y[r * 8 + c], want, 1e-6);
			}
	}
	/* only targets declaring it receive one */
	kir_kernel *k = mma_kernel(a, 32, true, false);
	tbc_target_desc sm80 = tbc_target_desc_cuda(80), sm75 = tbc_target_desc_cuda(75), cl = tbc_target_desc_opencl_default();
	assert_true(kir_fits_target(k, &sm80, d));
	assert_false(kir_fits_target(k, &sm75, d));
	assert_false(kir_fits_target(k, &cl, d));
	assert_true(mentions(d, "matrix multiply-accumulate (mma) the target does not declare"));
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* The rules: whole warps, a kernel marked contract; at run time the items
 * of a warp agree on the operands. */
static void test_mma_rules(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	assert_false(kir_verify(mma_kernel(a, 16, true, false), d));
	assert_true(mentions(d, "not whole warps of 32"));
	assert_false(kir_verify(mma_kernel(a, 32, false, false), d));
	assert_true(mentions(d, "not marked contract"));
	kir_kernel *k = mma_kernel(a, 32, true, true);
	assert_true(verifies(k, d));
	uint16_t x[256] = {0}, w[128] = {0};
	float y[128];
	void *bufs[3] = {x, w, y};
	assert_false(kir_eval(k, bufs, NULL, d));
	assert_true(mentions(d, "work-items 0 and 16 of one warp disagree on an mma's operands"));
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_math_folds),
		cmocka_unit_test(test_var_names_are_made_unique),
		cmocka_unit_test(test_print_and_eval_exp),
		cmocka_unit_test(test_eval_sum_with_local),
		cmocka_unit_test(test_defined_integer_edge_cases),
		cmocka_unit_test(test_float_max_propagates_nan),
		cmocka_unit_test(test_verify_store_out_of_bounds),
		cmocka_unit_test(test_verify_counter_set_twice),
		cmocka_unit_test(test_verify_store_to_input),
		cmocka_unit_test(test_verify_type_mismatch),
		cmocka_unit_test(test_verify_parallel_loop_sets_outer_local),
		cmocka_unit_test(test_verify_use_outside_scope_and_narrow_math),
		cmocka_unit_test(test_eval_checks_bounds_at_run_time),
		cmocka_unit_test(test_error_statement),
		cmocka_unit_test(test_cast_without_saturation),
		cmocka_unit_test(test_cast_with_any_nan),
		cmocka_unit_test(test_group_tree_sum_prints_verifies_and_runs),
		cmocka_unit_test(test_group_race_is_reported),
		cmocka_unit_test(test_launch_shape),
		cmocka_unit_test(test_eval_reversed_parallel_loops),
		cmocka_unit_test(test_verify_barrier_in_divergent_code),
		cmocka_unit_test(test_verify_group_constructs_need_a_group),
		cmocka_unit_test(test_mma_fragment_layout_prints_verifies_and_runs),
		cmocka_unit_test(test_mma_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
