/* The seq family (recurrent nets, attention, signal ops, NMS, TfIdf, control
 * flow), case by case as the ONNX spec states it: each test builds one op,
 * runs its shape rule and its kernel, and checks the values beside it. */
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
	tbc_tensor *out[4];
} one_op;

static tbc_tensor *tensor(tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, vals[i]);
	return t;
}
static tbc_tensor *scalar_i64(int64_t v) {
	tbc_tensor *t = tbc_tensor_create(TBC_DT_I64, 0, NULL);
	assert_non_null(t);
	tbc_set_i64(t, 0, v);
	return t;
}

/* Builds the op over graph inputs typed like the tensors (which it takes);
 * a NULL tensor is an omitted input. */
static one_op make(tbc_opcode code, int n, tbc_tensor **ins, int n_out) {
	one_op o = {.m = tbc_module_new("test"), .d = tbc_diags_create(), .n = n};
	tbc_value *vals[8];
	for (int i = 0; i < n; i++) {
		vals[i] = NULL;
		o.in[i] = ins[i];
		if (!ins[i]) continue;
		tbc_type ty;
		tbc_type_set(&ty, ins[i]->dtype, ins[i]->rank, ins[i]->dims);
		vals[i] = tbc_graph_add_input(o.m->main, NULL, &ty);
	}
	o.op = tbc_op_new(o.m->main, code, "n", n, vals, n_out);
	return o;
}
static void attr_i(one_op *o, const char *name, int64_t v) { tbc_op_add_attr(o->op, name, TBC_ATTR_INT)->i = v; }
static void attr_s(one_op *o, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}
static void attr_ints(one_op *o, const char *name, int n, int64_t *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_INTS);
	a->n = n;
	a->ints = v;
}

/* Runs shape inference and the kernel; every result must match its
 * inferred type.  false when either reports an error. */
static bool run(one_op *o) {
	tbc_infer cx = {.module = o->m, .diags = o->d};
	if (!tbc_infer_op(&cx, o->op)) return false;
	tbc_interp ip = {.module = o->m, .diags = o->d};
	if (tbc_ops[o->op->code].interp(&ip, o->op, o->in, o->out) != 0) return false;
	for (int i = 0; i < o->op->n_outputs; i++) {
		if (!o->op->outputs[i]) continue;
		const tbc_type *ty = &o->op->outputs[i]->type;
		assert_non_null(o->out[i]);
		assert_int_equal(o->out[i]->dtype, ty->dtype);
		assert_int_equal(o->out[i]->rank, ty->rank);
		for (int d = 0; d < ty->rank; d++)
			if (!ty->dims[d].sym) assert_int_equal(o->out[i]->dims[d], ty->dims[d].size);
	}
	return true;
}
static void done(one_op *o) {
	for (int i = 0; i < o->n; i++) tbc_tensor_destroy((tbc_tensor *)o->in[i]);
	for (int i = 0; i < 4; i++) tbc_tensor_destroy(o->out[i]);
	tbc_diags_destroy(o->d);
	tbc_module_destroy(o->m);
}
static void expect_f(const tbc_tensor *t, int64_t n, const double *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_float_equal(tbc_get_f64(t, i), want[i], 1e-5 * (1 + fabs(want[i])));
}

/* ---- RNN -------------------------------------------------------------------*/
/* H_t = tanh(X_t W^T + H_{t-1} R^T + Wb + Rb) with one unit: W = 1, R = 0.5,
 * no bias, X = [1, 2]: H_1 = tanh(1), H_2 = tanh(2 + 0.5 tanh(1)). */
static void rnn_forward_one_unit(void **state) {
	(void)state;
	int64_t xd[3] = {2, 1, 1}, wd[3] = {1, 1, 1};
	tbc_tensor *ins[3] = {tensor(TBC_DT_F32, 3, xd, (double[]){1, 2}), tensor(TBC_DT_F32, 3, wd, (double[]){1}),
			      tensor(TBC_DT_F32, 3, wd, (double[]){0.5})};
	one_op o = make(TBC_OP_RNN, 3, ins, 2);
	attr_i(&o, "hidden_size", 1);
	assert_true(run(&o));
	double h1 = tanh(1.0), h2 = tanh(2 + 0.5 * h1);
	expect_f(o.out[0], 2, (double[]){h1, h2});
	expect_f(o.out[1], 1, (double[]){h2});
	done(&o);
}

/* direction = reverse walks the sequence from the end: H at t=0 is the last. */
static void rnn_reverse_one_unit(void **state) {
	(void)state;
	int64_t xd[3] = {2, 1, 1}, wd[3] = {1, 1, 1};
	tbc_tensor *ins[3] = {tensor(TBC_DT_F32, 3, xd, (double[]){1, 2}), tensor(TBC_DT_F32, 3, wd, (double[]){1}),
			      tensor(TBC_DT_F32, 3, wd, (double[]){0.5})};
	one_op o = make(TBC_OP_RNN, 3, ins, 2);
	attr_s(&o, "direction", "reverse");
	assert_true(run(&o));
	double h_t1 = tanh(2.0), h_t0 = tanh(1 + 0.5 * h_t1);
	expect_f(o.out[0], 2, (double[]){h_t0, h_t1});
	expect_f(o.out[1], 1, (double[]){h_t0});
	done(&o);
}

/* sequence_lens beyond the sequence is an error, not a read past the end. */
static void rnn_rejects_sequence_lens_out_of_range(void **state) {
	(void)state;
	int64_t xd[3] = {2, 1, 1}, wd[3] = {1, 1, 1}, one = 1;
	tbc_tensor *lens = tbc_tensor_create(TBC_DT_I32, 1, &one);
	tbc_set_i64(lens, 0, 3);
	tbc_tensor *ins[5] = {tensor(TBC_DT_F32, 3, xd, (double[]){1, 2}), tensor(TBC_DT_F32, 3, wd, (double[]){1}),
			      tensor(TBC_DT_F32, 3, wd, (double[]){0.5}), NULL, lens};
	one_op o = make(TBC_OP_RNN, 5, ins, 1);
	assert_false(run(&o));
	done(&o);
}

/* ---- Windows, DFT ----------------------------------------------------------*/
/* HannWindow(4), periodic: sin^2(pi n / 4) = [0, 0.5, 1, 0.5]. */
static void hann_window_periodic(void **state) {
	(void)state;
	tbc_tensor *ins[1] = {scalar_i64(4)};
	one_op o = make(TBC_OP_HannWindow, 1, ins, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){0, 0.5, 1, 0.5});
	done(&o);
}

/* HammingWindow(3), symmetric: 25/46 - 21/46 cos(pi n) = [4/46, 1, 4/46]. */
static void hamming_window_symmetric(void **state) {
	(void)state;
	tbc_tensor *ins[1] = {scalar_i64(3)};
	one_op o = make(TBC_OP_HammingWindow, 1, ins, 1);
	attr_i(&o, "periodic", 0);
	assert_true(run(&o));
	expect_f(o.out[0], 3, (double[]){4.0 / 46, 1, 4.0 / 46});
	done(&o);
}

/* DFT of a unit impulse is flat: [1, 0, 0, 0] -> every bin 1 + 0i; onesided
 * keeps 4/2+1 = 3 bins. */
static void dft_of_impulse_is_flat_onesided(void **state) {
	(void)state;
	int64_t xd[3] = {1, 4, 1};
	tbc_tensor *ins[1] = {tensor(TBC_DT_F32, 3, xd, (double[]){1, 0, 0, 0})};
	one_op o = make(TBC_OP_DFT, 1, ins, 1);
	attr_i(&o, "onesided", 1);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dims[1], 3);
	expect_f(o.out[0], 6, (double[]){1, 0, 1, 0, 1, 0});
	done(&o);
}

/* The inverse DFT of a flat spectrum is the impulse back, scaled by 1/n. */
static void dft_inverse_of_flat_is_impulse(void **state) {
	(void)state;
	int64_t xd[3] = {1, 4, 2};
	tbc_tensor *ins[1] = {tensor(TBC_DT_F64, 3, xd, (double[]){1, 0, 1, 0, 1, 0, 1, 0})};
	one_op o = make(TBC_OP_DFT, 1, ins, 1);
	attr_i(&o, "inverse", 1);
	assert_true(run(&o));
	expect_f(o.out[0], 8, (double[]){1, 0, 0, 0, 0, 0, 0, 0});
	done(&o);
}

/* ---- NonMaxSuppression (the spec's suppress_by_IOU example) -----------------*/
static void nms_suppress_by_iou(void **state) {
	(void)state;
	int64_t bd[3] = {1, 6, 4}, sd[3] = {1, 1, 6}, one = 1;
	double boxes[24] = {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9, 0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100, 1, 101};
	tbc_tensor *mo = tbc_tensor_create(TBC_DT_I64, 1, &one);
	tbc_set_i64(mo, 0, 3);
	tbc_tensor *ins[5] = {tensor(TBC_DT_F32, 3, bd, boxes), tensor(TBC_DT_F32, 3, sd, (double[]){0.9, 0.75, 0.6, 0.95, 0.5, 0.3}),
			      mo, tensor(TBC_DT_F32, 1, &one, (double[]){0.5}), tensor(TBC_DT_F32, 1, &one, (double[]){0})};
	one_op o = make(TBC_OP_NonMaxSuppression, 5, ins, 1);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dims[0], 3);
	int64_t want[9] = {0, 0, 3, 0, 0, 0, 0, 0, 5};
	for (int i = 0; i < 9; i++) assert_int_equal(tbc_get_i64(o.out[0], i), want[i]);
	done(&o);
}

/* ---- TfIdfVectorizer ---------------------------------------------------------*/
/* Unigrams and bigrams of the pool [2 3 5 4 | 5 6 7 8 6 7] (TF, no skips)
 * in [1 1 3 3 3 7 8 6 7 5 6 8]: 3 x3, 5 x1, 4 x0, (5,6) x1, (7,8) x1, (6,7) x1. */
static void tfidf_tf_uni_and_bigrams(void **state) {
	(void)state;
	int64_t n = 12;
	tbc_tensor *x = tbc_tensor_create(TBC_DT_I32, 1, &n);
	int64_t xs[12] = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};
	for (int i = 0; i < 12; i++) tbc_set_i64(x, i, xs[i]);
	tbc_tensor *ins[1] = {x};
	one_op o = make(TBC_OP_TfIdfVectorizer, 1, ins, 1);
	int64_t counts[2] = {0, 4}, idx[7] = {0, 1, 2, 3, 4, 5, 6}, pool[10] = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
	attr_s(&o, "mode", "TF");
	attr_i(&o, "min_gram_length", 1);
	attr_i(&o, "max_gram_length", 2);
	attr_i(&o, "max_skip_count", 0);
	attr_ints(&o, "ngram_counts", 2, counts);
	attr_ints(&o, "ngram_indexes", 7, idx);
	attr_ints(&o, "pool_int64s", 10, pool);
	assert_true(run(&o));
	expect_f(o.out[0], 7, (double[]){0, 3, 1, 0, 1, 1, 1});
	done(&o);
}

/* ---- RotaryEmbedding -------------------------------------------------------*/
/* One head of size 2 at position 1 with cos = 0, sin = 1 rotates (x1, x2) by
 * 90 degrees: (-x2, x1).  A position id past the cache is an error. */
static void rotary_rotates_and_checks_position_ids(void **state) {
	(void)state;
	int64_t xd[4] = {1, 1, 1, 2}, cd[2] = {2, 1}, pd[2] = {1, 1};
	tbc_tensor *pos = tbc_tensor_create(TBC_DT_I64, 2, pd);
	tbc_set_i64(pos, 0, 1);
	tbc_tensor *ins[4] = {tensor(TBC_DT_F32, 4, xd, (double[]){3, 4}), tensor(TBC_DT_F32, 2, cd, (double[]){1, 0}),
			      tensor(TBC_DT_F32, 2, cd, (double[]){0, 1}), pos};
	one_op o = make(TBC_OP_RotaryEmbedding, 4, ins, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 2, (double[]){-4, 3});
	tbc_tensor_destroy(o.out[0]);
	o.out[0] = NULL;
	tbc_set_i64(pos, 0, 2);
	assert_false(run(&o));
	done(&o);
}

/* ---- Attention ---------------------------------------------------------------*/
/* One query, two keys with equal scores: Y is the mean of the values; with
 * is_causal the first query sees only the first key. */
static void attention_equal_scores_average_values(void **state) {
	(void)state;
	int64_t qd[4] = {1, 1, 1, 1}, kd[4] = {1, 1, 2, 1};
	tbc_tensor *ins[3] = {tensor(TBC_DT_F32, 4, qd, (double[]){1}), tensor(TBC_DT_F32, 4, kd, (double[]){2, 2}),
			      tensor(TBC_DT_F32, 4, kd, (double[]){10, 20})};
	one_op o = make(TBC_OP_Attention, 3, ins, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 1, (double[]){15});
	tbc_tensor_destroy(o.out[0]);
	o.out[0] = NULL;
	attr_i(&o, "is_causal", 1);
	assert_true(run(&o));
	expect_f(o.out[0], 1, (double[]){10});
	done(&o);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rnn_forward_one_unit),
		cmocka_unit_test(rnn_reverse_one_unit),
		cmocka_unit_test(rnn_rejects_sequence_lens_out_of_range),
		cmocka_unit_test(hann_window_periodic),
		cmocka_unit_test(hamming_window_symmetric),
		cmocka_unit_test(dft_of_impulse_is_flat_onesided),
		cmocka_unit_test(dft_inverse_of_flat_is_impulse),
		cmocka_unit_test(nms_suppress_by_iou),
		cmocka_unit_test(tfidf_tf_uni_and_bigrams),
		cmocka_unit_test(rotary_rotates_and_checks_position_ids),
		cmocka_unit_test(attention_equal_scores_average_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
