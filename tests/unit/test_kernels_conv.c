/* The conv family, case by case as the ONNX spec states it: each test builds
 * one op over graph inputs (or constants, where a shape depends on values),
 * runs its shape rule and its kernel, and checks the inferred type and the
 * values against the spec's (the examples of docs/Operators.md where it has
 * them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "ir/kernels/kernels.h"

/* ---- A one-op harness ----------------------------------------------------*/
#define MAX_IO 10
typedef struct one_op {
	tbc_module *m;
	tbc_diags *d;
	tbc_op *op;
	tbc_value *vals[MAX_IO];
	const tbc_tensor *in[MAX_IO];
	tbc_tensor *out[MAX_IO];
	int n_in, n_out;
} one_op;

static tbc_tensor *tensor(tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, vals[i]);
	return t;
}
static tbc_tensor *ivec(tbc_dtype dt, int64_t n, const int64_t *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, 1, &n);
	assert_non_null(t);
	for (int64_t i = 0; i < n; i++) tbc_set_i64(t, i, vals[i]);
	return t;
}
static tbc_tensor *scalar(tbc_dtype dt, double v) {
	tbc_tensor *t = tbc_tensor_create(dt, 0, NULL);
	assert_non_null(t);
	tbc_set_f64(t, 0, v);
	return t;
}
static tbc_tensor *iota(tbc_dtype dt, int rank, const int64_t *dims) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, (double)i);
	return t;
}
static tbc_tensor *filled(tbc_dtype dt, int rank, const int64_t *dims, double v) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, v);
	return t;
}
/* Deterministic pseudo-random values in [-1, 1). */
static tbc_tensor *noise(tbc_dtype dt, int rank, const int64_t *dims, uint32_t seed) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) {
		seed = seed * 1664525u + 1013904223u;
		tbc_set_f64(t, i, (double)(seed >> 8) / (double)(1u << 23) - 1.0);
	}
	return t;
}

static one_op begin(void) {
	one_op o = {.m = tbc_module_new("test"), .d = tbc_diags_create()};
	return o;
}
/* A graph input typed like t (sym: names for dims, NULL entries static). */
static void input(one_op *o, tbc_tensor *t, const char *const *sym) {
	tbc_type ty;
	tbc_type_set(&ty, t->dtype, t->rank, t->dims);
	for (int d = 0; sym && d < t->rank; d++)
		if (sym[d]) ty.dims[d] = (tbc_dim){-1, sym[d]};
	o->vals[o->n_in] = tbc_graph_add_input(o->m->main, NULL, &ty);
	o->in[o->n_in++] = t;
}
static void constant(one_op *o, tbc_tensor *t) {
	o->vals[o->n_in] = tbc_graph_add_const(o->m->main, NULL, t);
	o->in[o->n_in++] = t;
}
static void omitted(one_op *o) {
	o->vals[o->n_in] = NULL;
	o->in[o->n_in++] = NULL;
}
static void op(one_op *o, tbc_opcode code, int n_out) {
	o->n_out = n_out;
	o->op = tbc_op_new(o->m->main, code, "n", o->n_in, o->vals, n_out);
}
static void attr_i(one_op *o, const char *name, int64_t v) { tbc_op_add_attr(o->op, name, TBC_ATTR_INT)->i = v; }
static void attr_f(one_op *o, const char *name, double v) { tbc_op_add_attr(o->op, name, TBC_ATTR_FLOAT)->f = v; }
static void attr_ints(one_op *o, const char *name, int n, const int64_t *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_INTS);
	a->n = n;
	a->ints = tbc_arena_alloc(o->m->arena, (size_t)n * sizeof *v);
	memcpy(a->ints, v, (size_t)n * sizeof *v);
}
static void attr_s(one_op *o, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}
static bool infer(one_op *o) {
	tbc_infer cx = {.module = o->m, .diags = o->d};
	return tbc_infer_op(&cx, o->op);
}
/* Shape rule then kernel; every result must agree with its inferred type. */
static bool run(one_op *o) {
	if (!infer(o)) return false;
	tbc_interp ip = {.module = o->m, .diags = o->d};
	if (tbc_ops[o->op->code].interp(&ip, o->op, o->in, o->out) != 0) return false;
	for (int i = 0; i < o->n_out; i++) {
		const tbc_type *ty = &o->op->outputs[i]->type;
		assert_int_equal(o->out[i]->dtype, ty->dtype);
		if (ty->rank < 0) continue;
		assert_int_equal(o->out[i]->rank, ty->rank);
		for (int d = 0; d < ty->rank; d++)
			if (!ty->dims[d].sym) assert_int_equal(o->out[i]->dims[d], ty->dims[d].size);
	}
	return true;
}
static void done(one_op *o) {
	for (int i = 0; i < o->n_in; i++) tbc_tensor_destroy((tbc_tensor *)o->in[i]);
	for (int i = 0; i < o->n_out; i++) tbc_tensor_destroy(o->out[i]);
	tbc_diags_destroy(o->d);
	tbc_module_destroy(o->m);
}
static const tbc_type *out_type(one_op *o, int i) { return &o->op->outputs[i]->type; }
static void expect_dims(const tbc_tensor *t, int rank, const int64_t *dims) {
	assert_int_equal(t->rank, rank);
	for (int d = 0; d < rank; d++) assert_int_equal(t->dims[d], dims[d]);
}
static void expect_i(const tbc_tensor *t, int64_t n, const int64_t *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_int_equal(tbc_get_i64(t, i), want[i]);
}
static void expect_f(const tbc_tensor *t, int64_t n, const double *want, double tol) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_float_equal(tbc_get_f64(t, i), want[i], tol);
}
static bool error_mentions(one_op *o, const char *text) {
	for (size_t i = 0; i < tbc_diags_count(o->d); i++)
		if (strstr(tbc_diags_get(o->d, i)->message, text)) return true;
	return false;
}

/* ---- Conv ----------------------------------------------------------------- */
static void conv_basic_with_padding(void **s) {
	(void)s; /* Operators.md: 5x5 ramp, 3x3 ones, pads 1 */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 5, 5}), NULL);
	input(&o, filled(TBC_DT_F32, 4, (int64_t[]){1, 1, 3, 3}, 1.0), NULL);
	op(&o, TBC_OP_Conv, 1);
	attr_ints(&o, "kernel_shape", 2, (int64_t[]){3, 3});
	attr_ints(&o, "pads", 4, (int64_t[]){1, 1, 1, 1});
	assert_true(run(&o));
	expect_f(o.out[0], 25,
		 (double[]){12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84},
		 0);
	done(&o);
}

static void conv_strides_and_asymmetric_padding(void **s) {
	(void)s; /* Operators.md: 7x5 ramp, strides 2, pads [1, 0, 1, 0] -> 4x2 */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 7, 5}), NULL);
	input(&o, filled(TBC_DT_F32, 4, (int64_t[]){1, 1, 3, 3}, 1.0), NULL);
	op(&o, TBC_OP_Conv, 1);
	attr_ints(&o, "pads", 4, (int64_t[]){1, 0, 1, 0});
	attr_ints(&o, "strides", 2, (int64_t[]){2, 2});
	assert_true(run(&o));
	expect_dims(o.out[0], 4, (int64_t[]){1, 1, 4, 2});
	expect_f(o.out[0], 8, (double[]){21, 33, 99, 117, 189, 207, 171, 183}, 0);
	done(&o);
}

static void conv_auto_pad_same_lower_puts_the_odd_pad_first(void **s) {
	(void)s; /* 1-D: x = 1..4, w = [1, 10], SAME_LOWER pads 1 at the start:
		  * y[i] = x[i-1] + 10 x[i] */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 4}, (double[]){1, 2, 3, 4}), NULL);
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 2}, (double[]){1, 10}), NULL);
	op(&o, TBC_OP_Conv, 1);
	attr_s(&o, "auto_pad", "SAME_LOWER");
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){10, 21, 32, 43}, 0);
	done(&o);
}

/* The float32 GEMM path and the double reference loop (float64 input) agree
 * with groups, dilations, strides and uneven pads. */
static void conv_float32_gemm_agrees_with_the_reference_loop(void **s) {
	(void)s;
	double got[2][2 * 6 * 4 * 4];
	for (int pass = 0; pass < 2; pass++) {
		tbc_dtype dt = pass ? TBC_DT_F64 : TBC_DT_F32;
		one_op o = begin();
		input(&o, noise(dt, 4, (int64_t[]){2, 4, 9, 8}, 1), NULL);
		input(&o, noise(dt, 4, (int64_t[]){6, 2, 3, 2}, 2), NULL);
		input(&o, noise(dt, 1, (int64_t[]){6}, 3), NULL);
		op(&o, TBC_OP_Conv, 1);
		attr_i(&o, "group", 2);
		attr_ints(&o, "dilations", 2, (int64_t[]){2, 1});
		attr_ints(&o, "strides", 2, (int64_t[]){2, 2});
		attr_ints(&o, "pads", 4, (int64_t[]){1, 0, 2, 1});
		assert_true(run(&o));
		expect_dims(o.out[0], 4, (int64_t[]){2, 6, 4, 4});
		for (int64_t i = 0; i < o.out[0]->numel; i++) got[pass][i] = tbc_get_f64(o.out[0], i);
		done(&o);
	}
	for (int i = 0; i < 2 * 6 * 4 * 4; i++) assert_float_equal(got[0][i], got[1][i], 1e-5);
}

static void conv_keeps_a_symbolic_batch_and_a_same_padded_size(void **s) {
	(void)s; /* [N, 3, H, W] with a 3x3 kernel and pads 1 stays [N, 8, H, W];
		  * stride 2 makes new symbols */
	one_op o = begin();
	input(&o, noise(TBC_DT_F32, 4, (int64_t[]){2, 3, 6, 7}, 4), (const char *[]){"N", NULL, "H", "W"});
	constant(&o, noise(TBC_DT_F32, 4, (int64_t[]){8, 3, 3, 3}, 5));
	op(&o, TBC_OP_Conv, 1);
	attr_ints(&o, "pads", 4, (int64_t[]){1, 1, 1, 1});
	assert_true(run(&o));
	assert_string_equal(out_type(&o, 0)->dims[0].sym, "N");
	assert_int_equal(out_type(&o, 0)->dims[1].size, 8);
	assert_string_equal(out_type(&o, 0)->dims[2].sym, "H");
	assert_string_equal(out_type(&o, 0)->dims[3].sym, "W");
	done(&o);
}

static void conv_rejects_channels_that_do_not_match_the_groups(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, noise(TBC_DT_F32, 4, (int64_t[]){1, 4, 5, 5}, 6), NULL);
	input(&o, noise(TBC_DT_F32, 4, (int64_t[]){4, 3, 3, 3}, 7), NULL);
	op(&o, TBC_OP_Conv, 1);
	assert_false(infer(&o));
	assert_true(error_mentions(&o, "channels"));
	done(&o);
}

/* ---- ConvTranspose ---------------------------------------------------------*/
static void convtranspose_spreads_each_input_over_the_kernel(void **s) {
	(void)s; /* Operators.md: 3x3 ramp, two 3x3 ones kernels -> 5x5 per channel */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 3, 3}), NULL);
	input(&o, filled(TBC_DT_F32, 4, (int64_t[]){1, 2, 3, 3}, 1.0), NULL);
	op(&o, TBC_OP_ConvTranspose, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 4, (int64_t[]){1, 2, 5, 5});
	static const double plane[25] = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
	double want[50];
	memcpy(want, plane, sizeof plane);
	memcpy(want + 25, plane, sizeof plane);
	expect_f(o.out[0], 50, want, 0);
	done(&o);
}

static void convtranspose_output_shape_and_output_padding(void **s) {
	(void)s; /* strides 3x2 on 3x3: natural size 9x7; output_padding [1, 1] -> 10x8 */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 3, 3}), NULL);
	input(&o, filled(TBC_DT_F32, 4, (int64_t[]){1, 2, 3, 3}, 1.0), NULL);
	op(&o, TBC_OP_ConvTranspose, 1);
	attr_ints(&o, "strides", 2, (int64_t[]){3, 2});
	attr_ints(&o, "output_padding", 2, (int64_t[]){1, 1});
	assert_true(run(&o));
	expect_dims(o.out[0], 4, (int64_t[]){1, 2, 10, 8});
	/* The padded last row and column only get the bias (none): zero. */
	for (int64_t w = 0; w < 8; w++) assert_float_equal(tbc_get_f64(o.out[0], 9 * 8 + w), 0.0, 0);
	done(&o);
}

/* ---- Pools -----------------------------------------------------------------*/
static void maxpool_indices_in_both_storage_orders(void **s) {
	(void)s; /* 2x3 input, 2x2 window, stride 1: max at (1, 1) and (1, 2);
		  * row-major indices 4, 5; column-major 3, 5 */
	for (int order = 0; order < 2; order++) {
		one_op o = begin();
		input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 2, 3}, (double[]){1, 2, 3, 4, 6, 5}), NULL);
		op(&o, TBC_OP_MaxPool, 2);
		attr_ints(&o, "kernel_shape", 2, (int64_t[]){2, 2});
		attr_i(&o, "storage_order", order);
		assert_true(run(&o));
		expect_f(o.out[0], 2, (double[]){6, 6}, 0);
		expect_i(o.out[1], 2, order ? (int64_t[]){3, 3} : (int64_t[]){4, 4});
		done(&o);
	}
}

static void averagepool_count_include_pad_divides_by_the_whole_window(void **s) {
	(void)s; /* 1-D [1, 2, 3], kernel 3, pads 1: corners average 2 values (no pad
		  * counted) or 3 (pad counted) */
	for (int cip = 0; cip < 2; cip++) {
		one_op o = begin();
		input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 3}, (double[]){1, 2, 3}), NULL);
		op(&o, TBC_OP_AveragePool, 1);
		attr_ints(&o, "kernel_shape", 1, (int64_t[]){3});
		attr_ints(&o, "pads", 2, (int64_t[]){1, 1});
		attr_i(&o, "count_include_pad", cip);
		assert_true(run(&o));
		expect_f(o.out[0], 3, cip ? (double[]){1, 2, 5.0 / 3} : (double[]){1.5, 2, 2.5}, 1e-6);
		done(&o);
	}
}

static void maxpool_ceil_mode_drops_a_window_starting_in_the_end_pad(void **s) {
	(void)s; /* in 4, kernel 2, stride 2, pads [0, 1]: ceil((4+1-2)/2)+1 = 3, but
		  * that window would start at 4, in the padding: 2 windows */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 4}, (double[]){1, 2, 3, 4}), NULL);
	op(&o, TBC_OP_MaxPool, 1);
	attr_ints(&o, "kernel_shape", 1, (int64_t[]){2});
	attr_ints(&o, "strides", 1, (int64_t[]){2});
	attr_ints(&o, "pads", 2, (int64_t[]){0, 1});
	attr_i(&o, "ceil_mode", 1);
	assert_true(run(&o));
	expect_f(o.out[0], 2, (double[]){2, 4}, 0);
	done(&o);
}

static void lppool_is_the_p_norm_of_the_window(void **s) {
	(void)s; /* p = 2 over [3, 4] is 5 */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 2}, (double[]){3, -4}), NULL);
	op(&o, TBC_OP_LpPool, 1);
	attr_ints(&o, "kernel_shape", 1, (int64_t[]){2});
	assert_true(run(&o));
	expect_f(o.out[0], 1, (double[]){5}, 1e-6);
	done(&o);
}

static void global_pools_reduce_every_spatial_dim(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 2, 2, 2}), (const char *[]){"N", NULL, "H", "W"});
	op(&o, TBC_OP_GlobalAveragePool, 1);
	assert_true(run(&o));
	assert_string_equal(out_type(&o, 0)->dims[0].sym, "N");
	assert_int_equal(out_type(&o, 0)->dims[2].size, 1);
	expect_f(o.out[0], 2, (double[]){1.5, 5.5}, 1e-6);
	done(&o);
}

static void maxunpool_rejects_an_index_outside_the_output(void **s) {
	(void)s; /* 1x1 unpooled by a 2x2 window has 4 places: index 4 is out */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 1, 1}, (double[]){7}), NULL);
	tbc_tensor *idx = tbc_tensor_create(TBC_DT_I64, 4, (int64_t[]){1, 1, 1, 1});
	tbc_set_i64(idx, 0, 4);
	input(&o, idx, NULL);
	op(&o, TBC_OP_MaxUnpool, 1);
	attr_ints(&o, "kernel_shape", 2, (int64_t[]){2, 2});
	attr_ints(&o, "strides", 2, (int64_t[]){2, 2});
	assert_false(run(&o));
	assert_true(error_mentions(&o, "index 4"));
	done(&o);
}

static void maxunpool_puts_values_where_the_indices_say(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 1, 1}, (double[]){7}), NULL);
	tbc_tensor *idx = tbc_tensor_create(TBC_DT_I64, 4, (int64_t[]){1, 1, 1, 1});
	tbc_set_i64(idx, 0, 2);
	input(&o, idx, NULL);
	op(&o, TBC_OP_MaxUnpool, 1);
	attr_ints(&o, "kernel_shape", 2, (int64_t[]){2, 2});
	attr_ints(&o, "strides", 2, (int64_t[]){2, 2});
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){0, 0, 7, 0}, 0);
	done(&o);
}

/* ---- Resize -----------------------------------------------------------------*/
static void resize_nearest_asymmetric_floor_repeats_elements(void **s) {
	(void)s; /* Upsample's semantics: [1, 2] x2 -> [1, 1, 2, 2] */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 2, (int64_t[]){1, 2}, (double[]){1, 2}), NULL);
	omitted(&o);
	constant(&o, tensor(TBC_DT_F32, 1, (int64_t[]){2}, (double[]){1, 2}));
	op(&o, TBC_OP_Resize, 1);
	attr_s(&o, "coordinate_transformation_mode", "asymmetric");
	attr_s(&o, "nearest_mode", "floor");
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){1, 1, 2, 2}, 0);
	done(&o);
}

static void resize_linear_align_corners_interpolates_between_the_ends(void **s) {
	(void)s; /* [0, 3] to 4 points with aligned corners: 0, 1, 2, 3 */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 2, (int64_t[]){1, 2}, (double[]){0, 3}), NULL);
	omitted(&o);
	omitted(&o);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){1, 4}));
	op(&o, TBC_OP_Resize, 1);
	attr_s(&o, "mode", "linear");
	attr_s(&o, "coordinate_transformation_mode", "align_corners");
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){0, 1, 2, 3}, 1e-6);
	done(&o);
}

static void resize_nearest_copies_int64_exactly(void **s) {
	(void)s; /* 2^62 + 1 is not a double: nearest must not go through one */
	one_op o = begin();
	tbc_tensor *x = ivec(TBC_DT_I64, 1, (int64_t[]){((int64_t)1 << 62) + 1});
	input(&o, x, NULL);
	omitted(&o);
	constant(&o, tensor(TBC_DT_F32, 1, (int64_t[]){1}, (double[]){3}));
	op(&o, TBC_OP_Resize, 1);
	assert_true(run(&o));
	expect_i(o.out[0], 3, (int64_t[]){((int64_t)1 << 62) + 1, ((int64_t)1 << 62) + 1, ((int64_t)1 << 62) + 1});
	done(&o);
}

/* ---- Quantization -----------------------------------------------------------*/
static void quantizelinear_rounds_half_to_even_and_saturates(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 1, (int64_t[]){7}, (double[]){0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000}), NULL);
	input(&o, scalar(TBC_DT_F32, 1.0), NULL);
	input(&o, scalar(TBC_DT_I8, 0), NULL);
	op(&o, TBC_OP_QuantizeLinear, 1);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dtype, TBC_DT_I8);
	expect_i(o.out[0], 7, (int64_t[]){0, 2, 2, 0, -2, 127, -128});
	done(&o);
}

static void quantizelinear_blocked_uses_one_scale_per_block(void **s) {
	(void)s; /* x [1, 5] with block_size 2 along axis 1: scales for [0,1], [2,3], [4] */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 2, (int64_t[]){1, 5}, (double[]){2, 4, 6, 8, 10}), NULL);
	input(&o, tensor(TBC_DT_F32, 2, (int64_t[]){1, 3}, (double[]){1, 2, 10}), NULL);
	op(&o, TBC_OP_QuantizeLinear, 1);
	attr_i(&o, "axis", 1);
	attr_i(&o, "block_size", 2);
	attr_i(&o, "output_dtype", TBC_DT_I4);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dtype, TBC_DT_I4);
	expect_i(o.out[0], 5, (int64_t[]){2, 4, 3, 4, 1});
	done(&o);
}

static void dequantizelinear_per_axis(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, tensor(TBC_DT_U8, 2, (int64_t[]){2, 2}, (double[]){10, 20, 10, 20}), NULL);
	input(&o, tensor(TBC_DT_F32, 1, (int64_t[]){2}, (double[]){0.5, 2}), NULL);
	input(&o, tensor(TBC_DT_U8, 1, (int64_t[]){2}, (double[]){10, 0}), NULL);
	op(&o, TBC_OP_DequantizeLinear, 1);
	attr_i(&o, "axis", 0);
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){0, 5, 20, 40}, 0);
	done(&o);
}

static void dynamicquantizelinear_spec_example(void **s) {
	(void)s; /* Operators.md: range [-3, 2] -> scale 5/255, zero point 153 */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 1, (int64_t[]){6}, (double[]){0, 2, -3, -2.5, 1.34, 0.5}), NULL);
	op(&o, TBC_OP_DynamicQuantizeLinear, 3);
	assert_true(run(&o));
	expect_i(o.out[0], 6, (int64_t[]){153, 255, 0, 26, 221, 179});
	assert_float_equal(tbc_get_f64(o.out[1], 0), (double)(5.0f / 255.0f), 1e-9);
	expect_i(o.out[2], 1, (int64_t[]){153});
	done(&o);
}

static void qlinearconv_requantizes_with_round_half_to_even(void **s) {
	(void)s; /* 1x1 conv: (x - 1) * (w - 0) * (1 * 0.5 / 1) + 0: 3 -> 1, 4 -> 1.5 -> 2, 6 -> 2.5 -> 2 */
	one_op o = begin();
	input(&o, tensor(TBC_DT_U8, 4, (int64_t[]){1, 1, 1, 3}, (double[]){3, 4, 6}), NULL);
	input(&o, scalar(TBC_DT_F32, 1), NULL);
	input(&o, scalar(TBC_DT_U8, 1), NULL);
	input(&o, tensor(TBC_DT_U8, 4, (int64_t[]){1, 1, 1, 1}, (double[]){1}), NULL);
	input(&o, scalar(TBC_DT_F32, 0.5), NULL);
	input(&o, scalar(TBC_DT_U8, 0), NULL);
	input(&o, scalar(TBC_DT_F32, 1), NULL);
	input(&o, scalar(TBC_DT_U8, 0), NULL);
	op(&o, TBC_OP_QLinearConv, 1);
	assert_true(run(&o));
	expect_i(o.out[0], 3, (int64_t[]){1, 2, 2});
	done(&o);
}

/* ---- The rest ------------------------------------------------------------- */
static void col2im_sums_overlapping_blocks(void **s) {
	(void)s; /* 1-D image of 3 from 2 blocks of 2 (stride 1): the middle gets both */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 2, 2}, (double[]){1, 2, 10, 20}), NULL);
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}));
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){2}));
	op(&o, TBC_OP_Col2Im, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 3, (int64_t[]){1, 1, 3});
	expect_f(o.out[0], 3, (double[]){1, 12, 20}, 0);
	done(&o);
}

static void causalconvwithstate_carries_the_last_k_minus_1_steps(void **s) {
	(void)s; /* k = 3, past [1, 2], input [3, 4], weight [1, 10, 100]:
		  * y = [1 + 20 + 300, 2 + 30 + 400], present_state = [3, 4] */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 2}, (double[]){3, 4}), NULL);
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 3}, (double[]){1, 10, 100}), NULL);
	omitted(&o);
	input(&o, tensor(TBC_DT_F32, 3, (int64_t[]){1, 1, 2}, (double[]){1, 2}), NULL);
	op(&o, TBC_OP_CausalConvWithState, 2);
	assert_true(run(&o));
	expect_f(o.out[0], 2, (double[]){321, 432}, 0);
	expect_f(o.out[1], 2, (double[]){3, 4}, 0);
	done(&o);
}

static void gridsample_align_corners_reads_the_corner_pixels(void **s) {
	(void)s; /* grid (-1, -1) and (1, 1) with aligned corners are the first and last pixel */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 2, 3}), NULL);
	input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){-1, -1, 1, 1}), NULL);
	op(&o, TBC_OP_GridSample, 1);
	attr_i(&o, "align_corners", 1);
	assert_true(run(&o));
	expect_f(o.out[0], 2, (double[]){0, 5}, 1e-6);
	done(&o);
}

static void roialign_rejects_a_batch_index_out_of_range(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 1, 4, 4}), NULL);
	input(&o, tensor(TBC_DT_F32, 2, (int64_t[]){1, 4}, (double[]){0, 0, 2, 2}), NULL);
	input(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}), NULL);
	op(&o, TBC_OP_RoiAlign, 1);
	attr_f(&o, "spatial_scale", 1.0);
	assert_false(run(&o));
	assert_true(error_mentions(&o, "batch index 3"));
	done(&o);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(conv_basic_with_padding),
		cmocka_unit_test(conv_strides_and_asymmetric_padding),
		cmocka_unit_test(conv_auto_pad_same_lower_puts_the_odd_pad_first),
		cmocka_unit_test(conv_float32_gemm_agrees_with_the_reference_loop),
		cmocka_unit_test(conv_keeps_a_symbolic_batch_and_a_same_padded_size),
		cmocka_unit_test(conv_rejects_channels_that_do_not_match_the_groups),
		cmocka_unit_test(convtranspose_spreads_each_input_over_the_kernel),
		cmocka_unit_test(convtranspose_output_shape_and_output_padding),
		cmocka_unit_test(maxpool_indices_in_both_storage_orders),
		cmocka_unit_test(averagepool_count_include_pad_divides_by_the_whole_window),
		cmocka_unit_test(maxpool_ceil_mode_drops_a_window_starting_in_the_end_pad),
		cmocka_unit_test(lppool_is_the_p_norm_of_the_window),
		cmocka_unit_test(global_pools_reduce_every_spatial_dim),
		cmocka_unit_test(maxunpool_rejects_an_index_outside_the_output),
		cmocka_unit_test(maxunpool_puts_values_where_the_indices_say),
		cmocka_unit_test(resize_nearest_asymmetric_floor_repeats_elements),
		cmocka_unit_test(resize_linear_align_corners_interpolates_between_the_ends),
		cmocka_unit_test(resize_nearest_copies_int64_exactly),
		cmocka_unit_test(quantizelinear_rounds_half_to_even_and_saturates),
		cmocka_unit_test(quantizelinear_blocked_uses_one_scale_per_block),
		cmocka_unit_test(dequantizelinear_per_axis),
		cmocka_unit_test(dynamicquantizelinear_spec_example),
		cmocka_unit_test(qlinearconv_requantizes_with_round_half_to_even),
		cmocka_unit_test(col2im_sums_overlapping_blocks),
		cmocka_unit_test(causalconvwithstate_carries_the_last_k_minus_1_steps),
		cmocka_unit_test(gridsample_align_corners_reads_the_corner_pixels),
		cmocka_unit_test(roialign_rejects_a_batch_index_out_of_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
