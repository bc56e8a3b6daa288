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

#include "codegen/kir/kir.h"
#include "codegen/opencl/opencl_c.h"
#include "ir/dtype.h"
#include "tests/conformance/opencl_target.h"
#include "tests/unit/support/need.h"
#include "tests/unit/support/pocl.h"

#define N 64

#define MAX_OUT 16

typedef struct fixture {
	tbc_arena *arena;
	kir_kernel *k;
	kir_buffer *x, *y;
	kir_buffer *outs[MAX_OUT]; /* y and the ones add_output made */
	int n_outs;
	kir_var *i;
	kir_block body; /* the parallel loop's, for several outputs */
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
	f.outs[f.n_outs++] = f.y;
	return f;
}

/* Another output of type t, stored value(x[i]) in the same loop as the
 * others (finish with close_outputs). */
static void add_output(fixture *f, tbc_dtype t, kir_expr *value) {
	kir_buffer *o = f->y;
	if (f->body.first) {
		kir_expr *dim = kir_e_size(f->k, 0);
		char name[16];
		snprintf(name, sizeof name, "y%d", f->n_outs);
		o = kir_buffer_new(f->k, name, t, KIR_BUF_OUTPUT, 1, &dim);
		f->outs[f->n_outs++] = o;
	}
	kir_block_add(f->k, &f->body, kir_s_store(f->k, o, kir_e_var(f->k, f->i), value));
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
static void close_outputs(fixture *f) { f->k->body = loop(f, KIR_LOOP_PARALLEL, f->body.first); }

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

/* Whether k has a float64 buffer (the fixtures' kernels compute float64
 * exactly when they have one). */
static bool has_f64(const kir_kernel *k) {
	for (int b = 0; b < k->n_buffers; b++)
		if (k->buffers[b]->dtype == TBC_DT_F64) return true;
	return false;
}

/* Whether d holds a message containing text. */
static bool diags_say(const tbc_diags *d, const char *text) {
	for (size_t i = 0; i < tbc_diags_count(d); i++)
		if (strstr(tbc_diags_get(d, i)->message, text)) return true;
	return false;
}

/* The two preamble paths a kernel is built with: the device's fp64, and
 * float alone, as on a device without cl_khr_fp64. */
static const char *const build_modes[] = {NULL, "-DTBC_NO_FP64"};

static void same_on_device(fixture *f, const void *x, bool nan_any) {
	need_opencl();
	if (!kir_verify(f->k, f->d)) print_diags(f->d);
	assert_true(kir_verify(f->k, f->d));
	for (size_t mode = 0; mode < sizeof build_modes / sizeof *build_modes; mode++) {
		void *eval_bufs[1 + MAX_OUT] = {(void *)x}, *dev_bufs[1 + MAX_OUT] = {(void *)x};
		for (int o = 0; o < f->n_outs; o++) {
			eval_bufs[1 + o] = calloc(N, 8);
			dev_bufs[1 + o] = calloc(N, 8);
		}
		int64_t sizes[1] = {N};
		assert_true(kir_eval(f->k, eval_bufs, sizes, f->d));
		bool ok = tbc_ocl_eval_kernel(f->k, dev_bufs, sizes, build_modes[mode], f->d);
		bool refused = build_modes[mode] && has_f64(f->k);
		if (refused) { /* the build log names the kernel */
			assert_false(ok);
			assert_true(diags_say(f->d, "computes float64, and this OpenCL device has no cl_khr_fp64"));
		} else {
			if (!ok) print_diags(f->d);
			assert_true(ok);
		}
		bool same = true;
		for (int o = 0; o < f->n_outs; o++) {
			tbc_dtype t = f->outs[o]->dtype;
			size_t es = tbc_dtype_size(t);
			const unsigned char *e = eval_bufs[1 + o], *g = dev_bufs[1 + o];
			for (size_t b = 0; b < N * es && same && !refused; b++)
				if (e[b] != g[b] && !(nan_any && both_nan(t, e, g, b / es))) {
					fprintf(stderr, "%s: output %d (%s), element %zu: evaluator byte %#x, device %#x\n",
						build_modes[mode] ? build_modes[mode] : "fp64", o, kir_type_name(t), b / es,
						e[b], g[b]);
					same = false;
				}
			free(eval_bufs[1 + o]);
			free(dev_bufs[1 + o]);
		}
		assert_true(same);
	}
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
	assert_int_equal(out.plan.shape, TBC_DEV_GRID);
	assert_non_null(strstr(out.source, "__kernel void twice("));
	assert_non_null(strstr(out.source, "get_global_id(0)"));
	assert_non_null(strstr(out.source, "get_global_size(0)"));
	assert_false(out.plan.can_fail);
	assert_true(out.plan.stored[1] && !out.plan.stored[0]);
	tbc_ocl_kernel_free(&out);
	float x[N];
	special_floats(x);
	same_on_device(&f, x, false);
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
	assert_int_equal(out.plan.shape, TBC_DEV_SINGLE);
	tbc_ocl_kernel_free(&out);
	int32_t x[N];
	for (int i = 0; i < N; i++) x[i] = i * 3;
	same_on_device(&f, x, false);
	done(&f);
}

/* Every integer operation of x[i] and x[i + 7] for type t, in one kernel:
 * x / 0, INT_MIN / -1, shifts by the width or more, wrapping. */
static void binary_ints(tbc_dtype t) {
	static const kir_binop ops[] = {KIR_ADD, KIR_SUB, KIR_MUL, KIR_DIV, KIR_REM, KIR_MIN, KIR_MAX,
					KIR_POW, KIR_SHL, KIR_SHR, KIR_AND, KIR_XOR};
	fixture f = make(t, t);
	kir_kernel *k = f.k;
	kir_expr *iv = kir_e_var(k, f.i);
	for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
		kir_expr *a = kir_e_load(k, f.x, iv);
		kir_expr *b = kir_e_load(k, f.x, kir_e_binary(k, KIR_FLOORMOD, kir_e_add(k, iv, kir_e_index(k, 7)), kir_e_size(k, 0)));
		add_output(&f, t, kir_e_binary(k, ops[o], a, b));
	}
	close_outputs(&f);
	unsigned char x[N * 8];
	static const int64_t v[] = {0, 1, -1, 2, -2, 7, -7, 127, -128, 100, 40, 31, 32, 33, 8, 64,
				    INT32_MAX, INT32_MIN, -65536, 65535};
	for (int i = 0; i < N; i++) tbc_store_i64(t, x, (size_t)i, v[i % (int)(sizeof v / sizeof *v)] + (i >= 20 ? i : 0));
	same_on_device(&f, x, false);
	done(&f);
}

static void test_integer_semantics_match_the_evaluator(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_I8, TBC_DT_U8, TBC_DT_I32, TBC_DT_U32, TBC_DT_I64, TBC_DT_I4};
	for (size_t t = 0; t < sizeof types / sizeof *types; t++) binary_ints(types[t]);
}

static void test_float_min_max_sign_match_the_evaluator(void **state) {
	(void)state;
	/* correctly rounded everywhere (pow, exp, ... are within a few ulp: the conformance run checks those) */
	static const kir_binop ops[] = {KIR_MIN, KIR_MAX, KIR_REM, KIR_DIV, KIR_MUL, KIR_ADD};
	for (int exact = 0; exact < 2; exact++) { /* min and max to the bit, the others to NaN's payload */
		fixture f = make(TBC_DT_F32, TBC_DT_F32);
		kir_kernel *k = f.k;
		kir_expr *iv = kir_e_var(k, f.i);
		for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
			if (exact != (ops[o] == KIR_MIN || ops[o] == KIR_MAX)) continue;
			kir_expr *b = kir_e_load(k, f.x, kir_e_binary(k, KIR_FLOORMOD, kir_e_add(k, iv, kir_e_index(k, 3)), kir_e_size(k, 0)));
			add_output(&f, TBC_DT_F32, kir_e_binary(k, ops[o], xi(&f), b));
		}
		close_outputs(&f);
		float x[N];
		special_floats(x);
		same_on_device(&f, x, !exact);
		done(&f);
	}
	fixture f = make(TBC_DT_F64, TBC_DT_F64);
	map(&f, kir_e_unary(f.k, KIR_SIGN, xi(&f)));
	double x[N];
	for (int i = 0; i < N; i++) x[i] = i == 0 ? -0.0 : i == 1 ? NAN : (double)(i - 30);
	same_on_device(&f, x, false);
	done(&f);
}

/* f32 -> every narrow float (saturating and not) -> f32, and f32 -> int8,
 * as ir/dtype.c converts. */
static void test_narrow_float_casts_match_the_evaluator(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F16,      TBC_DT_BF16,       TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ,
					  TBC_DT_F8E5M2,   TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1,   TBC_DT_F8E8M0};
	float x[N];
	special_floats(x);
	fixture f = make(TBC_DT_F32, TBC_DT_I8);
	kir_kernel *k = f.k;
	add_output(&f, TBC_DT_I8, kir_e_cast(k, TBC_DT_I8, xi(&f)));
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (int nosat = 0; nosat < 2; nosat++) {
			bool float8 = types[t] != TBC_DT_F16 && types[t] != TBC_DT_BF16 && types[t] != TBC_DT_F4E2M1;
			if (nosat && !float8) continue; /* Cast's saturate is float8's alone */
			kir_expr *narrow = nosat ? kir_e_cast_nosat(k, types[t], xi(&f)) : kir_e_cast(k, types[t], xi(&f));
			add_output(&f, TBC_DT_F32, kir_e_cast(k, TBC_DT_F32, narrow));
		}
	close_outputs(&f);
	same_on_device(&f, x, false);
	done(&f);
}

/* A kernel with float buffers that sums in double (as lowering does for
 * Softmax, the normalizations and pooling) is printed for both kinds of
 * device: bit for bit with fp64, within float's rounding without. */
static void test_double_sums_are_float_without_fp64(void **state) {
	(void)state;
	need_opencl();
	fixture f = make(TBC_DT_F32, TBC_DT_F32);
	kir_kernel *k = f.k;
	kir_var *sum = kir_var_new(k, "sum", TBC_DT_F64), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_expr *xj = kir_e_cast(k, TBC_DT_F64, kir_e_load(k, f.x, kir_e_var(k, j)));
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_set(k, sum, kir_e_float(k, TBC_DT_F64, 0)));
	kir_block_add(k, &b, kir_s_for(k, j, kir_e_index(k, 0), kir_e_add(k, kir_e_var(k, f.i), kir_e_index(k, 1)), 1,
				       KIR_LOOP_SEQUENTIAL,
				       kir_s_set(k, sum, kir_e_binary(k, KIR_ADD, kir_e_var(k, sum), kir_e_binary(k, KIR_MUL, xj, xj)))));
	kir_block_add(k, &b, kir_s_store(k, f.y, kir_e_var(k, f.i),
					 kir_e_cast(k, TBC_DT_F32, kir_e_unary(k, KIR_SQRT, kir_e_var(k, sum)))));
	k->body = loop(&f, KIR_LOOP_PARALLEL, b.first);
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(k, "norms", &out, f.d));
	assert_non_null(strstr(out.source, "#ifdef TBC_HAS_FP64"));
	assert_non_null(strstr(out.source, "#else /* float64 values as float */"));
	assert_null(strstr(out.source, "#error"));
	tbc_ocl_kernel_free(&out);
	float x[N], want[N], got[N];
	for (int i = 0; i < N; i++) x[i] = (float)(i % 7 - 3) * 0.37f + 1e-3f * (float)i;
	int64_t sizes[1] = {N};
	void *ev[2] = {x, want};
	assert_true(kir_eval(k, ev, sizes, f.d));
	for (size_t mode = 0; mode < sizeof build_modes / sizeof *build_modes; mode++) {
		memset(got, 0, sizeof got);
		void *dev[2] = {x, got};
		bool ok = tbc_ocl_eval_kernel(k, dev, sizes, build_modes[mode], f.d);
		if (!ok) print_diags(f.d);
		assert_true(ok);
		for (int i = 0; i < N; i++) {
			if (!build_modes[mode]) assert_memory_equal(&got[i], &want[i], sizeof(float));
			else assert_true(fabsf(got[i] - want[i]) <= 4e-7f * fabsf(want[i]));
		}
	}
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
	assert_true(out.plan.can_fail);
	assert_int_equal(out.plan.n_messages, 1);
	assert_string_equal(out.plan.errors[0]->message, "index -1 is out of range");
	tbc_ocl_kernel_free(&out);
	int64_t x[N], y[N];
	for (int i = 0; i < N; i++) x[i] = i == 40 ? -1 : i;
	int64_t sizes[1] = {N};
	void *bufs[2] = {x, y};
	assert_false(tbc_ocl_eval_kernel(k, bufs, sizes, NULL, f.d));
	assert_true(diags_say(f.d, "index -1 is out of range"));
	done(&f);
}


/* ---- The parallel form: work-groups, local memory, barriers ------------------ */

/* Runs k with the evaluator and on the device over copies of bufs
 * (bytes[i] each); every output must have the same bytes. */
static void same_kernel_on_device(const kir_kernel *k, void *const *bufs, const size_t *bytes, const int64_t *sizes, tbc_diags *d) {
	need_opencl();
	if (!kir_verify(k, d)) print_diags(d);
	assert_true(kir_verify(k, d));
	void *ev[8], *dev[8];
	assert_true(k->n_buffers <= 8);
	for (int b = 0; b < k->n_buffers; b++) {
		ev[b] = malloc(bytes[b]);
		dev[b] = malloc(bytes[b]);
		memcpy(ev[b], bufs[b], bytes[b]);
		memcpy(dev[b], bufs[b], bytes[b]);
	}
	bool ok = kir_eval(k, ev, sizes, d);
	if (!ok) print_diags(d);
	assert_true(ok);
	ok = tbc_ocl_eval_kernel(k, dev, sizes, NULL, d);
	if (!ok) print_diags(d);
	assert_true(ok);
	for (int b = 0; b < k->n_buffers; b++) {
		if (k->buffers[b]->role == KIR_BUF_OUTPUT && memcmp(ev[b], dev[b], bytes[b])) {
			fprintf(stderr, "output %s differs\n", k->buffers[b]->name);
			fail();
		}
		free(ev[b]);
		free(dev[b]);
	}
}

/* y[r] = sum of row r of x ($rows x $cols, f32) as a work-group per row:
 * each item sums a strided part of the row, then a tree in local memory
 * (wg / 2, wg / 4, ... items), the same additions in the same order on the
 * device as in the evaluator. */
static kir_kernel *row_sum(tbc_arena *a, int64_t wg) {
	kir_kernel *k = kir_kernel_new(a, "row_sum");
	kir_kernel_set_group(k, 1, &wg);
	kir_expr *R = kir_e_size(k, kir_size_param(k, "rows")), *C = kir_e_size(k, kir_size_param(k, "cols"));
	kir_expr *xd[2] = {R, C};
	kir_buffer *x = kir_buffer_new(k, "x", TBC_DT_F32, KIR_BUF_INPUT, 2, xd);
	kir_buffer *y = kir_buffer_new(k, "y", TBC_DT_F32, KIR_BUF_OUTPUT, 1, &R);
	kir_buffer *part = kir_local_new(k, "part", TBC_DT_F32, 1, &wg);
	kir_var *row = kir_var_new(k, "row", KIR_INDEX), *c = kir_var_new(k, "c", KIR_INDEX);
	kir_var *acc = kir_var_new(k, "acc", TBC_DT_F32);
	kir_expr *lid = kir_e_local_id(k, 0);
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_set(k, acc, kir_e_float(k, TBC_DT_F32, 0)));
	kir_expr *xi = kir_e_add(k, kir_e_mul(k, kir_e_var(k, row), C), kir_e_var(k, c));
	kir_block_add(k, &b, kir_s_for(k, c, lid, C, wg, KIR_LOOP_SEQUENTIAL,
				       kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, kir_e_var(k, acc), kir_e_load(k, x, xi)))));
	kir_block_add(k, &b, kir_s_store(k, part, lid, kir_e_var(k, acc)));
	kir_block_add(k, &b, kir_s_barrier(k));
	for (int64_t st = wg / 2; st >= 1; st /= 2) {
		kir_expr *sum = kir_e_binary(k, KIR_ADD, kir_e_load(k, part, lid), kir_e_load(k, part, kir_e_add(k, lid, kir_e_index(k, st))));
		kir_block_add(k, &b, kir_s_if(k, kir_e_cmp(k, KIR_LT, lid, kir_e_index(k, st)), kir_s_store(k, part, lid, sum), NULL));
		kir_block_add(k, &b, kir_s_barrier(k));
	}
	kir_block_add(k, &b, kir_s_if(k, kir_e_cmp(k, KIR_EQ, lid, kir_e_index(k, 0)),
				      kir_s_store(k, y, kir_e_var(k, row), kir_e_load(k, part, kir_e_index(k, 0))), NULL));
	k->body = kir_s_for(k, row, kir_e_index(k, 0), R, 1, KIR_LOOP_GRID, b.first);
	return k;
}

static void test_tree_reduction_in_local_memory(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = row_sum(a, 64);
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(k, "row_sum", &out, d));
	assert_int_equal(out.plan.shape, TBC_DEV_GROUPS);
	assert_non_null(strstr(out.source, "__attribute__((reqd_work_group_size(64, 1, 1))) void row_sum("));
	assert_non_null(strstr(out.source, "__local float l0[64]; /* part */"));
	assert_non_null(strstr(out.source, "barrier(CLK_LOCAL_MEM_FENCE);"));
	assert_non_null(strstr(out.source, "get_group_id(0)"));
	int64_t sizes[2] = {5, 1000};
	uint32_t dims;
	uint64_t global[3], local[3];
	assert_true(tbc_dev_launch_geometry(k, &out.plan, sizes, &dims, global, local, d));
	assert_int_equal(dims, 1);
	assert_int_equal(global[0], 5 * 64);
	assert_int_equal(local[0], 64);
	tbc_ocl_kernel_free(&out);
	static float x[5 * 1000];
	float y[5] = {0};
	for (int i = 0; i < 5 * 1000; i++) x[i] = (float)((i * 37) % 101) * 0.013f - 0.6f;
	void *bufs[2] = {x, y};
	size_t bytes[2] = {sizeof x, sizeof y};
	same_kernel_on_device(k, bufs, bytes, sizes, d);
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

/* c = a ($m x $k) * b ($k x $n), f32: a work-group of gx x gy items per
 * (gy * wm) x (gx * wn) tile of c, wm x wn outputs per item, tiles of a
 * and b staged in local memory tk columns / rows at a time, zeros past the
 * edges.  Each output's sum is taken in k order, as the evaluator does. */
static kir_kernel *tiled_gemm(tbc_arena *a, int64_t gx, int64_t gy, int wm, int wn, int64_t tk) {
	kir_kernel *k = kir_kernel_new(a, "gemm");
	int64_t grp[2] = {gx, gy}, TM = gy * wm, TN = gx * wn, items = gx * gy;
	kir_kernel_set_group(k, 2, grp);
	kir_expr *Me = kir_e_size(k, kir_size_param(k, "m")), *Ne = kir_e_size(k, kir_size_param(k, "n")),
		 *Ke = kir_e_size(k, kir_size_param(k, "k"));
	kir_expr *ad[2] = {Me, Ke}, *bd[2] = {Ke, Ne}, *cd[2] = {Me, Ne};
	kir_buffer *A = kir_buffer_new(k, "a", TBC_DT_F32, KIR_BUF_INPUT, 2, ad);
	kir_buffer *B = kir_buffer_new(k, "b", TBC_DT_F32, KIR_BUF_INPUT, 2, bd);
	kir_buffer *Cb = kir_buffer_new(k, "c", TBC_DT_F32, KIR_BUF_OUTPUT, 2, cd);
	int64_t asz = TM * tk, bsz = tk * TN;
	kir_buffer *As = kir_local_new(k, "as", TBC_DT_F32, 1, &asz), *Bs = kir_local_new(k, "bs", TBC_DT_F32, 1, &bsz);
	kir_var *bi = kir_var_new(k, "bi", KIR_INDEX), *bj = kir_var_new(k, "bj", KIR_INDEX);
	kir_var *kt = kir_var_new(k, "kt", KIR_INDEX), *kk = kir_var_new(k, "kk", KIR_INDEX);
	kir_expr *lx = kir_e_local_id(k, 0), *ly = kir_e_local_id(k, 1);
	kir_expr *lid = kir_e_add(k, lx, kir_e_mul(k, ly, kir_e_index(k, gx)));
	kir_expr *i0 = kir_e_mul(k, kir_e_var(k, bi), kir_e_index(k, TM)), *j0 = kir_e_mul(k, kir_e_var(k, bj), kir_e_index(k, TN));
	kir_expr *k0 = kir_e_mul(k, kir_e_var(k, kt), kir_e_index(k, tk));
	kir_expr *zero = kir_e_float(k, TBC_DT_F32, 0);
	kir_block body = {0};
	kir_var *acc[4][4];
	for (int r = 0; r < wm; r++)
		for (int c = 0; c < wn; c++) {
			acc[r][c] = kir_var_new(k, "acc", TBC_DT_F32);
			kir_block_add(k, &body, kir_s_set(k, acc[r][c], zero));
		}
	kir_block tile = {0};
	/* Stage the tiles: element e = it * items + lid of each. */
	for (int w = 0; w < 2; w++) {
		int64_t n = w == 0 ? asz : bsz, cols = w == 0 ? tk : TN;
		for (int64_t it = 0; it < n / items; it++) {
			kir_expr *e = kir_e_add(k, kir_e_index(k, it * items), lid);
			kir_expr *r = kir_e_binary(k, KIR_FLOORDIV, e, kir_e_index(k, cols)), *c = kir_e_binary(k, KIR_FLOORMOD, e, kir_e_index(k, cols));
			kir_expr *gr = kir_e_add(k, w == 0 ? i0 : k0, r), *gc = kir_e_add(k, w == 0 ? k0 : j0, c);
			kir_expr *R = w == 0 ? Me : Ke, *Cn = w == 0 ? Ke : Ne;
			kir_expr *in = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_LT, gr, R), kir_e_cmp(k, KIR_LT, gc, Cn));
			kir_expr *one = kir_e_index(k, 1);
			kir_expr *idx = kir_e_add(k, kir_e_mul(k, kir_e_binary(k, KIR_MIN, gr, kir_e_binary(k, KIR_SUB, R, one)), Cn),
						  kir_e_binary(k, KIR_MIN, gc, kir_e_binary(k, KIR_SUB, Cn, one)));
			kir_block_add(k, &tile, kir_s_store(k, w == 0 ? As : Bs, e, kir_e_select(k, in, kir_e_load(k, w == 0 ? A : B, idx), zero)));
		}
	}
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_block step = {0};
	kir_expr *av[4], *bv[4];
	for (int r = 0; r < wm; r++) {
		kir_var *v = kir_var_new(k, "a", TBC_DT_F32);
		kir_expr *row = kir_e_add(k, ly, kir_e_index(k, r * gy));
		kir_block_add(k, &step, kir_s_set(k, v, kir_e_load(k, As, kir_e_add(k, kir_e_mul(k, row, kir_e_index(k, tk)), kir_e_var(k, kk)))));
		av[r] = kir_e_var(k, v);
	}
	for (int c = 0; c < wn; c++) {
		kir_var *v = kir_var_new(k, "b", TBC_DT_F32);
		kir_expr *col = kir_e_add(k, lx, kir_e_index(k, c * gx));
		kir_block_add(k, &step, kir_s_set(k, v, kir_e_load(k, Bs, kir_e_add(k, kir_e_mul(k, kir_e_var(k, kk), kir_e_index(k, TN)), col))));
		bv[c] = kir_e_var(k, v);
	}
	for (int r = 0; r < wm; r++)
		for (int c = 0; c < wn; c++)
			kir_block_add(k, &step, kir_s_set(k, acc[r][c], kir_e_binary(k, KIR_ADD, kir_e_var(k, acc[r][c]), kir_e_binary(k, KIR_MUL, av[r], bv[c]))));
	kir_block_add(k, &tile, kir_s_for(k, kk, kir_e_index(k, 0), kir_e_index(k, tk), 1, KIR_LOOP_SEQUENTIAL, step.first));
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_expr *KT = kir_e_binary(k, KIR_FLOORDIV, kir_e_add(k, Ke, kir_e_index(k, tk - 1)), kir_e_index(k, tk));
	kir_block_add(k, &body, kir_s_for(k, kt, kir_e_index(k, 0), KT, 1, KIR_LOOP_SEQUENTIAL, tile.first));
	for (int r = 0; r < wm; r++)
		for (int c = 0; c < wn; c++) {
			kir_expr *row = kir_e_add(k, i0, kir_e_add(k, ly, kir_e_index(k, r * gy)));
			kir_expr *col = kir_e_add(k, j0, kir_e_add(k, lx, kir_e_index(k, c * gx)));
			kir_expr *in = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_LT, row, Me), kir_e_cmp(k, KIR_LT, col, Ne));
			kir_block_add(k, &body, kir_s_if(k, in, kir_s_store(k, Cb, kir_e_add(k, kir_e_mul(k, row, Ne), col), kir_e_var(k, acc[r][c])), NULL));
		}
	kir_expr *MT = kir_e_binary(k, KIR_FLOORDIV, kir_e_add(k, Me, kir_e_index(k, TM - 1)), kir_e_index(k, TM));
	kir_expr *NT = kir_e_binary(k, KIR_FLOORDIV, kir_e_add(k, Ne, kir_e_index(k, TN - 1)), kir_e_index(k, TN));
	kir_stmt *inner = kir_s_for(k, bj, kir_e_index(k, 0), NT, 1, KIR_LOOP_GRID, body.first);
	k->body = kir_s_for(k, bi, kir_e_index(k, 0), MT, 1, KIR_LOOP_GRID, inner);
	return k;
}

static void test_tiled_gemm_in_local_memory(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	tbc_diags *d = tbc_diags_create();
	kir_kernel *k = tiled_gemm(a, 4, 4, 2, 3, 8);
	tbc_ocl_kernel out;
	assert_true(tbc_ocl_print_kernel(k, "gemm", &out, d));
	assert_int_equal(out.plan.shape, TBC_DEV_GROUPS);
	assert_non_null(strstr(out.source, "reqd_work_group_size(4, 4, 1)"));
	assert_non_null(strstr(out.source, "__local float l1[96]; /* bs */"));
	enum { GM = 37, GN = 45, GK = 29 };
	int64_t sizes[3] = {GM, GN, GK};
	uint32_t dims;
	uint64_t global[3], local[3];
	assert_true(tbc_dev_launch_geometry(k, &out.plan, sizes, &dims, global, local, d));
	assert_int_equal(dims, 2);
	assert_int_equal(global[0], (GM + 7) / 8 * 4); /* row tiles of 8 along dim 0 */
	assert_int_equal(global[1], (GN + 11) / 12 * 4);
	tbc_ocl_kernel_free(&out);
	static float A[GM * GK], B[GK * GN], C[GM * GN];
	for (int i = 0; i < GM * GK; i++) A[i] = (float)((i * 13) % 17) * 0.25f - 1.0f;
	for (int i = 0; i < GK * GN; i++) B[i] = (float)((i * 7) % 23) * 0.125f - 1.3f;
	void *bufs[3] = {A, B, C};
	size_t bytes[3] = {sizeof A, sizeof B, sizeof C};
	same_kernel_on_device(k, bufs, bytes, sizes, d);
	/* and against the plain product */
	void *ev[3] = {A, B, C};
	assert_true(kir_eval(k, ev, sizes, d));
	for (int i = 0; i < GM; i++)
		for (int j = 0; j < GN; j++) {
			double s = 0;
			for (int q = 0; q < GK; q++) s += (double)A[i * GK + q] * B[q * GN + j];
			assert_float_equal(C[i * GN + j], s, 1e-3);
		}
	tbc_diags_destroy(d);
	tbc_arena_destroy(a);
}

int main(void) {
	tbc_pocl_setup();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_parallel_loop_is_a_grid),
		cmocka_unit_test(test_two_loops_run_on_one_work_item),
		cmocka_unit_test(test_integer_semantics_match_the_evaluator),
		cmocka_unit_test(test_float_min_max_sign_match_the_evaluator),
		cmocka_unit_test(test_narrow_float_casts_match_the_evaluator),
		cmocka_unit_test(test_double_sums_are_float_without_fp64),
		cmocka_unit_test(test_failed_check_reports_its_message),
		cmocka_unit_test(test_tree_reduction_in_local_memory),
		cmocka_unit_test(test_tiled_gemm_in_local_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
