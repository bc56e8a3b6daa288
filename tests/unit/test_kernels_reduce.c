/* The reduce family (reductions, scans, TopK, softmaxes, normalizations,
 * losses, contractions), case by case as the ONNX spec states it: each test
 * builds one op, runs its shape rule and its kernel, and checks the result
 * against the values the spec (or its reference implementation) gives. */
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
	tbc_tensor *out[4];
	int n;
} one_op;

static tbc_tensor *tensor(tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, vals[i]);
	return t;
}
static tbc_tensor *itensor(tbc_dtype dt, int rank, const int64_t *dims, const int64_t *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_i64(t, i, vals[i]);
	return t;
}
#define DIMS(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define F(...) (double[]){__VA_ARGS__}
#define I(...) (int64_t[]){__VA_ARGS__}

/* Builds the op over its inputs (which it takes): those marked in consts
 * (bit i: input i) become constants, the others graph inputs; a NULL tensor
 * is an omitted input. */
static one_op make(tbc_opcode code, int n, tbc_tensor **ins, unsigned consts, int n_out) {
	one_op o = {.m = tbc_module_new("test"), .d = tbc_diags_create(), .n = n};
	tbc_value *vals[8];
	for (int i = 0; i < n; i++) {
		o.in[i] = ins[i];
		if (!ins[i]) {
			vals[i] = NULL;
		} else if (consts & (1u << i)) {
			vals[i] = tbc_graph_add_const(o.m->main, NULL, ins[i]);
		} else {
			tbc_type ty;
			tbc_type_set(&ty, ins[i]->dtype, ins[i]->rank, ins[i]->dims);
			vals[i] = tbc_graph_add_input(o.m->main, NULL, &ty);
		}
	}
	o.op = tbc_op_new(o.m->main, code, "n", n, vals, n_out);
	return o;
}
static void attr_f(one_op *o, const char *name, double v) { tbc_op_add_attr(o->op, name, TBC_ATTR_FLOAT)->f = v; }
static void attr_i(one_op *o, const char *name, int64_t v) { tbc_op_add_attr(o->op, name, TBC_ATTR_INT)->i = v; }
static void attr_s(one_op *o, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}

static bool infer(one_op *o) {
	tbc_infer cx = {.module = o->m, .diags = o->d};
	return tbc_infer_op(&cx, o->op);
}

/* Runs shape inference and the kernel; every result must match its
 * inferred type.  Returns output 0, or NULL when either reports an error. */
static tbc_tensor *run(one_op *o) {
	if (!infer(o)) return NULL;
	tbc_interp ip = {.module = o->m, .diags = o->d};
	if (tbc_ops[o->op->code].interp(&ip, o->op, o->in, o->out) != 0) return NULL;
	for (int i = 0; i < o->op->n_outputs; i++) {
		const tbc_type *ty = &o->op->outputs[i]->type;
		assert_non_null(o->out[i]);
		assert_int_equal(o->out[i]->dtype, ty->dtype);
		assert_int_equal(o->out[i]->rank, ty->rank);
		for (int d = 0; d < ty->rank; d++)
			if (!ty->dims[d].sym) assert_int_equal(o->out[i]->dims[d], ty->dims[d].size);
	}
	return o->out[0];
}
static void done(one_op *o) {
	for (int i = 0; i < o->n; i++) tbc_tensor_destroy((tbc_tensor *)o->in[i]);
	for (int i = 0; i < 4; i++) tbc_tensor_destroy(o->out[i]);
	tbc_diags_destroy(o->d);
	tbc_module_destroy(o->m);
}
static void expect_f(const tbc_tensor *t, int64_t n, const double *want) {
	assert_non_null(t);
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) {
		double got = tbc_get_f64(t, i);
		if (isnan(want[i])) assert_true(isnan(got));
		else if (isinf(want[i])) assert_true(got == want[i]);
		else assert_float_equal(got, want[i], 1e-6 * (1 + fabs(want[i])));
	}
}
static void expect_i(const tbc_tensor *t, int64_t n, const int64_t *want) {
	assert_non_null(t);
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_true(tbc_get_i64(t, i) == want[i]);
}
static void expect_dims(const tbc_tensor *t, int rank, const int64_t *dims) {
	assert_int_equal(t->rank, rank);
	for (int d = 0; d < rank; d++) assert_int_equal(t->dims[d], dims[d]);
}
static void expect_error(one_op *o, const char *needle) {
	assert_true(tbc_diags_count(o->d) > 0);
	assert_non_null(strstr(tbc_diags_get(o->d, 0)->message, needle));
}

/* The data of the spec's Reduce* examples: shape (3, 2, 2). */
static tbc_tensor *spec_data(void) { return tensor(TBC_DT_F32, 3, (int64_t[]){3, 2, 2}, F(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)); }

/* ---- Reductions ----------------------------------------------------------*/
static void reduce_sum_keepdims_example(void **s) {
	(void)s;
	tbc_tensor *in[2] = {spec_data(), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(1))};
	one_op o = make(TBC_OP_ReduceSum, 2, in, 0, 1);
	attr_i(&o, "keepdims", 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 3, I(3, 1, 2));
	expect_f(y, 6, F(4, 6, 12, 14, 20, 22));
	done(&o);
}

static void reduce_mean_default_axes_reduce_everything(void **s) {
	(void)s;
	tbc_tensor *in[1] = {spec_data()};
	one_op o = make(TBC_OP_ReduceMean, 1, in, 0, 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 3, I(1, 1, 1));
	expect_f(y, 1, F(6.5));
	done(&o);
}

static void reduce_log_sum_exp_do_not_keepdims_example(void **s) {
	(void)s;
	/* log(exp(1) + exp(3)) = 3.12692801, and so on along axis 1. */
	tbc_tensor *in[2] = {spec_data(), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(1))};
	one_op o = make(TBC_OP_ReduceLogSumExp, 2, in, 2, 1);
	attr_i(&o, "keepdims", 0);
	tbc_tensor *y = run(&o);
	expect_dims(y, 2, I(3, 2));
	expect_f(y, 6, F(3.126928011, 4.126928011, 7.126928011, 8.126928011, 11.126928011, 12.126928011));
	done(&o);
}

static void reduce_empty_sets_give_the_identity(void **s) {
	(void)s;
	struct {
		tbc_opcode op;
		double want;
	} cases[] = {{TBC_OP_ReduceSum, 0},      {TBC_OP_ReduceProd, 1},       {TBC_OP_ReduceMax, -INFINITY},
		     {TBC_OP_ReduceMin, INFINITY}, {TBC_OP_ReduceLogSum, -INFINITY}, {TBC_OP_ReduceLogSumExp, -INFINITY},
		     {TBC_OP_ReduceL1, 0},       {TBC_OP_ReduceL2, 0},          {TBC_OP_ReduceSumSquare, 0}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		tbc_tensor *in[2] = {tensor(TBC_DT_F32, 3, (int64_t[]){2, 0, 4}, NULL),
				     itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(1))};
		one_op o = make(cases[c].op, 2, in, 0, 1);
		tbc_tensor *y = run(&o);
		expect_dims(y, 3, I(2, 1, 4));
		double w = cases[c].want;
		expect_f(y, 8, F(w, w, w, w, w, w, w, w));
		done(&o);
	}
}

static void reduce_max_of_empty_int32_is_the_smallest_int32(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_I32, 2, (int64_t[]){2, 0}, NULL), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(1))};
	one_op o = make(TBC_OP_ReduceMax, 2, in, 2, 1);
	tbc_tensor *y = run(&o);
	expect_i(y, 2, I(INT32_MIN, INT32_MIN));
	done(&o);
}

static void reduce_sum_of_int64_is_exact(void **s) {
	(void)s;
	/* 2^61 + 4 is not a double: a sum through double would be off. */
	tbc_tensor *in[1] = {itensor(TBC_DT_I64, 1, (int64_t[]){2}, I(((int64_t)1 << 60) + 1, ((int64_t)1 << 60) + 3))};
	one_op o = make(TBC_OP_ReduceSum, 1, in, 0, 1);
	attr_i(&o, "keepdims", 0);
	expect_i(run(&o), 1, I(((int64_t)1 << 61) + 4));
	done(&o);
}

static void reduce_sum_square_noop_with_empty_axes_squares(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(1, -2, 3)), itensor(TBC_DT_I64, 1, (int64_t[]){0}, NULL)};
	one_op o = make(TBC_OP_ReduceSumSquare, 2, in, 0, 1);
	attr_i(&o, "noop_with_empty_axes", 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 1, I(3));
	expect_f(y, 3, F(1, 4, 9));
	done(&o);
}

static void reduce_max_of_bools_is_any(void **s) {
	(void)s;
	tbc_tensor *in[2] = {itensor(TBC_DT_BOOL, 2, (int64_t[]){3, 2}, I(1, 1, 0, 1, 0, 0)), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(1))};
	one_op o = make(TBC_OP_ReduceMax, 2, in, 0, 1);
	expect_i(run(&o), 3, I(1, 1, 0));
	done(&o);
}

static void reduce_constant_axis_out_of_range_is_an_error(void **s) {
	(void)s;
	tbc_tensor *in[2] = {spec_data(), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(3))};
	one_op o = make(TBC_OP_ReduceSum, 2, in, 2, 1);
	assert_false(infer(&o));
	expect_error(&o, "out of range");
	done(&o);
}

static void reduce_repeated_axis_is_an_error_at_run_time(void **s) {
	(void)s;
	tbc_tensor *in[2] = {spec_data(), itensor(TBC_DT_I64, 1, (int64_t[]){2}, I(1, -2))};
	one_op o = make(TBC_OP_ReduceSum, 2, in, 0, 1);
	assert_null(run(&o));
	expect_error(&o, "repeated");
	done(&o);
}

static void reduce_axes_known_only_at_run_time_keep_the_rank(void **s) {
	(void)s;
	tbc_tensor *in[2] = {spec_data(), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(0))};
	one_op o = make(TBC_OP_ReduceMin, 2, in, 0, 1);
	attr_i(&o, "keepdims", 0);
	assert_true(infer(&o));
	const tbc_type *t = &o.op->outputs[0]->type;
	assert_int_equal(t->rank, 2); /* one axis of three goes */
	assert_non_null(t->dims[0].sym);
	done(&o);
}

/* ---- ArgMax / ArgMin -------------------------------------------------------*/
static void argmax_select_last_index_example(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(2, 2, 3, 10))};
	one_op o = make(TBC_OP_ArgMax, 1, in, 0, 1);
	attr_i(&o, "axis", 1);
	attr_i(&o, "select_last_index", 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 2, I(2, 1));
	expect_i(y, 2, I(1, 1));
	done(&o);
}

static void argmin_no_keepdims_example(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(2, 1, 3, 10))};
	one_op o = make(TBC_OP_ArgMin, 1, in, 0, 1);
	attr_i(&o, "axis", 1);
	attr_i(&o, "keepdims", 0);
	tbc_tensor *y = run(&o);
	expect_dims(y, 1, I(2));
	expect_i(y, 2, I(1, 0));
	done(&o);
}

/* ---- CumSum / CumProd / TopK ---------------------------------------------*/
static void cumsum_1d_reverse_exclusive(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F64, 1, (int64_t[]){5}, F(1, 2, 3, 4, 5)), itensor(TBC_DT_I32, 0, NULL, I(0))};
	one_op o = make(TBC_OP_CumSum, 2, in, 0, 1);
	attr_i(&o, "reverse", 1);
	attr_i(&o, "exclusive", 1);
	expect_f(run(&o), 5, F(14, 12, 9, 5, 0));
	done(&o);
}

static void cumprod_1d_int32_exclusive(void **s) {
	(void)s;
	tbc_tensor *in[2] = {itensor(TBC_DT_I32, 1, (int64_t[]){5}, I(1, 2, 3, 4, 5)), itensor(TBC_DT_I32, 0, NULL, I(0))};
	one_op o = make(TBC_OP_CumProd, 2, in, 0, 1);
	attr_i(&o, "exclusive", 1);
	expect_i(run(&o), 5, I(1, 1, 2, 6, 24));
	done(&o);
}

static void top_k_same_values_keep_their_index_order(void **s) {
	(void)s;
	tbc_tensor *in[2] = {itensor(TBC_DT_I64, 1, (int64_t[]){4}, I(0, 0, 1, 1)), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(3))};
	one_op o = make(TBC_OP_TopK, 2, in, 2, 2);
	attr_i(&o, "axis", 0);
	tbc_tensor *y = run(&o);
	expect_i(y, 3, I(1, 1, 0));
	expect_i(o.out[1], 3, I(2, 3, 0));
	done(&o);
}

static void top_k_smallest(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 4}, F(0, 1, 2, 3, 11, 10, 9, 8)),
			     itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(2))};
	one_op o = make(TBC_OP_TopK, 2, in, 0, 2);
	attr_i(&o, "largest", 0);
	tbc_tensor *y = run(&o);
	expect_f(y, 4, F(0, 1, 8, 9));
	expect_i(o.out[1], 4, I(0, 1, 3, 2));
	done(&o);
}

static void top_k_larger_than_the_axis_is_an_error(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(1, 2, 3)), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(4))};
	one_op o = make(TBC_OP_TopK, 2, in, 0, 2);
	assert_null(run(&o));
	expect_error(&o, "K (4)");
	done(&o);
}

/* ---- Softmax family ------------------------------------------------------*/
static void softmax_example(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){1, 3}, F(-1, 0, 1))};
	one_op o = make(TBC_OP_Softmax, 1, in, 0, 1);
	expect_f(run(&o), 3, F(0.09003057, 0.24472847, 0.66524096));
	done(&o);
}

static void logsoftmax_large_numbers_stay_finite(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){1, 4}, F(10000, 10001, 10002, 10003))};
	one_op o = make(TBC_OP_LogSoftmax, 1, in, 0, 1);
	expect_f(run(&o), 4, F(-3.4401896, -2.4401896, -1.4401897, -0.44018972));
	done(&o);
}

static void hardmax_picks_the_first_of_ties(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 3}, F(3, 1, 3, 2, 2, 2))};
	one_op o = make(TBC_OP_Hardmax, 1, in, 0, 1);
	expect_f(run(&o), 6, F(1, 0, 0, 1, 0, 0));
	done(&o);
}

/* ---- Normalizations --------------------------------------------------------*/
static void layer_normalization_gives_mean_and_inv_std_dev(void **s) {
	(void)s;
	tbc_tensor *in[3] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(1, 3, 2, 4)), tensor(TBC_DT_F32, 1, (int64_t[]){2}, F(1, 2)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){2}, F(0, 1))};
	one_op o = make(TBC_OP_LayerNormalization, 3, in, 0, 3);
	attr_f(&o, "epsilon", 0);
	tbc_tensor *y = run(&o);
	/* Each row has variance 1, so it normalizes to (-1, 1), then scale and bias. */
	expect_f(y, 4, F(-1, 3, -1, 3));
	expect_dims(o.out[1], 2, I(2, 1));
	expect_f(o.out[1], 2, F(2, 3));
	expect_f(o.out[2], 2, F(1, 1));
	done(&o);
}

static void lp_normalization_of_a_zero_vector_is_zero(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(0, 0, 3, 4))};
	one_op o = make(TBC_OP_LpNormalization, 1, in, 0, 1);
	expect_f(run(&o), 4, F(0, 0, 0.6, 0.8));
	done(&o);
}

static void group_normalization_needs_channels_divisible_by_groups(void **s) {
	(void)s;
	tbc_tensor *in[3] = {tensor(TBC_DT_F32, 3, (int64_t[]){1, 3, 1}, F(1, 2, 3)), tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(1, 1, 1)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(0, 0, 0))};
	one_op o = make(TBC_OP_GroupNormalization, 3, in, 0, 1);
	attr_i(&o, "num_groups", 2);
	assert_false(infer(&o));
	expect_error(&o, "do not split");
	done(&o);
}

/* ---- Losses ----------------------------------------------------------------*/
static void nll_loss_mean_does_not_count_ignored_targets(void **s) {
	(void)s;
	/* Targets 1, ignored, 0: loss = -(x[0,1] + x[2,0]) / 2. */
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 2, (int64_t[]){3, 2}, F(0.1, 0.2, 0.3, 0.4, 0.5, 0.6)),
			     itensor(TBC_DT_I64, 1, (int64_t[]){3}, I(1, -1, 0))};
	one_op o = make(TBC_OP_NegativeLogLikelihoodLoss, 2, in, 0, 1);
	attr_i(&o, "ignore_index", -1);
	attr_s(&o, "reduction", "mean");
	tbc_tensor *y = run(&o);
	expect_dims(y, 0, NULL);
	expect_f(y, 1, F(-0.35));
	done(&o);
}

static void nll_loss_target_out_of_range_is_an_error(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 2, (int64_t[]){1, 2}, F(0.1, 0.2)), itensor(TBC_DT_I64, 1, (int64_t[]){1}, I(2))};
	one_op o = make(TBC_OP_NegativeLogLikelihoodLoss, 2, in, 0, 1);
	assert_null(run(&o));
	expect_error(&o, "out of range");
	done(&o);
}

/* ---- Contractions ------------------------------------------------------------*/
static void matmul_1d_by_1d_is_a_dot_product(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(1, 2, 3)), tensor(TBC_DT_F32, 1, (int64_t[]){3}, F(4, 5, 6))};
	one_op o = make(TBC_OP_MatMul, 2, in, 0, 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 0, NULL);
	expect_f(y, 1, F(32));
	done(&o);
}

static void matmul_broadcasts_batch_dims(void **s) {
	(void)s;
	/* (2, 1, 2) x (2, 1): each 1x2 row times the same column. */
	tbc_tensor *in[2] = {tensor(TBC_DT_F64, 3, (int64_t[]){2, 1, 2}, F(1, 2, 3, 4)), tensor(TBC_DT_F64, 2, (int64_t[]){2, 1}, F(10, 1))};
	one_op o = make(TBC_OP_MatMul, 2, in, 0, 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 3, I(2, 1, 1));
	expect_f(y, 2, F(12, 34));
	done(&o);
}

static void matmul_of_int64_is_exact(void **s) {
	(void)s;
	tbc_tensor *in[2] = {itensor(TBC_DT_I64, 2, (int64_t[]){1, 2}, I((int64_t)1 << 40, 3)),
			     itensor(TBC_DT_I64, 2, (int64_t[]){2, 1}, I(((int64_t)1 << 20) + 1, 7))};
	one_op o = make(TBC_OP_MatMul, 2, in, 0, 1);
	expect_i(run(&o), 1, I(((int64_t)1 << 60) + ((int64_t)1 << 40) + 21));
	done(&o);
}

static void matmul_inner_dims_must_agree(void **s) {
	(void)s;
	tbc_tensor *in[2] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 3}, F(0, 0, 0, 0, 0, 0)), tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(0, 0, 0, 0))};
	one_op o = make(TBC_OP_MatMul, 2, in, 0, 1);
	assert_false(infer(&o));
	expect_error(&o, "inner dims differ");
	done(&o);
}

static void gemm_all_attributes(void **s) {
	(void)s;
	/* Y = 0.5 * A^T B^T + 2 * C, C broadcast along rows. */
	tbc_tensor *in[3] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 1}, F(1, 2)), tensor(TBC_DT_F32, 2, (int64_t[]){2, 2}, F(1, 2, 3, 4)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){2}, F(1, 10))};
	one_op o = make(TBC_OP_Gemm, 3, in, 0, 1);
	attr_i(&o, "transA", 1);
	attr_i(&o, "transB", 1);
	attr_f(&o, "alpha", 0.5);
	attr_f(&o, "beta", 2);
	tbc_tensor *y = run(&o);
	expect_dims(y, 2, I(1, 2));
	expect_f(y, 2, F(0.5 * 5 + 2, 0.5 * 11 + 20));
	done(&o);
}

static void einsum_batch_diagonal(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F64, 3, (int64_t[]){2, 2, 2}, F(1, 2, 3, 4, 5, 6, 7, 8))};
	one_op o = make(TBC_OP_Einsum, 1, in, 0, 1);
	attr_s(&o, "equation", "...ii ->...i");
	tbc_tensor *y = run(&o);
	expect_dims(y, 2, I(2, 2));
	expect_f(y, 4, F(1, 4, 5, 8));
	done(&o);
}

static void einsum_implicit_output_sorts_labels(void **s) {
	(void)s;
	/* "ba" means "ba->ab": a transpose. */
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 2, (int64_t[]){2, 3}, F(1, 2, 3, 4, 5, 6))};
	one_op o = make(TBC_OP_Einsum, 1, in, 0, 1);
	attr_s(&o, "equation", "ba");
	tbc_tensor *y = run(&o);
	expect_dims(y, 2, I(3, 2));
	expect_f(y, 6, F(1, 4, 2, 5, 3, 6));
	done(&o);
}

static void einsum_three_operand_chain(void **s) {
	(void)s;
	tbc_tensor *in[3] = {itensor(TBC_DT_I64, 2, (int64_t[]){1, 2}, I(1, 2)), itensor(TBC_DT_I64, 2, (int64_t[]){2, 2}, I(1, 2, 3, 4)),
			     itensor(TBC_DT_I64, 2, (int64_t[]){2, 1}, I(5, 6))};
	one_op o = make(TBC_OP_Einsum, 3, in, 0, 1);
	attr_s(&o, "equation", "ab,bc,cd->ad");
	/* [1 2] [[1 2] [3 4]] = [7 10]; [7 10] [5 6]^T = 95. */
	expect_i(run(&o), 1, I(95));
	done(&o);
}

static void det_of_a_batch(void **s) {
	(void)s;
	tbc_tensor *in[1] = {tensor(TBC_DT_F32, 3, (int64_t[]){2, 2, 2}, F(1, 2, 3, 4, 1, 2, 2, 4))};
	one_op o = make(TBC_OP_Det, 1, in, 0, 1);
	tbc_tensor *y = run(&o);
	expect_dims(y, 1, I(2));
	expect_f(y, 2, F(-2, 0));
	done(&o);
}

static void matmul_integer_example(void **s) {
	(void)s;
	tbc_tensor *in[4] = {itensor(TBC_DT_U8, 2, (int64_t[]){4, 3}, I(11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0)),
			     itensor(TBC_DT_U8, 2, (int64_t[]){3, 2}, I(1, 4, 2, 5, 3, 6)), itensor(TBC_DT_U8, 0, NULL, I(12)),
			     itensor(TBC_DT_U8, 0, NULL, I(0))};
	one_op o = make(TBC_OP_MatMulInteger, 4, in, 0, 1);
	tbc_tensor *y = run(&o);
	assert_int_equal(y->dtype, TBC_DT_I32);
	expect_i(y, 8, I(-38, -83, -44, -98, -50, -113, -56, -128));
	done(&o);
}

static void qlinear_matmul_rounds_and_saturates(void **s) {
	(void)s;
	/* (a - 0)(b - 0) * 1 * 1 / 2 + 0: 5 / 2 = 2.5 rounds to 2 (half to even), 400 / 2 saturates to 127. */
	tbc_tensor *in[8] = {itensor(TBC_DT_I8, 2, (int64_t[]){1, 2}, I(1, 20)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){1}, F(1)),
			     itensor(TBC_DT_I8, 1, (int64_t[]){1}, I(0)),
			     itensor(TBC_DT_I8, 2, (int64_t[]){2, 2}, I(5, 0, 0, 20)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){1}, F(1)),
			     itensor(TBC_DT_I8, 1, (int64_t[]){1}, I(0)),
			     tensor(TBC_DT_F32, 1, (int64_t[]){1}, F(2)),
			     itensor(TBC_DT_I8, 1, (int64_t[]){1}, I(0))};
	one_op o = make(TBC_OP_QLinearMatMul, 8, in, 0, 1);
	expect_i(run(&o), 2, I(2, 127));
	done(&o);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reduce_sum_keepdims_example),
		cmocka_unit_test(reduce_mean_default_axes_reduce_everything),
		cmocka_unit_test(reduce_log_sum_exp_do_not_keepdims_example),
		cmocka_unit_test(reduce_empty_sets_give_the_identity),
		cmocka_unit_test(reduce_max_of_empty_int32_is_the_smallest_int32),
		cmocka_unit_test(reduce_sum_of_int64_is_exact),
		cmocka_unit_test(reduce_sum_square_noop_with_empty_axes_squares),
		cmocka_unit_test(reduce_max_of_bools_is_any),
		cmocka_unit_test(reduce_constant_axis_out_of_range_is_an_error),
		cmocka_unit_test(reduce_repeated_axis_is_an_error_at_run_time),
		cmocka_unit_test(reduce_axes_known_only_at_run_time_keep_the_rank),
		cmocka_unit_test(argmax_select_last_index_example),
		cmocka_unit_test(argmin_no_keepdims_example),
		cmocka_unit_test(cumsum_1d_reverse_exclusive),
		cmocka_unit_test(cumprod_1d_int32_exclusive),
		cmocka_unit_test(top_k_same_values_keep_their_index_order),
		cmocka_unit_test(top_k_smallest),
		cmocka_unit_test(top_k_larger_than_the_axis_is_an_error),
		cmocka_unit_test(softmax_example),
		cmocka_unit_test(logsoftmax_large_numbers_stay_finite),
		cmocka_unit_test(hardmax_picks_the_first_of_ties),
		cmocka_unit_test(layer_normalization_gives_mean_and_inv_std_dev),
		cmocka_unit_test(lp_normalization_of_a_zero_vector_is_zero),
		cmocka_unit_test(group_normalization_needs_channels_divisible_by_groups),
		cmocka_unit_test(nll_loss_mean_does_not_count_ignored_targets),
		cmocka_unit_test(nll_loss_target_out_of_range_is_an_error),
		cmocka_unit_test(matmul_1d_by_1d_is_a_dot_product),
		cmocka_unit_test(matmul_broadcasts_batch_dims),
		cmocka_unit_test(matmul_of_int64_is_exact),
		cmocka_unit_test(matmul_inner_dims_must_agree),
		cmocka_unit_test(gemm_all_attributes),
		cmocka_unit_test(einsum_batch_diagonal),
		cmocka_unit_test(einsum_implicit_output_sorts_labels),
		cmocka_unit_test(einsum_three_operand_chain),
		cmocka_unit_test(det_of_a_batch),
		cmocka_unit_test(matmul_integer_example),
		cmocka_unit_test(qlinear_matmul_rounds_and_saturates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
