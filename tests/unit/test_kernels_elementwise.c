/* The elementwise family, case by case as the ONNX spec states it: each test
 * builds one op, runs its shape rule and its kernel, and checks the result
 * against the values the spec gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "ir/kernels/kernels.h"

/* ---- A one-op harness ----------------------------------------------------*/
typedef struct one_op {
	tbc_module *m;
	tbc_diags *d;
	tbc_op *op;
	const tbc_tensor *in[8];
	int n;
} one_op;

static tbc_tensor *tensor(tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, vals[i]);
	return t;
}
static tbc_tensor *vec(tbc_dtype dt, int64_t n, const double *vals) { return tensor(dt, 1, &n, vals); }
static tbc_tensor *ivec(tbc_dtype dt, int64_t n, const int64_t *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, 1, &n);
	assert_non_null(t);
	for (int64_t i = 0; i < n; i++) tbc_set_i64(t, i, vals[i]);
	return t;
}
static tbc_tensor *uvec(tbc_dtype dt, int64_t n, const uint64_t *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, 1, &n);
	assert_non_null(t);
	for (int64_t i = 0; i < n; i++) tbc_store_u64(dt, t->data, (size_t)i, vals[i]);
	return t;
}

/* Builds the op over graph inputs typed like the tensors (which it takes). */
static one_op make(tbc_opcode code, int n, tbc_tensor **ins) {
	one_op o = {.m = tbc_module_new("test"), .d = tbc_diags_create(), .n = n};
	tbc_value *vals[8];
	for (int i = 0; i < n; i++) {
		tbc_type ty;
		tbc_type_set(&ty, ins[i]->dtype, ins[i]->rank, ins[i]->dims);
		vals[i] = tbc_graph_add_input(o.m->main, NULL, &ty);
		o.in[i] = ins[i];
	}
	o.op = tbc_op_new(o.m->main, code, "n", n, vals, 1);
	return o;
}
static void attr_f(one_op *o, const char *name, double v) { tbc_op_add_attr(o->op, name, TBC_ATTR_FLOAT)->f = v; }
static void attr_i(one_op *o, const char *name, int64_t v) { tbc_op_add_attr(o->op, name, TBC_ATTR_INT)->i = v; }
static void attr_s(one_op *o, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}

/* Runs shape inference and the kernel; the result must match the inferred
 * type.  NULL when either reports an error (then *o keeps the diags). */
static tbc_tensor *run(one_op *o) {
	tbc_infer cx = {.module = o->m, .diags = o->d};
	if (!tbc_infer_op(&cx, o->op)) return NULL;
	tbc_interp ip = {.module = o->m, .diags = o->d};
	tbc_tensor *out[2] = {NULL, NULL};
	if (tbc_ops[o->op->code].interp(&ip, o->op, o->in, out) != 0) return NULL;
	const tbc_type *ty = &o->op->outputs[0]->type;
	assert_int_equal(out[0]->dtype, ty->dtype);
	assert_int_equal(out[0]->rank, ty->rank);
	for (int d = 0; d < ty->rank; d++)
		if (!ty->dims[d].sym) assert_int_equal(out[0]->dims[d], ty->dims[d].size);
	return out[0];
}
static void done(one_op *o, tbc_tensor *result) {
	for (int i = 0; i < o->n; i++) tbc_tensor_destroy((tbc_tensor *)o->in[i]);
	tbc_tensor_destroy(result);
	tbc_diags_destroy(o->d);
	tbc_module_destroy(o->m);
}
static void expect_f(const tbc_tensor *t, int64_t n, const double *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) {
		double got = tbc_get_f64(t, i);
		if (isnan(want[i])) assert_true(isnan(got));
		else assert_float_equal(got, want[i], 1e-6 * (1 + fabs(want[i])));
	}
}
static void expect_i(const tbc_tensor *t, int64_t n, const int64_t *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_int_equal(tbc_get_i64(t, i), want[i]);
}
static void expect_u(const tbc_tensor *t, int64_t n, const uint64_t *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_true(tbc_load_u64(t->dtype, t->data, (size_t)i) == want[i]);
}

/* ---- Unary math ---------------------------------------------------------*/
static void abs_of_int8_min_wraps_like_numpy(void **s) {
	(void)s;
	tbc_tensor *x = ivec(TBC_DT_I8, 3, (int64_t[]){-128, -5, 7});
	one_op o = make(TBC_OP_Abs, 1, &x);
	tbc_tensor *y = run(&o);
	expect_i(y, 3, (int64_t[]){-128, 5, 7});
	done(&o, y);
}

static void round_halves_to_even(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 6, (double[]){0.5, 1.5, 2.5, -0.5, -1.5, 2.3});
	one_op o = make(TBC_OP_Round, 1, &x);
	tbc_tensor *y = run(&o);
	expect_f(y, 6, (double[]){0, 2, 2, -0.0, -2, 2});
	done(&o, y);
}

static void sign_of_floats_keeps_nan(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F64, 4, (double[]){-3, 0, 2, NAN});
	one_op o = make(TBC_OP_Sign, 1, &x);
	tbc_tensor *y = run(&o);
	expect_f(y, 4, (double[]){-1, 0, 1, NAN});
	done(&o, y);
}

static void isinf_detect_negative_only(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 4, (double[]){-INFINITY, INFINITY, NAN, 1});
	one_op o = make(TBC_OP_IsInf, 1, &x);
	attr_i(&o, "detect_positive", 0);
	tbc_tensor *y = run(&o);
	expect_i(y, 4, (int64_t[]){1, 0, 0, 0});
	done(&o, y);
}

static void bitwise_not_uint8(void **s) {
	(void)s;
	tbc_tensor *x = ivec(TBC_DT_U8, 2, (int64_t[]){0, 0x0f});
	one_op o = make(TBC_OP_BitwiseNot, 1, &x);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, (int64_t[]){255, 0xf0});
	done(&o, y);
}

/* ---- Activations ----------------------------------------------------------*/
static void leaky_relu_default_alpha_is_0_01(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 3, (double[]){-1, 0, 1});
	one_op o = make(TBC_OP_LeakyRelu, 1, &x);
	tbc_tensor *y = run(&o);
	expect_f(y, 3, (double[]){-0.01, 0, 1});
	done(&o, y);
}

static void elu_with_alpha_2(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 3, (double[]){-1, 0, 1});
	one_op o = make(TBC_OP_Elu, 1, &x);
	attr_f(&o, "alpha", 2.0);
	tbc_tensor *y = run(&o);
	expect_f(y, 3, (double[]){2.0 * (exp(-1.0) - 1.0), 0, 1});
	done(&o, y);
}

static void gelu_tanh_approximation(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 3, (double[]){-1, 0, 1});
	one_op o = make(TBC_OP_Gelu, 1, &x);
	attr_s(&o, "approximate", "tanh");
	tbc_tensor *y = run(&o);
	expect_f(y, 3, (double[]){-0.15880800939172324, 0, 0.8411919906082768});
	done(&o, y);
}

static void gelu_rejects_unknown_approximation(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 1, (double[]){1});
	one_op o = make(TBC_OP_Gelu, 1, &x);
	attr_s(&o, "approximate", "fast");
	assert_null(run(&o));
	assert_int_equal(tbc_diags_first_code(o.d), TBC_ERR_INVALID_MODEL);
	done(&o, NULL);
}

static void clip_min_greater_than_max_gives_max(void **s) {
	(void)s;
	tbc_tensor *in[3] = {vec(TBC_DT_F32, 3, (double[]){-2, 0, 2}), tensor(TBC_DT_F32, 0, NULL, (double[]){1}),
			     tensor(TBC_DT_F32, 0, NULL, (double[]){-1})};
	one_op o = make(TBC_OP_Clip, 3, in);
	tbc_tensor *y = run(&o);
	expect_f(y, 3, (double[]){-1, -1, -1});
	done(&o, y);
}

static void clip_int64_bounds_are_exact(void **s) {
	(void)s;
	tbc_tensor *in[3] = {ivec(TBC_DT_I64, 2, (int64_t[]){INT64_MAX, INT64_MIN}),
			     ivec(TBC_DT_I64, 1, (int64_t[]){-9007199254740993}),
			     ivec(TBC_DT_I64, 1, (int64_t[]){9007199254740993})};
	one_op o = make(TBC_OP_Clip, 3, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, (int64_t[]){9007199254740993, -9007199254740993});
	done(&o, y);
}

static void prelu_slope_broadcasts_to_x(void **s) {
	(void)s;
	int64_t xd[2] = {2, 2};
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 2, xd, (double[]){-1, 2, -3, 4}), vec(TBC_DT_F32, 2, (double[]){0.5, 0.25})};
	one_op o = make(TBC_OP_PRelu, 2, in);
	tbc_tensor *y = run(&o);
	expect_f(y, 4, (double[]){-0.5, 2, -1.5, 4});
	done(&o, y);
}

/* ---- Binary -------------------------------------------------------------- */
static void add_uint64_is_bit_exact(void **s) {
	(void)s;
	tbc_tensor *in[2] = {uvec(TBC_DT_U64, 2, (uint64_t[]){18446744073709551615u, 9007199254740993u}),
			     uvec(TBC_DT_U64, 2, (uint64_t[]){1, 2})};
	one_op o = make(TBC_OP_Add, 2, in);
	tbc_tensor *y = run(&o);
	expect_u(y, 2, (uint64_t[]){0, 9007199254740995u});
	done(&o, y);
}

static void mul_int64_is_bit_exact(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I64, 1, (int64_t[]){3037000499}), ivec(TBC_DT_I64, 1, (int64_t[]){3037000499})};
	one_op o = make(TBC_OP_Mul, 2, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 1, (int64_t[]){9223372030926249001});
	done(&o, y);
}

static void div_int32_truncates_toward_zero(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I32, 4, (int64_t[]){7, -7, 7, -7}), ivec(TBC_DT_I32, 4, (int64_t[]){2, 2, -2, -2})};
	one_op o = make(TBC_OP_Div, 2, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 4, (int64_t[]){3, -3, -3, 3});
	done(&o, y);
}

static void div_uint64_large_values(void **s) {
	(void)s;
	tbc_tensor *in[2] = {uvec(TBC_DT_U64, 1, (uint64_t[]){18446744073709551615u}), uvec(TBC_DT_U64, 1, (uint64_t[]){3})};
	one_op o = make(TBC_OP_Div, 2, in);
	tbc_tensor *y = run(&o);
	expect_u(y, 1, (uint64_t[]){6148914691236517205u});
	done(&o, y);
}

static void div_int_by_zero_is_an_error(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I32, 1, (int64_t[]){1}), ivec(TBC_DT_I32, 1, (int64_t[]){0})};
	one_op o = make(TBC_OP_Div, 2, in);
	assert_null(run(&o));
	assert_int_equal(tbc_diags_first_code(o.d), TBC_ERR_RUNTIME);
	done(&o, NULL);
}

static void mod_int_takes_the_sign_of_the_divisor(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I32, 6, (int64_t[]){-4, 7, 5, 4, -7, 8}),
			     ivec(TBC_DT_I32, 6, (int64_t[]){2, -3, 8, -2, 3, 5})};
	one_op o = make(TBC_OP_Mod, 2, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 6, (int64_t[]){0, -2, 5, 0, 2, 3});
	done(&o, y);
}

static void mod_fmod_takes_the_sign_of_the_dividend(void **s) {
	(void)s;
	tbc_tensor *in[2] = {vec(TBC_DT_F32, 4, (double[]){-4.3, 7.2, 5.0, -7.6}), vec(TBC_DT_F32, 4, (double[]){2.1, -3.4, 8.0, 3.2})};
	one_op o = make(TBC_OP_Mod, 2, in);
	attr_i(&o, "fmod", 1);
	tbc_tensor *y = run(&o);
	expect_f(y, 4, (double[]){fmod((float)-4.3, (float)2.1), fmod((float)7.2, (float)-3.4), 5.0,
				  fmod((float)-7.6, (float)3.2)});
	done(&o, y);
}

static void pow_int_base_float_exponent_truncates(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I32, 3, (int64_t[]){2, 3, 4}), vec(TBC_DT_F32, 3, (double[]){0.5, 2, -1})};
	one_op o = make(TBC_OP_Pow, 2, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 3, (int64_t[]){1, 9, 0});
	done(&o, y);
}

static void pow_int64_is_exact(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I64, 2, (int64_t[]){3, -2}), ivec(TBC_DT_I64, 2, (int64_t[]){39, 3})};
	one_op o = make(TBC_OP_Pow, 2, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, (int64_t[]){4052555153018976267, -8});
	done(&o, y);
}

static void bitshift_right_int8_is_arithmetic(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_I8, 4, (int64_t[]){-16, 16, -1, 5}), ivec(TBC_DT_I8, 4, (int64_t[]){2, 2, 9, -1})};
	one_op o = make(TBC_OP_BitShift, 2, in);
	attr_s(&o, "direction", "RIGHT");
	tbc_tensor *y = run(&o);
	expect_i(y, 4, (int64_t[]){-4, 4, -1, 0});
	done(&o, y);
}

static void bitshift_left_uint8_drops_high_bits(void **s) {
	(void)s;
	tbc_tensor *in[2] = {ivec(TBC_DT_U8, 3, (int64_t[]){16, 4, 1}), ivec(TBC_DT_U8, 3, (int64_t[]){1, 6, 8})};
	one_op o = make(TBC_OP_BitShift, 2, in);
	attr_s(&o, "direction", "LEFT");
	tbc_tensor *y = run(&o);
	expect_i(y, 3, (int64_t[]){32, 0, 0});
	done(&o, y);
}

static void greater_uint64_compares_unsigned(void **s) {
	(void)s;
	tbc_tensor *in[2] = {uvec(TBC_DT_U64, 1, (uint64_t[]){18446744073709551615u}), uvec(TBC_DT_U64, 1, (uint64_t[]){1})};
	one_op o = make(TBC_OP_Greater, 2, in);
	tbc_tensor *y = run(&o);
	assert_int_equal(y->dtype, TBC_DT_BOOL);
	expect_i(y, 1, (int64_t[]){1});
	done(&o, y);
}

static void add_rejects_mixed_dtypes(void **s) {
	(void)s;
	tbc_tensor *in[2] = {vec(TBC_DT_F32, 1, (double[]){1}), vec(TBC_DT_F64, 1, (double[]){1})};
	one_op o = make(TBC_OP_Add, 2, in);
	assert_null(run(&o));
	done(&o, NULL);
}

/* ---- Variadic ---------------------------------------------------------------*/
static void max_of_three_broadcasts_and_propagates_nan(void **s) {
	(void)s;
	int64_t d2[2] = {2, 1};
	tbc_tensor *in[3] = {vec(TBC_DT_F32, 2, (double[]){1, 5}), tensor(TBC_DT_F32, 2, d2, (double[]){3, NAN}),
			     tensor(TBC_DT_F32, 0, NULL, (double[]){2})};
	one_op o = make(TBC_OP_Max, 3, in);
	tbc_tensor *y = run(&o);
	assert_int_equal(y->rank, 2);
	expect_f(y, 4, (double[]){3, 5, NAN, NAN});
	done(&o, y);
}

static void mean_of_two(void **s) {
	(void)s;
	tbc_tensor *in[2] = {vec(TBC_DT_F32, 2, (double[]){1, 2}), vec(TBC_DT_F32, 2, (double[]){2, 5})};
	one_op o = make(TBC_OP_Mean, 2, in);
	tbc_tensor *y = run(&o);
	expect_f(y, 2, (double[]){1.5, 3.5});
	done(&o, y);
}

static void where_picks_x_or_y_with_broadcast(void **s) {
	(void)s;
	int64_t d[2] = {2, 2};
	tbc_tensor *in[3] = {tensor(TBC_DT_BOOL, 2, d, (double[]){1, 0, 1, 1}), ivec(TBC_DT_I64, 2, (int64_t[]){1, 2}),
			     tensor(TBC_DT_I64, 0, NULL, (double[]){9})};
	one_op o = make(TBC_OP_Where, 3, in);
	tbc_tensor *y = run(&o);
	expect_i(y, 4, (int64_t[]){1, 9, 1, 2});
	done(&o, y);
}

/* ---- Cast ---------------------------------------------------------------------*/
static void cast_float_to_int4_wraps(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 4, (double[]){-9, 8, 7.9, -1});
	one_op o = make(TBC_OP_Cast, 1, &x);
	attr_i(&o, "to", TBC_DT_I4);
	tbc_tensor *y = run(&o);
	expect_i(y, 4, (int64_t[]){7, -8, 7, -1});
	done(&o, y);
}

static void cast_to_e4m3fn_saturates_by_default(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 3, (double[]){1e6, -INFINITY, 0.4});
	one_op o = make(TBC_OP_Cast, 1, &x);
	attr_i(&o, "to", TBC_DT_F8E4M3FN);
	tbc_tensor *y = run(&o);
	const uint8_t *b = y->data;
	assert_int_equal(b[0], 0x7e); /* 448 */
	assert_int_equal(b[1], 0xfe); /* -448 */
	expect_f(y, 3, (double[]){448, -448, 0.40625});
	done(&o, y);
}

static void cast_no_saturate_to_e5m2_gives_inf(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 2, (double[]){1e6, -1e6});
	one_op o = make(TBC_OP_Cast, 1, &x);
	attr_i(&o, "to", TBC_DT_F8E5M2);
	attr_i(&o, "saturate", 0);
	tbc_tensor *y = run(&o);
	expect_f(y, 2, (double[]){INFINITY, -INFINITY});
	done(&o, y);
}

static void cast_int64_to_uint8_keeps_the_low_bits(void **s) {
	(void)s;
	tbc_tensor *x = ivec(TBC_DT_I64, 2, (int64_t[]){300, -1});
	one_op o = make(TBC_OP_Cast, 1, &x);
	attr_i(&o, "to", TBC_DT_U8);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, (int64_t[]){44, 255});
	done(&o, y);
}

static void cast_to_e8m0_rounds_up(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 3, (double[]){0.124, 1.1, 8});
	one_op o = make(TBC_OP_Cast, 1, &x);
	attr_i(&o, "to", TBC_DT_F8E8M0);
	tbc_tensor *y = run(&o);
	expect_f(y, 3, (double[]){0.125, 2, 8});
	done(&o, y);
}

static void bitcast_float32_to_int32(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 2, (double[]){1.0, -2.0});
	one_op o = make(TBC_OP_BitCast, 1, &x);
	attr_i(&o, "to", TBC_DT_I32);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, (int64_t[]){0x3f800000, (int32_t)0xc0000000});
	done(&o, y);
}

static void bitcast_rejects_different_widths(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 1, (double[]){1.0});
	one_op o = make(TBC_OP_BitCast, 1, &x);
	attr_i(&o, "to", TBC_DT_I64);
	assert_null(run(&o));
	done(&o, NULL);
}

static void dropout_in_inference_is_identity(void **s) {
	(void)s;
	tbc_tensor *x = vec(TBC_DT_F32, 2, (double[]){1, -2});
	one_op o = make(TBC_OP_Dropout, 1, &x);
	tbc_tensor *y = run(&o);
	expect_f(y, 2, (double[]){1, -2});
	done(&o, y);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(abs_of_int8_min_wraps_like_numpy),
		cmocka_unit_test(round_halves_to_even),
		cmocka_unit_test(sign_of_floats_keeps_nan),
		cmocka_unit_test(isinf_detect_negative_only),
		cmocka_unit_test(bitwise_not_uint8),
		cmocka_unit_test(leaky_relu_default_alpha_is_0_01),
		cmocka_unit_test(elu_with_alpha_2),
		cmocka_unit_test(gelu_tanh_approximation),
		cmocka_unit_test(gelu_rejects_unknown_approximation),
		cmocka_unit_test(clip_min_greater_than_max_gives_max),
		cmocka_unit_test(clip_int64_bounds_are_exact),
		cmocka_unit_test(prelu_slope_broadcasts_to_x),
		cmocka_unit_test(add_uint64_is_bit_exact),
		cmocka_unit_test(mul_int64_is_bit_exact),
		cmocka_unit_test(div_int32_truncates_toward_zero),
		cmocka_unit_test(div_uint64_large_values),
		cmocka_unit_test(div_int_by_zero_is_an_error),
		cmocka_unit_test(mod_int_takes_the_sign_of_the_divisor),
		cmocka_unit_test(mod_fmod_takes_the_sign_of_the_dividend),
		cmocka_unit_test(pow_int_base_float_exponent_truncates),
		cmocka_unit_test(pow_int64_is_exact),
		cmocka_unit_test(bitshift_right_int8_is_arithmetic),
		cmocka_unit_test(bitshift_left_uint8_drops_high_bits),
		cmocka_unit_test(greater_uint64_compares_unsigned),
		cmocka_unit_test(add_rejects_mixed_dtypes),
		cmocka_unit_test(max_of_three_broadcasts_and_propagates_nan),
		cmocka_unit_test(mean_of_two),
		cmocka_unit_test(where_picks_x_or_y_with_broadcast),
		cmocka_unit_test(cast_float_to_int4_wraps),
		cmocka_unit_test(cast_to_e4m3fn_saturates_by_default),
		cmocka_unit_test(cast_no_saturate_to_e5m2_gives_inf),
		cmocka_unit_test(cast_int64_to_uint8_keeps_the_low_bits),
		cmocka_unit_test(cast_to_e8m0_rounds_up),
		cmocka_unit_test(bitcast_float32_to_int32),
		cmocka_unit_test(bitcast_rejects_different_widths),
		cmocka_unit_test(dropout_in_inference_is_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
