/* The OpenCL C printer: how kernels map to work-items, and that a printed
 * kernel run on the OpenCL device (PoCL here) computes what the kernel IR
 * evaluator computes, bit for bit where kir_sem.h and ir/dtype.c define the
 * result (integer division by zero, wrapping, shifts, NaN in min/max, every
 * narrow float cast). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kir.h"
#include "codegen/opencl/opencl_c.h"
#include "ir/dtype.h"
#include "tests/conformance/opencl_target.h"
#include "tests/unit/support/need.h"

#define N 64

typedef struct fixture {
	tbc_arena *arena;
	kir_kernel *k;
	kir_buffer *x, *y, *z;
	kir_var *i;
	tbc_diags *d;
} fixture;

/* x: in[n], y: out[n] (and z: out[n]) over size $n. */
static fixture make(tbc_dtype in, tbc_dtype out) {
	fixture f = {.arena = tbc_arena_create(), .d = tbc_diags_create()};
	f.k = kir_kernel_new(f.arena, "k");
	kir_expr *dim = kir_e_size(f.k, kir_size_param(f.k, "n"));
	f.x = kir_buffer_new(f.k, "x", in, KIR_BUF_INPUT, 1, &dim);
	f.y = kir_buffer_new(f.k, "y", out, KIR_BUF_OUTPUT, 1, &dim);
	f.i = kir_var_new(f.k, "i", KIR_INDEX);
	return f;
}

static void done(fixture *f) {
	tbc_diags_destroy(f->d);
	tbc_arena_destroy(f->arena);
}

static kir_stmt *loop(fixture *f, kir_loop_kind kind, kir_stmt *body) {
	return kir_s_for(f->k, f->i, kir_e_index(f->k, 0), kir_e_size(f->k, 0), 1, kind, body);
}

/* y[i] = value(x[i]) in a parallel loop. */
static void map(fixture *f, kir_expr *value) {
	f->k->body = loop(f, KIR_LOOP_PARALLEL, kir_s_store(f->k, f->y, kir_e_var(f->k, f->i), value));
}

static void same_on_device_as(fixture *f, const void *x, size_t y_bytes, bool nan_any);
static void same_on_device(fixture *f, const void *x, size_t x_bytes, size_t y_bytes) {
	(void)x_bytes;
	same_on_device_as(f, x, y_bytes, false);
}

static kir_expr *xi(fixture *f) { return kir_e_load(f->k, f->x, kir_e_var(f->k, f->i)); }

static void need_opencl(void) {
	if (!tbc_ocl_available()) TBC_TEST_NEEDS("an OpenCL platform (pocl-opencl-icd)");
}

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) fprintf(stderr, "%s\n", tbc_diags_get(d, i)->message);
}

/* Runs f's kernel with the evaluator and on the device over the same
 * inputs; the outputs must have the same bytes, except that with nan_any a
 * NaN f32 or f64 result may have another sign or payload (IEEE 754 leaves
 * them to the hardware for arithmetic; kir_sem.h fixes them for min and max
 * and casts, which are compared bit for bit). */
static bool both_nan(tbc_dtype t, const void *a, const void *b, size_t i) {
	if (t != TBC_DT_F32 && t != TBC_DT_F64) return false;
	return isnan(tbc_load_f64(t, a, i)) && isnan(tbc_load_f64(t, b, i));
}

static void same_on_device_as(fixture *f, const void *x, size_t y_bytes, bool nan_any) {
	need_opencl();
	if (!kir_verify(f->k, f->d)) print_diags(f->d);
	assert_true(kir_verify(f->k, f->d));
	void *y_eval = calloc(1, y_bytes), *y_dev = calloc(1, y_bytes);
	int64_t sizes[1] = {N};
	void *eval_bufs[2] = {(void *)x, y_eval}, *dev_bufs[2] = {(void *)x, y_dev};
	assert_true(kir_eval(f->k, eval_bufs, sizes, f->d));
	bool ok = tbc_ocl_eval_kernel(f->k, dev_bufs, sizes, f->d);
	if (!ok) print_diags(f->d);
	assert_true(ok);
	tbc_dtype t = f->y->dtype;
	size_t es = tbc_dtype_size(t);
	for (size_t b = 0; b < y_bytes; b++)
		if (((unsigned char *)y_eval)[b] != ((unsigned char *)y_dev)[b] && !(nan_any && both_nan(t, y_eval, y_dev, b / es))) {
			fprintf(stderr, "byte %zu: evaluator %#x, device %#x\n", b, ((unsigned char *)y_eval)[b],
				((unsigned char *)y_dev)[b]);
			fail();
		}
	free(y_eval);
	free(y_dev);
}

/* Interesting floats: zeros, NaN, infinities, overflow for every narrow
 * format, ties, subnormals. */
static void special_floats(float *x) {
	static const float v[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1.0f, -1.5f, 65504.0f, 65520.0f,
				  1e6f, -1e6f, 448.0f, 464.0f, 240.0f, 57344.0f, 6.0f, 7.0f, 0.25f, 1e-8f,
				  3.0e-5f, 1.0e-40f, 2.5f, 3.5f, 0.1f, -0.3f, 1e30f, 3.3895314e38f, 0.75f, 5.5f};
	for (int i = 0; i < N; i++) x[i] = i < (int)(sizeof v / sizeof *v) ? v[i] : (float)(i - 40) * 0.37f;
}

static void test_one_parallel_loop_is_a_grid(void **state) {
	(void)state;
	fixture f = make(TBC_DT_F32, TBC_DT_F32);
	map(&f, kir_e_binary(f.k, KIR_MUL, xi(&f), kir_e_float(f.k, TBC_DT_F32, 2.0)));
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(f.k, "twice", &out, f.d));
	assert_int_equal(out.shape, TBC_OCL_GRID);
	assert_non_null(strstr(out.source, "__kernel void twice("));
	assert_non_null(strstr(out.source, "get_global_id(0)"));
	assert_non_null(strstr(out.source, "get_global_size(0)"));
	assert_false(out.has_status);
	assert_true(out.stored[1] && !out.stored[0]);
	tbc_ocl_kernel_free(&out);
	float x[N];
	special_floats(x);
	same_on_device(&f, x, sizeof x, N * 4);
	done(&f);
}

/* Two top-level parallel loops, the second reading what the first stored:
 * one work-item runs both in order. */
static void test_two_loops_run_on_one_work_item(void **state) {
	(void)state;
	fixture f = make(TBC_DT_I32, TBC_DT_I32);
	kir_kernel *k = f.k;
	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_expr *jv = kir_e_var(k, j);
	kir_stmt *first = loop(&f, KIR_LOOP_PARALLEL, kir_s_store(k, f.y, kir_e_var(k, f.i), xi(&f)));
	kir_expr *prev = kir_e_load(k, f.y, kir_e_binary(k, KIR_FLOORMOD, kir_e_add(k, jv, kir_e_index(k, 1)), kir_e_size(k, 0)));
	kir_stmt *second = kir_s_for(k, j, kir_e_index(k, 0), kir_e_size(k, 0), 1, KIR_LOOP_PARALLEL,
				     kir_s_store(k, f.y, jv, kir_e_binary(k, KIR_ADD, prev, kir_e_int(k, TBC_DT_I32, 1))));
	first->next = second;
	k->body = first;
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(k, "two", &out, f.d));
	assert_int_equal(out.shape, TBC_OCL_SINGLE);
	tbc_ocl_kernel_free(&out);
	int32_t x[N];
	for (int i = 0; i < N; i++) x[i] = i * 3;
	same_on_device(&f, x, sizeof x, sizeof x);
	done(&f);
}

/* x / y, x % y, x << y, x >> y of int8 and int32 where C leaves them undefined. */
static void binary_ints(tbc_dtype t, kir_binop op) {
	fixture f = make(t, t);
	kir_kernel *k = f.k;
	kir_expr *iv = kir_e_var(k, f.i);
	kir_expr *a = kir_e_load(k, f.x, iv);
	kir_expr *b = kir_e_load(k, f.x, kir_e_binary(k, KIR_FLOORMOD, kir_e_add(k, iv, kir_e_index(k, 7)), kir_e_size(k, 0)));
	map(&f, kir_e_binary(k, op, a, b));
	size_t es = tbc_dtype_size(t);
	unsigned char x[N * 8];
	static const int64_t v[] = {0, 1, -1, 2, -2, 7, -7, 127, -128, 100, 40, 31, 32, 33, 8, 64,
				    INT32_MAX, INT32_MIN, -65536, 65535};
	for (int i = 0; i < N; i++) tbc_store_i64(t, x, (size_t)i, v[i % (int)(sizeof v / sizeof *v)] + (i >= 20 ? i : 0));
	same_on_device(&f, x, N * es, N * es);
	done(&f);
}

static void test_integer_semantics_match_the_evaluator(void **state) {
	(void)state;
	static const kir_binop ops[] = {KIR_ADD, KIR_SUB, KIR_MUL, KIR_DIV, KIR_REM, KIR_MIN, KIR_MAX,
					KIR_POW, KIR_SHL, KIR_SHR, KIR_AND, KIR_XOR};
	static const tbc_dtype types[] = {TBC_DT_I8, TBC_DT_U8, TBC_DT_I32, TBC_DT_U32, TBC_DT_I64, TBC_DT_I4};
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) binary_ints(types[t], ops[o]);
}

static void test_float_min_max_sign_match_the_evaluator(void **state) {
	(void)state;
	/* correctly rounded everywhere (pow, exp, ... are within a few ulp: the conformance run checks those) */
	static const kir_binop ops[] = {KIR_MIN, KIR_MAX, KIR_REM, KIR_DIV, KIR_MUL, KIR_ADD};
	for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
		fixture f = make(TBC_DT_F32, TBC_DT_F32);
		kir_kernel *k = f.k;
		kir_expr *iv = kir_e_var(k, f.i);
		kir_expr *b = kir_e_load(k, f.x, kir_e_binary(k, KIR_FLOORMOD, kir_e_add(k, iv, kir_e_index(k, 3)), kir_e_size(k, 0)));
		map(&f, kir_e_binary(k, ops[o], xi(&f), b));
		float x[N];
		special_floats(x);
		same_on_device_as(&f, x, sizeof x, ops[o] != KIR_MIN && ops[o] != KIR_MAX);
		done(&f);
	}
	fixture f = make(TBC_DT_F64, TBC_DT_F64);
	map(&f, kir_e_unary(f.k, KIR_SIGN, xi(&f)));
	double x[N];
	for (int i = 0; i < N; i++) x[i] = i == 0 ? -0.0 : i == 1 ? NAN : (double)(i - 30);
	same_on_device(&f, x, sizeof x, sizeof x);
	done(&f);
}

/* f32 -> every narrow float (saturating and not) -> f32 and -> int8, as
 * ir/dtype.c converts. */
static void test_narrow_float_casts_match_the_evaluator(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F16,      TBC_DT_BF16,       TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ,
					  TBC_DT_F8E5M2,   TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1,   TBC_DT_F8E8M0};
	float x[N];
	special_floats(x);
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (int nosat = 0; nosat < 2; nosat++) {
			bool float8 = types[t] != TBC_DT_F16 && types[t] != TBC_DT_BF16 && types[t] != TBC_DT_F4E2M1;
			if (nosat && !float8) continue; /* Cast's saturate is float8's alone */
			fixture f = make(TBC_DT_F32, TBC_DT_F32);
			kir_kernel *k = f.k;
			kir_expr *narrow = nosat ? kir_e_cast_nosat(k, types[t], xi(&f)) : kir_e_cast(k, types[t], xi(&f));
			map(&f, kir_e_cast(k, TBC_DT_F32, narrow));
			same_on_device(&f, x, sizeof x, sizeof x);
			done(&f);
		}
	fixture f = make(TBC_DT_F32, TBC_DT_I8);
	map(&f, kir_e_cast(f.k, TBC_DT_I8, xi(&f)));
	same_on_device(&f, x, sizeof x, N);
	done(&f);
}

/* A failed check stops the kernel and reports its message. */
static void test_failed_check_reports_its_message(void **state) {
	(void)state;
	need_opencl();
	fixture f = make(TBC_DT_I64, TBC_DT_I64);
	kir_kernel *k = f.k;
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_error(k, kir_e_cmp(k, KIR_LT, xi(&f), kir_e_int(k, TBC_DT_I64, 0)),
					 "index -1 is out of range"));
	kir_block_add(k, &b, kir_s_store(k, f.y, kir_e_var(k, f.i), xi(&f)));
	k->body = loop(&f, KIR_LOOP_PARALLEL, b.first);
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(k, "checked", &out, f.d));
	assert_true(out.has_status);
	assert_int_equal(out.n_messages, 1);
	assert_string_equal(out.messages[0], "index -1 is out of range");
	tbc_ocl_kernel_free(&out);
	int64_t x[N], y[N];
	for (int i = 0; i < N; i++) x[i] = i == 40 ? -1 : i;
	int64_t sizes[1] = {N};
	void *bufs[2] = {x, y};
	assert_false(tbc_ocl_eval_kernel(k, bufs, sizes, f.d));
	bool named = false;
	for (size_t i = 0; i < tbc_diags_count(f.d); i++)
		named |= strstr(tbc_diags_get(f.d, i)->message, "index -1 is out of range") != NULL;
	assert_true(named);
	done(&f);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_parallel_loop_is_a_grid),
		cmocka_unit_test(test_two_loops_run_on_one_work_item),
		cmocka_unit_test(test_integer_semantics_match_the_evaluator),
		cmocka_unit_test(test_float_min_max_sign_match_the_evaluator),
		cmocka_unit_test(test_narrow_float_casts_match_the_evaluator),
		cmocka_unit_test(test_failed_check_reports_its_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
